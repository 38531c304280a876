# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""Can the standby colour's tasks be placed? Per-instance bin packing, plus what the Auto Scaling group can add.

A task that needs N GPUs needs ONE instance with N free GPUs and enough CPU and memory: summing free GPUs across
the cluster says nothing about that (8 instances with 1 free GPU each cannot take one 2-GPU task). Managed
scaling can only add instances up to the Auto Scaling group's max size, each with the launch template's instance
type. Everything here is pure; the runner reads the container instances, the group, its launch template and the
instance type, and calls `verdict()` before its first write.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The ECS agent registers a little less memory than the instance type's (the OS and the agent keep some); a new
# instance is counted at this share of its type's memory so the verdict never promises a task that cannot start.
NEW_INSTANCE_MEMORY_SHARE = 0.95


@dataclass(frozen=True)
class Resources:
    """GPUs, CPU units (1024 a vCPU) and memory in MiB: what a task needs or an instance has free."""

    gpus: int = 0
    cpu: int = 0
    memory: int = 0

    def fits(self, need: Resources) -> int:
        """How many tasks needing `need` fit in these resources (a resource the task does not need never limits)."""
        counts = [have // want for have, want in ((self.gpus, need.gpus), (self.cpu, need.cpu), (self.memory, need.memory)) if want > 0]
        return min(counts) if counts else 0

    def short_of(self, need: Resources) -> list[str]:
        """What one task lacks on these resources, e.g. ['GPU 1 free of 2 needed']."""
        return [
            f"{name} {have} free of {want} needed"
            for name, have, want in (("GPU", self.gpus, need.gpus), ("CPU", self.cpu, need.cpu), ("MEMORY", self.memory, need.memory))
            if want > have
        ]


@dataclass
class Headroom:
    """What the Auto Scaling group behind a managed-scaling capacity provider can still add."""

    group: str
    instance_type: str
    max_size: int
    current: int
    per_instance: Resources
    reserved: int | None = None  # instances the targeted capacity reservation still has free (None: no reservation)
    reservation: str = ""

    @property
    def instances(self) -> int:
        room = max(self.max_size - self.current, 0)
        return room if self.reserved is None else min(room, self.reserved)

    def describe(self, need: Resources) -> str:
        reserved = f", capacity reservation {self.reservation} has {self.reserved} free" if self.reserved is not None else ""
        return (
            f"Auto Scaling group {self.group} at {self.current} of max {self.max_size}{reserved} can add {self.instances} "
            f"{self.instance_type} ({self.per_instance.gpus} GPU each, {self.per_instance.fits(need)} task(s) each)"
        )


@dataclass
class Verdict:
    ok: bool
    needed: int
    on_registered: int
    on_new: int
    why: str
    per_instance: dict[str, int] = field(default_factory=dict)
    spare_instances: int = 0  # new instances the groups add for it

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


# ---------------------------------------------------------------- reading AWS shapes


def task_needs(task_definition: dict[str, Any]) -> Resources:
    """What one task of this task definition reserves: its GPUs, and task-level CPU/memory or the containers' sum.

    A container reserves its memoryReservation (the soft limit) when it has one, else its memory (the hard limit):
    ECS places by the reservation, and the hard limit may exceed what the instance has."""
    containers = task_definition.get("containerDefinitions") or []
    gpus = sum(int(r.get("value", 0)) for c in containers for r in c.get("resourceRequirements") or [] if r.get("type") == "GPU")
    cpu = int(task_definition.get("cpu") or 0) or sum(int(c.get("cpu") or 0) for c in containers)
    memory = int(task_definition.get("memory") or 0) or sum(int(c.get("memoryReservation") or c.get("memory") or 0) for c in containers)
    return Resources(gpus, cpu, memory)


def instance_free(container_instance: dict[str, Any]) -> Resources:
    """The resources no task has reserved on one container instance (remainingResources)."""
    free = {"GPU": 0, "CPU": 0, "MEMORY": 0}
    for resource in container_instance.get("remainingResources") or []:
        name = resource.get("name")
        if name == "GPU":
            free[name] = len(resource.get("stringSetValue") or []) or int(resource.get("integerValue") or 0)
        elif name in free:
            free[name] = int(resource.get("integerValue") or 0)
    return Resources(free["GPU"], free["CPU"], free["MEMORY"])


def usable_instances(container_instances: list[dict[str, Any]]) -> dict[str, Resources]:
    """Free resources of each ACTIVE instance whose agent is connected, by instance id (or ARN)."""
    return {
        ci.get("ec2InstanceId") or ci.get("containerInstanceArn", f"instance-{i}"): instance_free(ci)
        for i, ci in enumerate(container_instances)
        if ci.get("status", "ACTIVE") == "ACTIVE" and ci.get("agentConnected", True)
    }


def instance_type_resources(instance_type: dict[str, Any]) -> Resources:
    """What ECS can offer tasks on a new instance of this type (describe_instance_types entry)."""
    gpus = sum(int(g.get("Count", 0)) for g in (instance_type.get("GpuInfo") or {}).get("Gpus") or [])
    vcpus = int((instance_type.get("VCpuInfo") or {}).get("DefaultVCpus") or 0)
    memory = int((instance_type.get("MemoryInfo") or {}).get("SizeInMiB") or 0)
    return Resources(gpus, vcpus * 1024, int(memory * NEW_INSTANCE_MEMORY_SHARE))


def group_launch_template(group: dict[str, Any]) -> tuple[dict[str, str], list[str]]:
    """(launch template spec {LaunchTemplateId|LaunchTemplateName, Version}, override instance types) of a group."""
    mixed = group.get("MixedInstancesPolicy") or {}
    spec = group.get("LaunchTemplate") or (mixed.get("LaunchTemplate") or {}).get("LaunchTemplateSpecification") or {}
    overrides = [o["InstanceType"] for o in (mixed.get("LaunchTemplate") or {}).get("Overrides") or [] if o.get("InstanceType")]
    return {k: v for k, v in spec.items() if k in ("LaunchTemplateId", "LaunchTemplateName", "Version")}, overrides


def group_current_size(group: dict[str, Any]) -> int:
    """Instances the group has or is about to have (its desired capacity, or more while instances are leaving)."""
    return max(int(group.get("DesiredCapacity") or 0), len(group.get("Instances") or []))


# ---------------------------------------------------------------- the verdict


def place(need: Resources, count: int, instances: dict[str, Resources]) -> dict[str, int]:
    """Tasks placed on each registered instance, fullest fit first, until `count` are placed."""
    placed: dict[str, int] = {}
    left = count
    for name, free in sorted(instances.items(), key=lambda item: -item[1].fits(need)):
        take = min(free.fits(need), left)
        if take:
            placed[name] = take
            left -= take
    return placed


def verdict(need: Resources, count: int, instances: dict[str, Resources], headroom: list[Headroom], cluster: str) -> Verdict:
    """Can `count` tasks needing `need` each be placed on the registered instances plus what the groups can add?"""
    if count <= 0:
        return Verdict(True, 0, 0, 0, "the standby needs no tasks beyond those it already runs")
    placed = place(need, count, instances)
    on_registered = sum(placed.values())
    left = count - on_registered
    on_new = 0
    for room in headroom:
        on_new += min(room.instances * room.per_instance.fits(need), left - on_new)
    task = f"{count} task(s) of {need.gpus} GPU, {need.cpu} CPU units, {need.memory} MiB"
    registered = f"the {len(instances)} registered instance(s) take {on_registered}"
    groups = "; ".join(r.describe(need) for r in headroom)
    if on_registered + on_new >= count:
        return Verdict(True, count, on_registered, count - on_registered, f"{task}: {registered}" + (f"; {groups}" if left else ""), placed)
    shortest = _closest_instance(need, instances)
    fixes = []
    for room in (r for r in headroom if r.per_instance.fits(need) == 0):
        fixes.append(
            f"one {room.instance_type} of Auto Scaling group {room.group} cannot hold one task "
            f"({', '.join(room.per_instance.short_of(need))}): lower the task's {short_names(room.per_instance, need)} "
            "or use a larger instance type in its launch template"
        )
    for room in headroom:
        per = room.per_instance.fits(need)
        if per:
            extra = -(-(count - on_registered - on_new) // per)  # ceil
            fixes.append(f"raise the max size of Auto Scaling group {room.group} to at least {room.max_size + extra}")
    if not headroom:
        fixes.append("attach a capacity provider with managed scaling, or register more GPU container instances")
    fixes.append(f"or lower desired_count to {on_registered + on_new}")
    why = (
        f"cluster {cluster} cannot place the standby colour: {task} while the live colour keeps its own; {registered}"
        + (f" (closest: {shortest})" if shortest else "")
        + (f"; {groups}" if groups else "; no capacity provider with managed scaling")
        + f": {count - on_registered - on_new} cannot be placed. Fix: "
        + "; ".join(fixes)
    )
    return Verdict(False, count, on_registered, on_new, why, placed)


def new_instances(need: Resources, count: int, headroom: list[Headroom]) -> int:
    """New instances the groups launch to hold `count` tasks (the first group with room first)."""
    launched, left = 0, count
    for room in headroom:
        per = room.per_instance.fits(need)
        if not per or left <= 0:
            continue
        take = min(room.instances, -(-left // per))
        launched += take
        left -= take * per
    return launched


def batch_verdict(
    need: Resources, count: int, batch_size: int, full_count: int, instances: dict[str, Resources], headroom: list[Headroom], cluster: str
) -> Verdict:
    """Can the next batch of a capacity-paced cutover - `count` tasks not yet running - be placed? The old colour's
    shrink frees the room of the batches after it, so one batch is what must fit."""
    task = f"{count} task(s) of {need.gpus} GPU, {need.cpu} CPU units, {need.memory} MiB"
    if count <= 0:
        return Verdict(True, 0, 0, 0, f"capacity-paced, batch of {batch_size}: the next batch needs no task beyond those running")
    placed = place(need, count, instances)
    on_registered = sum(placed.values())
    on_new = 0
    for room in headroom:
        on_new += min(room.instances * room.per_instance.fits(need), count - on_registered - on_new)
    free_gpus = sum(free.gpus for free in instances.values())
    registered = f"{len(instances)} registered instance(s) with {free_gpus} free GPU(s) take {on_registered}"
    groups = "; ".join(r.describe(need) for r in headroom) or "no capacity provider with managed scaling"
    if on_registered + on_new >= count:
        spare = new_instances(need, count - on_registered, headroom)
        why = f"capacity-paced, batch of {batch_size} ({task}): {registered}" + (f"; {groups}: {spare} new instance(s)" if spare else "")
        return Verdict(True, count, on_registered, on_new, why, placed, spare)
    short = count - on_registered - on_new
    fixes = []
    for room in headroom:
        per = room.per_instance.fits(need)
        if per:
            grow = -(-short // per)
            if room.reserved is not None and room.reserved < grow:
                fixes.append(f"free {grow - room.reserved} instance(s) in capacity reservation {room.reservation} (or enlarge it)")
            fixes.append(f"raise the max size of Auto Scaling group {room.group} by {grow} to {room.max_size + grow}")
    if not headroom:
        fixes.append("register one more GPU container instance, or attach a capacity provider with managed scaling")
    if on_registered + on_new:
        fixes.append(f"or a smaller batch_size: {on_registered + on_new} fit(s) now")
    blue_green_short = max(full_count - on_registered - on_new, 0)
    why = (
        f"cluster {cluster} cannot place one capacity-paced batch: {task} (batch_size {batch_size}, full count {full_count}); "
        f"{registered}; {groups}: {short} cannot be placed. Fix: "
        + "; ".join(fixes)
        + f". (mode blue_green would need room for {full_count} task(s) beside the live colour: {blue_green_short} more)"
    )
    return Verdict(False, count, on_registered, on_new, why, placed)


def short_names(have: Resources, need: Resources) -> str:
    """What a task asks beyond these resources, as the task definition's settings: e.g. 'memory reservation'."""
    names = {"GPU": "GPU count", "CPU": "CPU units", "MEMORY": "memory reservation (memory_reservation, MiB)"}
    return " and ".join(names[item.split(" ", 1)[0]] for item in have.short_of(need))


def _closest_instance(need: Resources, instances: dict[str, Resources]) -> str:
    lacking = [(name, free.short_of(need)) for name, free in instances.items() if free.short_of(need)]
    if not lacking:
        return ""
    name, short = min(lacking, key=lambda item: len(item[1]))
    return f"{name} has {', '.join(short)}"
