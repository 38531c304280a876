# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The `placement_constraints` option shared by the bluegreen_services and task_definition modules."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  placement_constraints:
    description: Placement constraints, e.g. C(memberOf) with C(attribute:ecs.instance-type =~ g5.*).
    type: list
    elements: dict
    default: []
    suboptions:
      type:
        description: V(memberOf) or V(distinctInstance).
        type: str
        required: true
      expression:
        description: Cluster query language expression (V(memberOf)).
        type: str
"""
