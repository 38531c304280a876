#!/usr/bin/python
# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: fleet_launch_template
short_description: The GPU fleet's launch template, with instance types of one GPU shape, a capacity reservation, a Capacity Block or Spot
version_added: 0.1.0
description:
  - Converges the launch template of an ECS GPU fleet (role C(fleet_capacity)) - IMDSv2 required, an encrypted root
    volume, the instance profile, security groups and user data - and where its instances come from.
  - The data is compared with the template's default version (the one the Auto Scaling group launches); a difference
    becomes a new version holding the whole data, made the default. A second run with the same settings writes nothing.
  - O(instance_types) may name several types of one GPU shape (the same GPU count, maker and model, GPU memory and CPU
    architecture, as C(DescribeInstanceTypes) says); the Auto Scaling group then launches them through the mixed
    instances policy this module returns (RV(mixed_instances_policy)). Types of different shapes are refused.
  - O(capacity_reservation_id) targets one On-Demand Capacity Reservation (instances launch only into it),
    O(capacity_reservation_group_arn) a resource group of reservations (instances fall back to On-Demand capacity when
    the group is full), O(capacity_block_id) a Capacity Block for ML (market type C(capacity-block), one instance type).
  - O(spot=true) is the explicit opt-in to Spot, through the returned mixed instances policy (all Spot above
    O(on_demand_base_capacity)); the fleet's interruption handling is the ECS agent's Spot draining, which role
    C(fleet_capacity) turns on in the user data (C(ECS_ENABLE_SPOT_INSTANCE_DRAINING=true)).
  - O(tags) are set on the template when it is created and converged on every later run (C(CreateTags)/C(DeleteTags));
    with O(tags) omitted its tags are left alone.
  - Combinations that cannot work (Spot with a reservation or a block, several types with a block or with one
    reservation, two targets at once) fail before any write, each problem naming role C(fleet_capacity)'s variable and
    the fix.
author:
  - inferops maintainers (@inferops)
options:
  name:
    description: Name of the launch template (C(fleet_capacity_name)).
    type: str
    required: true
  image_id:
    description: The AMI (C(ami-...)).
    type: str
    required: true
  keep_image:
    description:
      - When the template exists, keep the AMI its default version runs and return O(image_id) as RV(pending_image_id)
        instead of writing it - a new AMI reaches the fleet through C(playbooks/roll_ami.yml) (a canary, then an
        instance refresh). Other settings still converge. A new template takes O(image_id).
    type: bool
    default: false
  instance_types:
    description:
      - GPU instance types of one GPU shape, the preferred first; the first is also the template's C(InstanceType).
    type: list
    elements: str
    required: true
  iam_instance_profile:
    description: Name of the instances' instance profile.
    type: str
  security_group_ids:
    description: Security groups of the instances.
    type: list
    elements: str
    default: []
  user_data:
    description: User data, base64-encoded.
    type: str
  metadata_hop_limit:
    description: IMDSv2 response hop limit (tokens are always required).
    type: int
    default: 1
  root_volume:
    description: Root volume, always encrypted and deleted with the instance.
    type: dict
    default: {}
    suboptions:
      device_name:
        description: The AMI's root device name.
        type: str
        default: /dev/xvda
      size_gb:
        description: Size in GiB.
        type: int
        default: 200
      type:
        description: EBS volume type.
        type: str
        default: gp3
  capacity_reservation_id:
    description: An On-Demand Capacity Reservation (C(cr-...)) the instances launch into, and only into.
    type: str
    default: ""
  capacity_reservation_group_arn:
    description: A resource group of capacity reservations the instances launch into while it has room.
    type: str
    default: ""
  capacity_block_id:
    description: The reservation id of a Capacity Block for ML (C(cr-...)); the instances launch into it with market type C(capacity-block).
    type: str
    default: ""
  spot:
    description: Launch Spot instances (through the mixed instances policy returned for the Auto Scaling group).
    type: bool
    default: false
  spot_allocation_strategy:
    description: How the group picks Spot pools.
    type: str
    default: price-capacity-optimized
    choices: [price-capacity-optimized, capacity-optimized, capacity-optimized-prioritized, lowest-price]
  on_demand_base_capacity:
    description: With O(spot=true), the first instances that are On-Demand.
    type: int
    default: 0
attributes:
  diff_mode:
    details:
      - The default version's data before, and the data after.
extends_documentation_fragment:
  - inferops.triton_ecs.attributes.full
  - amazon.aws.common.modules
  - amazon.aws.region.modules
  - amazon.aws.tags
  - amazon.aws.boto3
