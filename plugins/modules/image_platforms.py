#!/usr/bin/python
# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: image_platforms
short_description: Read the platforms an image's manifest carries and refuse an image the fleet's architecture cannot run
version_added: 0.1.0
description:
  - Reads the manifest of O(image) from its registry - an image index (OCI) or manifest list (Docker) names a
    platform per entry; a single manifest names its platform in its config blob - and returns the platforms.
  - With O(cpu_architecture), fails when the manifest lacks C(linux/amd64) (V(X86_64)) or C(linux/arm64) (V(ARM64)),
    naming the platforms found and the fix. An x86_64 controller builds amd64 by default, and a g5g (arm64) instance
    cannot run that image; ECS would only find out when the task fails to start.
  - ECR images (C(<account>.dkr.ecr.<region>.amazonaws.com/...)) are read through the ECR API (C(BatchGetImage),
    and C(GetDownloadUrlForLayer) for a single manifest's config); any other registry through its HTTP API v2,
    anonymously or with O(registry_username)/O(registry_password).
  - Only reads; the preflight runs it before any write, C(deploy.yml) before the task definition is registered.
author:
  - inferops maintainers (@inferops)
options:
  image:
    description: The image reference the task definition uses, C(registry/repository[:tag|@sha256:...]).
    type: str
    required: true
  cpu_architecture:
    description: The fleet's CPU architecture (C(fleet_capacity_cpu_architecture)); omitted, the platforms are only returned.
    type: str
    choices: [X86_64, ARM64]
  registry_insecure:
    description: Reach a registry other than ECR over plain HTTP (a local registry on loopback).
    type: bool
    default: false
  registry_username:
    description: Username of a registry other than ECR (basic auth).
    type: str
  registry_password:
    description: Password of a registry other than ECR.
    type: str
extends_documentation_fragment:
  - inferops.triton_ecs.attributes.info_module
  - amazon.aws.common.modules
  - amazon.aws.region.modules
  - amazon.aws.boto3
"""

EXAMPLES = r"""
- name: Refuse an image the arm64 fleet cannot run
  inferops.triton_ecs.image_platforms:
    image: 123456789012.dkr.ecr.eu-west-1.amazonaws.com/triton@sha256:0123...
    cpu_architecture: ARM64
"""

RETURN = r"""
platforms:
  description: The platforms of the image, C(os/architecture[/variant]), sorted.
  returned: success
  type: list
  elements: str
  sample: [linux/amd64, linux/arm64]
media_type:
  description: The media type of the manifest read (an index, a manifest list or a single manifest).
  returned: success
  type: str
registry:
  description: The registry host the manifest was read from.
  returned: success
  type: str
image:
  description: The image reference checked.
  returned: success
  type: str
"""

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import module_errors  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.module import aws_module, client  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet.image_platform import check  # noqa: E402


def main() -> None:
    module = aws_module(
        dict(
            image=dict(type="str", required=True),
            cpu_architecture=dict(type="str", choices=["X86_64", "ARM64"]),
            registry_insecure=dict(type="bool", default=False),
            registry_username=dict(type="str"),
            registry_password=dict(type="str", no_log=True),
        )
    )
    with module_errors(module, f"reading the manifest of {module.params['image']} failed"):
        result = check(module.params, lambda: client(module, "ecr"))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
