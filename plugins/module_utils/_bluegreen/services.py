# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The two colour services of a blue/green application, `<name>-blue` and `<name>-green`.

Created when missing: awsvpc networking, each colour behind its own target group, the live colour at
`desired_count` tasks of the initial task definition and the standby at 0. Once a service exists its task
definition and desired count belong to the bluegreen module (a cutover changes both), so this module never
writes them. Of the settings bluegreen does not touch, the health-check grace period is converged in place (no
new deployment); networking, placement and capacity provider strategy replace every task of the service, so a
difference is reported (`drift`) and applied only with `settings_update: apply`.
"""

from __future__ import annotations

import re
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import ecs as _ecs
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import InputError
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.colors import COLORS, target_group_arn_errors
from ansible_collections.inferops.triton_ecs.plugins.module_utils._tags import TagPlan, as_strings, key_errors
from ansible_collections.inferops.triton_ecs.plugins.module_utils._tags import plan as plan_tags

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,248}$")  # leaves room for the -green suffix (255 in all)
COLOR_TAG = "inferops:color"  # each service's colour, written by this module alongside the asked tags


# ---------------------------------------------------------------- input


def validate(params: dict[str, Any]) -> list[str]:
    errors = []
    if not _NAME.match(params.get("name") or ""):
        errors.append(f"name {params.get('name')!r}: letters, digits, hyphens and underscores, starting with a letter (e.g. triton)")
    if params.get("initial_live_color", "blue") not in COLORS:
        errors.append(f"initial_live_color {params.get('initial_live_color')!r}: blue or green")
    if (params.get("desired_count") or 0) < 0:
        errors.append(f"desired_count is {params.get('desired_count')}: give 0 (created empty, for a gated first cutover) or more tasks")
    errors += target_group_arn_errors(params.get("target_groups") or {})
    port = params.get("container_port")
    if port is None or not 1 <= port <= 65535:
        errors.append(f"container_port is {port}: the port of Triton's HTTP endpoint in the container, e.g. 8000")
    grpc = params.get("grpc") or {}
    if grpc.get("target_groups"):
        errors += [f"grpc.{e}" for e in target_group_arn_errors(grpc["target_groups"])]
        overlap = set(grpc["target_groups"].values()) & set((params.get("target_groups") or {}).values())
        if overlap:
            errors.append(
                f"grpc.target_groups {sorted(overlap)} are HTTP target groups of target_groups: give the gRPC pair (protocol version GRPC)"
            )
        grpc_port = grpc.get("container_port")
        if grpc_port is None or not 1 <= grpc_port <= 65535 or grpc_port == port:
            errors.append(f"grpc.container_port is {grpc_port}: Triton's gRPC port in the container, e.g. 8001, not the HTTP port")
    if not params.get("subnets"):
        errors.append("subnets is empty: awsvpc tasks need the private subnets they run in")
    if not params.get("security_groups"):
        errors.append("security_groups is empty: give the task security group that lets the ALB reach the container port")
    grace = params.get("health_check_grace_period_s")
    if grace is not None and not 0 <= grace <= 2147483647:
        errors.append(f"health_check_grace_period_s is {grace}: seconds, 0 or more (size it for model loading, e.g. 600)")
    for i, entry in enumerate(params.get("capacity_provider_strategy") or []):
        if not entry.get("capacity_provider"):
            errors.append(f"capacity_provider_strategy[{i}].capacity_provider is missing: name the GPU capacity provider")
        if not 0 <= (entry.get("weight") or 0) <= 1000:
            errors.append(f"capacity_provider_strategy[{i}].weight is {entry.get('weight')}: 0-1000")
        if not 0 <= (entry.get("base") or 0) <= 100000:
            errors.append(f"capacity_provider_strategy[{i}].base is {entry.get('base')}: 0-100000")
    for i, constraint in enumerate(params.get("placement_constraints") or []):
        if constraint.get("type") not in ("memberOf", "distinctInstance"):
            errors.append(f"placement_constraints[{i}].type is {constraint.get('type')!r}: memberOf or distinctInstance")
        elif constraint.get("type") == "memberOf" and not constraint.get("expression"):
            errors.append(
                f"placement_constraints[{i}].expression is missing: memberOf needs a cluster query, e.g. attribute:ecs.instance-type =~ g5.*"
            )
    for i, strategy in enumerate(params.get("placement_strategy") or []):
        if strategy.get("type") not in ("spread", "binpack", "random"):
            errors.append(f"placement_strategy[{i}].type is {strategy.get('type')!r}: spread, binpack or random")
    return errors + key_errors(params.get("tags"), reserved=(COLOR_TAG,))


def validate_task_definition(task_definition: dict[str, Any], params: dict[str, Any]) -> list[str]:
    """The initial task definition must fit the services: awsvpc, EC2, the load-balanced container and port."""
    errors = []
    arn = task_definition.get("taskDefinitionArn")
    if task_definition.get("networkMode") != "awsvpc":
        errors.append(
            f"task_definition {arn} uses network mode {task_definition.get('networkMode')}: the services use awsvpc; register it with awsvpc"
        )
    containers = {c.get("name"): c for c in task_definition.get("containerDefinitions") or []}
    container = containers.get(params["container_name"])
    if container is None:
        errors.append(
            f"container_name {params['container_name']!r} is not a container of {arn} (it has {', '.join(sorted(containers))}): fix container_name"
        )
    else:
        mapped = [p.get("containerPort") for p in container.get("portMappings") or []]
        if params["container_port"] not in mapped:
            errors.append(
                f"container_port {params['container_port']} is not mapped by container {params['container_name']} of {arn}: fix container_port"
            )
        grpc = params.get("grpc") or {}
        if grpc.get("target_groups") and grpc.get("container_port") not in mapped:
            errors.append(
                f"grpc.container_port {grpc.get('container_port')} is not mapped by container {params['container_name']} of {arn}: "
                "fix grpc.container_port (Triton's gRPC port, task_definition triton.grpc_port)"
            )
    return errors


# ---------------------------------------------------------------- settings


def network_configuration(params: dict[str, Any]) -> dict[str, Any]:
    return {
        "awsvpcConfiguration": {
            "subnets": list(params["subnets"]),
            "securityGroups": list(params["security_groups"]),
            "assignPublicIp": "ENABLED" if params.get("assign_public_ip") else "DISABLED",
        }
    }


def capacity_provider_strategy(params: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"capacityProvider": e["capacity_provider"], "weight": e.get("weight") or 0, "base": e.get("base") or 0}
        for e in params.get("capacity_provider_strategy") or []
    ]


def placement_constraints(params: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in (("type", c["type"]), ("expression", c.get("expression"))) if v}
        for c in params.get("placement_constraints") or []
    ]


def placement_strategy(params: dict[str, Any]) -> list[dict[str, Any]]:
    return [{k: v for k, v in (("type", s["type"]), ("field", s.get("field"))) if v} for s in params.get("placement_strategy") or []]


def load_balancers(params: dict[str, Any], color: str) -> list[dict[str, Any]]:
    """A colour's target groups: the HTTP one on Triton's HTTP port, and the gRPC one on its gRPC port when given."""
    found = [
        {
            "targetGroupArn": params["target_groups"][color],
            "containerName": params["container_name"],
            "containerPort": params["container_port"],
        }
    ]
    grpc = params.get("grpc") or {}
    if grpc.get("target_groups"):
        found.append(
            {
                "targetGroupArn": grpc["target_groups"][color],
                "containerName": params["container_name"],
                "containerPort": grpc.get("container_port") or 8001,
            }
        )
    return found


def create_arguments(params: dict[str, Any], color: str, task_definition: str) -> dict[str, Any]:
    live = params.get("initial_live_color") or "blue"
    kwargs: dict[str, Any] = {
        "cluster": params["cluster"],
        "serviceName": f"{params['name']}-{color}",
        "taskDefinition": task_definition,
        "desiredCount": params["desired_count"] if color == live else 0,
        "loadBalancers": load_balancers(params, color),
        "networkConfiguration": network_configuration(params),
        "deploymentConfiguration": {
            "maximumPercent": params.get("maximum_percent", 200),
            "minimumHealthyPercent": params.get("minimum_healthy_percent", 100),
            "deploymentCircuitBreaker": {"enable": True, "rollback": True},
        },
        "schedulingStrategy": "REPLICA",
        "propagateTags": "SERVICE",
        "enableECSManagedTags": True,
    }
    if params.get("health_check_grace_period_s") is not None:
        kwargs["healthCheckGracePeriodSeconds"] = params["health_check_grace_period_s"]
    if params.get("capacity_provider_strategy"):
        kwargs["capacityProviderStrategy"] = capacity_provider_strategy(params)
    else:
        kwargs["launchType"] = "EC2"
    if params.get("placement_constraints"):
        kwargs["placementConstraints"] = placement_constraints(params)
    if params.get("placement_strategy"):
        kwargs["placementStrategy"] = placement_strategy(params)
    kwargs["tags"] = _ecs.ecs_tags(wanted_tags(params.get("tags") or {}, color))
    return kwargs


def wanted_tags(asked: dict[str, Any] | None, color: str) -> dict[str, str] | None:
    """A colour's service tags: the asked ones and its colour; None when `tags` is omitted (left alone)."""
    return None if asked is None else {**as_strings(asked), COLOR_TAG: color}


