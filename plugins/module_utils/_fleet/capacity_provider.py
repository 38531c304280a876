# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""An ECS capacity provider on an Auto Scaling group, attached to a cluster.

The provider is created when missing and its managed scaling / termination protection converged; it is then
added to the cluster's capacity providers (keeping every other provider attached) and, when asked, made the
cluster's default strategy. Its tags are converged on every run (`_tags.py`). Managed termination protection needs the group to protect new instances from
scale-in, which amazon.aws.autoscaling_group cannot set: this module sets it on the group.
"""

from __future__ import annotations

import re
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import ecs as _ecs
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import InputError
from ansible_collections.inferops.triton_ecs.plugins.module_utils._tags import key_errors
from ansible_collections.inferops.triton_ecs.plugins.module_utils._tags import plan as plan_tags

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,255}$")
_ASG_ARN = re.compile(r"^arn:aws[a-z-]*:autoscaling:[a-z0-9-]+:\d{12}:autoScalingGroup:[^:]+:autoScalingGroupName/.+$")
_SCALING_KEYS = {
    # option -> (API field, lowest, highest)
    "target_capacity": ("targetCapacity", 1, 100),
    "minimum_scaling_step_size": ("minimumScalingStepSize", 1, 10000),
    "maximum_scaling_step_size": ("maximumScalingStepSize", 1, 10000),
    "instance_warmup_period_s": ("instanceWarmupPeriod", 0, 10000),
}

# ---------------------------------------------------------------- pure


def validate(params: dict[str, Any]) -> list[str]:
    errors = []
    name = params.get("name") or ""
    if not _NAME.match(name):
        errors.append(f"name {name!r}: 1-255 letters, digits, hyphens and underscores, e.g. gpu-fleet")
    elif name.lower().startswith(("aws", "ecs", "fargate")):
        errors.append(f"name {name!r}: ECS reserves names starting with aws, ecs and fargate; pick another, e.g. triton-gpu")
    if not _ASG_ARN.match(params.get("auto_scaling_group_arn") or ""):
        errors.append(
            f"auto_scaling_group_arn {params.get('auto_scaling_group_arn')!r}: give the Auto Scaling group's ARN "
            "(arn:aws:autoscaling:<region>:<account>:autoScalingGroup:<id>:autoScalingGroupName/<name>), e.g. the autoscaling_group module's result"
        )
    scaling = params.get("managed_scaling") or {}
    for option, (_field, low, high) in _SCALING_KEYS.items():
        value = scaling.get(option)
        if value is not None and not low <= value <= high:
            errors.append(f"managed_scaling.{option} is {value}: it must be between {low} and {high}")
    low_step, high_step = scaling.get("minimum_scaling_step_size"), scaling.get("maximum_scaling_step_size")
    if low_step is not None and high_step is not None and low_step > high_step:
        errors.append(f"managed_scaling.minimum_scaling_step_size {low_step} is above maximum_scaling_step_size {high_step}: swap them")
    if params.get("managed_termination_protection") and not scaling.get("enabled", True):
        errors.append(
            "managed_termination_protection needs managed_scaling.enabled: enable managed scaling, or turn termination protection off"
        )
    strategy = params.get("default_strategy")
    if strategy:
        if not 0 <= strategy.get("weight", 1) <= 1000:
            errors.append(f"default_strategy.weight is {strategy.get('weight')}: it must be between 0 and 1000")
        if not 0 <= strategy.get("base", 0) <= 100000:
            errors.append(f"default_strategy.base is {strategy.get('base')}: it must be between 0 and 100000")
    return errors + key_errors(params.get("tags"))


def wanted_scaling(params: dict[str, Any]) -> dict[str, Any]:
    scaling = params.get("managed_scaling") or {}
    out: dict[str, Any] = {"status": "ENABLED" if scaling.get("enabled", True) else "DISABLED"}
    for option, (field, _low, _high) in _SCALING_KEYS.items():
        if scaling.get(option) is not None:
            out[field] = scaling[option]
    return out


def wanted_provider(params: dict[str, Any]) -> dict[str, Any]:
    return {
        "autoScalingGroupArn": params["auto_scaling_group_arn"],
        "managedScaling": wanted_scaling(params),
        "managedTerminationProtection": "ENABLED" if params.get("managed_termination_protection") else "DISABLED",
        "managedDraining": "ENABLED" if params.get("managed_draining", True) else "DISABLED",
    }


def provider_drift(current: dict[str, Any], params: dict[str, Any]) -> list[str]:
    """The fields of an existing provider that differ from what is asked (only the asked scaling fields compare)."""
    have = current.get("autoScalingGroupProvider") or {}
    want = wanted_provider(params)
    drift = []
    if have.get("autoScalingGroupArn") != want["autoScalingGroupArn"]:
        raise InputError(
            f"capacity provider {params['name']} already uses Auto Scaling group {have.get('autoScalingGroupArn')}, not "
            f"{want['autoScalingGroupArn']}: ECS cannot change it; give the provider another name or delete the old one"
        )
    have_scaling = have.get("managedScaling") or {}
    for field, value in want["managedScaling"].items():
        if have_scaling.get(field) != value:
            drift.append(f"managedScaling.{field}")
    if have.get("managedTerminationProtection", "DISABLED") != want["managedTerminationProtection"]:
        drift.append("managedTerminationProtection")
    # AWS answers managedDraining for every provider; an answer without it (moto) is not compared
    if "managedDraining" in have and have["managedDraining"] != want["managedDraining"]:
        drift.append("managedDraining")
    return drift


def strategy_canonical(strategy: list[dict[str, Any]] | None) -> list[tuple[str, int, int]]:
    return sorted((s["capacityProvider"], int(s.get("weight", 0)), int(s.get("base", 0))) for s in strategy or [])


def cluster_plan(cluster: dict[str, Any], params: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]] | None:
    """(providers, default strategy) to put on the cluster, or None when it already has them."""
    providers = list(cluster.get("capacityProviders") or [])
    strategy = list(cluster.get("defaultCapacityProviderStrategy") or [])
    wanted_providers = providers if params["name"] in providers else [*providers, params["name"]]
    wanted_strategy = strategy
    chosen = params.get("default_strategy")
    if chosen:
        wanted_strategy = [{"capacityProvider": params["name"], "weight": chosen.get("weight", 1), "base": chosen.get("base", 0)}]
    if wanted_providers == providers and strategy_canonical(wanted_strategy) == strategy_canonical(strategy):
        return None
    return wanted_providers, wanted_strategy


def summary(provider: dict[str, Any] | None, cluster: dict[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if provider:
        asg = provider.get("autoScalingGroupProvider") or {}
        out["provider"] = {
            k: asg.get(k) for k in ("autoScalingGroupArn", "managedScaling", "managedTerminationProtection", "managedDraining")
        }
    if cluster:
        out["cluster_capacity_providers"] = list(cluster.get("capacityProviders") or [])
        out["cluster_default_strategy"] = list(cluster.get("defaultCapacityProviderStrategy") or [])
    return out


def asg_name_of(arn: str) -> str:
    return arn.split(":autoScalingGroupName/", 1)[-1]


# ---------------------------------------------------------------- Auto Scaling calls: only this module makes them


def describe_asg(autoscaling: Any, name: str) -> dict[str, Any] | None:
    found = autoscaling.describe_auto_scaling_groups(aws_retry=True, AutoScalingGroupNames=[name])["AutoScalingGroups"]
    return found[0] if found else None


def protect_new_instances(autoscaling: Any, name: str) -> None:
    autoscaling.update_auto_scaling_group(aws_retry=True, AutoScalingGroupName=name, NewInstancesProtectedFromScaleIn=True)


# ---------------------------------------------------------------- the module's run


def ensure(ecs: Any, autoscaling: Any, params: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    errors = validate(params)
    if errors:
        raise InputError(errors)
    cluster = _ecs.describe_cluster(ecs, params["cluster"])
    if cluster is None:
        raise InputError(f"cluster {params['cluster']!r} does not exist (or is not ACTIVE): create it first (role fleet_cluster)")
    asg_name = asg_name_of(params["auto_scaling_group_arn"])
    asg = describe_asg(autoscaling, asg_name)
    if asg is None or asg.get("AutoScalingGroupARN") != params["auto_scaling_group_arn"]:
        raise InputError(f"auto_scaling_group_arn {params['auto_scaling_group_arn']}: no such Auto Scaling group; create it first")
    found = _ecs.describe_capacity_providers(ecs, [params["name"]], include=["TAGS"])
    provider = next((p for p in found if p.get("status") == "ACTIVE"), None)
    drift = provider_drift(provider, params) if provider else []  # raises before any write on an ASG mismatch
    tags = plan_tags(_ecs.tags_of(provider), params.get("tags"), params.get("purge_tags", True))
    actions: list[str] = []
    provider_after, cluster_after = provider, cluster
    if params.get("managed_termination_protection") and not asg.get("NewInstancesProtectedFromScaleIn"):
        actions.append("protect_new_instances_from_scale_in")
        if not check_mode:
            protect_new_instances(autoscaling, asg_name)
    if provider is None:
        actions.append("create_capacity_provider")
        if not check_mode:
            provider_after = _ecs.create_capacity_provider(ecs, params["name"], wanted_provider(params), params.get("tags") or {})
        else:
            provider_after = {"name": params["name"], "autoScalingGroupProvider": wanted_provider(params)}
    elif drift:
        actions.append("update_capacity_provider")
        if not check_mode:
            provider_after = _ecs.update_capacity_provider(ecs, params["name"], wanted_provider(params))
        else:
            provider_after = {**provider, "autoScalingGroupProvider": wanted_provider(params)}
    if provider is not None and tags.changed:  # a new provider gets its tags at creation
        actions.append("update_tags")
        if not check_mode:
            _ecs.update_tags(ecs, provider["capacityProviderArn"], tags.to_set, tags.to_remove)
    attach = cluster_plan(cluster, params)
    if attach is not None:
        actions.append("put_cluster_capacity_providers")
        if not check_mode:
            cluster_after = _ecs.put_cluster_providers(ecs, params["cluster"], *attach)
        else:
            cluster_after = {**cluster, "capacityProviders": attach[0], "defaultCapacityProviderStrategy": attach[1]}
    return {
        "changed": bool(actions),
        "actions": actions,
        "drift": drift,
        "capacity_provider_name": params["name"],
        "capacity_provider_arn": (provider_after or {}).get("capacityProviderArn"),
        "cluster_capacity_providers": list((cluster_after or {}).get("capacityProviders") or []),
        "tags": tags.after,
        "diff": {
            "before": {**summary(provider, cluster), "tags": tags.before},
            "after": {**summary(provider_after, cluster_after), "tags": tags.after},
        },
    }
