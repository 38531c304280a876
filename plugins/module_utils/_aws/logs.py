# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The one place this collection calls the CloudWatch Logs API: one thin function per call.

Every function takes a client made by `_aws.module.client` (jittered retries) and calls it with `aws_retry=True`;
listings go through botocore's paginators (`pages.full_result`). Botocore errors propagate for the module to report.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.pages import full_result


def describe_log_group(logs: Any, name: str) -> dict[str, Any] | None:
    """The log group called exactly `name`, or None (the API only lists by prefix)."""
    listed = full_result(logs, "describe_log_groups", logGroupNamePrefix=name)
    return next((group for group in listed.get("logGroups", []) if group.get("logGroupName") == name), None)


def tagging_arn(group: dict[str, Any]) -> str:
    """The ARN the tagging calls take: without the `:*` that `arn` ends with (newer answers carry `logGroupArn`)."""
    return group.get("logGroupArn") or group["arn"].removesuffix(":*")


def create_log_group(logs: Any, name: str, tags: dict[str, str]) -> None:
    logs.create_log_group(aws_retry=True, logGroupName=name, **({"tags": tags} if tags else {}))


def put_retention_policy(logs: Any, name: str, days: int) -> None:
    logs.put_retention_policy(aws_retry=True, logGroupName=name, retentionInDays=days)


def list_tags(logs: Any, arn: str) -> dict[str, str]:
    return logs.list_tags_for_resource(aws_retry=True, resourceArn=arn).get("tags") or {}


def tag_resource(logs: Any, arn: str, tags: dict[str, str]) -> None:
    logs.tag_resource(aws_retry=True, resourceArn=arn, tags=tags)
