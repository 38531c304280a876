#!/usr/bin/python
# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: security_group_rules
short_description: The security-group rules the fleet's paths need, checked on existing groups and added when asked
version_added: 0.1.0
description:
  - Checks that existing security groups allow the traffic the fleet needs, and with O(add_missing) adds the rules
    they lack. It never creates a group and never removes or changes a rule.
  - With O(network), the rules of the fleet's own paths - the load balancer reaches each task ENI on Triton's HTTP
    port, the model agent on each container instance reaches the task ENIs on the HTTP and metrics ports - each as
    ingress on the task groups and egress on the other side's groups. O(rules) adds rules of your own (such as the
    controller's network to the test listener).
  - A rule counts as present when a permission of the group in that direction allows TCP on its ports (or all
    traffic) and its peer is the wanted group, or a CIDR that contains every subnet the peer lives in (O(network)'s
    C(subnets); 0.0.0.0/0 always counts, a narrower CIDR only when those subnets are given). Prefix lists and IPv6
    ranges do not count.
  - All groups are read in one call before any write; a group that does not exist, or bad input, fails with nothing
    written, naming the option, its value and the fix. A rule added here carries a description that starts with
    C(inferops.triton_ecs:), so it can be told from the rules the account had.
  - Without O(add_missing) the module only reads and reports the rules that are missing in RV(missing), each with
    the AWS CLI command that adds it.
author:
  - inferops maintainers (@inferops)
options:
  network:
    description: The fleet's groups; the rules of its paths are derived from them.
    type: dict
    suboptions:
      load_balancer:
        description: The ALB's security groups (and, optional, its subnets).
        type: dict
        required: true
        suboptions: &side  # each side the same, as `side` in main()
          security_groups:
            description: Security group ids, C(sg-...); at least one.
            type: list
            elements: str
            required: true
          subnets:
            description: Subnet ids, C(subnet-...), where this side's network interfaces live. Only read when a
              CIDR permission could cover them.
            type: list
            elements: str
            default: []
      instances:
        description: The container instances' security groups (and subnets); the model agent runs there.
        type: dict
        required: true
        suboptions: *side
      tasks:
        description: The task ENIs' security groups (and subnets), those of the awsvpc services.
        type: dict
        required: true
        suboptions: *side
      http_port:
        description: Triton's HTTP port in the task.
        type: int
        default: 8000
      metrics_port:
        description: Triton's metrics port in the task (the model agent reads the inference counters there).
        type: int
        default: 8002
      grpc_port:
        description: Triton's gRPC port in the task, when the load balancer has a gRPC route to it (role fleet_load_balancing); omitted for none.
        type: int
  rules:
    description: More rules to ensure, each TCP on one group.
    type: list
    elements: dict
    default: []
    suboptions:
      security_group_id:
        description: The group the rule goes on, C(sg-...).
        type: str
        required: true
      direction:
        description: V(ingress) (from the peer) or V(egress) (to the peer).
        type: str
        choices: [ingress, egress]
        default: ingress
      peer_security_group_id:
        description: The peer group, C(sg-...); or give O(rules[].peer_cidr).
        type: str
      peer_cidr:
        description: The peer network, such as V(10.20.0.0/16); or give O(rules[].peer_security_group_id).
        type: str
      from_port:
        description: The first port.
        type: int
        required: true
      to_port:
        description: The last port; default O(rules[].from_port).
        type: int
      description:
        description: What the rule is for; the rule's description is C(inferops.triton_ecs:) and this.
        type: str
        default: ""
  add_missing:
    description:
      - V(true) adds the missing rules. V(false) only reads and reports them in RV(missing) (C(changed) stays false).
    type: bool
    default: false
attributes:
  diff_mode:
    details:
      - The wanted rules each group has, before and after (with O(add_missing), the added ones too).
extends_documentation_fragment:
  - inferops.triton_ecs.attributes.full
  - amazon.aws.common.modules
  - amazon.aws.region.modules
  - amazon.aws.boto3
