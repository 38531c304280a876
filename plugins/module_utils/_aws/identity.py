# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The one place this collection asks who the caller is (STS). What it may do (IAM's policy simulator) is in `iam.py`.

Every function takes a client made by `AnsibleAWSModule.client(..., retry_decorator=AWSRetry.jittered_backoff())`
and calls it with `aws_retry=True`; botocore errors propagate for the caller to report.
"""

from __future__ import annotations

from typing import Any


def get_caller_identity(sts: Any) -> dict[str, str]:
    """{Account, Arn, UserId} of the credentials in use."""
    found = sts.get_caller_identity(aws_retry=True)
    return {"Account": found["Account"], "Arn": found["Arn"], "UserId": found["UserId"]}