def _canonical_network(value: dict[str, Any] | None) -> tuple:
    config = (value or {}).get("awsvpcConfiguration") or {}
    return (
        tuple(sorted(config.get("subnets") or [])),
        tuple(sorted(config.get("securityGroups") or [])),
        config.get("assignPublicIp", "DISABLED"),
    )


def _canonical_list(items: list[dict[str, Any]] | None, keys: tuple[str, ...]) -> list[tuple]:
    return [tuple(str(item.get(k, "")) for k in keys) for item in items or []]


def drift(service: dict[str, Any], params: dict[str, Any], color: str) -> dict[str, Any]:
    """update_service fields whose value differs. Only what the service reports is compared: a field that
    DescribeServices leaves out cannot be compared, and is left alone rather than rewritten on every run.
    Task definition and desired count are never compared: they belong to the bluegreen module."""
    out: dict[str, Any] = {}
    grace = params.get("health_check_grace_period_s")
    if grace is not None and "healthCheckGracePeriodSeconds" in service and service["healthCheckGracePeriodSeconds"] != grace:
        out["healthCheckGracePeriodSeconds"] = grace
    if "networkConfiguration" in service and _canonical_network(service["networkConfiguration"]) != _canonical_network(
        network_configuration(params)
    ):
        out["networkConfiguration"] = network_configuration(params)
    wanted_cps = capacity_provider_strategy(params)
    if wanted_cps and "capacityProviderStrategy" in service:
        keys = ("capacityProvider", "weight", "base")
        if sorted(_canonical_list(service["capacityProviderStrategy"], keys)) != sorted(_canonical_list(wanted_cps, keys)):
            out["capacityProviderStrategy"] = wanted_cps
    if "placementConstraints" in service:
        keys = ("type", "expression")
        if _canonical_list(service["placementConstraints"], keys) != _canonical_list(placement_constraints(params), keys):
            out["placementConstraints"] = placement_constraints(params)
    if "placementStrategy" in service:
        keys = ("type", "field")
        if _canonical_list(service["placementStrategy"], keys) != _canonical_list(placement_strategy(params), keys):
            out["placementStrategy"] = placement_strategy(params)

    def balancers(found: list[dict[str, Any]]) -> list[tuple]:
        return sorted((lb.get("targetGroupArn"), lb.get("containerName"), lb.get("containerPort")) for lb in found)

    if balancers(service.get("loadBalancers") or []) != balancers(load_balancers(params, color)):
        out["loadBalancers"] = load_balancers(params, color)
    return out


