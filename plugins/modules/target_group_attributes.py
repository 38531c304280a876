#!/usr/bin/python
# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: target_group_attributes
short_description: Set ALB target group attributes (slow start and others) that differ
version_added: 0.1.0
description:
  - Sets the given attributes of an existing target group, writing only those whose value differs.
  - Fills what M(community.aws.elb_target_group) cannot set, such as C(slow_start.duration_seconds), the warm-up
    period during which a new Triton task receives a linearly increasing share of requests.
  - A key the target group does not have fails before any write.
author:
  - inferops maintainers (@inferops)
options:
  target_group_arn:
    description: ARN of the target group.
    type: str
    required: true
  attributes:
    description: Attribute keys and values (as in the ELBv2 API; numbers and booleans are written as strings).
    type: dict
    required: true
attributes:
  diff_mode:
    details:
      - The managed attributes before and after.
extends_documentation_fragment:
  - inferops.triton_ecs.attributes.full
  - amazon.aws.common.modules
  - amazon.aws.region.modules
  - amazon.aws.boto3
"""

EXAMPLES = r"""
- name: Slow start for Triton warm-up
  inferops.triton_ecs.target_group_attributes:
    target_group_arn: "{{ blue_tg.target_group_arn }}"
    attributes:
      slow_start.duration_seconds: 60
"""

RETURN = r"""
actions:
  description: The attributes written (in check mode, that would be written).
  returned: always
  type: list
  elements: str
target_group_arn:
  description: The target group.
  returned: always
  type: str
attributes:
  description: Every attribute of the target group at the end.
  returned: always
  type: dict
"""

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.module import aws_module, converge  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet.target_group_attributes import ensure  # noqa: E402


def main() -> None:
    argument_spec = dict(
        target_group_arn=dict(type="str", required=True),
        attributes=dict(type="dict", required=True),
    )
    module = aws_module(argument_spec)
    result = converge(module, ["elbv2"], ensure, f"target group {module.params['target_group_arn']}: AWS call failed")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
