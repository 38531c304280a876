# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The blue and green target groups of a blue/green service, converged in one module run: created when missing,
then their health check, the given attributes (slow start, deregistration delay, ...) and tags brought to the wanted
values, writing only what differs. Both groups are read and planned before the first write, so bad input or a field
AWS cannot change on an existing group fails with nothing written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import elbv2 as _elbv2
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import InputError
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.colors import COLORS
from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet.target_group_attributes import (
    as_api_value,
    attribute_errors,
    changes,
)
from ansible_collections.inferops.triton_ecs.plugins.module_utils._tags import TagPlan, key_errors
from ansible_collections.inferops.triton_ecs.plugins.module_utils._tags import plan as plan_tags

COLOR_TAG = "inferops:color"
# ALB rules: 1-32 alphanumerics and hyphens, not starting or ending with a hyphen.
_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,30}[A-Za-z0-9])?$")
_VPC = re.compile(r"^vpc-[0-9a-f]+$")
# HTTP codes as the ALB takes them: 200, 200,202 or 200-299.
_MATCHER = re.compile(r"^\d{3}(?:[-,]\d{3})*$")
# gRPC status codes as the ALB takes them (protocol version GRPC): 0, 0,12 or 0-99.
_GRPC_MATCHER = re.compile(r"^\d{1,2}(?:[-,]\d{1,2})*$")
PROTOCOL_VERSIONS = ("HTTP1", "HTTP2", "GRPC")
# Fields AWS cannot change on an existing target group: option -> describe_target_groups key.
IMMUTABLE = {
    "protocol": "Protocol",
    "protocol_version": "ProtocolVersion",
    "port": "Port",
    "vpc_id": "VpcId",
    "target_type": "TargetType",
}
# Health check option -> create/modify_target_group argument (also the describe key); matcher is Matcher.HttpCode.
HEALTH_CHECK = {
    "protocol": "HealthCheckProtocol",
    "port": "HealthCheckPort",
    "path": "HealthCheckPath",
    "interval_s": "HealthCheckIntervalSeconds",
    "timeout_s": "HealthCheckTimeoutSeconds",
    "healthy_threshold": "HealthyThresholdCount",
    "unhealthy_threshold": "UnhealthyThresholdCount",
}
HEALTH_CHECK_RANGES = {"interval_s": (5, 300), "timeout_s": (2, 120), "healthy_threshold": (2, 10), "unhealthy_threshold": (2, 10)}

# ---------------------------------------------------------------- pure


