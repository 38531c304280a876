#!/usr/bin/python
# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: bluegreen_listeners
short_description: The production listener (or rule) and test listener of a blue/green application, created with initial weights
version_added: 0.1.0
description:
  - On an existing Application Load Balancer, creates when missing the production listener (or, with
    O(production.rule), a rule on it) forwarding to the two colours' target groups with weights - the live colour
    100, the other 0 - and the test listener forwarding to the standby colour.
  - Once they exist, their forward actions belong to M(inferops.triton_ecs.bluegreen), which moves the weights at
    every cutover; this module never rewrites them, so a re-run after a cutover changes nothing.
  - It converges what bluegreen does not touch - a listener's protocol, certificate and TLS policy, a rule's
    conditions and priority.
  - A listener (or a rule at the asked priority) that forwards anywhere but the two target groups fails the task
    before any write, as do a missing load balancer or target group.
  - O(tags) are converged on every run on the resources that hold the forwards - the production listener (or, with
    O(production.rule), the rule; a listener shared through rules keeps its own tags) and the test listener - with
    C(AddTags)/C(RemoveTags). O(purge_tags) never removes the cutover lock and record (C(inferops:cutover*)) that
    M(inferops.triton_ecs.bluegreen) keeps in those tags, nor C(aws:) keys; O(tags) may not hold such keys.
author:
  - inferops maintainers (@inferops)
options:
  load_balancer_arn:
    description: ARN of the Application Load Balancer.
    type: str
    required: true
  initial_live_color:
    description: The colour that gets weight 100 when the production forward is created.
    type: str
    choices: [blue, green]
    default: blue
  production:
    description: The production listener, found by port.
    type: dict
    required: true
    suboptions:
      port:
        description: Listener port.
        type: int
        required: true
      protocol:
        description: Listener protocol.
        type: str
        choices: [HTTP, HTTPS]
        default: HTTPS
      certificate_arn:
        description: ACM certificate of an HTTPS listener.
        type: str
      ssl_policy:
        description: TLS policy of an HTTPS listener (AWS picks its default when unset).
        type: str
      rule:
        description:
          - Put the weights on a rule of the listener rather than its default action (for a listener shared with
            other applications). A missing listener is created with a C(404) fixed response as its default action.
        type: dict
        suboptions:
          priority:
            description: Rule priority.
            type: int
            required: true
          conditions:
            description: Rule conditions, as in the ELBv2 API (C(Field) and C(Values) or the field's C(*Config)).
            type: list
            elements: dict
            required: true
  test:
    description: The test listener (found by port) that reaches the standby colour before it takes traffic.
    type: dict
    suboptions:
      port:
        description: Listener port.
        type: int
        required: true
      protocol:
        description: Listener protocol.
        type: str
        choices: [HTTP, HTTPS]
        default: HTTPS
      certificate_arn:
        description: ACM certificate of an HTTPS listener.
        type: str
      ssl_policy:
        description: TLS policy of an HTTPS listener.
        type: str
extends_documentation_fragment:
  - inferops.triton_ecs.target_groups
  - inferops.triton_ecs.attributes.full
  - amazon.aws.tags
  - amazon.aws.common.modules
  - amazon.aws.region.modules
  - amazon.aws.boto3
"""

EXAMPLES = r"""
- name: Production rule on a shared HTTPS listener, test listener on 8443
  inferops.triton_ecs.bluegreen_listeners:
    load_balancer_arn: "{{ alb_arn }}"
    target_groups:
      blue: "{{ blue_tg_arn }}"
      green: "{{ green_tg_arn }}"
    production:
      port: 443
      certificate_arn: "{{ certificate_arn }}"
      rule:
        priority: 100
        conditions:
          - Field: path-pattern
            Values: ["/v2/*"]
    test:
      port: 8443
      certificate_arn: "{{ certificate_arn }}"
"""

RETURN = r"""
actions:
  description: The writes made (in check mode, that would be made).
  returned: always
  type: list
  elements: str
production_listener_arn:
  description: The production listener (unknown in check mode before it exists).
  returned: always
  type: str
production_rule_arn:
  description: The production rule, when O(production.rule) is given.
  returned: always
  type: str
test_listener_arn:
  description: The test listener, when O(test) is given.
  returned: always
  type: str
production_url:
  description: Where clients reach the production listener, C(<protocol>://<load balancer DNS name>:<port>) (a rule adds its conditions).
  returned: always
  type: str
  sample: https://internal-triton-123456789.eu-west-1.elb.amazonaws.com:443
weights:
  description: The production weights by colour, as the load balancer has them (bluegreen's after a cutover).
  returned: always
  type: dict
  sample: {blue: 100, green: 0}
live_color:
  description: The colour with the larger production weight.
  returned: always
  type: str
tags:
  description:
    - Tags of each resource this module tags - V(production) (the listener), V(rule), V(test) - when O(tags) is given.
    - A listener shared through O(production.rule) appears only when this run created it.
  returned: always
  type: dict
  sample: {rule: {team: inference}, test: {team: inference}}
"""

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.module import aws_module, converge  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.colors import COLORS, TARGET_GROUPS_OPTION  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.listeners import ensure  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._tags import TAGS_OPTIONS  # noqa: E402


def main() -> None:
    listener = dict(
        port=dict(type="int", required=True),
        protocol=dict(type="str", choices=["HTTP", "HTTPS"], default="HTTPS"),
        certificate_arn=dict(type="str"),
        ssl_policy=dict(type="str"),
    )
    rule = dict(priority=dict(type="int", required=True), conditions=dict(type="list", elements="dict", required=True))
    argument_spec = dict(
        load_balancer_arn=dict(type="str", required=True),
        target_groups=TARGET_GROUPS_OPTION,
        initial_live_color=dict(type="str", choices=list(COLORS), default="blue"),
        production=dict(type="dict", required=True, options=dict(listener, rule=dict(type="dict", options=rule))),
        test=dict(type="dict", options=dict(listener)),
        **TAGS_OPTIONS,
    )
    module = aws_module(argument_spec)
    result = converge(module, ["elbv2"], ensure, f"listeners of {module.params['load_balancer_arn']}: AWS call failed")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
