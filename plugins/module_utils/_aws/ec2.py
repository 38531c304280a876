# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The one place this collection calls the EC2 API: one thin function per call.

Every function takes a client made by `AnsibleAWSModule.client(..., retry_decorator=AWSRetry.jittered_backoff())`
and calls it with `aws_retry=True`; botocore errors propagate for the module to report through `fail_json_aws`.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.amazon.aws.plugins.module_utils.botocore import is_boto3_error_code
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.pages import full_result

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


def describe_security_groups(ec2: Any, group_ids: list[str]) -> dict[str, dict[str, Any]]:
    """The groups among `group_ids` that exist, by id, in one listing (a filter, so a missing id is left out rather
    than failing the call)."""
    if not group_ids:
        return {}
    found = full_result(ec2, "describe_security_groups", Filters=[{"Name": "group-id", "Values": sorted(set(group_ids))}])
    return {group["GroupId"]: group for group in found["SecurityGroups"]}


def describe_subnets(ec2: Any, subnet_ids: list[str]) -> dict[str, dict[str, Any]]:
    """Each subnet among `subnet_ids` that exists, by id, in one listing."""
    if not subnet_ids:
        return {}
    found = full_result(ec2, "describe_subnets", Filters=[{"Name": "subnet-id", "Values": sorted(set(subnet_ids))}])
    return {subnet["SubnetId"]: subnet for subnet in found["Subnets"]}


def describe_subnet_cidrs(ec2: Any, subnet_ids: list[str]) -> dict[str, str]:
    """The IPv4 CIDR block of each subnet among `subnet_ids` that exists."""
    return {sid: subnet["CidrBlock"] for sid, subnet in describe_subnets(ec2, subnet_ids).items()}


def authorize_security_group_ingress(ec2: Any, group_id: str, permissions: list[dict[str, Any]]) -> None:
    ec2.authorize_security_group_ingress(aws_retry=True, GroupId=group_id, IpPermissions=permissions)


def authorize_security_group_egress(ec2: Any, group_id: str, permissions: list[dict[str, Any]]) -> None:
    ec2.authorize_security_group_egress(aws_retry=True, GroupId=group_id, IpPermissions=permissions)


def existing_vpcs(ec2: Any, vpc_ids: list[str]) -> set[str]:
    """The VPCs among `vpc_ids` that exist (a filter: a missing id is left out rather than failing the call)."""
    if not vpc_ids:
        return set()
    found = full_result(ec2, "describe_vpcs", Filters=[{"Name": "vpc-id", "Values": sorted(set(vpc_ids))}])
    return {vpc["VpcId"] for vpc in found["Vpcs"]}


def existing_images(ec2: Any, image_ids: list[str]) -> set[str]:
    """The AMIs among `image_ids` this account can launch (its own, shared with it, or public)."""
    if not image_ids:
        return set()
    found = full_result(ec2, "describe_images", Filters=[{"Name": "image-id", "Values": sorted(set(image_ids))}])
    return {image["ImageId"] for image in found["Images"]}


def describe_instance_type(ec2: Any, name: str) -> dict[str, Any] | None:
    """One instance type's description, or None when the region does not offer it (or the name is wrong)."""
    try:
        found = ec2.describe_instance_types(aws_retry=True, InstanceTypes=[name])["InstanceTypes"]
    except is_boto3_error_code(["InvalidInstanceType", "InvalidParameterValue"]):
        return None
    return found[0] if found else None


# ---------------------------------------------------------------- launch template versions and the canary instance


def describe_launch_template_versions(ec2: Any, template_id: str, versions: list[str] | None = None) -> list[dict[str, Any]]:
    """The template's versions (all of them when `versions` is None), across pages."""
    kwargs: dict[str, Any] = {"LaunchTemplateId": template_id}
    if versions:
        kwargs["Versions"] = versions
    return full_result(ec2, "describe_launch_template_versions", **kwargs).get("LaunchTemplateVersions", [])


