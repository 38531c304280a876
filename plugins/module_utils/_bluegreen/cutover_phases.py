# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The phases of a blue/green cutover, in run order: capacity, standby up, gates, traffic steps, drain, finish,
and the rollback that any failure after the first write leads to. Each phase is one method of `CutoverPhases`
and adds one entry to the run's timeline.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import cloudwatch as cw
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import ec2
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import ecs as ecs_svc
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import elbv2 as elb
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import BotoCoreError, ClientError, error_code
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import drain_endpoints as endpoints
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import gates, grpc_route, hooks, paced, placement
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import plan as bg
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.canary_watch import CanaryFailed
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.cutover_state import CutoverFailed, CutoverState
from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet import capacity_provider as capacity
from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet import capacity_sources as sources
from ansible_collections.inferops.triton_ecs.plugins.module_utils._triton_client import TritonError

__all__ = ["CutoverFailed", "CutoverPhases", "RollbackStalled"]


class RollbackStalled(Exception):
    """A capacity-paced rollback could not finish a batch (the old colour did not come back in time): the run stops
    with traffic where it is, and a re-run goes on from what AWS shows."""


class CutoverPhases(CutoverState):
    """Each phase of a cutover over the run's view; a failed gate or timeout raises CutoverFailed."""

    DRAIN_POLL_S = 0.5  # how often the old colour's metrics are sampled during the drain
    DRAIN_SAMPLERS = 32  # endpoints sampled at once

    def phase_capacity(self, plan: bg.Plan) -> None:
        if plan.mode == "capacity_paced":
            if self.capacity_checked != (plan.new, plan.old):  # checked once a run (before the lock is taken)
                self._paced_capacity(plan)
            return
        entry = self._phase("capacity")
        need = placement.task_needs(self.task_definition)
        standby = self.colors[plan.new]
        # standby tasks already running the new task definition keep their place; others are replaced
        count = self.desired_count() - (standby.running if standby.task_definition == self.td_arn else 0)
        instances: dict[str, placement.Resources] = {}
        headroom: list[placement.Headroom] = []
        if count > 0:
            instances = placement.usable_instances(ecs_svc.container_instances(self.aws.ecs, self.p["cluster"]))
            if sum(placement.place(need, count, instances).values()) < count:
                headroom = self._scaling_headroom()
        verdict = placement.verdict(need, count, instances, headroom, self.p["cluster"])
        spare = placement.new_instances(need, verdict.on_new, headroom) if verdict.ok else 0
        self._capacity_verdict(entry, verdict, "blue_green", 0, 0, spare)

    def _capacity_verdict(
        self, entry: dict[str, Any], verdict: placement.Verdict, mode: str, batch_size: int, batches: int, spare: int
    ) -> None:
        """Record the capacity check (the result's capacity_plan), end its phase, and refuse before any write when
        the verdict says the tasks cannot be placed."""
        self.capacity_plan = {
            "mode": mode,
            "batch_size": batch_size,
            "batches": batches,
            "spare_instances_needed": spare,
            "on_registered": verdict.on_registered,
            "on_new": verdict.on_new,
            "why": verdict.why,
        }
        self._end(entry, "ok" if verdict.ok else "failed", verdict.why)
        if not verdict.ok:
            raise bg.PlanError(verdict.why)

    def size_batch(
        self, full: int, need: placement.Resources, instances: dict[str, placement.Resources]
    ) -> list[placement.Headroom] | None:
        """Set the batch size: batch_size, else what one spare instance holds (the free registered instance with the
        most room, else one new instance of a group's smallest type), clamped to the full count. Returns the groups'
        headroom when it was read for it."""
        headroom = None
        if self.p.get("batch_size"):
            size = self.p["batch_size"]
        else:
            per_free = [free.fits(need) for free in instances.values()]
            if not any(per_free):
                headroom = self._scaling_headroom()
            size = paced.default_batch_size(per_free, [room.per_instance.fits(need) for room in headroom or []])
        self.batch_size = paced.clamp(size, full)
        return headroom

    def _paced_capacity(self, plan: bg.Plan) -> None:
        """Size the batch (batch_size, else what one spare instance holds) and check that the next batch can be
        placed: per instance on the free registered instances, then on what the groups can add. Reads only; a batch
        that cannot be placed fails the run before its first write, with the numbers and the fixes."""
        entry = self._phase("capacity")
        need = placement.task_needs(self.task_definition)
        full = self.desired_count()
        new, old = self.colors[plan.new], self.colors[plan.old]
        instances = placement.usable_instances(ecs_svc.container_instances(self.aws.ecs, self.p["cluster"]))
        headroom = self.size_batch(full, need, instances)
        growing = bg.growing_count(new, self.td_arn)
        batch = paced.next_batch(full, self.batch_size, growing, old.desired)
        # the tasks of the next batch not yet running the new task definition (the old colour's shrinks free the rest)
        count = max((batch.grow_to if batch else growing) - (new.running if new.task_definition == self.td_arn else 0), 0)
        if count and sum(placement.place(need, count, instances).values()) < count and headroom is None:
            headroom = self._scaling_headroom()
        verdict = placement.batch_verdict(need, count, self.batch_size, full, instances, headroom or [], self.p["cluster"])
        batches = paced.schedule(full, self.batch_size, growing, old.desired)
        self.capacity_checked = (plan.new, plan.old)
        self._capacity_verdict(entry, verdict, "capacity_paced", self.batch_size, len(batches), verdict.spare_instances)

    def _scaling_headroom(self) -> list[placement.Headroom]:
        """What each managed-scaling capacity provider's Auto Scaling group can still add."""
        cluster = ecs_svc.describe_cluster(self.aws.ecs, self.p["cluster"]) or {}
        names = [n for n in cluster.get("capacityProviders") or [] if n not in ("FARGATE", "FARGATE_SPOT")]
        providers = ecs_svc.describe_capacity_providers(self.aws.ecs, names)
        rooms = []
        for provider in providers:
            if provider["name"] not in gates.managed_scaling_providers([provider]):
                continue
            arn = (provider.get("autoScalingGroupProvider") or {}).get("autoScalingGroupArn", "")
            group = capacity.describe_asg(self.aws.autoscaling, capacity.asg_name_of(arn))
            if group is None:
                raise bg.PlanError(
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
                raise bg.PlanError(
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

    def phase_standby_up(self, plan: bg.Plan) -> None:
        entry = self._phase("standby_up")
        if self.scaling is not None:
            self._guard_write()
            self.scaling.set_scale_in(plan.old, True)  # from here to the end of the cutover, the live colour does not shrink
        desired = self.desired_count()
        self.point_test_listener(plan.new)
        self.point_grpc_test_listener(plan.new)
        self.scale(plan.new, desired, self.td_arn)
        timeout = self.p["timeouts"]["standby_up_s"]
        deadline = self.clock.monotonic() + timeout
        while True:
            self.colors = self._color_states()
            problems = gates.serving_problems(self.colors[plan.new], self.td_arn, desired)
            if not problems:
                self._end(entry, "ok", f"{self.colors[plan.new].service}: {self.colors[plan.new].healthy} healthy targets")
                if not self.weights.get(plan.new):  # before any production traffic (a resumed cutover is past it)
                    self.run_hooks("standby_healthy", plan)
                return
            if self.clock.monotonic() >= deadline:
                self._end(entry, "failed", "; ".join(problems))
                raise CutoverFailed(f"standby {plan.new} not serving after {timeout} s: " + "; ".join(problems))
            self.clock.sleep(min(self.p["timeouts"]["poll_interval_s"], max(deadline - self.clock.monotonic(), 0)))

    def gate_problems(self, color: str) -> list[str]:
        problems: list[str] = []
        if self.p.get("alarm_names"):
            problems += gates.alarm_problems(cw.describe_alarms(self.aws.cloudwatch, self.p["alarm_names"]), self.p["alarm_names"])
        url = self._test_url(color)
        if not url:
            grpc_url = grpc_route.test_url(self.p.get("grpc"), color)
            if grpc_url:
                problems += grpc_route.gate_problems(grpc_url, self.p["gates"], self.p.get("grpc"))
            return problems
        options = self.p["gates"]
        problems += gates.triton_problems(self.triton(url, options["request_timeout_s"]), url, options)
        if gates.not_live(url) in problems:
            return problems
        grpc_url = grpc_route.test_url(self.p.get("grpc"), color)
        if grpc_url:
            problems += grpc_route.gate_problems(grpc_url, options, self.p.get("grpc"))
        return problems

    def phase_gates(self, plan: bg.Plan) -> None:
        entry = self._phase("gates")
        try:
            passed = self.await_gates(plan.new)
        except CutoverFailed as e:
            self._end(entry, "failed", str(e).split(": ", 1)[-1])
            raise
        self._end(entry, "ok", passed)

    def await_gates(self, color: str) -> str:
        """Wait until the gates pass on `color` (what passed), or raise CutoverFailed at gates.timeout_s."""
        timeout = self.p["gates"]["timeout_s"]
        deadline = self.clock.monotonic() + timeout
        while True:
            problems = self.gate_problems(color)
            if not problems:
                return (
                    "alarms OK"
                    + (", Triton ready, models READY, smoke inference as expected" if self._test_url(color) else "")
                    + (" (over HTTP and gRPC)" if self._test_url(color) and grpc_route.test_url(self.p.get("grpc"), color) else "")
                )
            if self.clock.monotonic() >= deadline:
                raise CutoverFailed(f"gate failed on {color}: " + "; ".join(problems))
            self.clock.sleep(min(self.p["gates"]["interval_s"], max(deadline - self.clock.monotonic(), 0)))

    def await_serving(self, color: str, task_definition: str | None, count: int, what: str) -> None:
        """Wait until `color` runs `count` tasks (of `task_definition`), every target healthy, or raise CutoverFailed."""
        timeout = self.p["timeouts"]["standby_up_s"]
        deadline = self.clock.monotonic() + timeout
        while True:
            self.colors = self._color_states()
            problems = gates.serving_problems(self.colors[color], task_definition, count)
            if not problems:
                return
            if self.clock.monotonic() >= deadline:
                raise CutoverFailed(f"{what}: {color} not serving {count} tasks after {timeout} s: " + "; ".join(problems))
            self.clock.sleep(min(self.p["timeouts"]["poll_interval_s"], max(deadline - self.clock.monotonic(), 0)))

    def await_gone(self, color: str, count: int, what: str) -> None:
        """Wait until the tasks `color` no longer wants are gone: it runs at most `count` and no target of its target
        groups is draining (the deregistration delay, then Triton's SIGTERM drain within stopTimeout)."""
        timeout = self.p["drain"]["timeout_s"]
        deadline = self.clock.monotonic() + timeout
        while True:
            self.colors = self._color_states()
            state = self.colors[color]
            if state.running + state.pending <= count and not state.draining:
                return
            if self.clock.monotonic() >= deadline:
                raise CutoverFailed(
                    f"{what}: {state.service} still runs {state.running} tasks ({state.draining} targets draining) "
                    f"{timeout} s after it was scaled to {count} (drain.timeout_s)"
                )
            self.clock.sleep(min(self.p["timeouts"]["poll_interval_s"], max(deadline - self.clock.monotonic(), 0)))

    # ------------------------------------------------------------ capacity-paced

    def _hold_scaling(self, plan: bg.Plan) -> None:
        """Autoscaling held for a capacity-paced cutover: neither colour's target scales in or out (see autoscaling.py)."""
        if self.scaling is None:
            return
        self._guard_write()
        for color in (plan.old, plan.new):
            self.scaling.set_scale_in(color, True)

    def phase_batches(self, plan: bg.Plan) -> None:
        """Batch after batch, each computed from the desired counts AWS shows (paced.py): grow the new colour, wait
        until it serves, the gates on the test route, the weights, the bake, shrink the old colour, wait until its
        removed tasks are gone."""
        full = self.desired_count()
        self._hold_scaling(plan)
        self.point_test_listener(plan.new)
        self.point_grpc_test_listener(plan.new)
        moved = False
        while True:
            batch = paced.next_batch(
                full, self.batch_size, bg.growing_count(self.colors[plan.new], self.td_arn), self.colors[plan.old].desired
            )
            if batch is None:
                break
            self._run_batch(plan, batch)
            moved = True
        if moved:
            self.run_hooks("after_cutover", plan)
        else:
            self._end(self._phase("batches"), "skipped", f"{plan.new} already runs {full} tasks and {plan.old} none")

    def _run_batch(self, plan: bg.Plan, batch: paced.Batch) -> None:
        new, old = plan.new, plan.old
        label = f"batch {batch.index}/{batch.total}"
        entry = self._phase(label)
        started = self.clock.monotonic()
        record = {"index": batch.index, "new_count": batch.grow_to, "old_count": batch.shrink_to, "seconds": 0.0, "status": "running"}
        record["weights"] = {new: batch.weight, old: 100 - batch.weight}
        self.batches.append(record)
        try:
            self.scale(new, batch.grow_to, self.td_arn if self.colors[new].task_definition != self.td_arn else None)
            self.await_serving(new, self.td_arn, batch.grow_to, label)
            if not self.weights.get(new):
                self.run_hooks("standby_healthy", plan)
            self.await_gates(new)
            if not self.weights.get(new):
                self.run_hooks("before_traffic", plan)
            since = self.clock.utcnow()
            self.set_weights({new: batch.weight, old: 100 - batch.weight})
            baked = self.bake(plan, batch.weight, since)
            verdict = self.canary_watch.steps[-1] if self.canary_watch is not None and self.canary_watch.steps else None
            self.run_hooks("after_step", plan, step=batch.weight, canary=verdict)
            self.scale(old, batch.shrink_to)
            self.await_gone(old, batch.shrink_to, label)
        except CutoverFailed as e:
            record.update(status="failed", seconds=round(self.clock.monotonic() - started, 3))
            self._end(entry, "failed", f"{label}: {e}")
            raise
        record.update(status="ok", seconds=round(self.clock.monotonic() - started, 3))
        self._end(
            entry,
            "ok",
            f"{label}: {new} {batch.grow_to}, {old} {batch.shrink_to}, weights {new}={batch.weight} {old}={100 - batch.weight}, {baked}",
        )

    def _rollback_batches(self, plan: bg.Plan, reason: str) -> tuple[float, str, int]:
        """The old colour grows back batch by batch as the new one shrinks (the same walk, colours swapped); returns
        when all traffic was back on the old colour, and how many batches ran."""
        full = self.rollback_full_count(plan)
        if not self.batch_size:  # a rollback run (state rolled_back) sizes its batch as the cutover did
            self.size_batch(
                full,
                placement.task_needs(self.task_definition),
                placement.usable_instances(ecs_svc.container_instances(self.aws.ecs, self.p["cluster"])),
            )
        size = self.batch_size
        restored, restored_at, count = self.clock.monotonic(), self.clock.stamp(), 0
        while True:
            batch = paced.next_batch(full, size, self.colors[plan.old].desired, self.colors[plan.new].desired)
            if batch is None:
                return restored, restored_at, count
            count += 1
            label = f"rollback batch {batch.index}/{batch.total}"
            entry = self._phase(label)
            started = self.clock.monotonic()
            try:
                self.scale(plan.old, batch.grow_to)
                self.await_serving(plan.old, None, batch.grow_to, label)
            except CutoverFailed as e:
                self._end(entry, "failed", str(e))
                raise RollbackStalled(f"{label} of {reason!r} stopped: {e}. Traffic stays split; run again to go on") from None
            self.set_weights({plan.old: batch.weight, plan.new: 100 - batch.weight})
            if batch.weight == 100:
                restored, restored_at = self.clock.monotonic(), self.clock.stamp()
            self.scale(plan.new, batch.shrink_to)
            try:
                self.await_gone(plan.new, batch.shrink_to, label)
            except CutoverFailed as e:
                self._end(entry, "failed", str(e))
                raise RollbackStalled(f"{label} of {reason!r} stopped: {e}. Run again to go on") from None
            self.batches.append(
                {
                    "index": batch.index,
                    "new_count": batch.shrink_to,
                    "old_count": batch.grow_to,
                    "weights": {plan.old: batch.weight, plan.new: 100 - batch.weight},
                    "seconds": round(self.clock.monotonic() - started, 3),
                    "status": "rolled_back",
                }
            )
            self._end(
                entry,
                "ok",
                f"{label}: {plan.old} {batch.grow_to}, {plan.new} {batch.shrink_to}, weights {plan.old}={batch.weight} "
                f"{plan.new}={100 - batch.weight}",
            )

    def _test_url(self, color: str) -> str | None:
        return (self.p.get("test_route_urls") or {}).get(color) or self.p.get("test_route_url")

    def _watch(self, color: str, seconds: float, what: str, also: Callable[[], None] | None = None) -> None:
        """Wait `seconds` (a told wait), checking alarms and gates (and `also`: the canary verdict) every
        watch_interval_s; raise on the first failure."""
        end = self.clock.monotonic() + seconds
        interval = self.p["watch_interval_s"] or 1
        while self.clock.monotonic() < end:
            self.clock.told_sleep(min(interval, end - self.clock.monotonic()))
            problems = self.gate_problems(color)
            if problems:
                raise CutoverFailed(f"{what} on {color}: " + "; ".join(problems))
            if also is not None:
                also()

    def bake(self, plan: bg.Plan, step: int, since: datetime) -> str:
        """Hold the step bake_time_s while alarms and gates are watched, and with the canary until its verdict."""
        if self.canary_watch is None:
            self._watch(plan.new, self.p["bake_time_s"], f"bake at {step}%")
            return f"baked {self.p['bake_time_s']} s"
        try:
            return self.canary_watch.bake(
                step,
                plan.new,
                plan.old,
                since,
                self.p["bake_time_s"],
                self.p["watch_interval_s"] or 1,
                lambda seconds, what, also: self._watch(plan.new, seconds, what, also),
            )
        except CanaryFailed as e:
            raise CutoverFailed(str(e)) from None

    def run_hooks(self, stage: str, plan: bg.Plan, **extra: Any) -> None:
        """The hooks of `stage`; a failing one fails the cutover (it rolls back)."""
        try:
            self.hook_runner.run(stage, plan.new, plan.old, **extra)
        except hooks.HookFailed as e:
            raise CutoverFailed(str(e)) from None

    def phase_traffic(self, plan: bg.Plan) -> None:
        if plan.steps and not self.weights.get(plan.new):
            self.run_hooks("before_traffic", plan)
        for step in plan.steps:
            entry = self._phase(f"traffic {step}%")
            since = self.clock.utcnow()
            self.set_weights({plan.new: step, plan.old: 100 - step})
            try:
                baked = self.bake(plan, step, since)
            except CutoverFailed as e:
                self._end(entry, "failed", str(e))
                raise
            self._end(entry, "ok", f"{plan.new}={step} {plan.old}={100 - step}, {baked}")
            verdict = self.canary_watch.steps[-1] if self.canary_watch is not None and self.canary_watch.steps else None
            self.run_hooks("after_step", plan, step=step, canary=verdict)
        if not plan.steps:
            self._end(self._phase("traffic"), "skipped", f"{plan.new} already has 100%")
            return
        self.run_hooks("after_cutover", plan)

    def drain_skip_reason(self, plan: bg.Plan) -> str:
        """Why the old colour needs no drain ("" when it does)."""
        if self.colors[plan.old].desired == 0:
            return f"{plan.old} is already scaled down"
        if not self.scale_down_old:
            return f"{plan.old} is kept at full size"
        return ""

    def drain_watch(self, color: str) -> endpoints.DrainWatch:
        """The endpoints the drain of `color` watches: drain.metrics_urls when given for it, else its RUNNING tasks'
        endpoints found through ECS (two reads, allowed in check mode). A quiet period of 0 asks for no quiet: nothing
        is looked up."""
        drain = self.p["drain"]
        given = (drain.get("metrics_urls") or {}).get(color) or []
        if given:
            return endpoints.DrainWatch(color, "metrics_urls", list(given))
        if not drain["quiet_period_s"]:
            return endpoints.DrainWatch(color, "none")
        service = self.services[color]
        try:
            arns = ecs_svc.list_service_tasks(self.aws.ecs, self.p["cluster"], service)
            tasks = ecs_svc.describe_tasks(self.aws.ecs, self.p["cluster"], arns) if arns else []
        except (BotoCoreError, ClientError) as e:  # traffic has moved already: a lookup refused (IAM) leaves the quiet period
            fix = "grant ecs:ListTasks and ecs:DescribeTasks (docs/iam.md) or give drain.metrics_urls"
            return endpoints.DrainWatch(color, "ecs_tasks", [], [f"the tasks of {service} could not be read ({error_code(e) or e}): {fix}"])
        urls, not_watched = endpoints.service_endpoints(tasks, service, drain.get("metrics_port") or endpoints.TRITON_METRICS_PORT)
        return endpoints.DrainWatch(color, "ecs_tasks", urls, not_watched)

    def phase_drain(self, plan: bg.Plan) -> None:
        entry = self._phase("drain")
        drain = self.p["drain"]
        skipped = self.drain_skip_reason(plan)
        if skipped:
            self._end(entry, "skipped", skipped)
            return
        quiet_for = drain["quiet_period_s"]
        deadline = self.clock.monotonic() + drain["timeout_s"]
        watch = self.drain_watched = self.drain_watch(plan.old)
        if not watch.urls:
            self.clock.told_sleep(quiet_for)
            what = (
                f"no RUNNING task endpoint of {plan.old} found through ECS"
                if watch.source == "ecs_tasks"
                else f"no metrics URL for {plan.old}"
            )
            self._end(entry, "ok", f"{what}: waited the quiet period of {quiet_for} s" + endpoints.left_out(watch))
            return
        first = self._sample_each(watch.urls)
        if watch.source == "ecs_tasks":
            # The controller may have no reach into the VPC: endpoints that do not answer now are not watched, and
            # with none answering the drain waits the quiet period rather than its whole timeout.
            silent = [url for url, sample in zip(watch.urls, first) if sample is None]
            watch.not_watched += [f"{url} did not answer from the controller" for url in silent]
            if len(silent) == len(watch.urls):
                self.clock.told_sleep(quiet_for)
                what = f"no reach to {len(silent)} task endpoints of {plan.old} from the controller"
                self._end(entry, "ok", f"{what}: waited the quiet period of {quiet_for} s")
                return
            watch.urls = [url for url in watch.urls if url not in silent]
            first = [sample for sample in first if sample is not None]
        previous = None if any(sample is None for sample in first) else first
        last_activity = self.clock.monotonic()
        while True:
            self.clock.told_sleep(min(self.DRAIN_POLL_S, quiet_for or self.DRAIN_POLL_S, max(deadline - self.clock.monotonic(), 0)))
            current = self._samples(watch.urls)
            now = self.clock.monotonic()
            if previous is None or current is None or not gates.is_quiet(previous, current):
                last_activity = now
            previous = current
            if now - last_activity >= quiet_for:
                where = "found through ECS" if watch.source == "ecs_tasks" else "of drain.metrics_urls"
                self._end(
                    entry, "ok", f"{plan.old} quiet for {quiet_for} s on {len(watch.urls)} endpoint(s) {where}" + endpoints.left_out(watch)
                )
                return
            if now >= deadline:
                pending = sum(gates.in_flight(m) for m in current or [])
                self._end(
                    entry, "timed_out", f"{plan.old} still busy after {drain['timeout_s']} s ({pending:g} queued): scaling down anyway"
                )
                return

    def _sample_each(self, urls: list[str]) -> list[dict[str, float] | None]:
        """One metrics sample of each endpoint, all at once (a controller without reach waits one request timeout,
        not one per task); None for an endpoint that did not answer."""

        def sample(url: str) -> dict[str, float] | None:
            try:
                return self.triton(url, self.p["gates"]["request_timeout_s"]).metrics(url)
            except (TritonError, OSError):
                return None

        if len(urls) == 1:
            return [sample(urls[0])]
        with ThreadPoolExecutor(max_workers=min(len(urls), self.DRAIN_SAMPLERS)) as pool:
            return list(pool.map(sample, urls))

    def _samples(self, urls: list[str]) -> list[dict[str, float]] | None:
        samples = self._sample_each(urls)
        if any(sample is None for sample in samples):
            return None  # an endpoint that stopped answering is not proof of quiet; the timeout bounds the wait
        return samples  # type: ignore[return-value]

    def phase_finish(self, plan: bg.Plan) -> None:
        entry = self._phase("finish")
        if self.scaling is not None:
            self._guard_write()
            self.scaling.move(plan.old, plan.new)  # before the old colour is scaled down: its target would scale it back up
        old = self.colors[plan.old]
        if not self.scale_down_old:
            self._end(entry, "ok", f"{old.service} kept at {old.desired} tasks for instant rollback (old_color=keep)")
            return
        if old.desired == 0:
            self._end(entry, "skipped", f"{old.service} already scaled down")
            return
        wait = self.p["termination_wait_s"]
        if wait:
            try:
                self._watch(plan.new, wait, "termination wait")
            except CutoverFailed as e:
                self._end(entry, "failed", str(e))
                raise
        self.scale(plan.old, 0)
        if self.p["drain"]["wait_deregistration"]:
            deadline = self.clock.monotonic() + self.p["drain"]["timeout_s"]
            while self.clock.monotonic() < deadline and any(
                h.get("TargetHealth", {}).get("State") == "draining" for h in elb.describe_target_health(self.aws.elbv2, self.tgs[plan.old])
            ):
                self.clock.sleep(self.p["timeouts"]["poll_interval_s"])
        self._end(entry, "ok", f"{old.service} scaled to 0" + (f" after a termination wait of {wait} s" if wait else ""))

    def phase_rollback(self, plan: bg.Plan, reason: str = "") -> None:
        entry = self._phase("rollback")
        reason = reason or plan.reason
        detected = self.clock.monotonic()
        detected_at = self.clock.stamp()
        batches = 0
        if plan.mode == "capacity_paced":
            restored, restored_at, batches = self._rollback_batches(plan, reason)
        else:
            self.set_weights({plan.old: 100, plan.new: 0})
            restored = self.clock.monotonic()
            restored_at = self.clock.stamp()
        if self.scaling is not None:
            self._guard_write()
            self.scaling.move(plan.new, plan.old)  # the target and policies stay on (or go back to) the colour that serves
        self.scale(plan.new, 0)
        self.rollback = {
            "reason": reason,
            "to_color": plan.old,
            "detected_at": detected_at,
            "weights_restored_at": restored_at,
            "seconds": round(restored - detected, 3),
            "batches": batches,
        }
        self._end(entry, "ok", f"traffic back on {plan.old}" + (f" in {batches} batch(es)" if batches else "") + f": {reason}")
        self.hook_runner.run_after_rollback(plan.new, plan.old, reason)
