# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""A gated AMI rollout, decided: pure functions from what AWS shows to what to do next.

The rollout (`runner.py`) brings a new AMI to an ECS GPU fleet in four stages: a new launch template version (the
version the group launches, with only the image changed), one canary instance launched from it outside the Auto
Scaling group (`canary.py`: it joins the cluster with its GPUs and healthy, and a Triton task placed on it answers a
smoke inference through the test route), an instance refresh of the group towards the new version with checkpoints
(`refresh.py`: ECS managed draining sets each leaving container instance DRAINING before termination; the fleet's
alarms and the new instances are checked at every checkpoint, and AWS rolls back on the alarms too), and the new
version made the template's default. A failure at any stage rolls the refresh back, keeps the previous version as
the group's and the default, and deletes the new version. Nothing here calls AWS.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import InputError

PlanError = InputError  # bad input or an AWS state the rollout cannot start from; raised before any write

AMI_ID = re.compile(r"^ami-[0-9a-f]{8,17}$")
# DescribeInstanceRefreshes statuses: running (one refresh at a time per group), and the ends of one.
REFRESH_RUNNING = frozenset({"Pending", "InProgress", "Cancelling", "RollbackInProgress", "Baking"})
REFRESH_FAILED = frozenset({"Failed", "Cancelled", "RollbackSuccessful", "RollbackFailed"})
CANARY_TAG = "inferops:ami-canary"  # value: the Auto Scaling group's name
STARTED_BY = "inferops-ami-canary"  # the canary task's startedBy
DRAINING_MANAGED = "ENABLED"


class RolloutFailed(Exception):
    """A gate failed after the first write: the rollout reverts, then the module fails with this reason."""


@dataclass
class Fleet:
    """What AWS shows of the fleet: the group, its launch template's versions, the newest refresh, the providers."""

    group_name: str
    group: dict[str, Any]
    template_id: str = ""
    template_name: str = ""
    group_version: str = ""  # as the group names it: a number, $Default or $Latest
    versions: list[dict[str, Any]] = field(default_factory=list)  # every version of the template
    refresh: dict[str, Any] | None = None  # the newest instance refresh
    providers: list[dict[str, Any]] = field(default_factory=list)  # capacity providers of this group

    def version(self, number: str | int) -> dict[str, Any] | None:
        return next((v for v in self.versions if str(v.get("VersionNumber")) == str(number)), None)

    @property
    def default_version(self) -> str:
        found = next((v for v in self.versions if v.get("DefaultVersion")), None)
        return str(found["VersionNumber"]) if found else ""


@dataclass
class Plan:
    action: str  # noop | rollout | resume
    base_version: str = ""
    new_version: str = ""  # "" until created
    reason: str = ""
    steps: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- input


def validate_params(params: dict[str, Any]) -> list[str]:
    """Every problem with the module's input, each naming the option, the value and the fix."""
    errors: list[str] = []
    if not AMI_ID.match(params.get("ami_id") or ""):
        errors.append(f"ami_id is {params.get('ami_id')!r}: give the new AMI's id (ami- and 8 or 17 hex digits), e.g. packer's manifest")
    refresh = params.get("refresh") or {}
    points = refresh.get("checkpoints") or []
    if not points or points[-1] != 100 or any(not 1 <= p <= 100 for p in points) or any(b <= a for a, b in zip(points, points[1:])):
        errors.append(
            f"refresh.checkpoints is {points}: percentages of the group that increase strictly and end at 100, e.g. [25, 50, 100]"
        )
    low, high = refresh.get("min_healthy_percentage", 90), refresh.get("max_healthy_percentage", 100)
    if not 0 <= low <= 100:
        errors.append(f"refresh.min_healthy_percentage is {low}: 0-100")
    if not 100 <= high <= 200 or high - low > 100 or (low == 100 and high == 100):
        errors.append(
            f"refresh.max_healthy_percentage is {high} with min_healthy_percentage {low}: 100-200, at most 100 above the minimum, "
            "and above 100 when the minimum is 100 (launch before terminate)"
        )
    for group in ("canary", "refresh", "gates"):
        for key, value in (params.get(group) or {}).items():
            if key.endswith("_s") and value is not None and value < 0:
                errors.append(f"{group}.{key} is {value}: it is a duration in seconds and cannot be negative")
    if params.get("test_route_url") and not re.match(r"^https?://", params["test_route_url"]):
        errors.append(f"test_route_url is {params['test_route_url']!r}: the http(s):// URL of the test listener, as bluegreen takes it")
    return errors


# ---------------------------------------------------------------- the fleet's launch template