# Changing these replaces every task of the service (a new deployment); the grace period does not.
REDEPLOYING = ("networkConfiguration", "capacityProviderStrategy", "placementConstraints", "placementStrategy", "loadBalancers")


def summary(service: dict[str, Any] | None) -> dict[str, Any]:
    if not service:
        return {}
    keys = ("taskDefinition", "desiredCount", "healthCheckGracePeriodSeconds", "networkConfiguration", "capacityProviderStrategy",
            "placementConstraints", "placementStrategy", "loadBalancers")  # fmt: skip
    return {k: service[k] for k in keys if k in service}


def update_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """update_service arguments for `fields`: a placement or capacity change only takes effect with a new deployment."""
    if any(k in fields for k in ("capacityProviderStrategy", "placementConstraints", "placementStrategy")):
        return {**fields, "forceNewDeployment": True}
    return fields


# ---------------------------------------------------------------- the module's run


def reported_missing(names: dict[str, str], before: dict[str, Any], missing: list[str]) -> dict[str, Any]:
    """missing=report: nothing written; which services are missing (deploy.yml creates them with the task definition
    it registers) and what the others run."""
    return {
        "changed": False,
        "actions": [],
        "missing": [names[c] for c in missing],
        "drift": {},
        "settings_held": [],
        "services": dict(names),
        "service_arns": {c: before.get(names[c], {}).get("serviceArn") for c in COLORS},
        "task_definitions": {c: before.get(names[c], {}).get("taskDefinition") for c in COLORS},
        "desired_counts": {c: before.get(names[c], {}).get("desiredCount") for c in COLORS},
        "tags": {c: _ecs.tags_of(before[names[c]]) if names[c] in before else {} for c in COLORS},
        "diff": {"before": {}, "after": {}},
    }


