# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The phases of a blue/green cutover, in run order: capacity, standby up, gates, traffic steps, drain, finish (a
capacity-paced cutover: capacity, batches, finish), and the rollback that any failure after the first write leads to.

`CutoverPhases` is given its collaborators, each with its own job: the run's state and checked writes
(`cutover_state.CutoverState`), the capacity check (`capacity_check.py`), the timeline, the clock, the Triton
client, and when asked for, autoscaling (`autoscaling.CutoverScaling`), the canary watch and the hooks. Each phase
is one method and adds one entry to the timeline.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import cloudwatch as cw
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import ecs as ecs_svc
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import elbv2 as elb
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import BotoCoreError, ClientError, error_code
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import drain_endpoints as endpoints
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import gates, grpc_route, hooks, paced
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.autoscaling import CutoverScaling
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.canary_watch import CanaryFailed, CanaryWatch
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.capacity_check import CapacityCheck
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.clock import Clock
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.cutover_state import CutoverFailed, CutoverState, Timeline
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.hook_runner import HookRunner
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.plan import Plan, growing_count
from ansible_collections.inferops.triton_ecs.plugins.module_utils._triton_client import TritonError

__all__ = ["CutoverFailed", "CutoverPhases", "RollbackStalled"]


class RollbackStalled(Exception):
    """A capacity-paced rollback could not finish a batch (the old colour did not come back in time): the run stops
    with traffic where it is, and a re-run goes on from what AWS shows."""