def group_version_problems(fleet: Fleet) -> list[str]:
    """Why the group cannot be rolled (a refresh's rollback needs a numbered version; the canary needs a template)."""
    if not fleet.template_id:
        return [f"Auto Scaling group {fleet.group_name} launches no launch template (a launch configuration or a mixed-instances policy)"]
    if not fleet.group_version.isdigit():
        return [
            f"Auto Scaling group {fleet.group_name} launches version {fleet.group_version} of {fleet.template_name}: a rollout needs a "
            "numbered version (AWS rolls an instance refresh back only to one, and a new $Latest would reach scale-outs before "
            "the canary). Run playbooks/infrastructure.yml: fleet_capacity pins the group to the template's default version"
        ]
    if fleet.version(fleet.group_version) is None:
        return [
            f"Auto Scaling group {fleet.group_name} launches version {fleet.group_version} of {fleet.template_name}, which does not exist"
        ]
    return []


def image_of(version: dict[str, Any] | None) -> str:
    return ((version or {}).get("LaunchTemplateData") or {}).get("ImageId", "")


def rolled_data(base: dict[str, Any], ami_id: str) -> dict[str, Any]:
    """The launch template data of the new version: the base version's with only the image changed."""
    return {**(base.get("LaunchTemplateData") or {}), "ImageId": ami_id}


def matching_version(fleet: Fleet, base_version: str, ami_id: str) -> str:
    """An existing version newer than the base that is the base with `ami_id` (a run that stopped after creating it)."""
    base = fleet.version(base_version) or {}
    wanted = rolled_data(base, ami_id)
    for version in sorted(fleet.versions, key=lambda v: int(v["VersionNumber"]), reverse=True):
        if int(version["VersionNumber"]) > int(base_version) and version.get("LaunchTemplateData") == wanted:
            return str(version["VersionNumber"])
    return ""


def outdated_instances(group: dict[str, Any], version: str) -> list[str]:
    """Instances of the group not launched from `version` of its template."""
    return sorted(
        i["InstanceId"]
        for i in group.get("Instances") or []
        if str((i.get("LaunchTemplate") or {}).get("Version", "")) != version and not i.get("LifecycleState", "").startswith("Terminat")
    )


def refresh_version(refresh: dict[str, Any] | None) -> str:
    return str((((refresh or {}).get("DesiredConfiguration") or {}).get("LaunchTemplate") or {}).get("Version", ""))


def draining_problems(providers: list[dict[str, Any]], group_name: str) -> list[str]:
    """The instance refresh terminates instances that run tasks: ECS must drain them first (managed draining)."""
    if not providers:
        return [
            f"no ECS capacity provider uses Auto Scaling group {group_name}: its instances would be terminated without a drain. "
            "Run playbooks/infrastructure.yml (fleet_capacity creates the provider with managed draining)"
        ]
    off = [p["name"] for p in providers if (p.get("autoScalingGroupProvider") or {}).get("managedDraining") != DRAINING_MANAGED]
    if off:
        return [
            f"capacity provider {', '.join(off)} of {group_name} has managed draining off: the refresh would terminate container instances "
            "still running tasks. Set fleet_capacity_managed_draining: true and run playbooks/infrastructure.yml"
        ]
    return []


