# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The one place this collection calls ACM (the preflight reads whether a listener's certificate exists)."""

from __future__ import annotations

from typing import Any

from ansible_collections.amazon.aws.plugins.module_utils.botocore import is_boto3_error_code


def describe_certificate(acm: Any, arn: str) -> dict[str, Any] | None:
    """The certificate, or None when it does not exist (or the ARN is malformed)."""
    try:
        return acm.describe_certificate(aws_retry=True, CertificateArn=arn)["Certificate"]
    except is_boto3_error_code(["ResourceNotFoundException", "InvalidArnException", "ValidationException"]):
        return None
