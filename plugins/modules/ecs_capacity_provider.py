#!/usr/bin/python
# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ecs_capacity_provider
short_description: An ECS capacity provider on an Auto Scaling group, with managed scaling, attached to a cluster
version_added: 0.1.0
description:
  - Creates the capacity provider when missing and converges its managed scaling and managed termination protection,
    so that ECS scales the GPU Auto Scaling group out for the standby colour of a blue/green cutover and back in after the drain.
  - Adds the provider to the cluster's capacity providers, keeping every provider already attached, and, with
    O(default_strategy), makes it the cluster's default capacity provider strategy.
  - The Auto Scaling group of an existing provider cannot change; asking for another one fails before any write.
  - Managed termination protection needs the group to protect new instances from scale-in; the module sets that on the group.
  - O(tags) are set when the provider is created and converged on every later run (C(TagResource)/C(UntagResource));
    with O(tags) omitted the provider's tags are left alone.
author:
  - inferops maintainers (@inferops)
options:
  name:
    description: Capacity provider name (it cannot start with C(aws), C(ecs) or C(fargate)).
    type: str
    required: true
  cluster:
    description: The cluster (name or ARN) the provider is attached to. It must exist.
    type: str
    required: true
  auto_scaling_group_arn:
    description:
      - ARN of the Auto Scaling group. It must exist. With O(managed_termination_protection) the module sets the
        group's C(NewInstancesProtectedFromScaleIn), which M(amazon.aws.autoscaling_group) cannot set.
    type: str
    required: true
  managed_scaling:
    description: Managed scaling. Only the fields given are compared with the provider.
    type: dict
    default: {}
    suboptions:
      enabled:
        description: Whether ECS scales the group.
        type: bool
        default: true
      target_capacity:
        description: Percent of the group's capacity that tasks should use (100 keeps no spare instance).
        type: int
        default: 100
      minimum_scaling_step_size:
        description: Fewest instances added or removed at once.
        type: int
      maximum_scaling_step_size:
        description: Most instances added or removed at once.
        type: int
      instance_warmup_period_s:
        description: Seconds a new instance takes before it counts (GPU instances boot and load the driver slowly).
        type: int
  managed_termination_protection:
    description: Keep ECS from letting the group terminate instances that still run tasks.
    type: bool
    default: true
  managed_draining:
    description: ECS managed draining - before the group terminates an instance, ECS sets its container instance DRAINING.
    type: bool
    default: true
  default_strategy:
    description: When given, the cluster's default capacity provider strategy becomes this provider alone.
    type: dict
    suboptions:
      weight:
        description: Weight of the provider.
        type: int
        default: 1
      base:
        description: Tasks placed on this provider first.
        type: int
        default: 0
attributes:
  diff_mode:
    details:
      - The diff shows the provider's scaling settings and tags, and the cluster's providers and default strategy.
extends_documentation_fragment:
  - inferops.triton_ecs.attributes.full
  - amazon.aws.tags
  - amazon.aws.common.modules
  - amazon.aws.region.modules
  - amazon.aws.boto3
"""

EXAMPLES = r"""
- name: GPU capacity with managed scaling, attached to the cluster
  inferops.triton_ecs.ecs_capacity_provider:
    name: triton-gpu
    cluster: inference
    auto_scaling_group_arn: "{{ asg.auto_scaling_group_arn }}"
    managed_scaling:
      target_capacity: 100
      instance_warmup_period_s: 300
    managed_termination_protection: true
    default_strategy:
      weight: 1
"""

RETURN = r"""
actions:
  description: The writes made (in check mode, that would be made).
  returned: always
  type: list
  elements: str
drift:
  description: Fields of an existing provider that differed and were updated.
  returned: always
  type: list
  elements: str
capacity_provider_name:
  description: The provider's name.
  returned: always
  type: str
capacity_provider_arn:
  description: The provider's ARN (unknown in check mode before it exists).
  returned: always
  type: str
cluster_capacity_providers:
  description: The cluster's capacity providers at the end.
  returned: always
  type: list
  elements: str
tags:
  description: The provider's tags (in check mode, as they would be).
  returned: always
  type: dict
  sample: {team: inference}
"""

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.module import aws_module, converge  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet.capacity_provider import ensure  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._tags import TAGS_OPTIONS  # noqa: E402


def main() -> None:
    argument_spec = dict(
        name=dict(type="str", required=True),
        cluster=dict(type="str", required=True),
        auto_scaling_group_arn=dict(type="str", required=True),
        managed_scaling=dict(
            type="dict",
            default={},
            options=dict(
                enabled=dict(type="bool", default=True),
                target_capacity=dict(type="int", default=100),
                minimum_scaling_step_size=dict(type="int"),
                maximum_scaling_step_size=dict(type="int"),
                instance_warmup_period_s=dict(type="int"),
            ),
        ),
        managed_termination_protection=dict(type="bool", default=True),
        managed_draining=dict(type="bool", default=True),
        default_strategy=dict(type="dict", options=dict(weight=dict(type="int", default=1), base=dict(type="int", default=0))),
        **TAGS_OPTIONS,
    )
    module = aws_module(argument_spec)
    result = converge(module, ["ecs", "autoscaling"], ensure, f"capacity provider {module.params['name']}: AWS call failed")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
