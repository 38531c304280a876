# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""Where the fleet's GPU instances come from: instance types of one GPU shape, a capacity reservation, a Capacity
Block for ML, or Spot - checked, and rendered into the launch template and the Auto Scaling group as AWS takes them.

Pure: the module `fleet_launch_template` reads the instance types (DescribeInstanceTypes) and the preflight reads the
reservation (DescribeCapacityReservations), then call these. Problems name role fleet_capacity's variables, since the
role is how a fleet is given its settings.

AWS's rules these follow:
- A launch template's `CapacityReservationSpecification` takes one option at a time: a target (a reservation id, or a
  resource group of reservations), never a target and a preference together. An instance that targets a reservation
  by id launches only into it; one that targets a group falls back to On-Demand capacity when the group is full.
- A Capacity Block for ML is a reservation whose instances launch with `InstanceMarketOptions.MarketType`
  `capacity-block` and target the block's id; it holds one instance type, so the group launches that type only.
- Spot is a market, not a reservation: Spot instances cannot launch into a reservation or a block. In an Auto Scaling
  group with a mixed instances policy the Spot share is the policy's `InstancesDistribution` (the launch template must
  not request Spot itself), so Spot always goes through the policy, even for one instance type.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import placement

RESERVATION_ID = re.compile(r"^cr-[0-9a-f]{8,17}$")
RESOURCE_GROUP_ARN = re.compile(r"^arn:aws[a-z-]*:resource-groups:[a-z0-9-]+:[0-9]{12}:group/[A-Za-z0-9._-]{1,128}$")
SPOT_ALLOCATION_STRATEGIES = ("price-capacity-optimized", "capacity-optimized", "capacity-optimized-prioritized", "lowest-price")
# A fractional GPU (g6f, gr6f) appears only under NVIDIA's GRID driver; the GPU AMI carries the datacenter driver.
FRACTIONAL_GPU = re.compile(r"^gr?6f[.]")
# States of a reservation (or block) that will never hold an instance again.
DEAD_RESERVATION_STATES = ("expired", "cancelled", "failed", "payment-failed", "unsupported")
# The ECS agent's Spot draining: on the two-minute interruption notice it sets its container instance DRAINING, so
# the services start replacement tasks elsewhere and the load balancer deregisters the targets before the reclaim.
SPOT_DRAINING = {"ECS_ENABLE_SPOT_INSTANCE_DRAINING": "true"}


@dataclass(frozen=True)
class Sources:
    """The capacity settings of one fleet (role fleet_capacity's variables without their prefix)."""

    instance_types: list[str]
    capacity_reservation_id: str = ""
    capacity_reservation_group_arn: str = ""
    capacity_block_id: str = ""
    spot: bool = False
    spot_allocation_strategy: str = "price-capacity-optimized"
    on_demand_base_capacity: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def mixed(self) -> bool:
        """Whether the group needs a mixed instances policy: several types, or Spot (only the policy requests it)."""
        return len(self.instance_types) > 1 or self.spot

    @property
    def reservation_id(self) -> str:
        """The one reservation the instances launch into, if any (a Capacity Block is one)."""
        return self.capacity_block_id or self.capacity_reservation_id

    @property
    def kind(self) -> str:
        if self.capacity_block_id:
            return "capacity-block"
        if self.capacity_reservation_id:
            return "capacity-reservation"
        if self.capacity_reservation_group_arn:
            return "capacity-reservation-group"
        return "spot" if self.spot else "on-demand"


def from_params(params: dict[str, Any]) -> Sources:
    """Sources from a module's options (None and "" mean not given)."""
    return Sources(
        instance_types=[t for t in params.get("instance_types") or [] if t],
        capacity_reservation_id=params.get("capacity_reservation_id") or "",
        capacity_reservation_group_arn=params.get("capacity_reservation_group_arn") or "",
        capacity_block_id=params.get("capacity_block_id") or "",
        spot=bool(params.get("spot")),
        spot_allocation_strategy=params.get("spot_allocation_strategy") or "price-capacity-optimized",
        on_demand_base_capacity=int(params.get("on_demand_base_capacity") or 0),
    )


# ---------------------------------------------------------------- the settings alone


