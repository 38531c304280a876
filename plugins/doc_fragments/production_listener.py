# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""Where the production weights of a blue/green application live (`listener_arn` / `listener_rule_arn`), shared by
the bluegreen and bluegreen_autoscaling modules."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  listener_arn:
    description:
      - Production listener whose default forward action holds the weights.
      - One of O(listener_arn) and O(listener_rule_arn) is required.
    type: str
  listener_rule_arn:
    description: Production listener rule whose forward action holds the weights.
    type: str
"""
