#!/usr/bin/python
# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: target_groups
short_description: The blue and green ALB target groups of a blue/green service, converged in one run
version_added: 0.1.0
description:
  - Creates the two target groups of a blue/green service when missing - one per colour, tagged C(inferops:color)
    - and converges on every run their health check, the given attributes (such as slow start and the
    deregistration delay) and their tags, writing only what differs.
  - Both groups are read and planned before the first write. Bad input, an attribute key a group does not have, or
    a field AWS cannot change on an existing group (O(protocol), O(port), O(vpc_id), O(target_type)) fails the task
    with nothing written; the error names the field, both values and the fix.
  - The health check always probes the traffic port, with the target group's protocol.
  - In check mode, the ARN of a group that would be created is returned as V(null).
  - The attributes of a group this run creates are checked by AWS only when they are written, after the create.
author:
  - inferops maintainers (@inferops)
options:
  names:
    description: Name of each colour's target group (1-32 letters, digits and hyphens, not starting or ending with a hyphen).
    type: dict
    required: true
    suboptions:
      blue:
        description: Target group of the blue service.
        type: str
        required: true
      green:
        description: Target group of the green service (not the blue one's name).
        type: str
        required: true
  vpc_id:
    description: VPC of the target groups (C(vpc-...)).
    type: str
    required: true
  port:
    description: Port the targets listen on (1-65535), such as Triton's HTTP port 8000.
    type: int
    required: true
  protocol:
    description: Protocol of the targets, also that of the health check.
    type: str
    choices: [HTTP, HTTPS]
    default: HTTP
  protocol_version:
    description:
      - V(GRPC) for Triton's gRPC port behind an HTTPS listener (the health check then calls a gRPC method, O(health_check.path),
        and O(health_check.matcher) holds gRPC status codes); V(HTTP1) for its HTTP port.
      - AWS cannot change it on an existing target group.
    type: str
    choices: [HTTP1, HTTP2, GRPC]
    default: HTTP1
  target_type:
    description: How targets are registered; V(ip) for the C(awsvpc) network mode of ECS tasks.
    type: str
    choices: [ip, instance]
    default: ip
  health_check:
    description: The health check of both groups, on the traffic port.
    type: dict
    default: {}
    suboptions:
      path:
        description:
          - Path probed; Triton's C(/v2/health/ready) answers 200 only when every model is ready.
          - With O(protocol_version=GRPC), the gRPC method called, such as C(/inference.GRPCInferenceService/ServerReady).
        type: str
        default: /v2/health/ready
      interval_s:
        description: Seconds between probes (5-300).
        type: int
        default: 10
      timeout_s:
        description: Seconds a probe waits for an answer (2-120, less than O(health_check.interval_s)).
        type: int
        default: 5
      healthy_threshold:
        description: Consecutive successes before a target is healthy (2-10).
        type: int
        default: 2
      unhealthy_threshold:
        description: Consecutive failures before a target is unhealthy (2-10).
        type: int
        default: 3
      matcher:
        description:
          - HTTP codes of a healthy answer, such as V(200), V(200,202) or V(200-299).
          - With O(protocol_version=GRPC), gRPC status codes, such as V(0) or V(0-99).
        type: str
        default: "200"
  attributes:
    description:
      - Target group attributes, as in the ELBv2 API; numbers and booleans are written as strings.
      - C(slow_start.duration_seconds) is 0 (off) or 30-900, C(deregistration_delay.timeout_seconds) 0-3600.
      - Attributes not given are left alone.
    type: dict
    default: {}
attributes:
  diff_mode:
    details:
      - Each colour's name, protocol, port, VPC, target type, health check, managed attributes and tags, before and
        after (V({}) before for a group to create).
extends_documentation_fragment:
  - inferops.triton_ecs.attributes.full
  - amazon.aws.tags
  - amazon.aws.common.modules
  - amazon.aws.region.modules
  - amazon.aws.boto3