def setting_problems(s: Sources) -> list[str]:
    """What cannot work in these settings, each naming the variables, their values and the fix. No AWS is read."""
    problems: list[str] = []
    types = s.instance_types
    if not types:
        problems.append("fleet_capacity_instance_types is []: give the GPU instance type(s) of the fleet")
    duplicates = sorted({t for t in types if types.count(t) > 1})
    if duplicates:
        problems.append(f"fleet_capacity_instance_types names {duplicates} more than once: name each type once")
    for name in (t for t in types if FRACTIONAL_GPU.match(t)):
        problems.append(
            f"fleet_capacity_instance_types has {name}: a fractional NVIDIA GPU (g6f, gr6f) that only NVIDIA's GRID driver "
            "drives, and the GPU AMI carries the datacenter driver, so its GPU would never appear (the instance's GPU count "
            "check refuses it at boot): use a whole-GPU type (g6 for L4, g6e for L40S)"
        )
    if s.capacity_reservation_id and not RESERVATION_ID.match(s.capacity_reservation_id):
        problems.append(
            f"fleet_capacity_capacity_reservation_id is {s.capacity_reservation_id!r}: an On-Demand Capacity Reservation id "
            "(cr- and 8 or 17 hex digits; aws ec2 describe-capacity-reservations)"
        )
    if s.capacity_reservation_group_arn and not RESOURCE_GROUP_ARN.match(s.capacity_reservation_group_arn):
        problems.append(
            f"fleet_capacity_capacity_reservation_group_arn is {s.capacity_reservation_group_arn!r}: the ARN of a resource "
            "group of capacity reservations (arn:aws:resource-groups:<region>:<account>:group/<name>)"
        )
    if s.capacity_block_id and not RESERVATION_ID.match(s.capacity_block_id):
        problems.append(
            f"fleet_capacity_capacity_block_id is {s.capacity_block_id!r}: the reservation id of a Capacity Block for ML "
            "(cr-...; aws ec2 describe-capacity-reservations --filters Name=reservation-type,Values=capacity-block)"
        )
    if s.capacity_reservation_id and s.capacity_reservation_group_arn:
        problems.append(
            f"fleet_capacity_capacity_reservation_id ({s.capacity_reservation_id}) and "
            f"fleet_capacity_capacity_reservation_group_arn ({s.capacity_reservation_group_arn}) are both set: a launch "
            "template targets one reservation or one resource group; put the reservation in the group and keep the group, "
            "or keep the reservation alone"
        )
    if s.capacity_block_id and (s.capacity_reservation_id or s.capacity_reservation_group_arn):
        other = "fleet_capacity_capacity_reservation_id" if s.capacity_reservation_id else "fleet_capacity_capacity_reservation_group_arn"
        problems.append(
            f"fleet_capacity_capacity_block_id ({s.capacity_block_id}) and {other} are both set: a Capacity Block is itself "
            f"the reservation the instances launch into; remove {other}, or the block"
        )
    if s.spot and (s.capacity_reservation_id or s.capacity_reservation_group_arn or s.capacity_block_id):
        reserved = (
            "fleet_capacity_capacity_block_id"
            if s.capacity_block_id
            else "fleet_capacity_capacity_reservation_id"
            if s.capacity_reservation_id
            else "fleet_capacity_capacity_reservation_group_arn"
        )
        problems.append(
            f"fleet_capacity_spot is true with {reserved}: Spot instances never launch into a reservation or a Capacity "
            f"Block (reserved capacity is paid for On-Demand); set fleet_capacity_spot to false, or remove {reserved}"
        )
    if s.capacity_block_id and len(types) > 1:
        problems.append(
            f"fleet_capacity_instance_types is {types} with fleet_capacity_capacity_block_id {s.capacity_block_id}: a Capacity "
            "Block holds one instance type and the Auto Scaling group cannot launch it through a mixed instances policy; "
            "give fleet_capacity_instance_types the block's one type"
        )
    if s.capacity_reservation_id and len(types) > 1:
        problems.append(
            f"fleet_capacity_instance_types is {types} with fleet_capacity_capacity_reservation_id "
            f"{s.capacity_reservation_id}: a reservation holds one instance type and instances that target it by id launch "
            "only into it; give the reservation's one type, or put a reservation of each type in a resource group and set "
            "fleet_capacity_capacity_reservation_group_arn instead"
        )
    if s.spot and s.spot_allocation_strategy not in SPOT_ALLOCATION_STRATEGIES:
        problems.append(
            f"fleet_capacity_spot_allocation_strategy is {s.spot_allocation_strategy!r}: one of {', '.join(SPOT_ALLOCATION_STRATEGIES)}"
        )
    if s.on_demand_base_capacity < 0:
        problems.append(f"fleet_capacity_on_demand_base_capacity is {s.on_demand_base_capacity}: 0 or more On-Demand instances")
    return problems


# ---------------------------------------------------------------- instance types (DescribeInstanceTypes entries)


