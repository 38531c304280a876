# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The one place this collection asks who the caller is (STS) and what it may do (IAM's policy simulator).

Every function takes a client made by `AnsibleAWSModule.client(..., retry_decorator=AWSRetry.jittered_backoff())`
and calls it with `aws_retry=True`; botocore errors propagate for the caller to report.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.pages import full_result


def get_caller_identity(sts: Any) -> dict[str, str]:
    """{Account, Arn, UserId} of the credentials in use."""
    found = sts.get_caller_identity(aws_retry=True)
    return {"Account": found["Account"], "Arn": found["Arn"], "UserId": found["UserId"]}


def simulate_principal_policy(iam: Any, principal_arn: str, actions: list[str]) -> list[dict[str, Any]]:
    """IAM's evaluation of each action for the principal, against every resource ("*"), across pages."""
    return full_result(iam, "simulate_principal_policy", PolicySourceArn=principal_arn, ActionNames=actions).get("EvaluationResults", [])