def validate(params: dict[str, Any]) -> list[str]:
    """Every error of the input, each naming the option, its value and the fix; [] when it is good."""
    errors = []
    names = params.get("names") or {}
    for color in COLORS:
        name = names.get(color)
        if not isinstance(name, str) or not _NAME.match(name):
            errors.append(
                f"names.{color} is {name!r}: a target group name is 1-32 letters, digits and hyphens, "
                f"not starting or ending with a hyphen, e.g. triton-{color}"
            )
    if names.get("blue") and names.get("blue") == names.get("green"):
        errors.append(f"names.blue and names.green are both {names['blue']!r}: give each colour its own target group")
    if not _VPC.match(str(params.get("vpc_id") or "")):
        errors.append(f"vpc_id is {params.get('vpc_id')!r}: the VPC of the target groups, vpc-...")
    port = params.get("port")
    if not isinstance(port, int) or not 1 <= port <= 65535:
        errors.append(f"port is {port!r}: the port the targets listen on, 1-65535 (Triton's HTTP port is 8000)")
    health_check = params.get("health_check") or {}
    path = health_check.get("path")
    if not isinstance(path, str) or not path.startswith("/") or len(path) > 1024:
        errors.append(f"health_check.path is {path!r}: an absolute path of at most 1024 characters, e.g. /v2/health/ready")
    for key, (low, high) in HEALTH_CHECK_RANGES.items():
        value = health_check.get(key)
        if not isinstance(value, int) or not low <= value <= high:
            errors.append(f"health_check.{key} is {value!r}: it must be between {low} and {high}")
    interval, timeout = health_check.get("interval_s"), health_check.get("timeout_s")
    if isinstance(interval, int) and isinstance(timeout, int) and timeout >= interval:
        errors.append(f"health_check.timeout_s is {timeout}: it must be less than health_check.interval_s ({interval})")
    matcher = health_check.get("matcher")
    version = params.get("protocol_version", "HTTP1")
    if version not in PROTOCOL_VERSIONS:
        errors.append(f"protocol_version is {version!r}: one of {', '.join(PROTOCOL_VERSIONS)} (GRPC for Triton's gRPC port)")
    elif version == "GRPC":
        if params.get("protocol") != "HTTP" and params.get("protocol") != "HTTPS":
            errors.append(f"protocol is {params.get('protocol')!r}: a GRPC target group is HTTP or HTTPS")
        if isinstance(path, str) and path.startswith("/v2/"):
            errors.append(
                f"health_check.path is {path!r}, an HTTP path: with protocol_version GRPC give a gRPC method, "
                "e.g. /inference.GRPCInferenceService/ServerReady"
            )
        if not _GRPC_MATCHER.match(str(matcher or "")):
            errors.append(f"health_check.matcher is {matcher!r}: with protocol_version GRPC, gRPC status codes such as 0, 0,12 or 0-99")
    elif not _MATCHER.match(str(matcher or "")):
        errors.append(f"health_check.matcher is {matcher!r}: HTTP codes such as 200, 200,202 or 200-299")
    errors += attribute_errors(params.get("attributes") or {})
    return errors + key_errors(params.get("tags"), reserved=(COLOR_TAG,))


def wanted_health_check(params: dict[str, Any]) -> dict[str, Any]:
    """The health check the groups should have: on the traffic port, with the target group's protocol."""
    health_check = params["health_check"]
    return {
        "protocol": params["protocol"],
        "port": "traffic-port",
        "path": health_check["path"],
        "interval_s": health_check["interval_s"],
        "timeout_s": health_check["timeout_s"],
        "healthy_threshold": health_check["healthy_threshold"],
        "unhealthy_threshold": health_check["unhealthy_threshold"],
        "matcher": str(health_check["matcher"]),
    }


def matcher_key(protocol_version: str | None) -> str:
    """Matcher.GrpcCode for a GRPC target group, Matcher.HttpCode otherwise."""
    return "GrpcCode" if protocol_version == "GRPC" else "HttpCode"


def health_check_of(group: dict[str, Any]) -> dict[str, Any]:
    """The health check of a target group as describe_target_groups returns it, in the module's terms."""
    found = {key: group.get(api) for key, api in HEALTH_CHECK.items()}
    found["matcher"] = (group.get("Matcher") or {}).get(matcher_key(group.get("ProtocolVersion")))
    return found


def health_check_fields(health_check: dict[str, Any], protocol_version: str = "HTTP1") -> dict[str, Any]:
    """create/modify_target_group arguments for these health check settings."""
    fields = {HEALTH_CHECK[key]: value for key, value in health_check.items() if key in HEALTH_CHECK}
    if "matcher" in health_check:
        fields["Matcher"] = {matcher_key(protocol_version): health_check["matcher"]}
    return fields


def wanted_fixed(params: dict[str, Any]) -> dict[str, Any]:
    """The IMMUTABLE fields asked for (protocol_version HTTP1 unless given)."""
    return {key: params.get(key, "HTTP1") if key == "protocol_version" else params[key] for key in IMMUTABLE}


def fixed_of(group: dict[str, Any]) -> dict[str, Any]:
    """The IMMUTABLE fields of an existing group (a group that reports no protocol version is HTTP1, as AWS reports
    it; moto leaves it out of a group created without one)."""
    found = {key: group.get(api) for key, api in IMMUTABLE.items()}
    found["protocol_version"] = found["protocol_version"] or "HTTP1"
    return found


