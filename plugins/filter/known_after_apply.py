# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""Filter known_after_apply: how a role publishes a value a check run cannot know yet (plugins/module_utils/_aws/after_apply.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: known_after_apply
short_description: Mark the parts of a value that a check run cannot know yet
version_added: 1.1.0
author: inferops maintainers
description:
  - Returns the input with every missing part (V(null) or V("")), in a dict or list too, replaced by
    V((known after apply)) - the ARN or id of a resource an earlier step of the same check run would create.
  - A role publishes such values with this filter; every module of the collection given one in check mode reports
    the change a real run would make and makes no AWS call, so the roles after it need no test of their own.
  - Test P(inferops.triton_ecs.known_after_apply#test) asks whether a value holds one, for the few steps run by
    modules of other collections.
positional: _input, applies
options:
  _input:
    description: The value as the module returned it (a string, a dict of them, a list of them).
    type: raw
    required: true
  applies:
    description: V(false) marks the missing parts V("") instead - a value this configuration does not have at all.
    type: bool
    default: true
"""

EXAMPLES = r"""
- name: Publish the role ARN (a check run that would create the role has none yet)
  ansible.builtin.set_fact:
    fleet_iam_task_role_arn: "{{ fleet_iam_roles.roles[1].arn | inferops.triton_ecs.known_after_apply }}"

- name: Publish the rule ARN, which only a shared listener has
  ansible.builtin.set_fact:
    production_rule_arn: >-
      {{ listeners.production_rule_arn | default(none)
         | inferops.triton_ecs.known_after_apply(applies=production.rule is defined) }}
"""

RETURN = r"""
_value:
  description: The input, its missing parts marked V((known after apply)) (or V("") with O(applies=false)).
  type: raw
"""

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.after_apply import known_after_apply  # noqa: E402


class FilterModule:
    def filters(self) -> dict:
        return {"known_after_apply": known_after_apply}
