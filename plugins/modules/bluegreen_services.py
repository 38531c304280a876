#!/usr/bin/python
# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: bluegreen_services
short_description: The blue and green ECS services of a Triton application, created when missing
version_added: 0.1.0
description:
  - Creates C(<name>-blue) and C(<name>-green) when missing - awsvpc networking, each colour registered in its own
    target group, a health-check grace period sized for model loading, GPU placement through a capacity provider
    strategy (or the EC2 launch type) and placement constraints - the live colour with O(desired_count) tasks of
    O(task_definition), the standby with 0.
  - An existing service's task definition and desired count belong to M(inferops.triton_ecs.bluegreen) and are never
    written here, so a re-run after a cutover changes nothing.
  - The health-check grace period is converged in place. Networking, placement, capacity provider strategy and the
    load balancer replace every task of a service when changed; a difference is reported in RV(drift) with a
    warning, and applied only with O(settings_update=apply).
  - Bad input, a missing cluster and an initial task definition that does not fit (not awsvpc, no such container
    or port) fail before any write.
  - O(tags) are set on both services when created and converged on every later run (C(TagResource)/C(UntagResource)
    on the service ARN); each service also carries C(inferops:color), which O(tags) may not set. With O(tags)
    omitted the services' tags are left alone.
author:
  - inferops maintainers (@inferops)
options:
  task_definition:
    description: Task definition (C(family:revision) or ARN) a new service starts with. Needed only while a service is missing.
    type: str
  missing:
    description:
      - What to do with a missing service. V(create) creates it (it needs O(task_definition)).
      - V(report) writes nothing and lists it in RV(missing); existing services are read only. What
        C(playbooks/infrastructure.yml) does before the first C(deploy.yml), which registers the task definition.
    type: str
    choices: [create, report]
    default: create
  initial_live_color:
    description: The colour created with O(desired_count) tasks; the other starts at 0.
    type: str
    choices: [blue, green]
    default: blue
  desired_count:
    description: Tasks of the live colour when it is created; 0 creates it empty, so the first tasks come up through a gated cutover.
    type: int
    default: 1
  container_name:
    description: The container registered in the target group.
    type: str
    default: triton
  container_port:
    description: Its port (Triton HTTP).
    type: int
    default: 8000
  grpc:
    description:
      - The gRPC target groups (protocol version GRPC, role fleet_load_balancing) each colour's tasks also register in,
        on Triton's gRPC port. V({}) for none. Attaching them to an existing service is a load balancer change
        (O(settings_update)).
    type: dict
    default: {}
    suboptions:
      target_groups:
        description: The gRPC target group ARN of each colour.
        type: dict
        suboptions:
          blue:
            description: gRPC target group of the blue service.
            type: str
            required: true
          green:
            description: gRPC target group of the green service.
            type: str
            required: true
      container_port:
        description: Triton's gRPC port in the container.
        type: int
        default: 8001
  subnets:
    description: Subnets of the tasks (awsvpc).
    type: list
    elements: str
    required: true
  security_groups:
    description: Security groups of the tasks.
    type: list
    elements: str
    required: true
  assign_public_ip:
    description: Give tasks a public IP (only in public subnets; keep it off in production).
    type: bool
    default: false
  health_check_grace_period_s:
    description: Seconds ECS ignores failing load balancer health checks of a new task - size it for model loading.
    type: int
    default: 600
  capacity_provider_strategy:
    description: Capacity provider strategy (the GPU capacity provider). Without it the services use the EC2 launch type.
    type: list
    elements: dict
    default: []
    suboptions:
      capacity_provider:
        description: Capacity provider name.
        type: str
        required: true
      weight:
        description: Relative share of tasks.
        type: int
        default: 1
      base:
        description: Tasks placed on this provider first.
        type: int
        default: 0
  placement_strategy:
    description: Placement strategy, e.g. C(spread) over C(attribute:ecs.availability-zone).
    type: list
    elements: dict
    default: []
    suboptions:
      type:
        description: V(spread), V(binpack) or V(random).
        type: str
        required: true
      field:
        description: What to spread or binpack on.
        type: str
  maximum_percent:
    description: Deployment maximum percent of a new service.
    type: int
    default: 200
  minimum_healthy_percent:
    description: Deployment minimum healthy percent of a new service.
    type: int
    default: 100
  settings_update:
    description:
      - What to do when an existing service's networking, placement, capacity provider strategy or load balancer
        differs - V(report) it (a warning and RV(drift)) or V(apply) it, which starts a new deployment of that colour.
    type: str
    choices: [report, apply]
    default: report
