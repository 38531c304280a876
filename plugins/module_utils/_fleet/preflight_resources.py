# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The preflight's read of what the inventory names, before any write: every id it gives exists in the account and
region (VPC, subnets, security groups, load balancer, certificates, AMI, SNS topics, model bucket, ECR repository),
and one task fits one instance of each of the fleet's instance types (GPUs, CPU, the memory ECS reserves;
DescribeInstanceTypes), the types are of one GPU shape, and a targeted capacity reservation or Capacity Block holds
them (DescribeCapacityReservations; `capacity_sources.py`). Kept apart from preflight.py's inventory checks; each
problem names the variable, its value and the fix."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import acm as _acm
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import ec2 as _ec2
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import ecr as _ecr
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import elbv2 as _elbv2
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import s3 as _s3
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import sns as _sns
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import BotoCoreError, ClientError, error_code
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import placement
from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet import capacity_sources as cs

# kind -> (what it is, the AWS service a client is needed for, how a team makes it)
KINDS: dict[str, tuple[str, str, str]] = {
    "vpc": ("VPC", "ec2", "give the id of the VPC the fleet runs in (aws ec2 describe-vpcs)"),
    "subnet": ("subnet", "ec2", "give private subnets of that VPC (aws ec2 describe-subnets)"),
    "security_group": ("security group", "ec2", "create it (docs/infrastructure.md, Network) or give its id (sg-...)"),
    "load_balancer": ("load balancer", "elbv2", "give the ARN of the existing ALB, or let role fleet_load_balancing create one"),
    "certificate": ("ACM certificate", "acm", "request or import it in ACM in this region, or give its ARN"),
    "image": ("AMI", "ec2", "run `packer build packer/` in this region, or give an AMI id this account can launch"),
    "topic": ("SNS topic", "sns", "create it, or give [] for no notification"),
    "bucket": ("S3 bucket", "s3", "create the model bucket (a bucket name, no s3://)"),
    "ecr_repository": ("ECR repository", "ecr", "create it (aws ecr create-repository), or give the repository the image is pushed to"),
}
_BATCHED = {"vpc": _ec2.existing_vpcs, "image": _ec2.existing_images}


# ---------------------------------------------------------------- pure


