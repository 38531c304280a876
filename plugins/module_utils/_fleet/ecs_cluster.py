# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""An ECS cluster with its Container Insights setting and tags: created when missing, both converged on every run.
With `log_group`, also the log group its tasks log to (awslogs): created when missing, its retention converged and
the cluster's tags added to it (tags it has besides are kept). One module run for both, as role fleet_cluster needs.

Capacity providers are left to `capacity_provider.py`: this module never calls put_cluster_capacity_providers,
so a re-run cannot detach what the capacity step attached.
"""

from __future__ import annotations

import re
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import ecs as _ecs
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import logs as _logs
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import InputError
from ansible_collections.inferops.triton_ecs.plugins.module_utils._tags import TagPlan, key_errors
from ansible_collections.inferops.triton_ecs.plugins.module_utils._tags import plan as plan_tags

CONTAINER_INSIGHTS = ("enabled", "enhanced", "disabled")
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,255}$")
_LOG_GROUP_NAME = re.compile(r"^[A-Za-z0-9_./#-]{1,512}$")
# The retention periods CloudWatch Logs accepts (PutRetentionPolicy), in days.
RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653)

# ---------------------------------------------------------------- pure


def validate(params: dict[str, Any]) -> list[str]:
    errors = []
    name = params.get("name") or ""
    if not _NAME.match(name):
        errors.append(f"name {name!r}: a cluster name is 1-255 letters, digits, hyphens and underscores, e.g. inference")
    if params.get("container_insights") not in CONTAINER_INSIGHTS:
        errors.append(f"container_insights {params.get('container_insights')!r}: use one of {', '.join(CONTAINER_INSIGHTS)}")
    for key, value in (params.get("tags") or {}).items():
        if not isinstance(value, str):
            errors.append(f"tags.{key} is {value!r}: tag values are strings; quote it")
    return errors + log_group_errors(params.get("log_group")) + key_errors(params.get("tags"))


def log_group_errors(log_group: dict[str, Any] | None) -> list[str]:
    if log_group is None:
        return []
    errors = []
    name = log_group.get("name") or ""
    if not _LOG_GROUP_NAME.match(name):
        errors.append(f"log_group.name {name!r}: 1-512 letters, digits and _ . / # -, e.g. /ecs/triton")
    if log_group.get("retention_days") not in RETENTION_DAYS:
        errors.append(
            f"log_group.retention_days {log_group.get('retention_days')!r}: CloudWatch Logs keeps logs for one of "
            f"{', '.join(map(str, RETENTION_DAYS))} days; pick the nearest"
        )
    return errors


def insights_of(cluster: dict[str, Any]) -> str:
    """The cluster's containerInsights value; AWS omits the setting on clusters that never set it (disabled)."""
    settings = {s.get("name"): s.get("value") for s in cluster.get("settings") or []}
    return settings.get("containerInsights") or "disabled"


def plan(cluster: dict[str, Any] | None, params: dict[str, Any]) -> list[str]:
    """The writes that bring `cluster` to `params`: [], ["create"] or ["update_settings"]."""
    if cluster is None:
        return ["create"]
    if insights_of(cluster) != params["container_insights"]:
        return ["update_settings"]
    return []


def plan_log_group(group: dict[str, Any] | None, tags: TagPlan, log_group: dict[str, Any]) -> list[str]:
    """The writes that bring the log group to `log_group`: create (with its tags), then retention and tags."""
    if group is None:
        return ["create_log_group", "set_retention"]
    actions = ["set_retention"] if group.get("retentionInDays") != log_group["retention_days"] else []
    return actions + (["tag_log_group"] if tags.to_set else [])


def log_group_summary(group: dict[str, Any] | None, tags: dict[str, str]) -> dict[str, Any]:
    if group is None:
        return {}
    return {"name": group.get("logGroupName"), "retention_days": group.get("retentionInDays"), "tags": tags}


def summary(cluster: dict[str, Any] | None) -> dict[str, Any]:
    if cluster is None:
        return {}
    return {"name": cluster.get("clusterName"), "container_insights": insights_of(cluster)}


# ---------------------------------------------------------------- the module's run


def ensure_log_group(logs: Any, params: dict[str, Any], check_mode: bool) -> tuple[list[str], dict[str, Any], dict[str, Any]]:
    """The log group's writes (made unless check_mode), and how it reads before and after."""
    log_group = params["log_group"]
    group = _logs.describe_log_group(logs, log_group["name"])
    tags = plan_tags(_logs.list_tags(logs, _logs.tagging_arn(group)) if group else {}, params.get("tags"), False)
    actions = plan_log_group(group, tags, log_group)
    if actions and not check_mode:
        if "create_log_group" in actions:
            _logs.create_log_group(logs, log_group["name"], tags.to_set)
        _logs.put_retention_policy(logs, log_group["name"], log_group["retention_days"])
        if "tag_log_group" in actions:
            _logs.tag_resource(logs, _logs.tagging_arn(group), tags.to_set)
    after = {"name": log_group["name"], "retention_days": log_group["retention_days"], "tags": tags.after}
    return actions, log_group_summary(group, tags.before), after


def ensure(ecs: Any, logs: Any, params: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    errors = validate(params)
    if errors:
        raise InputError(errors)
    log_actions, log_before, log_after = ensure_log_group(logs, params, check_mode) if params.get("log_group") else ([], {}, {})
    before = _ecs.describe_cluster(ecs, params["name"], statuses=("ACTIVE", "PROVISIONING"), include=["SETTINGS", "TAGS"])
    actions = plan(before, params)
    tags = plan_tags(_ecs.tags_of(before), params.get("tags"), params.get("purge_tags", True))
    tag_actions = ["update_tags"] if before is not None and tags.changed else []  # a new cluster gets its tags at creation
    after = before
    if actions and not check_mode:
        if actions == ["create"]:
            after = _ecs.create_cluster(ecs, params["name"], params["container_insights"], params.get("tags") or {})
        else:
            after = _ecs.update_insights(ecs, params["name"], params["container_insights"])
    elif actions:
        after = {
            **(before or {}),
            "clusterName": params["name"],
            "settings": [{"name": "containerInsights", "value": params["container_insights"]}],
        }
    if tag_actions and not check_mode:
        _ecs.update_tags(ecs, before["clusterArn"], tags.to_set, tags.to_remove)
    log_group = {"log_group": log_after} if params.get("log_group") else {}
    return {
        "changed": bool(actions or tag_actions or log_actions),
        "actions": actions + tag_actions + log_actions,
        "cluster_name": params["name"],
        "cluster_arn": (after or {}).get("clusterArn"),
        "container_insights": params["container_insights"],
        "tags": tags.after,
        **log_group,
        "diff": {
            "before": {**({**summary(before), "tags": tags.before} if before else {}), **({"log_group": log_before} if log_group else {})},
            "after": {**summary(after), "tags": tags.after, **log_group},
        },
    }
