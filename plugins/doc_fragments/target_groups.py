# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The `target_groups` option shared by the bluegreen, bluegreen_listeners and bluegreen_services modules."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  target_groups:
    description:
      - Target group ARN of each colour. Each colour's service registers its tasks in its own target group (target
        type C(ip) with C(awsvpc) networking); the production and test listeners forward to both with weights.
    type: dict
    required: true
    suboptions:
      blue:
        description: Target group of the blue service (C(<name>-blue)).
        type: str
        required: true
      green:
        description: Target group of the green service (C(<name>-green)).
        type: str
        required: true
"""