notes:
  - Without O(tags), the colour tag C(inferops:color) is still ensured and no tag is removed. O(tags) may not hold
    C(inferops:color) or C(aws:) keys, and O(purge_tags) never removes them.
"""

EXAMPLES = r"""
- name: Blue and green target groups on Triton's readiness, with slow start and a short deregistration delay
  inferops.triton_ecs.target_groups:
    names:
      blue: triton-blue
      green: triton-green
    vpc_id: "{{ vpc_id }}"
    port: 8000
    health_check:
      path: /v2/health/ready
      interval_s: 10
      timeout_s: 5
    attributes:
      slow_start.duration_seconds: 60
      deregistration_delay.timeout_seconds: 60
    tags:
      team: inference
    purge_tags: false
  register: target_groups

- name: The gRPC pair next to them (Triton's gRPC port, behind an HTTPS listener)
  inferops.triton_ecs.target_groups:
    names:
      blue: triton-grpc-blue
      green: triton-grpc-green
    vpc_id: "{{ vpc_id }}"
    port: 8001
    protocol_version: GRPC
    health_check:
      path: /inference.GRPCInferenceService/ServerReady
      matcher: "0"
- name: Give the ARNs to the services
  ansible.builtin.set_fact:
    blue_target_group_arn: "{{ target_groups.target_groups.blue }}"
"""

RETURN = r"""
actions:
  description: The writes made (in check mode, that would be made), one line per call.
  returned: always
  type: list
  elements: str
  sample: ["modify target group triton-blue (blue) attributes: slow_start.duration_seconds=90"]
target_groups:
  description: ARN of each colour's target group; V(null) for one that check mode would create.
  returned: always
  type: dict
  sample:
    blue: arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/triton-blue/0123456789abcdef
    green: arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/triton-green/fedcba9876543210
settings:
  description:
    - What each colour's group has at the end (in check mode, would have) - the same shape as C(diff.after).
    - C(attributes) holds the attributes of O(attributes) only, as the API stores them (strings).
  returned: always
  type: dict
  sample:
    blue:
      name: triton-blue
      protocol: HTTP
      protocol_version: HTTP1
      port: 8000
      vpc_id: vpc-0123456789abcdef0
      target_type: ip
      health_check: {protocol: HTTP, port: traffic-port, path: /v2/health/ready, interval_s: 10, timeout_s: 5,
                     healthy_threshold: 2, unhealthy_threshold: 3, matcher: "200"}
      attributes: {deregistration_delay.timeout_seconds: "60", slow_start.duration_seconds: "60"}
      tags: {"inferops:color": blue, team: inference}
"""

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.module import aws_module, converge  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet.target_groups import ensure  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._tags import TAGS_OPTIONS  # noqa: E402


def main() -> None:
    color = dict(type="str", required=True)
    health_check = dict(
        path=dict(type="str", default="/v2/health/ready"),
        interval_s=dict(type="int", default=10),
        timeout_s=dict(type="int", default=5),
        healthy_threshold=dict(type="int", default=2),
        unhealthy_threshold=dict(type="int", default=3),
        matcher=dict(type="str", default="200"),
    )
    argument_spec = dict(
        names=dict(type="dict", required=True, options=dict(blue=color, green=color)),
        vpc_id=dict(type="str", required=True),
        port=dict(type="int", required=True),
        protocol=dict(type="str", choices=["HTTP", "HTTPS"], default="HTTP"),
        protocol_version=dict(type="str", choices=["HTTP1", "HTTP2", "GRPC"], default="HTTP1"),
        target_type=dict(type="str", choices=["ip", "instance"], default="ip"),
        health_check=dict(type="dict", default={}, options=health_check),
        attributes=dict(type="dict", default={}),
        **TAGS_OPTIONS,
    )
    module = aws_module(argument_spec)
    names = module.params["names"]
    result = converge(module, ["elbv2"], ensure, f"target groups {names['blue']} and {names['green']}: AWS call failed")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
