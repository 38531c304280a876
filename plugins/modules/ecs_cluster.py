#!/usr/bin/python
# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ecs_cluster
short_description: An ECS cluster with Container Insights, and optionally its log group, created when missing
version_added: 0.1.0
description:
  - Creates the ECS cluster when it does not exist, and converges its Container Insights setting
    (which M(community.aws.ecs_cluster) cannot set).
  - Never touches the cluster's capacity providers; M(inferops.triton_ecs.ecs_capacity_provider) attaches them, so a
    re-run of this module cannot detach them.
  - O(tags) are set when the cluster is created and converged on every later run (C(TagResource)/C(UntagResource));
    with O(tags) omitted the cluster's tags are left alone.
  - With O(log_group), also the CloudWatch Logs group the cluster's tasks log to (the awslogs driver). It is created
    when missing, its retention is converged, and O(tags) are added to it; tags it has besides are kept, whatever
    O(purge_tags) says. Cluster and log group take one module run.
author:
  - inferops maintainers (@inferops)
options:
  name:
    description: Cluster name.
    type: str
    required: true
  container_insights:
    description: Container Insights - V(enabled), V(enhanced) (per-container metrics) or V(disabled).
    type: str
    choices: [enabled, enhanced, disabled]
    default: enabled
  log_group:
    description: The log group of the cluster's tasks; omit to leave log groups alone.
    type: dict
    suboptions:
      name:
        description: Log group name, e.g. V(/ecs/triton).
        type: str
        required: true
      retention_days:
        description: Days CloudWatch Logs keeps the logs, one of the periods it accepts (1, 3, 5, 7, 14, 30, 60, 90, ...).
        type: int
        required: true
attributes:
  diff_mode:
    details:
      - The diff shows the Container Insights setting, the tags and, with O(log_group), the log group.
extends_documentation_fragment:
  - inferops.triton_ecs.attributes.full
  - amazon.aws.tags
  - amazon.aws.common.modules
  - amazon.aws.region.modules
  - amazon.aws.boto3
"""

EXAMPLES = r"""
- name: The inference cluster, with Container Insights
  inferops.triton_ecs.ecs_cluster:
    name: inference
    container_insights: enabled
    tags:
      team: inference

- name: The cluster and the log group its tasks write to
  inferops.triton_ecs.ecs_cluster:
    name: inference
    log_group:
      name: /ecs/triton
      retention_days: 30
"""

RETURN = r"""
actions:
  description: >-
    The writes made (in check mode, that would be made) - V(create), V(update_settings), V(update_tags), and for the
    log group V(create_log_group), V(set_retention), V(tag_log_group).
  returned: always
  type: list
  elements: str
cluster_name:
  description: The cluster's name.
  returned: always
  type: str
cluster_arn:
  description: The cluster's ARN (unknown in check mode before the cluster exists).
  returned: always
  type: str
container_insights:
  description: The Container Insights setting.
  returned: always
  type: str
tags:
  description: The cluster's tags (in check mode, as they would be).
  returned: always
  type: dict
  sample: {team: inference}
log_group:
  description: The log group (in check mode, as it would be).
  returned: when O(log_group) is given
  type: dict
  sample: {name: /ecs/triton, retention_days: 30, tags: {team: inference}}
"""

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.module import aws_module, converge  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet.ecs_cluster import ensure  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._tags import TAGS_OPTIONS  # noqa: E402


def main() -> None:
    argument_spec = dict(
        name=dict(type="str", required=True),
        container_insights=dict(type="str", choices=["enabled", "enhanced", "disabled"], default="enabled"),
        **TAGS_OPTIONS,
        log_group=dict(
            type="dict",
            options=dict(name=dict(type="str", required=True), retention_days=dict(type="int", required=True)),
        ),
    )
    module = aws_module(argument_spec)
    result = converge(module, ["ecs", "logs"], ensure, f"ECS cluster {module.params['name']}: AWS call failed")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