def create_launch_template_version(
    ec2: Any, template_id: str, source_version: str | None, data: dict[str, Any], description: str
) -> dict[str, Any]:
    """A new version: the source version's data with `data` laid over it (`data` alone when `source_version` is None,
    so a key left out is gone). It does not become the default."""
    source = {"SourceVersion": source_version} if source_version else {}
    return ec2.create_launch_template_version(
        aws_retry=True, LaunchTemplateId=template_id, LaunchTemplateData=data, VersionDescription=description[:255], **source
    )["LaunchTemplateVersion"]


def describe_launch_template(ec2: Any, name: str) -> dict[str, Any] | None:
    """The launch template of that name (its id, default and latest version numbers, tags), or None."""
    try:
        found = ec2.describe_launch_templates(aws_retry=True, LaunchTemplateNames=[name])["LaunchTemplates"]
    except is_boto3_error_code(MISSING_LAUNCH_TEMPLATE):
        return None
    return found[0] if found else None


def create_launch_template(ec2: Any, name: str, data: dict[str, Any], tags: dict[str, str], description: str) -> dict[str, Any]:
    """A new launch template whose version 1 (its default) holds `data`, tagged."""
    tag_specs = [{"ResourceType": "launch-template", "Tags": [{"Key": k, "Value": v} for k, v in sorted(tags.items())]}] if tags else []
    return ec2.create_launch_template(
        aws_retry=True, LaunchTemplateName=name, LaunchTemplateData=data, VersionDescription=description[:255], TagSpecifications=tag_specs
    )["LaunchTemplate"]


def create_tags(ec2: Any, resource_id: str, tags: dict[str, str]) -> None:
    ec2.create_tags(aws_retry=True, Resources=[resource_id], Tags=[{"Key": k, "Value": v} for k, v in sorted(tags.items())])


def delete_tags(ec2: Any, resource_id: str, keys: list[str]) -> None:
    ec2.delete_tags(aws_retry=True, Resources=[resource_id], Tags=[{"Key": k} for k in sorted(keys)])


def describe_capacity_reservation(ec2: Any, reservation_id: str) -> dict[str, Any] | None:
    """One On-Demand Capacity Reservation or Capacity Block (its type, instance type, zone, counts, state), or None."""
    try:
        found = ec2.describe_capacity_reservations(aws_retry=True, CapacityReservationIds=[reservation_id])["CapacityReservations"]
    except is_boto3_error_code(["InvalidCapacityReservationId.NotFound", "InvalidCapacityReservationId.Malformed"]):
        return None
    return found[0] if found else None


def set_default_launch_template_version(ec2: Any, template_id: str, version: str) -> None:
    ec2.modify_launch_template(aws_retry=True, LaunchTemplateId=template_id, DefaultVersion=version)


def delete_launch_template_versions(ec2: Any, template_id: str, versions: list[str]) -> list[str]:
    """Deletes the versions; returns why each one EC2 did not delete was refused (the call itself succeeds)."""
    answer = ec2.delete_launch_template_versions(aws_retry=True, LaunchTemplateId=template_id, Versions=versions)
    return [
        f"version {v.get('VersionNumber')}: {(v.get('ResponseError') or {}).get('Message', 'not deleted')}"
        for v in answer.get("UnsuccessfullyDeletedLaunchTemplateVersions") or []
    ]


def run_instance(ec2: Any, template: dict[str, str], subnet_id: str, tags: dict[str, str]) -> dict[str, Any]:
    """One instance launched from a launch template version ({LaunchTemplateId, Version}) in `subnet_id`, tagged."""
    tag_list = [{"Key": k, "Value": v} for k, v in sorted(tags.items())]
    return ec2.run_instances(
        aws_retry=True,
        LaunchTemplate=template,
        SubnetId=subnet_id,
        MinCount=1,
        MaxCount=1,
        TagSpecifications=[{"ResourceType": "instance", "Tags": tag_list}],
    )["Instances"][0]


def describe_instance(ec2: Any, instance_id: str) -> dict[str, Any] | None:
    found = full_result(ec2, "describe_instances", InstanceIds=[instance_id]).get("Reservations", [])
    instances = [i for r in found for i in r.get("Instances", [])]
    return instances[0] if instances else None


def terminate_instances(ec2: Any, instance_ids: list[str]) -> None:
    if instance_ids:
        ec2.terminate_instances(aws_retry=True, InstanceIds=instance_ids)
