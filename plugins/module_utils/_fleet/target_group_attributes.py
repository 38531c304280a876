# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""Target group attributes (slow start, deregistration delay, ...): only the ones that differ are written."""

from __future__ import annotations

import re
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import elbv2 as _elbv2
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import InputError

_KEY = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_]+)+$")
# Documented ranges of the attributes a Triton fleet tunes; others are passed through as given.
_RANGES = {
    "slow_start.duration_seconds": (0, 900),
    "deregistration_delay.timeout_seconds": (0, 3600),
}

# ---------------------------------------------------------------- pure


def as_api_value(value: Any) -> str:
    """The string form the ELBv2 API stores: booleans lower-case, numbers as digits."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def validate(params: dict[str, Any]) -> list[str]:
    errors = []
    if not (params.get("target_group_arn") or "").startswith("arn:"):
        errors.append(
            f"target_group_arn {params.get('target_group_arn')!r}: give the target group's ARN (the elb_target_group module returns it)"
        )
    attributes = params.get("attributes") or {}
    if not attributes:
        errors.append("attributes is empty: give at least one, e.g. {slow_start.duration_seconds: 60}")
    return errors + attribute_errors(attributes)


def attribute_errors(attributes: dict[str, Any]) -> list[str]:
    """What is wrong with the keys and values of an `attributes` option (the documented ranges checked)."""
    errors = []
    for key, value in attributes.items():
        if not _KEY.match(key):
            errors.append(f"attributes key {key!r}: ELBv2 attribute keys are dotted lower-case names, e.g. slow_start.duration_seconds")
            continue
        if key in _RANGES:
            low, high = _RANGES[key]
            try:
                number = int(as_api_value(value))
            except ValueError:
                errors.append(f"attributes.{key} is {value!r}: it is a number of seconds")
                continue
            if key == "slow_start.duration_seconds" and number != 0 and not low + 30 <= number <= high:
                errors.append(f"attributes.{key} is {number}: slow start is 0 (off) or 30-900 seconds")
            elif not low <= number <= high:
                errors.append(f"attributes.{key} is {number}: it must be between {low} and {high}")
    return errors


def changes(current: dict[str, str], wanted: dict[str, Any]) -> dict[str, str]:
    """Attributes to write: those whose API value differs. A key the target group does not have is an error."""
    unknown = sorted(k for k in wanted if k not in current)
    if unknown:
        raise InputError(
            f"attributes {', '.join(unknown)}: not attributes of this target group (it has {', '.join(sorted(current))}); fix the key"
        )
    return {k: as_api_value(v) for k, v in sorted(wanted.items()) if current.get(k) != as_api_value(v)}


# ---------------------------------------------------------------- the module's run


def ensure(elbv2: Any, params: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    errors = validate(params)
    if errors:
        raise InputError(errors)
    arn = params["target_group_arn"]
    current = _elbv2.describe_target_group_attributes(elbv2, arn)
    if current is None:
        raise InputError(f"target_group_arn {arn}: no such target group; create it first (elb_target_group)")
    todo = changes(current, params["attributes"])
    after = dict(current)
    if todo:
        after.update(todo)
        if not check_mode:
            after = _elbv2.modify_target_group_attributes(elbv2, arn, todo)
    keys = sorted(params["attributes"])
    return {
        "changed": bool(todo),
        "actions": [f"modify {k}={v}" for k, v in todo.items()],
        "target_group_arn": arn,
        "attributes": after,
        "diff": {"before": {k: current.get(k) for k in keys}, "after": {k: after.get(k) for k in keys}},
    }