def gpu_shape(described: dict[str, Any]) -> dict[str, Any]:
    """What a task sees of one instance type's GPUs: count, maker and model, memory per GPU, CPU architecture."""
    gpus = (described.get("GpuInfo") or {}).get("Gpus") or []
    first = gpus[0] if gpus else {}
    architectures = [a for a in (described.get("ProcessorInfo") or {}).get("SupportedArchitectures") or [] if a != "i386"]
    return {
        "gpus": sum(int(g.get("Count") or 0) for g in gpus),
        "gpu": " ".join(x for x in (first.get("Manufacturer"), first.get("Name")) if x),
        "gpu_memory_mib": int((first.get("MemoryInfo") or {}).get("SizeInMiB") or 0),
        "architecture": ",".join(sorted(architectures)),
    }


def shape_text(shape: dict[str, Any]) -> str:
    return f"{shape['gpus']} x {shape['gpu'] or 'no GPU'} {shape['gpu_memory_mib']} MiB, {shape['architecture']}"


def shape_problems(types: list[str], described: dict[str, dict[str, Any] | None], region: str) -> list[str]:
    """Every type exists, has a GPU, and all have one GPU shape: a task definition asks for N GPUs of one kind, and the
    model's memory plan holds on every instance the group may launch only when the GPUs are the same."""
    problems = [
        f"fleet_capacity_instance_types has {name}, which is no instance type of region {region}: give types the region "
        "offers (aws ec2 describe-instance-types)"
        for name in types
        if described.get(name) is None
    ]
    shapes = {name: gpu_shape(d) for name, d in described.items() if d is not None and name in types}
    problems += [
        f"fleet_capacity_instance_types has {name}, which has no GPU: give GPU instance types"
        for name, shape in shapes.items()
        if not shape["gpus"]
    ]
    distinct = {shape_text(s) for s in shapes.values() if s["gpus"]}
    if len(distinct) > 1:
        listed = "; ".join(f"{name}: {shape_text(shapes[name])}" for name in types if name in shapes)
        problems.append(
            f"fleet_capacity_instance_types mixes GPU shapes ({listed}): a task asks for its GPUs by count and its models are "
            "sized for one GPU model and memory, so every type the group may launch must have the same GPU count, model, "
            "GPU memory and CPU architecture; keep the types of one shape (e.g. sizes of one family with as many GPUs)"
        )
    return problems


def smallest_type(described: list[dict[str, Any]]) -> dict[str, Any]:
    """The type with the least for tasks (CPU, then memory): the group may launch any type, so it decides what one
    new instance is counted to hold."""
    return min(described, key=lambda d: (placement.instance_type_resources(d).cpu, placement.instance_type_resources(d).memory))


# ---------------------------------------------------------------- reservations (DescribeCapacityReservations entries)


def reservation_summary(reservation: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": reservation.get("CapacityReservationId", ""),
        "instance_type": reservation.get("InstanceType", ""),
        "availability_zone": reservation.get("AvailabilityZone", ""),
        "state": reservation.get("State", ""),
        "type": reservation.get("ReservationType", "default"),
        "total_instances": int(reservation.get("TotalInstanceCount") or 0),
        "available_instances": int(reservation.get("AvailableInstanceCount") or 0),
        "end_date": str(reservation.get("EndDate") or ""),
    }


def reservation_problems(s: Sources, reservation: dict[str, Any] | None, max_size: int, subnet_zones: list[str] | None = None) -> list[str]:
    """The targeted reservation (or block) exists, lives, holds the fleet's type, and bounds the group's max size:
    an instance targeting a reservation by id launches only into it, so the group can never hold more."""
    variable = "fleet_capacity_capacity_block_id" if s.capacity_block_id else "fleet_capacity_capacity_reservation_id"
    if not s.reservation_id:
        return []
    if reservation is None:
        return [f"{variable} = {s.reservation_id} is no capacity reservation of this account and region: give one that exists"]
    r = reservation_summary(reservation)
    problems = []
    if r["state"] in DEAD_RESERVATION_STATES:
        problems.append(f"{variable} = {r['id']} is {r['state']}: no instance can launch into it; give a live reservation")
    if s.capacity_block_id and r["type"] != "capacity-block":
        problems.append(
            f"fleet_capacity_capacity_block_id = {r['id']} is an On-Demand Capacity Reservation, not a Capacity Block: set it "
            "as fleet_capacity_capacity_reservation_id instead"
        )
    if s.capacity_reservation_id and r["type"] == "capacity-block":
        problems.append(
            f"fleet_capacity_capacity_reservation_id = {r['id']} is a Capacity Block for ML, whose instances launch with "
            "market type capacity-block: set it as fleet_capacity_capacity_block_id instead"
        )
    if r["instance_type"] and r["instance_type"] not in s.instance_types:
        problems.append(
            f"{variable} = {r['id']} reserves {r['instance_type']} but fleet_capacity_instance_types is {s.instance_types}: "
            f"set fleet_capacity_instance_types to [{r['instance_type']}]"
        )
    if subnet_zones and r["availability_zone"] and r["availability_zone"] not in subnet_zones:
        problems.append(
            f"{variable} = {r['id']} is in {r['availability_zone']} but fleet_capacity_subnets are in {sorted(set(subnet_zones))}: "
            f"add a subnet of {r['availability_zone']} to fleet_capacity_subnets"
        )
    if r["total_instances"] and max_size > r["total_instances"]:
        problems.append(
            f"fleet_capacity_max_size is {max_size} but {variable} = {r['id']} holds {r['total_instances']} instance(s), and "
            f"instances that target it launch nowhere else: lower fleet_capacity_max_size to {r['total_instances']}, or grow "
            "the reservation"
        )
    return problems


