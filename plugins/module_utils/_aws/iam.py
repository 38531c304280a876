# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The one place this collection calls the IAM API: roles, their policies and tags, instance profiles, and the
policy simulator, one thin function per call. The caller's identity (STS) is in `identity.py`.

Every function takes a client made by `AnsibleAWSModule.client(..., retry_decorator=AWSRetry.jittered_backoff())`
and calls it with `aws_retry=True`; listings go through botocore's paginators (`pages.full_result`). Botocore
errors propagate for the module to report through `fail_json_aws`; NoSuchEntity on a read means "none" (None).
Botocore hands policy documents back already decoded (dicts).
"""

from __future__ import annotations

import json
from typing import Any

from ansible_collections.amazon.aws.plugins.module_utils.botocore import is_boto3_error_code
from ansible_collections.amazon.aws.plugins.module_utils.retries import AWSRetry
from ansible_collections.amazon.aws.plugins.module_utils.tagging import ansible_dict_to_boto3_tag_list, boto3_tag_list_to_ansible_dict
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.pages import full_result


def iam_tags(tags: dict[str, str]) -> list[dict[str, str]]:
    return ansible_dict_to_boto3_tag_list(dict(sorted(tags.items())))


def tags_of(role: dict[str, Any] | None) -> dict[str, str]:
    """{key: value} of a role as get_role answers it."""
    return boto3_tag_list_to_ansible_dict((role or {}).get("Tags") or [])


# ---------------------------------------------------------------- roles


def get_role(iam: Any, name: str) -> dict[str, Any] | None:
    """The role (trust policy, description, boundary and tags included), or None when there is none."""
    try:
        return iam.get_role(aws_retry=True, RoleName=name)["Role"]
    except is_boto3_error_code("NoSuchEntity"):
        return None


def create_role(
    iam: Any, name: str, path: str, trust_policy: dict[str, Any], description: str | None, boundary: str, tags: dict[str, str]
) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"RoleName": name, "Path": path, "AssumeRolePolicyDocument": json.dumps(trust_policy)}
    if description is not None:
        kwargs["Description"] = description
    if boundary:
        kwargs["PermissionsBoundary"] = boundary
    if tags:
        kwargs["Tags"] = iam_tags(tags)
    return iam.create_role(aws_retry=True, **kwargs)["Role"]


def update_assume_role_policy(iam: Any, name: str, trust_policy: dict[str, Any]) -> None:
    iam.update_assume_role_policy(aws_retry=True, RoleName=name, PolicyDocument=json.dumps(trust_policy))


def update_role_description(iam: Any, name: str, description: str) -> None:
    iam.update_role(aws_retry=True, RoleName=name, Description=description)


def put_permissions_boundary(iam: Any, name: str, boundary: str) -> None:
    iam.put_role_permissions_boundary(aws_retry=True, RoleName=name, PermissionsBoundary=boundary)


def delete_permissions_boundary(iam: Any, name: str) -> None:
    iam.delete_role_permissions_boundary(aws_retry=True, RoleName=name)


def tag_role(iam: Any, name: str, tags: dict[str, str]) -> None:
    iam.tag_role(aws_retry=True, RoleName=name, Tags=iam_tags(tags))


def untag_role(iam: Any, name: str, keys: list[str]) -> None:
    iam.untag_role(aws_retry=True, RoleName=name, TagKeys=keys)


# ---------------------------------------------------------------- managed and inline policies


def list_attached_policies(iam: Any, name: str) -> list[str]:
    """The ARNs of the managed policies attached to the role."""
    listed = full_result(iam, "list_attached_role_policies", RoleName=name).get("AttachedPolicies", [])
    return [policy["PolicyArn"] for policy in listed]


def attach_policy(iam: Any, name: str, policy_arn: str) -> None:
    iam.attach_role_policy(aws_retry=True, RoleName=name, PolicyArn=policy_arn)


def detach_policy(iam: Any, name: str, policy_arn: str) -> None:
    iam.detach_role_policy(aws_retry=True, RoleName=name, PolicyArn=policy_arn)


def get_inline_policy(iam: Any, name: str, policy_name: str) -> dict[str, Any] | None:
    """The document of the role's inline policy `policy_name`, or None when the role has no such policy."""
    try:
        return iam.get_role_policy(aws_retry=True, RoleName=name, PolicyName=policy_name)["PolicyDocument"]
    except is_boto3_error_code("NoSuchEntity"):
        return None


def put_inline_policy(iam: Any, name: str, policy_name: str, document: dict[str, Any]) -> None:
    iam.put_role_policy(aws_retry=True, RoleName=name, PolicyName=policy_name, PolicyDocument=json.dumps(document))


# ---------------------------------------------------------------- instance profiles


def get_instance_profile(iam: Any, name: str) -> dict[str, Any] | None:
    """The instance profile (Path, Roles), or None when there is none."""
    try:
        return iam.get_instance_profile(aws_retry=True, InstanceProfileName=name)["InstanceProfile"]
    except is_boto3_error_code("NoSuchEntity"):
        return None


def create_instance_profile(iam: Any, name: str, path: str) -> dict[str, Any]:
    return iam.create_instance_profile(aws_retry=True, InstanceProfileName=name, Path=path)["InstanceProfile"]


# IAM is eventually consistent: a profile or role created a moment ago can still answer NoSuchEntity here.
@AWSRetry.jittered_backoff(retries=5, delay=1, catch_extra_error_codes=["NoSuchEntity"])
def add_role_to_instance_profile(iam: Any, profile_name: str, role_name: str) -> None:
    iam.add_role_to_instance_profile(aws_retry=True, InstanceProfileName=profile_name, RoleName=role_name)


# ---------------------------------------------------------------- policy simulator


def simulate_principal_policy(iam: Any, principal_arn: str, actions: list[str]) -> list[dict[str, Any]]:
    """IAM's evaluation of each action for the principal, against every resource ("*"), across pages."""
    return full_result(iam, "simulate_principal_policy", PolicySourceArn=principal_arn, ActionNames=actions).get("EvaluationResults", [])


def simulate_with_context(iam: Any, principal_arn: str, action: str, resource_arn: str, context: dict[str, str]) -> list[dict[str, Any]]:
    """IAM's evaluation of one action on one resource for the principal, with string context keys set as a request
    would carry them (e.g. ec2:SourceInstanceARN for a request signed with an instance's role credentials)."""
    entries = [{"ContextKeyName": k, "ContextKeyValues": [v], "ContextKeyType": "string"} for k, v in sorted(context.items())]
    return full_result(
        iam,
        "simulate_principal_policy",
        PolicySourceArn=principal_arn,
        ActionNames=[action],
        ResourceArns=[resource_arn],
        ContextEntries=entries,
    ).get("EvaluationResults", [])
