#!/usr/bin/python
# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ecr_authorization_token
short_description: Get an ECR authorization token to log Docker in to the account's registry
version_added: 0.1.0
description:
  - Calls ECR C(GetAuthorizationToken) and returns the registry host with a username and password for
    M(community.docker.docker_login). The password is valid for 12 hours.
  - Read-only; runs in check mode too, so a check-mode run can still look at the registry.
author:
  - inferops maintainers (@inferops)
options: {}
attributes:
  check_mode:
    details:
      - The call is read-only and always made, so check mode returns a real token.
extends_documentation_fragment:
  - inferops.triton_ecs.attributes.info_module
  - amazon.aws.common.modules
  - amazon.aws.region.modules
  - amazon.aws.boto3
"""

EXAMPLES = r"""
- name: Get an ECR token
  inferops.triton_ecs.ecr_authorization_token:
    region: eu-west-1
  register: ecr_token
  no_log: true

- name: Log Docker in to ECR
  community.docker.docker_login:
    registry_url: "https://{{ ecr_token.registry }}"
    username: "{{ ecr_token.username }}"
    password: "{{ ecr_token.password }}"
  no_log: true
"""

RETURN = r"""
registry:
  description: Registry host of the account and region, C(<account>.dkr.ecr.<region>.amazonaws.com).
  returned: success
  type: str
username:
  description: Username for the registry (C(AWS)).
  returned: success
  type: str
password:
  description: Password for the registry, valid until RV(expires_at).
  returned: success
  type: str
expires_at:
  description: When the password expires (ISO 8601).
  returned: success
  type: str
"""

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.ecr import get_authorization  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import module_errors  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.module import aws_module, client  # noqa: E402


def main() -> None:
    module = aws_module({})
    ecr = client(module, "ecr")
    with module_errors(module, "ECR GetAuthorizationToken failed"):
        auth = get_authorization(ecr)
    module.exit_json(changed=False, **auth)


if __name__ == "__main__":
    main()
