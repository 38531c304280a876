# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""Carries out a blue/green plan: observes AWS, asks `plan.decide()`, runs each phase, rolls back on failure.

What the run reads and writes is in `cutover_state.py` (through `application.py`), the capacity check in
`capacity_check.py`, the phases in `cutover_phases.py`. The AWS calls go through
the thin client files (`_aws/ecs.py`, `_aws/elbv2.py`, `_aws/cloudwatch.py`); Triton gates and drains through
`_triton_client.py`. Time comes from a `Clock`, so tests can count the waits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import gates, hooks, paced
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.autoscaling import CutoverScaling
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.canary_watch import CanaryWatch
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.capacity_check import CapacityCheck
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.clock import Clock
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.colors import COLORS, is_split
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.cutover_phases import CutoverPhases
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.cutover_state import (
    Clients,
    CutoverFailed,
    CutoverState,
    Timeline,
)
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.hook_runner import HookRunner
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.plan import (
    Plan,
    PlanError,
    decide,
    growing_count,
    planned_writes,
    truncate,
)
from ansible_collections.inferops.triton_ecs.plugins.module_utils._triton_client import TritonClient


class Runner:
    """One run of the bluegreen module: discover, decide, then the plan's phases under the cutover lock.

    It makes the run's collaborators and hands each what it needs: the state (`CutoverState`: what AWS shows and
    the checked writes), the timeline, the capacity check, autoscaling (`autoscaling: true`), the canary watch
    (canary.enabled), the hooks, and the phases that use them all."""

    def __init__(
        self,
        params: dict[str, Any],
        clients: Clients,
        check_mode: bool = False,
        clock: Clock | None = None,
        triton: Callable[[str, float], Any] = TritonClient,
        guard: Any = None,
    ) -> None:
        self.p = params
        self.check_mode = check_mode
        self.clock = clock or Clock()
        self.guard = guard  # guard.CutoverGuard: controller alive and lock held before each write
        self.timeline = Timeline(self.clock)
        self.state = state = CutoverState(params, clients, guard)
        self.before: dict[str, Any] = {}
        self.scaling = (
            CutoverScaling(
                clients.application_autoscaling,
                clients.cloudwatch,
                params["cluster"],
                state.app.service_names,
                params["name"],
                state.writes,
                hold_scale_out=state.paced,
            )
            if params.get("autoscaling")
            else None
        )
        canary = params.get("canary") or {}
        self.canary_watch = (
            CanaryWatch(clients.cloudwatch, canary, {c: state.app.groups(c) for c in COLORS}, self.clock) if canary.get("enabled") else None
        )
        self.hook_runner = HookRunner(
            params.get("hooks"),
            clients.lambda_ if params.get("hooks") else None,
            self.clock,
            self.timeline.start,
            self.timeline.end,
            state.guard_write,
            lambda stage, new, old, extra: hooks.context(params, stage, new, old, state.weights, **extra),
        )
        self.capacity = CapacityCheck(clients, params["cluster"], params.get("batch_size"), self.timeline)
        self.phases = CutoverPhases(
            params, state, self.capacity, self.timeline, self.clock, triton, self.hook_runner, self.scaling, self.canary_watch
        )

    @property
    def writes(self) -> list[str]:
        return self.state.writes

    @property
    def batches(self) -> list[dict[str, Any]]:
        return self.phases.batches

    def run(self) -> dict[str, Any]:
        try:
            result = self._run()
        except Exception as e:
            self.timeline.fail_running()
            if self.guard is not None:
                self.guard.end(complete=True, error=e)
            if self.guard is None or not self.guard.refuses(e):
                self._restore_scale_in_after_failure()
            raise
        if self.guard is not None:
            self.guard.end(complete=bool(result.get("failed_reason")) or result["phases_run"] == result["plan"]["phases"])
        return result

    def _run(self) -> dict[str, Any]:
        start = self.clock.monotonic()
        state = self.state
        entry = self.timeline.start("discover")
        self._validate_aws()
        if self.guard is not None:
            self.guard.check_free()
        state.observe(state.described)
        state.read_record()
        self.before = state.app.view()
        plan = self._decide()
        phases = truncate(plan, self.p.get("stop_after"))
        self._refuse_alarms_before_writes(plan)
        if plan.mode == "capacity_paced" and "capacity" in phases and not self.check_mode:
            self.phases.phase_capacity(plan)  # reads only: a batch that cannot be placed is refused before any write, the lock's included
        if self.guard is not None and not self.check_mode and self._writes_ahead(plan, phases):
            plan, phases = self._plan_under_lock()
        self.timeline.end(entry, "ok", f"{plan.action}: {plan.reason}")
        if self.check_mode:
            return self._planned(plan, phases, start)
        if self.scaling is not None and plan.action == "noop":
            if self.guard is not None:
                self.guard.check_controller()  # no lock is taken for a noop; check_free above saw no other run
            self.scaling.set_scale_in(plan.live, False)  # a cutover that never finished (a killed controller) held it
        failure = ""
        try:
            if plan.restore_first and phases:
                state.set_weights({plan.old: 100, plan.new: 0})
            for phase in phases:
                getattr(self.phases, f"phase_{phase}")(plan)
        except CutoverFailed as e:
            failure = str(e)
            self.phases.phase_rollback(plan, reason=failure)
        result = self._result(plan, phases, start)
        result["failed_reason"] = failure
        return result

    def _validate_aws(self) -> None:
        """Every check that needs AWS and must pass before the first write; raises PlanError naming what is wrong."""
        errors = self.state.aws_problems()
        if self.canary_watch is not None:
            errors += self.canary_watch.attach(self.state.target_group_descriptions)
        errors += self.hook_runner.problems()
        if errors:
            raise PlanError(errors)

    def _planned(self, plan: Plan, phases: list[str], start: float) -> dict[str, Any]:
        """Check mode: the writes these phases would make, from reads only."""
        state = self.state
        if "capacity" in phases:
            self.phases.phase_capacity(plan)  # reads only: a standby the real run could not place fails the dry run too
        full = state.desired_count()
        if plan.mode == "capacity_paced" and "rollback" in phases:
            full = state.rollback_full_count(plan)
            self.capacity.size_rollback(state, full)
        writes = planned_writes(
            plan, phases, state.colors, state.td_arn, full, state.weights, state.scale_down_old, batch_size=self.capacity.batch
        )
        if state.app.grpc is not None:  # the gRPC route's forward moves with each weight write
            writes = [w for write in writes for w in _with_grpc(write)]
        state.writes[:] = writes
        if "drain" in phases and not self.phases.drain_skip_reason(plan):
            self.phases.drain_watched = self.phases.drain_watch(plan.old)  # reads only; whether the controller reaches them is not probed
        if self.scaling is not None:
            state.writes += self.scaling.planned(plan, phases)
        return self._result(plan, phases, start, planned=True)

    def _decide(self) -> Plan:
        state = self.state
        return decide(
            self.p["state"],
            state.td_arn,
            state.desired_count(),
            self.p["traffic_steps"],
            state.weights,
            state.colors,
            state.scale_down_old,
            mode=self.p.get("mode") or "blue_green",
        )

    def _refuse_alarms_before_writes(self, plan: Plan) -> None:
        """An alarm already in ALARM fails a cutover (or the scale-down of the old colour) before its first write.
        Traffic already split is left to the gates, which roll back."""
        if plan.action not in ("cutover", "finish") or is_split(self.state.weights) or not self.p.get("alarm_names"):
            return
        problems = gates.alarm_problems(self.state.alarms, self.p["alarm_names"])  # read by _validate_aws in this discover
        if problems:
            what = "the cutover" if plan.action == "cutover" else f"scaling down {plan.old} (the instant rollback)"
            raise PlanError([f"{p}: {what} does not start while it is; nothing was written" for p in problems])

    def _writes_ahead(self, plan: Plan, phases: list[str]) -> bool:
        """Whether this call works on a cutover (any phase to run): it holds the lock, refreshed through its waits
        (a long drain included). A run with nothing to do takes no lock and writes nothing."""
        return bool(phases) or plan.restore_first

    def _plan_under_lock(self) -> tuple[Plan, list[str]]:
        """Take the lock, then observe and plan again: what this run acts on is read after the lock is held."""
        state = self.state
        self.guard.take_lock()
        state.observe()
        state.read_record()
        self.before = state.app.view()
        plan = self._decide()
        if plan.action == "cutover":
            self.guard.record(plan.old, plan.new, state.td_arn, state.desired_count() if plan.mode == "capacity_paced" else None)
            state.read_record()
        return plan, truncate(plan, self.p.get("stop_after"))

    def _hook_phases(self, plan: Plan) -> tuple[list[str], list[int]]:
        """The phases and traffic steps the hooks see: a capacity-paced plan's batches hold the standby, gates and
        traffic stages, each batch's weight a step (known once the capacity phase sized the batch)."""
        if "batches" not in plan.phases:
            return plan.phases, plan.steps
        weights = []
        state = self.state
        if self.capacity.batch and state.colors:
            new, old = state.colors[plan.new], state.colors[plan.old]
            batches = paced.schedule(state.desired_count(), self.capacity.batch, growing_count(new, state.td_arn), old.desired)
            weights = [b.weight for b in batches]
        return [*plan.phases, "standby_up", "gates", "traffic"], weights

    def _restore_scale_in_after_failure(self) -> None:
        """A failed run that wrote leaves scale-in restored on the colour with traffic (the next cutover suspends it
        again). A run refused before its first write restores nothing: another run may hold the cutover and its scale-in."""
        if self.scaling is None or not self.state.weights or self.check_mode or not self.state.writes:
            return
        try:
            self.scaling.set_scale_in(self.state.app.live, False)
        except Exception as e:  # the run's own error is the one to report; this one is added to its actions
            self.state.writes.append(f"could not restore scale-in: {e}")

    def _result(self, plan: Plan, phases: list[str], start: float, planned: bool = False) -> dict[str, Any]:
        state, run = self.state, self.phases
        after = state.app.view()
        return {
            "changed": bool(state.writes),
            "decision": plan.action,
            "plan": plan.as_dict(),
            "phases_run": phases,
            "planned": planned,
            "actions": list(state.writes),
            "timeline": self.timeline.report(),
            "weights": after["weights"],
            "live_color": state.app.live,
            "task_definitions": after["task_definitions"],
            "desired_counts": after["desired_counts"],
            "colors": {c: s.as_dict() for c, s in state.colors.items()},
            "rollback": run.rollback,
            "batches": list(run.batches),
            "capacity_plan": dict(self.capacity.plan),
            "told_waits_s": round(self.clock.told_waits_s, 3),
            "wall_s": round(self.clock.monotonic() - start, 3),
            "diff": {"before": self.before, "after": after},
            "autoscaling": self.scaling.summary() if self.scaling is not None else {},
            "drain_watch": run.drain_watched.as_dict() if run.drain_watched is not None else {},
            "canary": self.canary_watch.summary() if self.canary_watch is not None else {"enabled": False},
            "hooks": list(self.hook_runner.runs),
            "hooks_planned": hooks.planned(self.p.get("hooks"), *self._hook_phases(plan)),
        }


def _with_grpc(write: str) -> list[str]:
    """A planned write, followed by the gRPC route's when it sets the production weights."""
    if write.startswith("set production weights"):
        return [write, write.replace("set production weights", "set gRPC weights")]
    return [write]