attributes:
  diff_mode:
    details:
      - The diff shows each colour's settings and tags.
extends_documentation_fragment:
  - inferops.triton_ecs.application
  - inferops.triton_ecs.target_groups
  - inferops.triton_ecs.placement_constraints
  - inferops.triton_ecs.attributes.full
  - amazon.aws.tags
  - amazon.aws.common.modules
  - amazon.aws.region.modules
  - amazon.aws.boto3
"""

EXAMPLES = r"""
- name: The blue and green services on GPU capacity
  inferops.triton_ecs.bluegreen_services:
    cluster: inference
    name: triton
    task_definition: triton:1
    desired_count: 2
    target_groups:
      blue: "{{ blue_tg_arn }}"
      green: "{{ green_tg_arn }}"
    subnets: [subnet-0123456789abcdef0, subnet-0123456789abcdef1]
    security_groups: [sg-0123456789abcdef0]
    health_check_grace_period_s: 600
    capacity_provider_strategy:
      - capacity_provider: triton-gpu
    placement_constraints:
      - type: memberOf
        expression: "attribute:ecs.instance-type =~ g5.*"
"""

RETURN = r"""
actions:
  description: The writes made (in check mode, that would be made).
  returned: always
  type: list
  elements: str
missing:
  description: With O(missing=report), the services that do not exist (nothing was written); otherwise empty.
  returned: always
  type: list
  elements: str
drift:
  description: Per colour, the settings of an existing service that differed from the options.
  returned: always
  type: dict
settings_held:
  description: Differences left as they are (see O(settings_update)); each is also a warning.
  returned: always
  type: list
  elements: str
services:
  description: Service name of each colour.
  returned: always
  type: dict
service_arns:
  description: Service ARN of each colour (unknown in check mode before it exists).
  returned: always
  type: dict
task_definitions:
  description: Task definition each colour runs.
  returned: always
  type: dict
desired_counts:
  description: Desired count of each colour.
  returned: always
  type: dict
tags:
  description: Tags of each colour's service (in check mode, as they would be).
  returned: always
  type: dict
  sample: {blue: {team: inference, "inferops:color": blue}, green: {team: inference, "inferops:color": green}}
"""

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.module import aws_module, converge  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.colors import COLORS, TARGET_GROUPS_OPTION  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.services import ensure  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._tags import TAGS_OPTIONS  # noqa: E402


def main() -> None:
    argument_spec = dict(
        cluster=dict(type="str", required=True),
        name=dict(type="str", required=True),
        task_definition=dict(type="str"),
        missing=dict(type="str", choices=["create", "report"], default="create"),
        initial_live_color=dict(type="str", choices=list(COLORS), default="blue"),
        desired_count=dict(type="int", default=1),
        target_groups=TARGET_GROUPS_OPTION,
        container_name=dict(type="str", default="triton"),
        container_port=dict(type="int", default=8000),
        grpc=dict(
            type="dict",
            default={},
            options=dict(
                target_groups=dict(type="dict", options=dict(blue=dict(type="str", required=True), green=dict(type="str", required=True))),
                container_port=dict(type="int", default=8001),
            ),
        ),
        subnets=dict(type="list", elements="str", required=True),
        security_groups=dict(type="list", elements="str", required=True),
        assign_public_ip=dict(type="bool", default=False),
        health_check_grace_period_s=dict(type="int", default=600),
        capacity_provider_strategy=dict(
            type="list",
            elements="dict",
            default=[],
            options=dict(
                capacity_provider=dict(type="str", required=True), weight=dict(type="int", default=1), base=dict(type="int", default=0)
            ),
        ),
        placement_constraints=dict(
            type="list", elements="dict", default=[], options=dict(type=dict(type="str", required=True), expression=dict(type="str"))
        ),
        placement_strategy=dict(
            type="list", elements="dict", default=[], options=dict(type=dict(type="str", required=True), field=dict(type="str"))
        ),
        maximum_percent=dict(type="int", default=200),
        minimum_healthy_percent=dict(type="int", default=100),
        settings_update=dict(type="str", choices=["report", "apply"], default="report"),
        **TAGS_OPTIONS,
    )
    module = aws_module(argument_spec)
    result = converge(module, ["ecs"], ensure, f"services of {module.params['name']}: AWS call failed")
    for warning in result["settings_held"]:
        module.warn(warning)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
