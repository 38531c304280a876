# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The one place this collection calls the ELBv2 (Application Load Balancer) API: one thin function per call.

Every function takes a client made by `AnsibleAWSModule.client(..., retry_decorator=AWSRetry.jittered_backoff())`
and calls it with `aws_retry=True`; listings go through botocore's paginators (`pages.full_result`); botocore
errors propagate for the module to report through `fail_json_aws`, except "not found", which reads as None.
Grouped by resource: load balancers, target groups, listeners, rules.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.amazon.aws.plugins.module_utils.botocore import is_boto3_error_code
from ansible_collections.amazon.aws.plugins.module_utils.tagging import ansible_dict_to_boto3_tag_list
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.pages import full_result


def _tags(tags: dict[str, str]) -> list[dict[str, str]]:
    return ansible_dict_to_boto3_tag_list(dict(sorted(tags.items())))


# ---------------------------------------------------------------- load balancers


def describe_load_balancer(elbv2: Any, arn: str) -> dict[str, Any] | None:
    try:
        return elbv2.describe_load_balancers(aws_retry=True, LoadBalancerArns=[arn])["LoadBalancers"][0]
    except is_boto3_error_code(["LoadBalancerNotFound", "ValidationError"]):
        return None


# ---------------------------------------------------------------- target groups


def describe_target_groups(elbv2: Any, arns: list[str]) -> dict[str, dict[str, Any] | None]:
    """ARN -> target group, or None for each ARN that does not exist (one call per ARN so each can be named)."""
    found: dict[str, dict[str, Any] | None] = {}
    for arn in arns:
        try:
            found[arn] = elbv2.describe_target_groups(aws_retry=True, TargetGroupArns=[arn])["TargetGroups"][0]
        except is_boto3_error_code(["TargetGroupNotFound", "ValidationError"]):
            found[arn] = None
    return found


def describe_target_groups_by_name(elbv2: Any, names: list[str]) -> dict[str, dict[str, Any] | None]:
    """Name -> target group, or None for each name that does not exist. One call for all names; AWS fails the whole
    call with TargetGroupNotFound when any is missing, and then each name is asked on its own."""
    try:
        found = elbv2.describe_target_groups(aws_retry=True, Names=names)["TargetGroups"]
        return {name: next((g for g in found if g["TargetGroupName"] == name), None) for name in names}
    except is_boto3_error_code("TargetGroupNotFound"):
        pass
    by_name: dict[str, dict[str, Any] | None] = {}
    for name in names:
        try:
            by_name[name] = elbv2.describe_target_groups(aws_retry=True, Names=[name])["TargetGroups"][0]
        except is_boto3_error_code("TargetGroupNotFound"):
            by_name[name] = None
    return by_name


def create_target_group(elbv2: Any, fields: dict[str, Any], tags: dict[str, str]) -> dict[str, Any]:
    """Creates a target group from `fields` (create_target_group arguments: Name, Protocol, Port, health check ...)."""
    kwargs = dict(fields)
    if tags:
        kwargs["Tags"] = _tags(tags)
    return elbv2.create_target_group(aws_retry=True, **kwargs)["TargetGroups"][0]


def modify_target_group(elbv2: Any, arn: str, fields: dict[str, Any]) -> dict[str, Any]:
    """Applies `fields` (modify_target_group arguments: the health check's) to the target group."""
    return elbv2.modify_target_group(aws_retry=True, TargetGroupArn=arn, **fields)["TargetGroups"][0]


def describe_target_health(elbv2: Any, target_group_arn: str) -> list[dict[str, Any]]:
    return elbv2.describe_target_health(aws_retry=True, TargetGroupArn=target_group_arn)["TargetHealthDescriptions"]


def register_ip_target(elbv2: Any, target_group_arn: str, ip: str, port: int) -> None:
    elbv2.register_targets(aws_retry=True, TargetGroupArn=target_group_arn, Targets=[{"Id": ip, "Port": port}])


def deregister_ip_target(elbv2: Any, target_group_arn: str, ip: str, port: int) -> None:
    elbv2.deregister_targets(aws_retry=True, TargetGroupArn=target_group_arn, Targets=[{"Id": ip, "Port": port}])


def describe_target_group_attributes(elbv2: Any, arn: str) -> dict[str, str] | None:
    """Attribute key -> value, or None when the target group does not exist."""
    try:
        found = elbv2.describe_target_group_attributes(aws_retry=True, TargetGroupArn=arn)["Attributes"]
    except is_boto3_error_code(["TargetGroupNotFound", "TargetGroupNotFoundException"]):
        return None
    return {a["Key"]: a["Value"] for a in found}