def ensure(ecs: Any, params: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    errors = validate(params)
    if errors:
        raise InputError(errors)
    if _ecs.describe_cluster(ecs, params["cluster"]) is None:
        raise InputError(f"cluster {params['cluster']!r} does not exist (or is not ACTIVE): create it first (role fleet_cluster)")
    names = {color: f"{params['name']}-{color}" for color in COLORS}
    # deleted (INACTIVE) services count as missing
    found = _ecs.describe_services(ecs, params["cluster"], list(names.values()), include=["TAGS"])
    before = {s["serviceName"]: s for s in found if s.get("status") != "INACTIVE"}
    for name in names.values():
        if before.get(name, {}).get("status") == "DRAINING":
            raise InputError(f"service {name} is being deleted (DRAINING): wait until ECS finishes deleting it, then run again")
    missing = [c for c in COLORS if names[c] not in before]
    task_definition_arn = None
    if missing and params.get("missing", "create") == "report":
        return reported_missing(names, before, missing)
    if missing:
        if not params.get("task_definition"):
            raise InputError(
                f"{', '.join(names[c] for c in missing)} missing: give task_definition, the revision a new service starts with "
                "(role fleet_services: fleet_services_task_definition; deploy.yml passes the revision it registers), "
                "or missing: report to leave them to deploy.yml"
            )
        described = _ecs.describe_task_definition(ecs, params["task_definition"])
        if described is None:
            raise InputError(f"task_definition {params['task_definition']!r} does not exist: register it first (task_definition module)")
        errors = validate_task_definition(described["taskDefinition"], params)
        if errors:
            raise InputError(errors)
        task_definition_arn = described["taskDefinition"]["taskDefinitionArn"]
    apply_settings = params.get("settings_update") == "apply"
    actions: list[str] = []
    warnings: list[str] = []
    drifted: dict[str, list[str]] = {}
    after = dict(before)
    tags: dict[str, TagPlan] = {}
    for color in COLORS:
        name = names[color]
        if color in missing:
            tags[color] = TagPlan({}, wanted_tags(params.get("tags") or {}, color))  # set at creation
            actions.append(f"create {name}")
            kwargs = create_arguments(params, color, task_definition_arn or "")
            if check_mode:
                after[name] = {k: v for k, v in kwargs.items() if k != "cluster"}
            else:
                after[name] = _ecs.create_service(ecs, kwargs)
            continue
        fields = drift(before[name], params, color)
        drifted[color] = sorted(fields)
        held = {k: v for k, v in fields.items() if k in REDEPLOYING and not apply_settings}
        if held:
            warnings.append(
                f"{name}: {', '.join(sorted(held))} differ from the inventory; changing them replaces every task of the service, "
                "so they are left as they are. Set settings_update: apply to change them"
            )
        todo = {k: v for k, v in fields.items() if k not in held}
        if todo:
            actions.append(f"update {name}: {', '.join(sorted(todo))}")
            if check_mode:
                after[name] = {**before[name], **todo}
            else:
                after[name] = _ecs.update_service(ecs, params["cluster"], name, update_fields(todo))
        tags[color] = plan_tags(_ecs.tags_of(before[name]), wanted_tags(params.get("tags"), color), params.get("purge_tags", True))
        if tags[color].changed:
            actions.append(f"update_tags {name}")
            if not check_mode:
                _ecs.update_tags(ecs, before[name]["serviceArn"], tags[color].to_set, tags[color].to_remove)
    return {
        "changed": bool(actions),
        "actions": actions,
        "missing": [],
        "drift": drifted,
        "settings_held": warnings,
        "services": {color: names[color] for color in COLORS},
        "service_arns": {color: after.get(names[color], {}).get("serviceArn") for color in COLORS},
        "task_definitions": {color: after.get(names[color], {}).get("taskDefinition") for color in COLORS},
        "desired_counts": {color: after.get(names[color], {}).get("desiredCount") for color in COLORS},
        "tags": {color: tags[color].after for color in COLORS},
        "diff": {
            "before": {c: {**summary(before[names[c]]), "tags": tags[c].before} if names[c] in before else {} for c in COLORS},
            "after": {c: {**summary(after.get(names[c])), "tags": tags[c].after} for c in COLORS},
        },
    }