"""

EXAMPLES = r"""
- name: A p5 fleet in its On-Demand Capacity Reservation
  inferops.triton_ecs.fleet_launch_template:
    name: triton-gpu
    image_id: ami-0123456789abcdef0
    instance_types: [p5.48xlarge]
    capacity_reservation_id: cr-0123456789abcdef0
    iam_instance_profile: triton-ecs-instance
    user_data: "{{ lookup('ansible.builtin.template', 'user_data.sh.j2') | b64encode }}"
  register: template

- name: g5 sizes of one GPU (A10G), Spot above two On-Demand instances
  inferops.triton_ecs.fleet_launch_template:
    name: triton-gpu
    image_id: ami-0123456789abcdef0
    instance_types: [g5.2xlarge, g5.4xlarge]
    spot: true
    on_demand_base_capacity: 2
  register: template

- name: The Auto Scaling group launches the template's default version through the returned policy
  amazon.aws.autoscaling_group:
    name: triton-gpu
    launch_template:
      launch_template_name: triton-gpu
      version: "{{ template.default_version | string }}"
    mixed_instances_policy: "{{ template.mixed_instances_policy or omit }}"
    min_size: 0
    max_size: 4
    vpc_zone_identifier: [subnet-0123456789abcdef0]
"""

RETURN = r"""
image_id:
  description: The AMI the template's default version runs after this run.
  returned: always
  type: str
pending_image_id:
  description: With O(keep_image), the O(image_id) that was not written because the template runs another AMI; empty otherwise.
  returned: always
  type: str
actions:
  description: What was written (in check mode, would be written).
  returned: always
  type: list
  elements: str
template_id:
  description: The launch template's id (empty in check mode before it exists).
  returned: always
  type: str
template_name:
  description: The launch template's name.
  returned: always
  type: str
default_version:
  description: The default version, which holds the data - the version the Auto Scaling group should launch.
  returned: always
  type: int
latest_version:
  description: The template's latest version.
  returned: always
  type: int
launch_template_data:
  description: The LaunchTemplateData the settings render.
  returned: always
  type: dict
mixed_instances_policy:
  description:
    - The Auto Scaling group's mixed instances policy as M(amazon.aws.autoscaling_group) takes it
      (C({instance_types, instances_distribution})), or null when the group launches the template alone (one type, no Spot).
  returned: always
  type: dict
mixed_instances_policy_aws:
  description: The same policy in the Auto Scaling API's shape (C(MixedInstancesPolicy)), around the default version, or null.
  returned: always
  type: dict
capacity:
  description:
    - C({kind, instance_types, smallest_instance_type, per_instance, gpu_shape, reservation_id,
      capacity_reservation_group_arn, spot, ecs_config}). C(kind) is one of V(on-demand), V(spot),
      V(capacity-reservation), V(capacity-reservation-group), V(capacity-block); C(per_instance) is what ECS can offer
      tasks on one instance of the smallest type (C({gpus, cpu, memory})), which the placement check counts.
  returned: always
  type: dict
"""

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.module import aws_module, converge  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet.launch_template import ensure  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._tags import TAGS_OPTIONS  # noqa: E402


def main() -> None:
    argument_spec = dict(
        name=dict(type="str", required=True),
        image_id=dict(type="str", required=True),
        keep_image=dict(type="bool", default=False),
        instance_types=dict(type="list", elements="str", required=True),
        iam_instance_profile=dict(type="str"),
        security_group_ids=dict(type="list", elements="str", default=[]),
        user_data=dict(type="str"),
        metadata_hop_limit=dict(type="int", default=1),
        root_volume=dict(
            type="dict",
            default={},
            options=dict(
                device_name=dict(type="str", default="/dev/xvda"),
                size_gb=dict(type="int", default=200),
                type=dict(type="str", default="gp3"),
            ),
        ),
        capacity_reservation_id=dict(type="str", default=""),
        capacity_reservation_group_arn=dict(type="str", default=""),
        capacity_block_id=dict(type="str", default=""),
        spot=dict(type="bool", default=False),
        spot_allocation_strategy=dict(
            type="str",
            default="price-capacity-optimized",
            choices=["price-capacity-optimized", "capacity-optimized", "capacity-optimized-prioritized", "lowest-price"],
        ),
        on_demand_base_capacity=dict(type="int", default=0),
        **TAGS_OPTIONS,
    )
    module = aws_module(argument_spec)
    result = converge(module, ["ec2"], ensure, f"launch template {module.params['name']}: AWS call failed")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