def modify_target_group_attributes(elbv2: Any, arn: str, attributes: dict[str, str]) -> dict[str, str]:
    found = elbv2.modify_target_group_attributes(
        aws_retry=True, TargetGroupArn=arn, Attributes=[{"Key": k, "Value": v} for k, v in attributes.items()]
    )["Attributes"]
    return {a["Key"]: a["Value"] for a in found}


# ---------------------------------------------------------------- listeners


def describe_listeners(elbv2: Any, load_balancer_arn: str) -> list[dict[str, Any]]:
    """Every listener of the load balancer, across pages."""
    return full_result(elbv2, "describe_listeners", LoadBalancerArn=load_balancer_arn).get("Listeners", [])


def describe_listener(elbv2: Any, listener_arn: str) -> dict[str, Any] | None:
    try:
        return elbv2.describe_listeners(aws_retry=True, ListenerArns=[listener_arn])["Listeners"][0]
    except is_boto3_error_code(["ListenerNotFound", "ValidationError"]):
        return None


def create_listener(elbv2: Any, lb_arn: str, fields: dict[str, Any], tags: dict[str, str]) -> dict[str, Any]:
    kwargs = {"LoadBalancerArn": lb_arn, **fields}
    if tags:
        kwargs["Tags"] = _tags(tags)
    return elbv2.create_listener(aws_retry=True, **kwargs)["Listeners"][0]


def modify_listener(elbv2: Any, listener_arn: str, fields: dict[str, Any]) -> dict[str, Any]:
    """Applies `fields` (modify_listener arguments: DefaultActions, Protocol, ...) to the listener."""
    return elbv2.modify_listener(aws_retry=True, ListenerArn=listener_arn, **fields)["Listeners"][0]


# ---------------------------------------------------------------- rules


def describe_rules(elbv2: Any, listener_arn: str) -> list[dict[str, Any]]:
    """Every rule of the listener, across pages."""
    return full_result(elbv2, "describe_rules", ListenerArn=listener_arn).get("Rules", [])


def describe_rule(elbv2: Any, rule_arn: str) -> dict[str, Any] | None:
    try:
        return elbv2.describe_rules(aws_retry=True, RuleArns=[rule_arn])["Rules"][0]
    except is_boto3_error_code(["RuleNotFound", "ValidationError"]):
        return None


def production_actions(elbv2: Any, listener_arn: str | None, rule_arn: str | None) -> list[dict[str, Any]] | None:
    """The actions of the production route: the rule's when `rule_arn` is given, else the listener's default actions;
    None when that rule or listener does not exist."""
    if rule_arn:
        rule = describe_rule(elbv2, rule_arn)
        return None if rule is None else rule["Actions"]
    listener = describe_listener(elbv2, listener_arn)
    return None if listener is None else listener["DefaultActions"]


def create_rule(elbv2: Any, listener_arn: str, fields: dict[str, Any], tags: dict[str, str]) -> dict[str, Any]:
    kwargs = {"ListenerArn": listener_arn, **fields}
    if tags:
        kwargs["Tags"] = _tags(tags)
    return elbv2.create_rule(aws_retry=True, **kwargs)["Rules"][0]


def modify_rule(elbv2: Any, rule_arn: str, fields: dict[str, Any]) -> dict[str, Any]:
    """Applies `fields` (modify_rule arguments: Actions, Conditions) to the rule."""
    return elbv2.modify_rule(aws_retry=True, RuleArn=rule_arn, **fields)["Rules"][0]


def set_rule_priority(elbv2: Any, rule_arn: str, priority: int) -> None:
    elbv2.set_rule_priorities(aws_retry=True, RulePriorities=[{"RuleArn": rule_arn, "Priority": priority}])


# ---------------------------------------------------------------- tags (listeners, rules, target groups)


def describe_tags(elbv2: Any, arns: list[str]) -> dict[str, dict[str, str]]:
    """ARN -> {key: value} of each resource (at most 20 ARNs a call)."""
    found: dict[str, dict[str, str]] = {}
    for start in range(0, len(arns), 20):
        for entry in elbv2.describe_tags(aws_retry=True, ResourceArns=arns[start : start + 20])["TagDescriptions"]:
            # Value is optional in the API (an empty value may come back without it); the helper would refuse such a list
            found[entry["ResourceArn"]] = {t["Key"]: t.get("Value", "") for t in entry.get("Tags") or []}
    return found


def add_tags(elbv2: Any, arn: str, tags: dict[str, str]) -> None:
    """Adds or overwrites these tags; other keys stay as they are."""
    elbv2.add_tags(aws_retry=True, ResourceArns=[arn], Tags=_tags(tags))


def remove_tags(elbv2: Any, arn: str, keys: list[str]) -> None:
    elbv2.remove_tags(aws_retry=True, ResourceArns=[arn], TagKeys=keys)