@dataclass
class CutoverPhases:
    """Each phase of a cutover; a failed gate or timeout raises CutoverFailed. `p` are the bluegreen module's options
    (the phases read the gates, drain, timeouts, bake and watch settings); `batches`, `rollback` and `drain_watched`
    are what the phases did, for the result."""

    DRAIN_POLL_S: ClassVar[float] = 0.5  # how often the old colour's metrics are sampled during the drain
    DRAIN_SAMPLERS: ClassVar[int] = 32  # endpoints sampled at once

    p: dict[str, Any]
    state: CutoverState
    capacity: CapacityCheck
    timeline: Timeline
    clock: Clock
    triton: Callable[[str, float], Any]
    hook_runner: HookRunner
    scaling: CutoverScaling | None = None
    canary_watch: CanaryWatch | None = None
    batches: list[dict[str, Any]] = field(default_factory=list)  # one entry per batch run
    rollback: dict[str, Any] | None = None
    drain_watched: endpoints.DrainWatch | None = None  # what the drain watched (in check mode: would watch)

    def phase_capacity(self, plan: Plan) -> None:
        self.capacity.run(self.state, plan)

    def phase_standby_up(self, plan: Plan) -> None:
        entry = self.timeline.start("standby_up")
        if self.scaling is not None:
            self.state.guard_write()
            self.scaling.set_scale_in(plan.old, True)  # from here to the end of the cutover, the live colour does not shrink
        desired = self.state.desired_count()
        self.state.point_test_listeners(plan.new)
        self.state.scale(plan.new, desired, self.state.td_arn)
        try:
            self.await_serving(plan.new, self.state.td_arn, desired, "standby")
        except CutoverFailed as e:
            self.timeline.end(entry, "failed", str(e))
            raise
        standby = self.state.colors[plan.new]
        self.timeline.end(entry, "ok", f"{standby.service}: {standby.healthy} healthy targets")
        if not self.state.weights.get(plan.new):  # before any production traffic (a resumed cutover is past it)
            self.run_hooks("standby_healthy", plan)

    def gate_problems(self, color: str) -> list[str]:
        problems: list[str] = []
        if self.p.get("alarm_names"):
            problems += gates.alarm_problems(cw.describe_alarms(self.state.aws.cloudwatch, self.p["alarm_names"]), self.p["alarm_names"])
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

    def phase_gates(self, plan: Plan) -> None:
        entry = self.timeline.start("gates")
        try:
            passed = self.await_gates(plan.new)
        except CutoverFailed as e:
            self.timeline.end(entry, "failed", str(e).split(": ", 1)[-1])
            raise
        self.timeline.end(entry, "ok", passed)

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
        """Wait until `color` runs `count` tasks (of `task_definition`), every target healthy, or raise CutoverFailed
        at timeouts.standby_up_s."""
        timeout = self.p["timeouts"]["standby_up_s"]
        deadline = self.clock.monotonic() + timeout
        while True:
            self.state.refresh_colors()
            problems = gates.serving_problems(self.state.colors[color], task_definition, count)
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
            self.state.refresh_colors()
            state = self.state.colors[color]
            if state.running + state.pending <= count and not state.draining:
                return
            if self.clock.monotonic() >= deadline:
                raise CutoverFailed(
                    f"{what}: {state.service} still runs {state.running} tasks ({state.draining} targets draining) "
                    f"{timeout} s after it was scaled to {count} (drain.timeout_s)"
                )
            self.clock.sleep(min(self.p["timeouts"]["poll_interval_s"], max(deadline - self.clock.monotonic(), 0)))

    # ------------------------------------------------------------ capacity-paced

    def _hold_scaling(self, plan: Plan) -> None:
        """Autoscaling held for a capacity-paced cutover: neither colour's target scales in or out (see autoscaling.py)."""
        if self.scaling is None:
            return
        self.state.guard_write()
        for color in (plan.old, plan.new):
            self.scaling.set_scale_in(color, True)

    def phase_batches(self, plan: Plan) -> None:
        """Batch after batch, each computed from the desired counts AWS shows (paced.py): grow the new colour, wait
        until it serves, the gates on the test route, the weights, the bake, shrink the old colour, wait until its
        removed tasks are gone."""
        full = self.state.desired_count()
        self._hold_scaling(plan)
        self.state.point_test_listeners(plan.new)
        moved = False
        while True:
            batch = paced.next_batch(
                full,
                self.capacity.batch,
                growing_count(self.state.colors[plan.new], self.state.td_arn),
                self.state.colors[plan.old].desired,
            )
            if batch is None:
                break
            self._run_batch(plan, batch)
            moved = True
        if moved:
            self.run_hooks("after_cutover", plan)
        else:
            self.timeline.end(self.timeline.start("batches"), "skipped", f"{plan.new} already runs {full} tasks and {plan.old} none")

    def _run_batch(self, plan: Plan, batch: paced.Batch) -> None:
        new, old = plan.new, plan.old
        label = f"batch {batch.index}/{batch.total}"
        entry = self.timeline.start(label)
        started = self.clock.monotonic()
        record = {"index": batch.index, "new_count": batch.grow_to, "old_count": batch.shrink_to, "seconds": 0.0, "status": "running"}
        record["weights"] = {new: batch.weight, old: 100 - batch.weight}
        self.batches.append(record)
        try:
            self.state.scale(new, batch.grow_to, self.state.td_arn if self.state.colors[new].task_definition != self.state.td_arn else None)
            self.await_serving(new, self.state.td_arn, batch.grow_to, label)
            if not self.state.weights.get(new):
                self.run_hooks("standby_healthy", plan)
            self.await_gates(new)
            if not self.state.weights.get(new):
                self.run_hooks("before_traffic", plan)
            since = self.clock.utcnow()
            self.state.set_weights({new: batch.weight, old: 100 - batch.weight})
            baked = self.bake(plan, batch.weight, since)
            verdict = self.canary_watch.steps[-1] if self.canary_watch is not None and self.canary_watch.steps else None
            self.run_hooks("after_step", plan, step=batch.weight, canary=verdict)
            self.state.scale(old, batch.shrink_to)
            self.await_gone(old, batch.shrink_to, label)
        except CutoverFailed as e:
            record.update(status="failed", seconds=round(self.clock.monotonic() - started, 3))
            self.timeline.end(entry, "failed", f"{label}: {e}")
            raise
        record.update(status="ok", seconds=round(self.clock.monotonic() - started, 3))
        self.timeline.end(
            entry,
            "ok",
            f"{label}: {new} {batch.grow_to}, {old} {batch.shrink_to}, weights {new}={batch.weight} {old}={100 - batch.weight}, {baked}",
        )

    def _rollback_batches(self, plan: Plan, reason: str) -> tuple[float, str, int]:
        """The old colour grows back batch by batch as the new one shrinks (the same walk, colours swapped); returns
        when all traffic was back on the old colour, and how many batches ran."""
        full = self.state.rollback_full_count(plan)
        self.capacity.size_rollback(self.state, full)
        size = self.capacity.batch
        restored, restored_at, count = self.clock.monotonic(), self.clock.stamp(), 0
        while True:
            batch = paced.next_batch(full, size, self.state.colors[plan.old].desired, self.state.colors[plan.new].desired)
            if batch is None:
                return restored, restored_at, count
            count += 1
            label = f"rollback batch {batch.index}/{batch.total}"
            entry = self.timeline.start(label)
            started = self.clock.monotonic()
            try:
                self.state.scale(plan.old, batch.grow_to)
                self.await_serving(plan.old, None, batch.grow_to, label)
            except CutoverFailed as e:
                self.timeline.end(entry, "failed", str(e))
                raise RollbackStalled(f"{label} of {reason!r} stopped: {e}. Traffic stays split; run again to go on") from None
            self.state.set_weights({plan.old: batch.weight, plan.new: 100 - batch.weight})
            if batch.weight == 100:
                restored, restored_at = self.clock.monotonic(), self.clock.stamp()
            self.state.scale(plan.new, batch.shrink_to)
            try:
                self.await_gone(plan.new, batch.shrink_to, label)
            except CutoverFailed as e:
                self.timeline.end(entry, "failed", str(e))
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
            self.timeline.end(
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

    def bake(self, plan: Plan, step: int, since: datetime) -> str:
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

    def run_hooks(self, stage: str, plan: Plan, **extra: Any) -> None:
        """The hooks of `stage`; a failing one fails the cutover (it rolls back)."""
        try:
            self.hook_runner.run(stage, plan.new, plan.old, **extra)
        except hooks.HookFailed as e:
            raise CutoverFailed(str(e)) from None

    def phase_traffic(self, plan: Plan) -> None:
        if plan.steps and not self.state.weights.get(plan.new):
            self.run_hooks("before_traffic", plan)
        for step in plan.steps:
            entry = self.timeline.start(f"traffic {step}%")
            since = self.clock.utcnow()
            self.state.set_weights({plan.new: step, plan.old: 100 - step})
            try:
                baked = self.bake(plan, step, since)
            except CutoverFailed as e:
                self.timeline.end(entry, "failed", str(e))
                raise
            self.timeline.end(entry, "ok", f"{plan.new}={step} {plan.old}={100 - step}, {baked}")
            verdict = self.canary_watch.steps[-1] if self.canary_watch is not None and self.canary_watch.steps else None
            self.run_hooks("after_step", plan, step=step, canary=verdict)
        if not plan.steps:
            self.timeline.end(self.timeline.start("traffic"), "skipped", f"{plan.new} already has 100%")
            return
        self.run_hooks("after_cutover", plan)

    def drain_skip_reason(self, plan: Plan) -> str:
        """Why the old colour needs no drain ("" when it does)."""
        if self.state.colors[plan.old].desired == 0:
            return f"{plan.old} is already scaled down"
        if not self.state.scale_down_old:
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
        service = self.state.app.service_names[color]
        try:
            arns = ecs_svc.list_service_tasks(self.state.aws.ecs, self.p["cluster"], service)
            tasks = ecs_svc.describe_tasks(self.state.aws.ecs, self.p["cluster"], arns) if arns else []
        except (BotoCoreError, ClientError) as e:  # traffic has moved already: a lookup refused (IAM) leaves the quiet period
            fix = "grant ecs:ListTasks and ecs:DescribeTasks (docs/iam.md) or give drain.metrics_urls"
            return endpoints.DrainWatch(color, "ecs_tasks", [], [f"the tasks of {service} could not be read ({error_code(e) or e}): {fix}"])
        urls, not_watched = endpoints.service_endpoints(tasks, service, drain.get("metrics_port") or endpoints.TRITON_METRICS_PORT)
        return endpoints.DrainWatch(color, "ecs_tasks", urls, not_watched)

    def phase_drain(self, plan: Plan) -> None:
        entry = self.timeline.start("drain")
        drain = self.p["drain"]
        skipped = self.drain_skip_reason(plan)
        if skipped:
            self.timeline.end(entry, "skipped", skipped)
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
            self.timeline.end(entry, "ok", f"{what}: waited the quiet period of {quiet_for} s" + endpoints.left_out(watch))
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
                self.timeline.end(entry, "ok", f"{what}: waited the quiet period of {quiet_for} s")
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
                self.timeline.end(
                    entry, "ok", f"{plan.old} quiet for {quiet_for} s on {len(watch.urls)} endpoint(s) {where}" + endpoints.left_out(watch)
                )
                return
            if now >= deadline:
                pending = sum(gates.in_flight(m) for m in current or [])
                self.timeline.end(
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

    def phase_finish(self, plan: Plan) -> None:
        entry = self.timeline.start("finish")
        if self.scaling is not None:
            self.state.guard_write()
            self.scaling.move(plan.old, plan.new)  # before the old colour is scaled down: its target would scale it back up
        old = self.state.colors[plan.old]
        if not self.state.scale_down_old:
            self.timeline.end(entry, "ok", f"{old.service} kept at {old.desired} tasks for instant rollback (old_color=keep)")
            return
        if old.desired == 0:
            self.timeline.end(entry, "skipped", f"{old.service} already scaled down")
            return
        wait = self.p["termination_wait_s"]
        if wait:
            try:
                self._watch(plan.new, wait, "termination wait")
            except CutoverFailed as e:
                self.timeline.end(entry, "failed", str(e))
                raise
        self.state.scale(plan.old, 0)
        if self.p["drain"]["wait_deregistration"]:
            deadline = self.clock.monotonic() + self.p["drain"]["timeout_s"]
            while self.clock.monotonic() < deadline and any(
                h.get("TargetHealth", {}).get("State") == "draining"
                for h in elb.describe_target_health(self.state.aws.elbv2, self.state.app.http.target_groups[plan.old])
            ):
                self.clock.sleep(self.p["timeouts"]["poll_interval_s"])
        self.timeline.end(entry, "ok", f"{old.service} scaled to 0" + (f" after a termination wait of {wait} s" if wait else ""))

    def phase_rollback(self, plan: Plan, reason: str = "") -> None:
        entry = self.timeline.start("rollback")
        reason = reason or plan.reason
        detected = self.clock.monotonic()
        detected_at = self.clock.stamp()
        batches = 0
        if plan.mode == "capacity_paced":
            restored, restored_at, batches = self._rollback_batches(plan, reason)
        else:
            self.state.set_weights({plan.old: 100, plan.new: 0})
            restored = self.clock.monotonic()
            restored_at = self.clock.stamp()
        if self.scaling is not None:
            self.state.guard_write()
            self.scaling.move(plan.new, plan.old)  # the target and policies stay on (or go back to) the colour that serves
        self.state.scale(plan.new, 0)
        self.rollback = {
            "reason": reason,
            "to_color": plan.old,
            "detected_at": detected_at,
            "weights_restored_at": restored_at,
            "seconds": round(restored - detected, 3),
            "batches": batches,
        }
        self.timeline.end(entry, "ok", f"traffic back on {plan.old}" + (f" in {batches} batch(es)" if batches else "") + f": {reason}")
        self.hook_runner.run_after_rollback(plan.new, plan.old, reason)
