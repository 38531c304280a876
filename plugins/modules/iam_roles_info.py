#!/usr/bin/python
# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: iam_roles_info
short_description: Look IAM roles up by name (their ARNs), in one run
version_added: 0.1.0
description:
  - Reads the named IAM roles and returns their ARNs and paths; a name without a role is listed in RV(missing), not an
    error, so the caller decides.
  - Role C(fleet_iam) looks up roles managed elsewhere with it. M(amazon.aws.iam_role_info) would do, but announces the
    removal of a return value on every call, which this collection keeps out of every run's output.
author:
  - inferops maintainers (@inferops)
options:
  names:
    description: Role names (not ARNs).
    type: list
    elements: str
    required: true
extends_documentation_fragment:
  - inferops.triton_ecs.attributes.info_module
  - amazon.aws.common.modules
  - amazon.aws.region.modules
  - amazon.aws.boto3
"""

EXAMPLES = r"""
- name: The task roles, managed by the platform team
  inferops.triton_ecs.iam_roles_info:
    names: [triton-task-execution, triton-task]
  register: found
"""

RETURN = r"""
roles:
  description: The roles found, in the order asked.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Role name.
      type: str
    arn:
      description: Role ARN.
      type: str
    path:
      description: IAM path of the role.
      type: str
arns:
  description: Role name to ARN, for the roles found.
  returned: always
  type: dict
  sample: {triton-task: "arn:aws:iam::123456789012:role/triton-task"}
missing:
  description: The names without a role.
  returned: always
  type: list
  elements: str
"""

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import iam as _iam  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import module_errors  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.module import aws_module, client  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet.iam_roles import ROLE_NAME  # noqa: E402


def main() -> None:
    module = aws_module(dict(names=dict(type="list", elements="str", required=True)))
    names = module.params["names"]
    bad = [name for name in names if not ROLE_NAME.match(name)]
    if bad:
        module.fail_json(msg=f"names: {', '.join(map(repr, bad))} are not IAM role names (1-64 of letters, digits and +=,.@_-; not ARNs)")
    iam = client(module, "iam")
    with module_errors(module, "IAM roles: AWS call failed"):
        found = {name: _iam.get_role(iam, name) for name in names}
    roles = [{"name": name, "arn": role["Arn"], "path": role["Path"]} for name, role in found.items() if role is not None]
    module.exit_json(
        changed=False,
        roles=roles,
        arns={role["name"]: role["arn"] for role in roles},
        missing=[name for name, role in found.items() if role is None],
    )


if __name__ == "__main__":
    main()
