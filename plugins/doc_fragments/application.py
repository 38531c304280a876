# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The blue/green application's identity (its name and cluster), shared by the bluegreen, bluegreen_rollback,
bluegreen_services and bluegreen_autoscaling modules."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  name:
    description: Application name; the services are C(<name>-blue) and C(<name>-green).
    type: str
    required: true
  cluster:
    description: ECS cluster (name or ARN) of both colours' services. It must exist.
    type: str
    required: true
"""
