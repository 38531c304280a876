# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""An ECS cluster with its Container Insights setting and tags: created when missing, both converged on every run.

Capacity providers are left to `capacity_provider.py`: this module never calls put_cluster_capacity_providers,
so a re-run cannot detach what the capacity step attached.
"""

from __future__ import annotations

import re
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import ecs as _ecs
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import InputError
from ansible_collections.inferops.triton_ecs.plugins.module_utils._tags import key_errors
from ansible_collections.inferops.triton_ecs.plugins.module_utils._tags import plan as plan_tags

CONTAINER_INSIGHTS = ("enabled", "enhanced", "disabled")
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,255}$")

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
    return errors + key_errors(params.get("tags"))


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


def summary(cluster: dict[str, Any] | None) -> dict[str, Any]:
    if cluster is None:
        return {}
    return {"name": cluster.get("clusterName"), "container_insights": insights_of(cluster)}


# ---------------------------------------------------------------- the module's run


def ensure(ecs: Any, params: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    errors = validate(params)
    if errors:
        raise InputError(errors)
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
    return {
        "changed": bool(actions or tag_actions),
        "actions": actions + tag_actions,
        "cluster_name": params["name"],
        "cluster_arn": (after or {}).get("clusterArn"),
        "container_insights": params["container_insights"],
        "tags": tags.after,
        "diff": {"before": {**summary(before), "tags": tags.before} if before else {}, "after": {**summary(after), "tags": tags.after}},
    }