def reserved_headroom(max_size: int, current: int, reservation: dict[str, Any] | None) -> int:
    """Instances the group can still add: up to its max size, and, when a reservation targeted by id is its only
    capacity, no more than the reservation has available."""
    room = max(max_size - current, 0)
    if reservation is None:
        return room
    return min(room, reservation_summary(reservation)["available_instances"])


# ---------------------------------------------------------------- rendering


def launch_template_capacity(s: Sources) -> dict[str, Any]:
    """The LaunchTemplateData keys these settings own. InstanceType is the first type even with a mixed policy (whose
    overrides then decide): the AMI rollout's canary and readers of the template take the type from it."""
    data: dict[str, Any] = {"InstanceType": s.instance_types[0]}
    if s.capacity_block_id:
        data["InstanceMarketOptions"] = {"MarketType": "capacity-block"}
        data["CapacityReservationSpecification"] = {"CapacityReservationTarget": {"CapacityReservationId": s.capacity_block_id}}
    elif s.capacity_reservation_id:
        data["CapacityReservationSpecification"] = {"CapacityReservationTarget": {"CapacityReservationId": s.capacity_reservation_id}}
    elif s.capacity_reservation_group_arn:
        data["CapacityReservationSpecification"] = {
            "CapacityReservationTarget": {"CapacityReservationResourceGroupArn": s.capacity_reservation_group_arn}
        }
    return data


def instances_distribution(s: Sources) -> dict[str, Any]:
    """The mixed policy's InstancesDistribution (AWS's names): all Spot above the On-Demand base when Spot is opted
    into, else all On-Demand in the order the types are given."""
    if s.spot:
        return {
            "OnDemandBaseCapacity": s.on_demand_base_capacity,
            "OnDemandPercentageAboveBaseCapacity": 0,
            "SpotAllocationStrategy": s.spot_allocation_strategy,
        }
    return {"OnDemandAllocationStrategy": "prioritized", "OnDemandBaseCapacity": 0, "OnDemandPercentageAboveBaseCapacity": 100}


def mixed_instances_policy(s: Sources, template: dict[str, str]) -> dict[str, Any] | None:
    """The group's MixedInstancesPolicy (AWS's shape) around `template` ({LaunchTemplateName|Id, Version}), or None
    when the group launches the template alone."""
    if not s.mixed:
        return None
    return {
        "LaunchTemplate": {
            "LaunchTemplateSpecification": dict(template),
            "Overrides": [{"InstanceType": t} for t in s.instance_types],
        },
        "InstancesDistribution": instances_distribution(s),
    }


def autoscaling_group_option(s: Sources) -> dict[str, Any] | None:
    """The same policy as amazon.aws.autoscaling_group's `mixed_instances_policy` option takes it (the module adds the
    launch template), or None."""
    if not s.mixed:
        return None
    snake = {
        "OnDemandAllocationStrategy": "on_demand_allocation_strategy",
        "OnDemandBaseCapacity": "on_demand_base_capacity",
        "OnDemandPercentageAboveBaseCapacity": "on_demand_percentage_above_base_capacity",
        "SpotAllocationStrategy": "spot_allocation_strategy",
    }
    return {
        "instance_types": list(s.instance_types),
        "instances_distribution": {snake[k]: v for k, v in instances_distribution(s).items()},
    }


def ecs_config(s: Sources) -> dict[str, str]:
    """ecs.config lines these settings need: Spot draining when Spot is opted into."""
    return dict(SPOT_DRAINING) if s.spot else {}
