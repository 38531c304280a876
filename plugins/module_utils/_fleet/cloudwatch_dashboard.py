# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""A CloudWatch dashboard: written only when its body differs (compared as JSON, not as text)."""

from __future__ import annotations

import json
import re
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import cloudwatch as _cloudwatch
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import InputError

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,255}$")

# ---------------------------------------------------------------- pure


def body_of(value: Any) -> dict[str, Any]:
    """The dashboard body as a dict, from a dict or a JSON string."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as e:
            raise InputError(f"body is not valid JSON ({e}): give a dict or a JSON document with a widgets list") from e
    if not isinstance(value, dict):
        raise InputError(f"body is a {type(value).__name__}: give a dict with a widgets list")
    return value


def validate(params: dict[str, Any]) -> list[str]:
    errors = []
    if not _NAME.match(params.get("name") or ""):
        errors.append(f"name {params.get('name')!r}: 1-255 letters, digits, hyphens and underscores, e.g. triton-inference")
    if params.get("state", "present") == "present":
        try:
            body = body_of(params.get("body"))
        except InputError as e:
            return [*errors, *e.errors]
        widgets = body.get("widgets")
        if not isinstance(widgets, list) or not widgets:
            errors.append("body.widgets is missing or empty: a dashboard needs at least one widget")
        else:
            for i, widget in enumerate(widgets):
                if not isinstance(widget, dict) or not widget.get("type"):
                    errors.append(f"body.widgets[{i}] has no type: give metric, text, log, alarm or explorer")
    return errors


def canonical(body: dict[str, Any]) -> str:
    return json.dumps(body, sort_keys=True, separators=(",", ":"))


# ---------------------------------------------------------------- the module's run


def ensure(cloudwatch: Any, params: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    errors = validate(params)
    if errors:
        raise InputError(errors)
    name = params["name"]
    current = _cloudwatch.get_dashboard(cloudwatch, name)
    before = current["body"] if current else {}
    warnings: list[str] = []
    if params.get("state", "present") == "absent":
        actions = ["delete"] if current else []
        if actions and not check_mode:
            _cloudwatch.delete_dashboard(cloudwatch, name)
        return {"changed": bool(actions), "actions": actions, "dashboard_name": name, "diff": {"before": before, "after": {}}}
    wanted = body_of(params["body"])
    actions = [] if current and canonical(current["body"]) == canonical(wanted) else ["create" if current is None else "update"]
    if actions and not check_mode:
        warnings = _cloudwatch.put_dashboard(cloudwatch, name, canonical(wanted))
    return {
        "changed": bool(actions),
        "actions": actions,
        "dashboard_name": name,
        "dashboard_arn": current["arn"] if current else None,
        "body": wanted,
        "validation_messages": warnings,
        "diff": {"before": before, "after": wanted},
    }
