# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The one place this collection calls the EC2 API: one thin function per call.

Every function takes a client made by `AnsibleAWSModule.client(..., retry_decorator=AWSRetry.jittered_backoff())`
and calls it with `aws_retry=True`; botocore errors propagate for the module to report through `fail_json_aws`.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.amazon.aws.plugins.module_utils.botocore import is_boto3_error_code

# What EC2 answers for a launch template, or a version of it, that does not exist (or a malformed id or name).
MISSING_LAUNCH_TEMPLATE = [
    "InvalidLaunchTemplateId.Malformed",
    "InvalidLaunchTemplateId.NotFound",
    "InvalidLaunchTemplateId.VersionNotFound",
    "InvalidLaunchTemplateName.MalformedException",
    "InvalidLaunchTemplateName.NotFoundException",
]


def launch_template_data(ec2: Any, spec: dict[str, str]) -> dict[str, Any] | None:
    """LaunchTemplateData of the version a group launches ({LaunchTemplateId|LaunchTemplateName, Version}), or None."""
    # the API takes the id or the name, not both
    key = "LaunchTemplateId" if spec.get("LaunchTemplateId") else "LaunchTemplateName"
    kwargs: dict[str, Any] = {key: spec.get(key)}
    kwargs["Versions"] = [spec.get("Version") or "$Default"]
    try:
        found = ec2.describe_launch_template_versions(aws_retry=True, **kwargs)["LaunchTemplateVersions"]
    except is_boto3_error_code(MISSING_LAUNCH_TEMPLATE):
        return None
    return found[0].get("LaunchTemplateData") if found else None


def describe_instance_types(ec2: Any, names: list[str]) -> list[dict[str, Any]]:
    if not names:
        return []
    return ec2.describe_instance_types(aws_retry=True, InstanceTypes=sorted(set(names)))["InstanceTypes"]