def immutable_errors(color: str, group: dict[str, Any], params: dict[str, Any]) -> list[str]:
    """The fields an existing group has otherwise than asked that AWS cannot change."""
    errors = []
    wanted, found = wanted_fixed(params), fixed_of(group)
    for key in IMMUTABLE:
        if found[key] != wanted[key]:
            errors.append(
                f"{key}: target group {group['TargetGroupName']} ({color}) has {found[key]!r}, asked for {wanted[key]!r}; "
                "AWS cannot change it on an existing target group: give names a new name, or delete the group first"
            )
    return errors


def wanted_tags(params: dict[str, Any], color: str) -> tuple[dict[str, Any], bool]:
    """The tags each colour's group should have and whether to purge the others. Without `tags`, only the colour
    tag is ensured and nothing is purged."""
    if params.get("tags") is None:
        return {COLOR_TAG: color}, False
    return {**params["tags"], COLOR_TAG: color}, params.get("purge_tags", True)


@dataclass
class ColorPlan:
    """What to write to one colour's target group, and how it reads before and after."""

    color: str
    name: str
    arn: str | None
    create: bool
    health_check: dict[str, Any] = field(default_factory=dict)  # the settings that differ on an existing group
    attributes: dict[str, str] = field(default_factory=dict)  # API values to write
    tags: TagPlan = field(default_factory=lambda: TagPlan({}))
    before: dict[str, Any] = field(default_factory=dict)
    after: dict[str, Any] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return self.create or bool(self.health_check or self.attributes) or self.tags.changed

    @property
    def actions(self) -> list[str]:
        where = f"target group {self.name} ({self.color})"
        found = [f"create {where}"] if self.create else []
        if self.health_check:
            found.append(f"modify {where} health check: " + ", ".join(f"{k}={v}" for k, v in self.health_check.items()))
        if self.attributes:
            found.append(f"modify {where} attributes: " + ", ".join(f"{k}={v}" for k, v in self.attributes.items()))
        if not self.create and self.tags.to_set:
            found.append(f"tag {where}: " + ", ".join(f"{k}={v}" for k, v in self.tags.to_set.items()))
        if not self.create and self.tags.to_remove:
            found.append(f"untag {where}: " + ", ".join(self.tags.to_remove))
        return found


def view(
    name: str, fields: dict[str, Any], health_check: dict[str, Any], attributes: dict[str, str], tags: dict[str, str]
) -> dict[str, Any]:
    """The managed fields of one group (`fields` holds the IMMUTABLE ones), as the diff and the result show them."""
    return {
        "name": name,
        **{key: fields.get(key) for key in IMMUTABLE},
        "health_check": health_check,
        "attributes": attributes,
        "tags": dict(sorted(tags.items())),
    }


def plan_color(
    color: str,
    group: dict[str, Any] | None,
    attributes: dict[str, str] | None,
    tags: dict[str, str] | None,
    params: dict[str, Any],
) -> ColorPlan:
    """The writes that bring one colour's group (None when missing; its attributes and tags as read) to `params`."""
    name = params["names"][color]
    health_check = wanted_health_check(params)
    wanted_attributes = {k: as_api_value(v) for k, v in sorted((params.get("attributes") or {}).items())}
    tag_wanted, purge = wanted_tags(params, color)
    if group is None:
        # The health check and tags go with the create; the attributes are written right after it.
        tag_plan = plan_tags({}, tag_wanted, purge)
        after = view(name, wanted_fixed(params), health_check, wanted_attributes, tag_plan.after)
        return ColorPlan(color, name, arn=None, create=True, attributes=wanted_attributes, tags=tag_plan, after=after)
    current_health_check = health_check_of(group)
    current_attributes = attributes or {}
    tag_plan = plan_tags(tags, tag_wanted, purge)
    return ColorPlan(
        color,
        name,
        arn=group["TargetGroupArn"],
        create=False,
        health_check={k: v for k, v in health_check.items() if current_health_check.get(k) != v},
        attributes=changes(current_attributes, wanted_attributes),
        tags=tag_plan,
        before=view(
            name,
            fixed_of(group),
            current_health_check,
            {k: current_attributes.get(k) for k in wanted_attributes},
            tag_plan.before,
        ),
        after=view(name, wanted_fixed(params), health_check, wanted_attributes, tag_plan.after),
    )


