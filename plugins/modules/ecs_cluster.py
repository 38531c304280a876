#!/usr/bin/python
# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ecs_cluster
short_description: An ECS cluster with Container Insights, created when missing
version_added: 0.1.0
description:
  - Creates the ECS cluster when it does not exist, and converges its Container Insights setting
    (which M(community.aws.ecs_cluster) cannot set).
  - Never touches the cluster's capacity providers; M(inferops.triton_ecs.ecs_capacity_provider) attaches them, so a
    re-run of this module cannot detach them.
  - Tags are set when the cluster is created.
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
  tags:
    description: Tags of a new cluster.
    type: dict
    default: {}
extends_documentation_fragment:
  - amazon.aws.common.modules
  - amazon.aws.region.modules
  - amazon.aws.boto3
notes:
  - Supports check mode and diff mode.
"""

EXAMPLES = r"""
- name: The inference cluster, with Container Insights
  inferops.triton_ecs.ecs_cluster:
    name: inference
    container_insights: enabled
"""

RETURN = r"""
actions:
  description: The writes made (in check mode, that would be made) - V(create) or V(update_settings).
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
"""

from ansible_collections.amazon.aws.plugins.module_utils.modules import AnsibleAWSModule  # noqa: E402
from ansible_collections.amazon.aws.plugins.module_utils.retries import AWSRetry  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import BotoCoreError, ClientError, InputError  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet.ecs_cluster import ensure  # noqa: E402


def main() -> None:
    argument_spec = dict(
        name=dict(type="str", required=True),
        container_insights=dict(type="str", choices=["enabled", "enhanced", "disabled"], default="enabled"),
        tags=dict(type="dict", default={}),
    )
    module = AnsibleAWSModule(argument_spec=argument_spec, supports_check_mode=True)
    ecs = module.client("ecs", retry_decorator=AWSRetry.jittered_backoff())
    try:
        result = ensure(ecs, module.params, module.check_mode)
    except InputError as e:
        module.fail_json(msg=str(e), errors=e.errors)
    except (BotoCoreError, ClientError) as e:
        module.fail_json_aws(e, msg=f"ECS cluster {module.params['name']}: AWS call failed")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
