# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The fleet's launch template, converged: the data its settings render is compared with the template's default
version (the one the Auto Scaling group launches); a difference becomes a new version, made the default. A version
holds the whole data (no source version), so a setting removed - a reservation target, say - is gone from it.

Its capacity settings (instance types of one GPU shape, a reservation, a Capacity Block, Spot) are checked before
any write: the settings alone (`capacity_sources.setting_problems`), then the types as EC2 describes them.
With `keep_image`, an existing template keeps the AMI its default version runs: a new one waits for the gated AMI
rollout (`_ami_rollout/`), which is the only way it reaches a running fleet.
"""

from __future__ import annotations

import re
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils import _tags
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import ec2 as _ec2
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import InputError
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import placement
from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet import capacity_sources as cs

IMAGE_ID = re.compile(r"^ami-[0-9a-f]{8,17}$")
TEMPLATE_NAME = re.compile(r"^[A-Za-z0-9().\-/_]{3,128}$")

# ---------------------------------------------------------------- pure


def input_problems(params: dict[str, Any]) -> list[str]:
    """The template's own settings; the capacity settings are capacity_sources'."""
    problems = []
    if not TEMPLATE_NAME.match(params.get("name") or ""):
        problems.append(f"name is {params.get('name')!r}: 3-128 letters, digits and ( ) . - / _ (fleet_capacity_name)")
    if not IMAGE_ID.match(params.get("image_id") or ""):
        problems.append(f"image_id is {params.get('image_id')!r}: an AMI id (ami-...; fleet_capacity_ami_id or the Packer manifest)")
    hop = int(params.get("metadata_hop_limit") or 0)
    if not 1 <= hop <= 64:
        problems.append(f"metadata_hop_limit is {hop}: 1-64 (fleet_capacity_imds_hop_limit; 2 lets containers reach IMDSv2)")
    return problems + _tags.key_errors(params.get("tags")) + cs.setting_problems(cs.from_params(params))


def template_data(params: dict[str, Any]) -> dict[str, Any]:
    """LaunchTemplateData as EC2 takes it: IMDSv2 required, an encrypted root volume, the capacity settings' keys."""
    volume = params.get("root_volume") or {}
    data: dict[str, Any] = {
        "ImageId": params["image_id"],
        **cs.launch_template_capacity(cs.from_params(params)),
        "MetadataOptions": {
            "HttpEndpoint": "enabled",
            "HttpTokens": "required",
            "HttpPutResponseHopLimit": int(params["metadata_hop_limit"]),
        },
        "BlockDeviceMappings": [
            {
                "DeviceName": volume.get("device_name") or "/dev/xvda",
                "Ebs": {
                    "VolumeSize": int(volume.get("size_gb") or 200),
                    "VolumeType": volume.get("type") or "gp3",
                    "Encrypted": True,
                    "DeleteOnTermination": True,
                },
            }
        ],
    }
    if params.get("iam_instance_profile"):
        data["IamInstanceProfile"] = {"Name": params["iam_instance_profile"]}
    if params.get("security_group_ids"):
        data["SecurityGroupIds"] = sorted(params["security_group_ids"])
    if params.get("user_data"):
        data["UserData"] = params["user_data"]
    return data


def canonical(value: Any) -> Any:
    """A form two LaunchTemplateData compare equal in when EC2 would launch the same: scalars as EC2's query strings
    (True and "true" alike), security groups in any order, empty values dropped."""
    if isinstance(value, dict):
        out = {k: canonical(v) for k, v in value.items() if v not in (None, "", [], {})}
        if "SecurityGroupIds" in out:
            out["SecurityGroupIds"] = sorted(out["SecurityGroupIds"])
        return out
    if isinstance(value, list):
        return [canonical(v) for v in value]
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def launch_data(data: dict[str, Any] | None) -> dict[str, Any]:
    """LaunchTemplateData without tag specifications of the template itself: those tag the template, never what it
    launches (moto 5 echoes CreateLaunchTemplate's into version 1's data)."""
    data = dict(data or {})
    specs = [t for t in data.pop("TagSpecifications", None) or [] if t.get("ResourceType") != "launch-template"]
    return {**data, "TagSpecifications": specs} if specs else data


def differing_keys(current: dict[str, Any] | None, wanted: dict[str, Any]) -> list[str]:
    """Top-level LaunchTemplateData keys whose value differs (all of them when there is no template)."""
    before, after = canonical(launch_data(current)), canonical(launch_data(wanted))
    return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))