def decide(fleet: Fleet, params: dict[str, Any]) -> Plan:
    """What the rollout does: nothing (the group already runs the AMI everywhere), resume a refresh this rollout
    started, or roll out from the group's version. PlanError names what blocks it."""
    ami = params["ami_id"]
    problems = group_version_problems(fleet)
    if problems:
        raise PlanError(problems)
    refresh = fleet.refresh or {}
    running = refresh.get("Status") in REFRESH_RUNNING
    if running:
        target = fleet.version(refresh_version(refresh))
        if target is None or image_of(target) != ami:
            raise PlanError(
                f"instance refresh {refresh.get('InstanceRefreshId')} of {fleet.group_name} is {refresh.get('Status')} towards "
                f"{describe_target(refresh, target)}: one change at a time. Wait for it, or cancel it (aws autoscaling cancel-instance-refresh)"
            )
        if refresh.get("Status") in ("Cancelling", "RollbackInProgress"):
            raise PlanError(
                f"instance refresh {refresh.get('InstanceRefreshId')} of {fleet.group_name} is {refresh['Status']}: run again once it ended"
            )
        base = next((v for v in sorted(fleet.versions, key=lambda v: -int(v["VersionNumber"])) if image_of(v) != ami), None)
        plan = Plan(
            "resume",
            fleet.group_version if image_of(fleet.version(fleet.group_version)) != ami else str((base or {}).get("VersionNumber", "")),
            refresh_version(refresh),
            f"instance refresh {refresh.get('InstanceRefreshId')} towards {ami} is {refresh['Status']}: watching it",
        )
        plan.steps = refresh_steps(fleet, plan, params)
        return plan
    current = fleet.version(fleet.group_version)
    if image_of(current) == ami:
        outdated = outdated_instances(fleet.group, fleet.group_version)
        if not outdated and fleet.default_version == fleet.group_version:
            return Plan(
                "noop",
                fleet.group_version,
                fleet.group_version,
                f"{fleet.group_name} runs {ami} (version {fleet.group_version}) on every instance",
            )
        if not outdated:
            plan = Plan(
                "rollout",
                fleet.group_version,
                fleet.group_version,
                f"{fleet.group_name} runs {ami}; version {fleet.group_version} becomes the default",
            )
            plan.steps = [f"make version {fleet.group_version} the default of launch template {fleet.template_name}"]
            return plan
        raise PlanError(
            f"{fleet.group_name} launches {ami} (version {fleet.group_version}) but {', '.join(outdated)} run older versions and no refresh "
            "is running: the last rollout was interrupted after the refresh. Start an instance refresh of the group (aws autoscaling "
            "start-instance-refresh) or roll out another AMI"
        )
    problems = draining_problems(fleet.providers, fleet.group_name)
    if problems:
        raise PlanError(problems)
    plan = Plan(
        "rollout",
        fleet.group_version,
        matching_version(fleet, fleet.group_version, ami),
        f"{fleet.group_name} launches {image_of(current)} (version {fleet.group_version}): rolling out {ami}",
    )
    plan.steps = rollout_steps(fleet, plan, params)
    return plan


def describe_target(refresh: dict[str, Any], target: dict[str, Any] | None) -> str:
    version = refresh_version(refresh) or "the group's configuration"
    return f"version {version} ({image_of(target) or 'another configuration'})"


# ---------------------------------------------------------------- what check mode shows


def rollout_steps(fleet: Fleet, plan: Plan, params: dict[str, Any]) -> list[str]:
    new = plan.new_version or f"{max((int(v['VersionNumber']) for v in fleet.versions), default=0) + 1} (new)"
    canary, gates = params.get("canary") or {}, params.get("gates") or {}
    steps = []
    if not plan.new_version:
        steps.append(
            f"create launch template {fleet.template_name} version {new} from version {plan.base_version}: image {params['ami_id']} "
            "(not the default)"
        )
    steps.append(
        f"launch one canary instance from version {new} (tag {CANARY_TAG}={fleet.group_name}), outside the group; within "
        f"{canary.get('join_timeout_s', 900)} s it joins cluster {params['cluster']} ACTIVE with its GPUs and no impaired health"
    )
    if params.get("test_route_url"):
        smoke = " and a smoke inference" if gates.get("smoke") else ""
        steps.append(
            f"run one task of the live colour's task definition on the canary, register it in the standby colour's target group "
            f"(the test listener's), and check Triton ready, the models{smoke} through {params['test_route_url']}"
        )
    steps.append(f"hold the canary {canary.get('bake_s', 300)} s (it stays ACTIVE and healthy), then drain it through ECS and terminate it")
    steps += refresh_steps(fleet, Plan("rollout", plan.base_version, new), params)
    steps.append(
        f"on any failure: roll the refresh back (or never start it), version {plan.base_version} stays the group's and the default, "
        f"version {new} is deleted, the canary is drained and terminated"
    )
    return steps


def refresh_steps(fleet: Fleet, plan: Plan, params: dict[str, Any]) -> list[str]:
    refresh = params.get("refresh") or {}
    alarms = params.get("alarm_names") or []
    return [
        f"instance refresh of {fleet.group_name} to version {plan.new_version}: checkpoints {refresh.get('checkpoints')} each held "
        f"{refresh.get('checkpoint_delay_s', 600)} s, healthy {refresh.get('min_healthy_percentage', 90)}-"
        f"{refresh.get('max_healthy_percentage', 100)} %, skip matching, scale-in protected instances refreshed, auto rollback"
        + (f" on alarms {', '.join(alarms)}" if alarms else "")
        + "; ECS managed draining sets each leaving container instance DRAINING before termination",
        "at every checkpoint: no alarm in ALARM, every new instance joined the cluster with its GPUs and is Healthy; else roll back",
        f"make version {plan.new_version} the default of launch template {fleet.template_name}",
    ]


# ---------------------------------------------------------------- verdicts on instances


def expected_gpus(instance_type: dict[str, Any] | None) -> int | None:
    """GPUs of an instance type as EC2 describes it (GpuInfo), None when it says nothing."""
    gpus = ((instance_type or {}).get("GpuInfo") or {}).get("Gpus")
    return sum(int(g.get("Count", 0)) for g in gpus) if gpus else None


