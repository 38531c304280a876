# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""Test known_after_apply: does a value hold a part a check run cannot know yet (plugins/module_utils/_aws/after_apply.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: known_after_apply
short_description: Whether a value holds a part a check run cannot know yet
version_added: 1.1.0
author: inferops maintainers
description:
  - True when the input, or any string in it (dict values, list items, nested), is V((known after apply)), as
    filter P(inferops.triton_ecs.known_after_apply#filter) publishes it.
  - The collection's own modules need no such test (given one in check mode, they report the change and make no
    call); it is for the steps other collections' modules run.
options:
  _input:
    description: The value to look into.
    type: raw
    required: true
"""

EXAMPLES = r"""
- name: Application Load Balancer (a check run whose subnets are created first cannot name them)
  amazon.aws.elb_application_lb:
    name: triton
    subnets: "{{ subnets }}"
    state: present
  when: subnets is not inferops.triton_ecs.known_after_apply
"""

RETURN = r"""
_value:
  description: Whether the input holds a value known only after apply.
  type: bool
"""

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.after_apply import unknown_inputs  # noqa: E402


def known_after_apply(value: object) -> bool:
    return bool(unknown_inputs(value))


class TestModule:
    def tests(self) -> dict:
        return {"known_after_apply": known_after_apply}
