# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""A value a check run cannot know yet: the ARN or id of a resource an earlier step of the same run would create.

A role publishes such a value as KNOWN_AFTER_APPLY (filter inferops.triton_ecs.known_after_apply). Every module of
the collection receives it like any other input: in check mode, a module given one reports the change a real run
would make and makes no AWS call (aws_module does it, so no role tests for it); in a real run it fails, naming the
input, since the step that creates it has not run.
"""

from __future__ import annotations

from typing import Any

__all__ = ["KNOWN_AFTER_APPLY", "known_after_apply", "unknown_inputs"]

KNOWN_AFTER_APPLY = "(known after apply)"


def unknown_inputs(value: Any, path: str = "") -> list[str]:
    """The dotted paths (list items as [i]) under `value` that are KNOWN_AFTER_APPLY, in order (whole values only: a
    text that mentions it is not one)."""
    if isinstance(value, str):
        return [path or "value"] if value == KNOWN_AFTER_APPLY else []
    if isinstance(value, dict):
        return [p for key, item in value.items() for p in unknown_inputs(item, f"{path}.{key}" if path else str(key))]
    if isinstance(value, (list, tuple)):
        return [p for i, item in enumerate(value) for p in unknown_inputs(item, f"{path}[{i}]")]
    return []


def known_after_apply(value: Any, applies: bool = True) -> Any:
    """`value`, with every missing part (None or "") marked KNOWN_AFTER_APPLY; with `applies` false, "" instead (a
    value that does not exist in this configuration, rather than one that will)."""
    if isinstance(value, dict):
        return {key: known_after_apply(item, applies) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [known_after_apply(item, applies) for item in value]
    if value is None or value == "":
        return KNOWN_AFTER_APPLY if applies else ""
    return value


def check_mode_result(unknown: list[str]) -> dict[str, Any]:
    """What a module reports in check mode when inputs are known only after apply: the change a real run makes."""
    names = ", ".join(unknown)
    return {
        "changed": True,
        "known_after_apply": unknown,
        "actions": [f"would run with {names} known after apply"],
        "msg": f"check mode: {names} is created earlier in this run, so this step is known only after apply",
    }


def real_run_error(unknown: list[str]) -> str:
    """The failure of a real run given a value only a check run may have: the step that creates it did not run."""
    return (
        f"{', '.join(unknown)} is {KNOWN_AFTER_APPLY!r} in a real run: the step that creates it did not run or returned "
        "nothing; run the playbook from its start without --check"
    )
