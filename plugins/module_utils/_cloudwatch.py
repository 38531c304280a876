# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The one place this collection calls the CloudWatch API: one thin function per call.

Every function takes a client made by `AnsibleAWSModule.client(..., retry_decorator=AWSRetry.jittered_backoff())`
and calls it with `aws_retry=True`; botocore errors propagate for the module to report through `fail_json_aws`.
"""

from __future__ import annotations

from typing import Any


def describe_alarms(cloudwatch: Any, names: list[str]) -> list[dict[str, Any]]:
    """The named metric and composite alarms that exist (missing names are simply absent)."""
    alarms: list[dict[str, Any]] = []
    for start in range(0, len(names), 100):  # the API takes at most 100 names a call
        kwargs: dict[str, Any] = {"AlarmNames": names[start : start + 100], "AlarmTypes": ["MetricAlarm", "CompositeAlarm"]}
        while True:
            page = cloudwatch.describe_alarms(aws_retry=True, **kwargs)
            alarms += page.get("MetricAlarms", []) + page.get("CompositeAlarms", [])
            if not page.get("NextToken"):
                break
            kwargs["NextToken"] = page["NextToken"]
    return alarms