def expand(resources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per id: a list of ids becomes `<variable>[i]` entries; empty ids are left out."""
    found = []
    for resource in resources:
        ids = resource.get("id")
        if isinstance(ids, list):
            found += [{**resource, "variable": f"{resource['variable']}[{i}]", "id": rid} for i, rid in enumerate(ids) if rid]
        elif ids:
            found.append(resource)
    return found


def missing_problem(resource: dict[str, Any], account: str, region: str) -> str:
    what, _service, fix = KINDS[resource["kind"]]
    return f"{resource['variable']} = {resource['id']!r}: no such {what} in account {account}, region {region}: {fix}"


def fit_problems(spec: dict[str, Any], described: dict[str, Any] | None, region: str) -> list[str]:
    """Whether one task (GPUs, CPU units, the memory ECS reserves for it) fits one instance of the instance type.

    spec: {instance_type, variable (of the instance type), gpus, cpu, memory (MiB reserved: each container's
    memoryReservation, else its memory), memory_variable, sidecar_memory (MiB the sidecars reserve)}."""
    name, variable = spec["instance_type"], spec.get("variable") or "fleet_capacity_instance_type"
    if described is None:
        return [
            f"{variable} = {name!r} is no instance type of region {region}: give one the region offers (aws ec2 describe-instance-types)"
        ]
    offers = placement.instance_type_resources(described)
    ram = int((described.get("MemoryInfo") or {}).get("SizeInMiB") or 0)
    sidecars = int(spec.get("sidecar_memory") or 0)
    need = placement.Resources(int(spec.get("gpus") or 0), int(spec.get("cpu") or 0), int(spec.get("memory") or 0) + sidecars)
    problems = []
    if need.gpus > offers.gpus:
        problems.append(
            f"one task needs {need.gpus} GPU(s) but one {name} has {offers.gpus}: lower task_definition_gpu_count or pick an "
            f"instance type with {need.gpus} GPUs ({variable})"
        )
    if need.cpu > offers.cpu:
        problems.append(
            f"one task reserves {need.cpu} CPU units but one {name} offers {offers.cpu} ({offers.cpu // 1024} vCPUs): lower "
            f"task_definition_cpu or pick a larger instance type ({variable})"
        )
    if need.memory > offers.memory:
        memory_variable = spec.get("memory_variable") or "task_definition_memory_reservation"
        with_sidecars = f" with the sidecars' {sidecars} MiB" if sidecars else ""
        problems.append(
            f"{memory_variable} = {spec.get('memory')} MiB{with_sidecars} does not fit one {name}: it has {ram} MiB of RAM "
            f"(GPU memory does not count), about {offers.memory} MiB for tasks: lower {memory_variable} (ECS places a task "
            f"by its memory reservation) or pick a larger instance type ({variable})"
        )
    return problems


# ---------------------------------------------------------------- reads


def capacity_problems(ec2: Any, fit: dict[str, Any], region: str) -> list[str]:
    """The capacity settings together (capacity_sources), one task on one instance of every type the group may launch
    (so the smallest decides), one GPU shape across them, and the targeted reservation or block read back.

    fit: instance_fit's keys, plus instance_types (several; else [instance_type]), capacity_reservation_id,
    capacity_reservation_group_arn, capacity_block_id, spot, max_size (the Auto Scaling group's) and subnets (the
    group's: a reservation lives in one Availability Zone, and the group must be able to launch there)."""
    sources = cs.from_params({**fit, "instance_types": fit.get("instance_types") or [fit.get("instance_type")]})
    problems = cs.setting_problems(sources)
    several = len(sources.instance_types) > 1
    described = {t: _ec2.describe_instance_type(ec2, t) for t in sources.instance_types}
    for name, found in described.items():
        variable = "fleet_capacity_instance_types" if several else fit.get("variable")
        problems += fit_problems({**fit, "instance_type": name, "variable": variable}, found, region)
    problems += cs.shape_problems(sources.instance_types, {n: d for n, d in described.items() if d is not None}, region)
    if sources.reservation_id and not problems:
        reservation = _ec2.describe_capacity_reservation(ec2, sources.reservation_id)
        zones = [subnet["AvailabilityZone"] for subnet in _ec2.describe_subnets(ec2, list(fit.get("subnets") or [])).values()]
        problems += cs.reservation_problems(sources, reservation, int(fit.get("max_size") or 0), zones)
    return problems


def exists_reader(clients: Callable[[str], Any], resources: list[dict[str, Any]]) -> Callable[[dict[str, Any]], bool]:
    """A test per resource, reading each service once per kind where the API takes a list (VPCs, subnets, groups, AMIs)."""
    by_kind: dict[str, set[str]] = {}
    for resource in resources:
        by_kind.setdefault(resource["kind"], set()).add(resource["id"])
    found: dict[str, set[str]] = {}
    for kind, ids in by_kind.items():
        if kind in _BATCHED:
            found[kind] = _BATCHED[kind](clients("ec2"), sorted(ids))
        elif kind == "subnet":
            found[kind] = set(_ec2.describe_subnet_cidrs(clients("ec2"), sorted(ids)))
        elif kind == "security_group":
            found[kind] = set(_ec2.describe_security_groups(clients("ec2"), sorted(ids)))

    def exists(resource: dict[str, Any]) -> bool:
        kind, rid = resource["kind"], resource["id"]
        if kind in found:
            return rid in found[kind]
        if kind == "load_balancer":
            return _elbv2.describe_load_balancer(clients("elbv2"), rid) is not None
        if kind == "certificate":
            return _acm.describe_certificate(clients("acm"), rid) is not None
        if kind == "topic":
            return _sns.topic_exists(clients("sns"), rid)
        if kind == "bucket":
            return _s3.bucket_exists(clients("s3"), rid)
        return _ecr.repository_exists(clients("ecr"), rid)

    return exists


def preflight_report(
    clients: Callable[[str], Any], resources: list[dict[str, Any]], fit: dict[str, Any] | None, account: str, region: str
) -> dict[str, Any]:
    """{problems, checked}: every named resource that does not exist, and whether one task fits one instance.

    A resource's `id` may be a list (a variable holding several ids): each is read, named `<variable>[i]`."""
    resources = expand(resources)
    unknown = sorted({r["kind"] for r in resources} - set(KINDS))
    if unknown:
        return {"problems": [f"resources: unknown kind(s) {unknown}: use {sorted(KINDS)}"], "checked": []}
    problems: list[str] = []
    try:
        exists = exists_reader(clients, resources)
        problems += [missing_problem(r, account, region) for r in resources if not exists(r)]
        if fit and (fit.get("instance_type") or fit.get("instance_types")):
            problems += capacity_problems(clients("ec2"), fit, region)
    except (BotoCoreError, ClientError) as e:
        services = sorted({KINDS[r["kind"]][1] for r in resources} | ({"ec2"} if fit else set()))
        problems.append(
            f"cannot read what the inventory names ({error_code(e) or e}): the caller needs the read calls of docs/iam.md "
            f"(preflight) on {', '.join(services)}"
        )
    return {"problems": problems, "checked": [f"{r['variable']}={r['id']}" for r in resources]}