notes:
  - A rule this module added stays when it is no longer wanted (after a port change, say); remove it by hand, its
    description says the collection added it.
"""

EXAMPLES = r"""
- name: The load balancer and the model agent reach the Triton tasks (rules added where missing)
  inferops.triton_ecs.security_group_rules:
    network:
      load_balancer: {security_groups: [sg-0a1b2c3d4e5f60001]}
      instances: {security_groups: [sg-0a1b2c3d4e5f60002], subnets: [subnet-0a1b2c3d4e5f60001, subnet-0a1b2c3d4e5f60002]}
      tasks: {security_groups: [sg-0a1b2c3d4e5f60003], subnets: [subnet-0a1b2c3d4e5f60001, subnet-0a1b2c3d4e5f60002]}
    add_missing: true

- name: Report only - which rules of the fleet are missing
  inferops.triton_ecs.security_group_rules:
    network:
      load_balancer: {security_groups: [sg-0a1b2c3d4e5f60001]}
      instances: {security_groups: [sg-0a1b2c3d4e5f60002]}
      tasks: {security_groups: [sg-0a1b2c3d4e5f60003]}
    rules:
      - security_group_id: sg-0a1b2c3d4e5f60001
        peer_cidr: 10.20.0.0/16
        from_port: 8443
        description: deploy controller to the test listener
  register: network
"""

RETURN = r"""
actions:
  description: The writes made (in check mode, that would be made), one line per rule; [] without O(add_missing).
  returned: always
  type: list
  elements: str
  sample: ["authorize ingress tcp 8000 on sg-0a1b2c3d4e5f60003 from sg-0a1b2c3d4e5f60001 (inferops.triton_ecs: load balancer to Triton HTTP)"]
present:
  description: The wanted rules the groups already allowed.
  returned: always
  type: list
  elements: dict
  contains:
    security_group_id:
      description: The group the rule is on.
      type: str
    direction:
      description: V(ingress) or V(egress).
      type: str
    protocol:
      description: Always V(tcp).
      type: str
    from_port:
      description: The first port.
      type: int
    to_port:
      description: The last port.
      type: int
    peer_security_group_id:
      description: The peer group, or V(null).
      type: str
    peer_cidr:
      description: The peer network, or V(null).
      type: str
    description:
      description: The description a rule added by the module carries.
      type: str
    rule:
      description: The rule in one line.
      type: str
missing:
  description: The wanted rules the groups lacked when read (added now with O(add_missing), unless in check mode),
    shaped as RV(present) plus C(fix).
  returned: always
  type: list
  elements: dict
  contains:
    fix:
      description: The AWS CLI command that adds the rule.
      type: str
"""

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.module import aws_module, converge  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet.security_group_rules import ensure  # noqa: E402


def main() -> None:
    side = dict(
        type="dict",
        required=True,
        options=dict(
            security_groups=dict(type="list", elements="str", required=True),
            subnets=dict(type="list", elements="str", default=[]),
        ),
    )
    argument_spec = dict(
        network=dict(
            type="dict",
            options=dict(
                load_balancer=side,
                instances=side,
                tasks=side,
                http_port=dict(type="int", default=8000),
                metrics_port=dict(type="int", default=8002),
                grpc_port=dict(type="int"),
            ),
        ),
        rules=dict(
            type="list",
            elements="dict",
            default=[],
            options=dict(
                security_group_id=dict(type="str", required=True),
                direction=dict(type="str", choices=["ingress", "egress"], default="ingress"),
                peer_security_group_id=dict(type="str"),
                peer_cidr=dict(type="str"),
                from_port=dict(type="int", required=True),
                to_port=dict(type="int"),
                description=dict(type="str", default=""),
            ),
            mutually_exclusive=[("peer_security_group_id", "peer_cidr")],
            required_one_of=[("peer_security_group_id", "peer_cidr")],
        ),
        add_missing=dict(type="bool", default=False),
    )
    module = aws_module(argument_spec)
    result = converge(module, ["ec2"], ensure, "security group rules: AWS call failed")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
