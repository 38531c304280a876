"""A value a check run cannot know yet: how roles publish it (filter), how a step run by another collection's module
asks for it (test), and what the collection's modules do with it (_aws/after_apply.py, called by aws_module).
Stand-in: none needed, pure functions."""

from __future__ import annotations

import pytest

from ansible_collections.inferops.triton_ecs.plugins.filter.known_after_apply import FilterModule
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.after_apply import (
    KNOWN_AFTER_APPLY,
    check_mode_result,
    real_run_error,
    unknown_inputs,
)
from ansible_collections.inferops.triton_ecs.plugins.test.known_after_apply import TestModule as KnownAfterApplyTests

mark = FilterModule().filters()["known_after_apply"]
holds = KnownAfterApplyTests().tests()["known_after_apply"]


def test_the_filter_marks_each_missing_part_and_keeps_the_known_ones():
    assert mark(None) == KNOWN_AFTER_APPLY
    assert mark("") == KNOWN_AFTER_APPLY
    assert mark("arn:aws:iam::123456789012:role/triton") == "arn:aws:iam::123456789012:role/triton"
    assert mark({"blue": "arn:blue", "green": None}) == {"blue": "arn:blue", "green": KNOWN_AFTER_APPLY}
    assert mark(["sg-1", ""]) == ["sg-1", KNOWN_AFTER_APPLY]
    assert mark(0) == 0 and mark(False) is False  # a known zero or false is a value


def test_the_filter_marks_a_value_the_configuration_does_not_have_as_empty():
    assert mark(None, applies=False) == ""
    assert mark({"rule": None}, applies=False) == {"rule": ""}


@pytest.mark.parametrize(
    ("value", "paths"),
    [
        ("arn:aws:ecs:us-east-1:123456789012:task-definition/triton:1", []),
        (KNOWN_AFTER_APPLY, ["value"]),
        ({"task_definition": KNOWN_AFTER_APPLY, "cluster": "c"}, ["task_definition"]),
        ({"target_groups": {"blue": "arn", "green": KNOWN_AFTER_APPLY}}, ["target_groups.green"]),
        ({"security_group_ids": ["sg-1", KNOWN_AFTER_APPLY]}, ["security_group_ids[1]"]),
        # a text that mentions it (a failure message, an image "digest known after apply") is not one
        ({"detail": f"x is {KNOWN_AFTER_APPLY}", "image": "repo:tag (digest known after apply)"}, []),
    ],
)
def test_unknown_inputs_names_each_path(value, paths):
    assert unknown_inputs(value) == paths
    assert holds(value) is bool(paths)


def test_a_check_run_reports_the_change_and_a_real_run_names_the_input():
    result = check_mode_result(["listener_arn", "target_groups.green"])
    assert result["changed"] is True
    assert result["known_after_apply"] == ["listener_arn", "target_groups.green"]
    assert "listener_arn, target_groups.green" in result["actions"][0]
    error = real_run_error(["listener_arn"])
    assert error.startswith("listener_arn is '(known after apply)' in a real run") and "without --check" in error
