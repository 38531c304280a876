# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The one place this collection calls the ELBv2 (Application Load Balancer) API: one thin function per call.

Every function takes a client made by `AnsibleAWSModule.client(..., retry_decorator=AWSRetry.jittered_backoff())`
and calls it with `aws_retry=True`; botocore errors propagate for the module to report through `fail_json_aws`.
"""

from __future__ import annotations

from typing import Any

try:
    from botocore.exceptions import ClientError
except ImportError:  # pragma: no cover - AnsibleAWSModule reports the missing library
    ClientError = Exception  # type: ignore[assignment,misc]


def _code(err: Exception) -> str:
    return getattr(err, "response", {}).get("Error", {}).get("Code", "")


def describe_target_groups(elbv2: Any, arns: list[str]) -> dict[str, dict[str, Any] | None]:
    """ARN -> target group, or None for each ARN that does not exist (one call per ARN so each can be named)."""
    found: dict[str, dict[str, Any] | None] = {}
    for arn in arns:
        try:
            found[arn] = elbv2.describe_target_groups(aws_retry=True, TargetGroupArns=[arn])["TargetGroups"][0]
        except ClientError as e:
            if _code(e) not in ("TargetGroupNotFound", "ValidationError"):
                raise
            found[arn] = None
    return found


def describe_target_health(elbv2: Any, target_group_arn: str) -> list[dict[str, Any]]:
    return elbv2.describe_target_health(aws_retry=True, TargetGroupArn=target_group_arn)["TargetHealthDescriptions"]


def describe_listener(elbv2: Any, listener_arn: str) -> dict[str, Any] | None:
    try:
        return elbv2.describe_listeners(aws_retry=True, ListenerArns=[listener_arn])["Listeners"][0]
    except ClientError as e:
        if _code(e) not in ("ListenerNotFound", "ValidationError"):
            raise
        return None


def describe_rule(elbv2: Any, rule_arn: str) -> dict[str, Any] | None:
    try:
        return elbv2.describe_rules(aws_retry=True, RuleArns=[rule_arn])["Rules"][0]
    except ClientError as e:
        if _code(e) not in ("RuleNotFound", "ValidationError"):
            raise
        return None


def set_listener_actions(elbv2: Any, listener_arn: str, actions: list[dict[str, Any]]) -> dict[str, Any]:
    return elbv2.modify_listener(aws_retry=True, ListenerArn=listener_arn, DefaultActions=actions)["Listeners"][0]


def set_rule_actions(elbv2: Any, rule_arn: str, actions: list[dict[str, Any]]) -> dict[str, Any]:
    return elbv2.modify_rule(aws_retry=True, RuleArn=rule_arn, Actions=actions)["Rules"][0]
