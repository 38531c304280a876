#!/usr/bin/python
# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: autoscaling_group_settings
short_description: Set Auto Scaling group settings that amazon.aws.autoscaling_group cannot (Capacity Rebalancing)
version_added: 1.0.0
description:
  - Sets the given settings of an existing Auto Scaling group, writing only those that differ (one
    C(UpdateAutoScalingGroup) naming only them).
  - Fills what M(amazon.aws.autoscaling_group) cannot set. Today that is Capacity Rebalancing, which a Spot fleet
    needs. On a rebalance recommendation the group launches the replacement first, then terminates the instance at
    risk. ECS managed draining moves that instance's tasks before it goes.
  - A group that does not exist fails before any write.
author:
  - inferops maintainers (@inferops)
options:
  name:
    description: Name of the Auto Scaling group.
    type: str
    required: true
  capacity_rebalance:
    description:
      - Capacity Rebalancing. Role C(fleet_capacity) turns it on with Spot (C(fleet_capacity_spot)).
      - Omit it to leave the group's setting as it is.
    type: bool
attributes:
  diff_mode:
    details:
      - The managed settings before and after.
extends_documentation_fragment:
  - inferops.triton_ecs.attributes.full
  - amazon.aws.common.modules
  - amazon.aws.region.modules
  - amazon.aws.boto3
"""

EXAMPLES = r"""
- name: A Spot fleet replaces an instance at risk before it is interrupted
  inferops.triton_ecs.autoscaling_group_settings:
    name: triton-gpu
    capacity_rebalance: true
"""

RETURN = r"""
actions:
  description: The settings written (in check mode, that would be written).
  returned: always
  type: list
  elements: str
  sample: ["set CapacityRebalance=true"]
name:
  description: The Auto Scaling group.
  returned: always
  type: str
settings:
  description: The managed settings at the end (in check mode, as a real run would leave them).
  returned: always
  type: dict
  sample: {capacity_rebalance: true}
"""

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.module import aws_module, converge  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet.group_settings import ensure  # noqa: E402


def main() -> None:
    argument_spec = dict(
        name=dict(type="str", required=True),
        capacity_rebalance=dict(type="bool"),
    )
    module = aws_module(argument_spec)
    result = converge(module, ["autoscaling"], ensure, f"Auto Scaling group {module.params['name']}: AWS call failed")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