def gpu_count(container_instance: dict[str, Any]) -> int:
    """GPUs the ECS agent registered (resource GPU, one id per device)."""
    for resource in container_instance.get("registeredResources") or []:
        if resource.get("name") == "GPU":
            return len(resource.get("stringSetValue") or [])
    return 0


def health_problems(container_instance: dict[str, Any]) -> list[str]:
    """The ECS agent's health report of the instance (ACCELERATED_COMPUTE: the GPUs, from DCGM) when it is IMPAIRED."""
    health = container_instance.get("healthStatus") or {}
    impaired = [f"{d.get('type')} {d.get('status')}" for d in health.get("details") or [] if d.get("status") == "IMPAIRED"]
    if health.get("overallStatus") == "IMPAIRED" or impaired:
        return [f"the ECS agent reports it IMPAIRED ({', '.join(impaired) or 'overall'})"]
    return []


def instance_problems(instance_id: str, container_instance: dict[str, Any] | None, gpus: int | None) -> list[str]:
    """Why an instance of the new AMI is not fit to serve: not registered, not ACTIVE (gpu_health drains a failing
    instance), agent disconnected, fewer GPUs than its type has, or impaired health."""
    if container_instance is None:
        return [f"{instance_id} has not joined the cluster"]
    problems = []
    if container_instance.get("status") != "ACTIVE":
        problems.append(
            f"{instance_id} is {container_instance.get('status')} in the cluster (gpu_health drains an instance whose GPUs fail)"
        )
    if not container_instance.get("agentConnected", False):
        problems.append(f"{instance_id}'s ECS agent is disconnected")
    if gpus is not None and gpu_count(container_instance) != gpus:
        problems.append(f"{instance_id} registered {gpu_count(container_instance)} GPUs, its instance type has {gpus}")
    return problems + [f"{instance_id}: {p}" for p in health_problems(container_instance)]


def task_address(task: dict[str, Any]) -> str:
    """The awsvpc address of a task (its ENI attachment's privateIPv4Address), "" until attached."""
    for attachment in task.get("attachments") or []:
        for detail in attachment.get("details") or []:
            if detail.get("name") == "privateIPv4Address":
                return detail.get("value") or ""
    return ""


def container_port(task_definition: dict[str, Any], name: str = "triton") -> int:
    """Triton's HTTP port in the task definition (the first port mapping of the container `name`, else of the first)."""
    containers = task_definition.get("containerDefinitions") or []
    chosen = next((c for c in containers if c.get("name") == name), containers[0] if containers else {})
    mappings = chosen.get("portMappings") or []
    return int(mappings[0]["containerPort"]) if mappings else 8000


# ---------------------------------------------------------------- verdicts on the refresh


def checkpoint_reached(refresh: dict[str, Any], checkpoints: list[int], passed: list[int]) -> int | None:
    """The first checkpoint not yet gated that the refresh has reached (its PercentageComplete), or None."""
    done = int(refresh.get("PercentageComplete") or 0)
    return next((p for p in checkpoints if p not in passed and done >= p), None)


def fleet_problems(group: dict[str, Any], version: str, container_instances: dict[str, dict[str, Any]], gpus: int | None) -> list[str]:
    """Every InService instance of the new version joined with its GPUs and is Healthy in its group."""
    problems = []
    for instance in group.get("Instances") or []:
        if str((instance.get("LaunchTemplate") or {}).get("Version", "")) != version or instance.get("LifecycleState") != "InService":
            continue
        if instance.get("HealthStatus") != "Healthy":
            problems.append(
                f"{instance['InstanceId']} is {instance.get('HealthStatus')} in its group (gpu_health or the model agent marked it)"
            )
            continue
        problems += instance_problems(instance["InstanceId"], container_instances.get(instance["InstanceId"]), gpus)
    return problems


def preferences(params: dict[str, Any]) -> dict[str, Any]:
    """StartInstanceRefresh's Preferences."""
    refresh = params["refresh"]
    prefs: dict[str, Any] = {
        "MinHealthyPercentage": refresh["min_healthy_percentage"],
        "MaxHealthyPercentage": refresh["max_healthy_percentage"],
        "InstanceWarmup": refresh["instance_warmup_s"],
        "CheckpointPercentages": list(refresh["checkpoints"]),
        "CheckpointDelay": refresh["checkpoint_delay_s"],
        "SkipMatching": True,
        "AutoRollback": True,
        "ScaleInProtectedInstances": "Refresh",
        "StandbyInstances": "Terminate",
    }
    if params.get("alarm_names"):
        prefs["AlarmSpecification"] = {"Alarms": list(params["alarm_names"])}
    return prefs
