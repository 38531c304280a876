# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""Auto Scaling group settings that amazon.aws.autoscaling_group does not manage: Capacity Rebalancing, with which
the group answers a Spot instance's rebalance recommendation by launching its replacement first, then terminating
the instance at risk (ECS managed draining moves its tasks before it goes). Only a setting that differs is written."""

from __future__ import annotations

from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import autoscaling as _autoscaling
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import InputError

# option -> the group's field, as DescribeAutoScalingGroups shows it and UpdateAutoScalingGroup takes it
FIELDS = {"capacity_rebalance": "CapacityRebalance"}


# ---------------------------------------------------------------- pure


def current_settings(group: dict[str, Any]) -> dict[str, Any]:
    """The managed settings of a described group (a field AWS leaves out is its default, false)."""
    return {option: bool(group.get(field, False)) for option, field in FIELDS.items()}


def changes(current: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """The settings to write, as UpdateAutoScalingGroup takes them: those given that differ."""
    return {FIELDS[o]: params[o] for o in FIELDS if params.get(o) is not None and params[o] != current[o]}


# ---------------------------------------------------------------- the module's run


def ensure(autoscaling: Any, params: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    name = params["name"]
    if not name:
        raise InputError("name is empty: give the Auto Scaling group's name (role fleet_capacity: fleet_capacity_name)")
    group = _autoscaling.describe_group(autoscaling, name)
    if group is None:
        raise InputError(f"name {name!r}: no such Auto Scaling group; create it first (amazon.aws.autoscaling_group)")
    before = current_settings(group)
    todo = changes(before, params)
    if todo and not check_mode:
        _autoscaling.update_group(autoscaling, name, todo)
    after = {**before, **{o: params[o] for o in FIELDS if FIELDS[o] in todo}}
    return {
        "changed": bool(todo),
        "actions": [f"set {field}={str(value).lower()}" for field, value in todo.items()],
        "name": name,
        "settings": after,
        "diff": {"before": before, "after": after},
    }
