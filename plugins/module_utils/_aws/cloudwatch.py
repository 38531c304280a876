# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The one place this collection calls the CloudWatch API: one thin function per call.

Every function takes a client made by `AnsibleAWSModule.client(..., retry_decorator=AWSRetry.jittered_backoff())`
and calls it with `aws_retry=True`; listings go through botocore's paginators (`pages.full_result`). Botocore
errors propagate for the module to report through `fail_json_aws`.
"""

from __future__ import annotations

import json
from typing import Any

from ansible_collections.amazon.aws.plugins.module_utils.botocore import is_boto3_error_code
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.pages import full_result


def describe_alarms(cloudwatch: Any, names: list[str]) -> list[dict[str, Any]]:
    """The named metric and composite alarms that exist (missing names are simply absent)."""
    alarms: list[dict[str, Any]] = []
    for start in range(0, len(names), 100):  # the API takes at most 100 names a call
        listed = full_result(
            cloudwatch, "describe_alarms", AlarmNames=names[start : start + 100], AlarmTypes=["MetricAlarm", "CompositeAlarm"]
        )
        alarms += listed.get("MetricAlarms", []) + listed.get("CompositeAlarms", [])
    return alarms


def get_dashboard(cloudwatch: Any, name: str) -> dict[str, Any] | None:
    try:
        found = cloudwatch.get_dashboard(aws_retry=True, DashboardName=name)
    except is_boto3_error_code(["ResourceNotFound", "ResourceNotFoundException"]):
        return None
    return {"arn": found.get("DashboardArn"), "body": json.loads(found.get("DashboardBody") or "{}")}


def put_dashboard(cloudwatch: Any, name: str, body: str) -> list[str]:
    """Writes the dashboard (body: its JSON); returns CloudWatch's validation messages (warnings: it was saved)."""
    answer = cloudwatch.put_dashboard(aws_retry=True, DashboardName=name, DashboardBody=body)
    return [f"{m.get('DataPath', '')}: {m.get('Message', '')}" for m in answer.get("DashboardValidationMessages") or []]


def delete_dashboard(cloudwatch: Any, name: str) -> None:
    cloudwatch.delete_dashboards(aws_retry=True, DashboardNames=[name])


def describe_alarms_with_prefix(cloudwatch: Any, prefix: str) -> list[dict[str, Any]]:
    """The metric alarms whose names start with `prefix`."""
    return full_result(cloudwatch, "describe_alarms", AlarmNamePrefix=prefix, AlarmTypes=["MetricAlarm"]).get("MetricAlarms", [])


def put_metric_alarm(cloudwatch: Any, alarm: dict[str, Any]) -> None:
    """Creates or replaces a metric alarm (put_metric_alarm arguments)."""
    cloudwatch.put_metric_alarm(aws_retry=True, **alarm)


def delete_alarms(cloudwatch: Any, names: list[str]) -> None:
    for start in range(0, len(names), 100):  # the API takes at most 100 names a call
        cloudwatch.delete_alarms(aws_retry=True, AlarmNames=names[start : start + 100])


def get_metric_data(cloudwatch: Any, queries: list[dict[str, Any]], start: Any, end: Any) -> dict[str, list[float]]:
    """Query id -> the values of each period in [start, end) (datetimes), every page merged. A query with no data
    point has no values."""
    values: dict[str, list[float]] = {}
    for begin in range(0, len(queries), 500):  # the API takes at most 500 queries a call
        listed = full_result(cloudwatch, "get_metric_data", MetricDataQueries=queries[begin : begin + 500], StartTime=start, EndTime=end)
        for result in listed.get("MetricDataResults", []):
            values.setdefault(result["Id"], []).extend(float(v) for v in result.get("Values") or [] if v is not None)
    return values
