# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The one place this collection calls SNS (the preflight reads whether the alarms' topics exist)."""

from __future__ import annotations

from typing import Any

from ansible_collections.amazon.aws.plugins.module_utils.botocore import is_boto3_error_code


def topic_exists(sns: Any, arn: str) -> bool:
    try:
        sns.get_topic_attributes(aws_retry=True, TopicArn=arn)
    except is_boto3_error_code(["NotFound", "NotFoundException", "InvalidParameter"]):
        return False
    return True
