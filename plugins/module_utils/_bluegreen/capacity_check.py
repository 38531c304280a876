# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The cutover's capacity phase: can the new colour's tasks (a capacity-paced cutover: its next batch) be placed?

Per instance on the cluster's free registered instances, then on what each managed-scaling capacity provider's Auto
Scaling group can still add (its maximum, the smallest of its instance types, a targeted reservation's free count).
Reads only; a verdict that the tasks cannot be placed refuses the run before its first write, with the numbers and
the fixes (`placement.py` holds the arithmetic). `CapacityCheck` is a collaborator of the phases with explicit
inputs: the AWS clients, the cluster, the batch_size option and the run's timeline.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import ec2
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import ecs as ecs_svc
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import gates, paced, placement
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.cutover_state import CutoverState, Timeline
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.plan import Plan, PlanError, growing_count
from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet import capacity_provider as capacity
from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet import capacity_sources as sources


class CapacityCheck:
    """`batch_size` is the option (None: what one spare instance holds); after a check, `batch` is the size a
    capacity-paced cutover uses and `plan` what the result reports as capacity_plan."""

    def __init__(self, clients: Any, cluster: str, batch_size: int | None, timeline: Timeline) -> None:
        self.aws = clients
        self.cluster = cluster
        self.batch_size = batch_size
        self.timeline = timeline
        self.batch = 0
        self.plan: dict[str, Any] = {}
        self.checked: tuple[str | None, str | None] | None = None  # the colours the paced check saw

    def run(self, state: CutoverState, plan: Plan) -> None:
        """The capacity phase of `plan`: all the new colour's tasks, or a capacity-paced cutover's next batch (checked
        once a run: before the lock is taken)."""
        if plan.mode != "capacity_paced":
            self._blue_green(state, plan)
        elif self.checked != (plan.new, plan.old):
            self._paced(state, plan)

    def _blue_green(self, state: CutoverState, plan: Plan) -> None:
        entry = self.timeline.start("capacity")
        need = placement.task_needs(state.task_definition)
        standby = state.colors[plan.new]
        # standby tasks already running the new task definition keep their place; others are replaced
        count = state.desired_count() - (standby.running if standby.task_definition == state.td_arn else 0)
        instances: dict[str, placement.Resources] = {}
        headroom: list[placement.Headroom] = []
        if count > 0:
            instances = self.free_instances()
            if sum(placement.place(need, count, instances).values()) < count:
                headroom = self.headroom()
        verdict = placement.verdict(need, count, instances, headroom, self.cluster)
        spare = placement.new_instances(need, verdict.on_new, headroom) if verdict.ok else 0
        self._record(entry, verdict, "blue_green", 0, 0, spare)

    def _paced(self, state: CutoverState, plan: Plan) -> None:
        """Size the batch and check that the next batch can be placed."""
        entry = self.timeline.start("capacity")
        need = placement.task_needs(state.task_definition)
        full = state.desired_count()
        new, old = state.colors[plan.new], state.colors[plan.old]
        instances = self.free_instances()
        headroom = self.size_batch(full, need, instances)
        growing = growing_count(new, state.td_arn)
        batch = paced.next_batch(full, self.batch, growing, old.desired)
        # the tasks of the next batch not yet running the new task definition (the old colour's shrinks free the rest)
        count = max((batch.grow_to if batch else growing) - (new.running if new.task_definition == state.td_arn else 0), 0)
        if count and sum(placement.place(need, count, instances).values()) < count and headroom is None:
            headroom = self.headroom()
        verdict = placement.batch_verdict(need, count, self.batch, full, instances, headroom or [], self.cluster)
        batches = paced.schedule(full, self.batch, growing, old.desired)
        self.checked = (plan.new, plan.old)
        self._record(entry, verdict, "capacity_paced", self.batch, len(batches), verdict.spare_instances)

    def _record(self, entry: dict[str, Any], verdict: placement.Verdict, mode: str, batch_size: int, batches: int, spare: int) -> None:
        """Record the check (the result's capacity_plan), end its phase, and refuse before any write when the
        verdict says the tasks cannot be placed."""
        self.plan = {
            "mode": mode,
            "batch_size": batch_size,
            "batches": batches,
            "spare_instances_needed": spare,
            "on_registered": verdict.on_registered,
            "on_new": verdict.on_new,
            "why": verdict.why,
        }
        self.timeline.end(entry, "ok" if verdict.ok else "failed", verdict.why)
        if not verdict.ok:
            raise PlanError(verdict.why)

    def size_batch(
        self, full: int, need: placement.Resources, instances: dict[str, placement.Resources]
    ) -> list[placement.Headroom] | None:
        """Set the batch size: batch_size, else what one spare instance holds (the free registered instance with the
        most room, else one new instance of a group's smallest type), clamped to the full count. Returns the groups'
        headroom when it was read for it."""
        headroom = None
        if self.batch_size:
            size = self.batch_size
        else:
            per_free = [free.fits(need) for free in instances.values()]
            if not any(per_free):
                headroom = self.headroom()
            size = paced.default_batch_size(per_free, [room.per_instance.fits(need) for room in headroom or []])
        self.batch = paced.clamp(size, full)
        return headroom

    def size_rollback(self, state: CutoverState, full: int) -> None:
        """A rollback run (state rolled_back) sizes its batch as the cutover did."""
        if not self.batch:
            self.size_batch(full, placement.task_needs(state.task_definition), self.free_instances())

    def free_instances(self) -> dict[str, placement.Resources]:
        return placement.usable_instances(ecs_svc.container_instances(self.aws.ecs, self.cluster))

    def headroom(self) -> list[placement.Headroom]:
        """What each managed-scaling capacity provider's Auto Scaling group can still add."""
        cluster = ecs_svc.describe_cluster(self.aws.ecs, self.cluster) or {}
        names = [n for n in cluster.get("capacityProviders") or [] if n not in ("FARGATE", "FARGATE_SPOT")]
        providers = ecs_svc.describe_capacity_providers(self.aws.ecs, names)
        rooms = []
        for provider in providers:
            if provider["name"] not in gates.managed_scaling_providers([provider]):
                continue
            arn = (provider.get("autoScalingGroupProvider") or {}).get("autoScalingGroupArn", "")
            group = capacity.describe_asg(self.aws.autoscaling, capacity.asg_name_of(arn))
            if group is None:
                raise PlanError(
                    f"capacity provider {provider['name']} uses Auto Scaling group {arn}, which does not exist: "
                    "fix the capacity provider (role fleet_capacity)"
                )
            spec, overrides = placement.group_launch_template(group)
            data = ec2.launch_template_data(self.aws.ec2, spec) if spec else None
            target = ((data or {}).get("CapacityReservationSpecification") or {}).get("CapacityReservationTarget") or {}
            reservation_id = target.get("CapacityReservationId")
            reservation = ec2.describe_capacity_reservation(self.aws.ec2, reservation_id) if reservation_id else None
            types = overrides or [(data or {}).get("InstanceType")]
            described = ec2.describe_instance_types(self.aws.ec2, [t for t in types if t])
            if not described:
                raise PlanError(
                    f"Auto Scaling group {group['AutoScalingGroupName']}: cannot tell its instance type (launch template {spec or 'none'}): "
                    "give the group a launch template with an InstanceType (role fleet_capacity)"
                )
            # with several instance types, count the smallest: the group may launch any of them
            smallest = sources.smallest_type(described)
            max_size, current = int(group.get("MaxSize") or 0), placement.group_current_size(group)
            rooms.append(
                placement.Headroom(
                    group=group["AutoScalingGroupName"],
                    instance_type=smallest["InstanceType"],
                    max_size=max_size,
                    current=current,
                    per_instance=placement.instance_type_resources(smallest),
                    # an instance targeting a reservation by id launches only into it: its free count bounds the group
                    reserved=(sources.reserved_headroom(max_size, current, reservation) if reservation else 0) if reservation_id else None,
                    reservation=reservation_id or "",
                )
            )
        return rooms
