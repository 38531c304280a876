#!/usr/bin/python
# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: cloudwatch_dashboard
short_description: A CloudWatch dashboard, written only when its body differs
version_added: 0.1.0
description:
  - Creates or replaces a CloudWatch dashboard. The body is compared with the stored one as JSON (key order and
    spacing do not count), so a re-run with the same body writes nothing.
  - CloudWatch's validation messages for a saved dashboard come back as warnings.
author:
  - inferops maintainers (@inferops)
options:
  name:
    description: Dashboard name.
    type: str
    required: true
  state:
    description: V(present) writes the dashboard, V(absent) deletes it.
    type: str
    choices: [present, absent]
    default: present
  body:
    description: The dashboard body (C(widgets) list), as a dict or a JSON string. Required with O(state=present).
    type: raw
attributes:
  diff_mode:
    details:
      - The dashboard body before and after.
extends_documentation_fragment:
  - inferops.triton_ecs.attributes.full
  - amazon.aws.common.modules
  - amazon.aws.region.modules
  - amazon.aws.boto3
"""

EXAMPLES = r"""
- name: A dashboard for the Triton service
  inferops.triton_ecs.cloudwatch_dashboard:
    name: triton
    body:
      widgets:
        - type: metric
          x: 0
          y: 0
          width: 12
          height: 6
          properties:
            title: Target 5xx
            region: eu-west-1
            metrics: [[AWS/ApplicationELB, HTTPCode_Target_5XX_Count, LoadBalancer, app/triton/0123456789abcdef]]
"""

RETURN = r"""
actions:
  description: The writes made (in check mode, that would be made) - V(create), V(update) or V(delete).
  returned: always
  type: list
  elements: str
dashboard_name:
  description: The dashboard's name.
  returned: always
  type: str
dashboard_arn:
  description: The dashboard's ARN when it existed before the run.
  returned: when state is present
  type: str
body:
  description: The dashboard body.
  returned: when state is present
  type: dict
validation_messages:
  description: CloudWatch's validation messages about the saved body.
  returned: when state is present
  type: list
  elements: str
"""

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.module import aws_module, converge  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet.cloudwatch_dashboard import ensure  # noqa: E402


def main() -> None:
    argument_spec = dict(
        name=dict(type="str", required=True),
        state=dict(type="str", choices=["present", "absent"], default="present"),
        body=dict(type="raw"),
    )
    module = aws_module(argument_spec, required_if=[("state", "present", ["body"])])
    result = converge(module, ["cloudwatch"], ensure, f"dashboard {module.params['name']}: AWS call failed")
    for message in result.get("validation_messages") or []:
        module.warn(f"dashboard {module.params['name']}: {message}")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