def create_fields(params: dict[str, Any], name: str) -> dict[str, Any]:
    """create_target_group arguments for one colour's group."""
    return {
        "Name": name,
        "Protocol": params["protocol"],
        "ProtocolVersion": params.get("protocol_version", "HTTP1"),
        "Port": params["port"],
        "VpcId": params["vpc_id"],
        "TargetType": params["target_type"],
        "HealthCheckEnabled": True,
        **health_check_fields(wanted_health_check(params), params.get("protocol_version", "HTTP1")),
    }


# ---------------------------------------------------------------- the module's run


def read(elbv2: Any, params: dict[str, Any]) -> dict[str, ColorPlan]:
    """Reads both groups (their attributes and tags when they exist) and plans each colour; fails before any write
    when an existing group cannot be converged."""
    names = [params["names"][color] for color in COLORS]
    groups = _elbv2.describe_target_groups_by_name(elbv2, names)
    arns = [g["TargetGroupArn"] for g in groups.values() if g]
    tags = _elbv2.describe_tags(elbv2, arns) if arns else {}
    errors: list[str] = []
    plans = {}
    for color in COLORS:
        group = groups[params["names"][color]]
        if group is None:
            plans[color] = plan_color(color, None, None, None, params)
            continue
        group_errors = immutable_errors(color, group, params)
        if group_errors:
            errors += group_errors
            continue
        arn = group["TargetGroupArn"]
        attributes = _elbv2.describe_target_group_attributes(elbv2, arn) if params.get("attributes") else {}
        try:
            plans[color] = plan_color(color, group, attributes, tags.get(arn, {}), params)
        except InputError as e:
            errors += [f"{error} ({color})" for error in e.errors]
    if errors:
        raise InputError(errors)
    return plans


def apply(elbv2: Any, params: dict[str, Any], plan: ColorPlan) -> str:
    """Makes the writes of one colour's plan; the group's ARN."""
    arn = plan.arn
    if plan.create:
        arn = _elbv2.create_target_group(elbv2, create_fields(params, plan.name), plan.tags.to_set)["TargetGroupArn"]
    elif plan.health_check:
        _elbv2.modify_target_group(elbv2, arn, health_check_fields(plan.health_check, params.get("protocol_version", "HTTP1")))
    if plan.attributes:
        _elbv2.modify_target_group_attributes(elbv2, arn, plan.attributes)
    if not plan.create and plan.tags.to_set:
        _elbv2.add_tags(elbv2, arn, plan.tags.to_set)
    if not plan.create and plan.tags.to_remove:
        _elbv2.remove_tags(elbv2, arn, plan.tags.to_remove)
    return arn


def ensure(elbv2: Any, params: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    errors = validate(params)
    if errors:
        raise InputError(errors)
    plans = read(elbv2, params)
    arns = {}
    for color, plan in plans.items():
        arns[color] = plan.arn if check_mode or not plan.changed else apply(elbv2, params, plan)
    return {
        "changed": any(plan.changed for plan in plans.values()),
        "actions": [action for plan in plans.values() for action in plan.actions],
        "target_groups": arns,
        "settings": {color: plan.after for color, plan in plans.items()},
        "diff": {
            "before": {color: plan.before for color, plan in plans.items()},
            "after": {color: plan.after for color, plan in plans.items()},
        },
    }