def capacity_summary(params: dict[str, Any], described: dict[str, dict[str, Any] | None]) -> dict[str, Any]:
    """What the placement check and the docs need to know of the fleet's capacity: its kind, the types, the smallest
    (which decides what one new instance holds) and its resources, the GPU shape."""
    s = cs.from_params(params)
    found = [d for d in (described.get(t) for t in s.instance_types) if d]
    smallest = cs.smallest_type(found) if found else {}
    per = placement.instance_type_resources(smallest) if smallest else placement.Resources()
    return {
        "kind": s.kind,
        "instance_types": s.instance_types,
        "smallest_instance_type": smallest.get("InstanceType", ""),
        "per_instance": {"gpus": per.gpus, "cpu": per.cpu, "memory": per.memory},
        "gpu_shape": cs.gpu_shape(smallest) if smallest else {},
        "reservation_id": s.reservation_id,
        "capacity_reservation_group_arn": s.capacity_reservation_group_arn,
        "spot": s.spot,
        "ecs_config": cs.ecs_config(s),
    }


# ---------------------------------------------------------------- the module's run


def ensure(ec2: Any, params: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    problems = input_problems(params)
    if problems:
        raise InputError(problems)
    s = cs.from_params(params)
    described = {t: _ec2.describe_instance_type(ec2, t) for t in s.instance_types}
    problems = cs.shape_problems(s.instance_types, described, params.get("region") or "")
    if problems:
        raise InputError(problems)

    name = params["name"]
    wanted = template_data(params)
    tags = _tags.as_strings(params.get("tags"))
    description = f"fleet_capacity: {s.kind}, {', '.join(s.instance_types)}"
    template = _ec2.describe_launch_template(ec2, name)
    actions: list[str] = []
    current: dict[str, Any] | None = None
    pending_image = ""
    if template is None:
        actions.append(f"create launch template {name}")
        template_id, default_version, latest_version = "", 1, 1
        if not check_mode:
            created = _ec2.create_launch_template(ec2, name, wanted, tags or {}, description)
            template_id = created["LaunchTemplateId"]
    else:
        template_id = template["LaunchTemplateId"]
        default_version = int(template["DefaultVersionNumber"])
        latest_version = int(template["LatestVersionNumber"])
        versions = _ec2.describe_launch_template_versions(ec2, template_id, [str(default_version)])
        current = launch_data(versions[0].get("LaunchTemplateData") if versions else {})
        live_image = current.get("ImageId", "")
        if params.get("keep_image") and live_image and live_image != wanted["ImageId"]:
            pending_image, wanted = wanted["ImageId"], {**wanted, "ImageId": live_image}
        differs = differing_keys(current, wanted)
        if differs:
            latest_version += 1
            actions.append(f"create version {latest_version} ({', '.join(differs)}) and make it the default (was {default_version})")
            if not check_mode:
                made = _ec2.create_launch_template_version(ec2, template_id, None, wanted, description)
                latest_version = int(made["VersionNumber"])
                _ec2.set_default_launch_template_version(ec2, template_id, str(latest_version))
            default_version = latest_version
        current_tags = {t["Key"]: t["Value"] for t in template.get("Tags") or []}
        tag_plan = _tags.plan(current_tags, tags, bool(params.get("purge_tags", True)))
        if tag_plan.changed:
            actions.append("update_tags")
            if not check_mode:
                if tag_plan.to_set:
                    _ec2.create_tags(ec2, template_id, tag_plan.to_set)
                if tag_plan.to_remove:
                    _ec2.delete_tags(ec2, template_id, tag_plan.to_remove)

    spec = {"LaunchTemplateName": name, "Version": str(default_version)}
    return {
        "changed": bool(actions),
        "actions": actions,
        "template_id": template_id,
        "template_name": name,
        "default_version": default_version,
        "image_id": wanted["ImageId"],
        "pending_image_id": pending_image,
        "latest_version": latest_version,
        "launch_template_data": wanted,
        "mixed_instances_policy": cs.autoscaling_group_option(s),
        "mixed_instances_policy_aws": cs.mixed_instances_policy(s, spec),
        "capacity": capacity_summary(params, described),
        "diff": {"before": current or {}, "after": wanted if actions else (current or {})},
    }
