# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""Carries out a blue/green plan: observes AWS, asks `plan.decide()`, runs each phase, rolls back on failure.

What the run reads and writes is in `cutover_state.py`, the phases in `cutover_phases.py`. The AWS calls go through
the thin client files (`_aws/ecs.py`, `_aws/elbv2.py`, `_aws/cloudwatch.py`); Triton gates and drains through
`_triton_client.py`. Time comes from a `Clock`, so tests can count the waits.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import ecs as ecs_svc
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import gates, hooks, paced, placement
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import plan as bg
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.cutover_phases import CutoverFailed, CutoverPhases


class Runner(CutoverPhases):
    """One run of the bluegreen module: discover, decide, then the plan's phases under the cutover lock."""

    def run(self) -> dict[str, Any]:
        try:
            result = self._run()
        except Exception as e:
            for entry in self.timeline:  # the phase that raised ends as failed; the module reports the timeline
                if "_t0" in entry:
                    self._end(entry, "failed", entry["detail"])
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
        entry = self._phase("discover")
        self.validate_aws()
        if self.guard is not None:
            self.guard.check_free()
        self.observe(self.described)
        self._read_record()
        self.before = self._snapshot()
        plan = self._decide()
        phases = bg.truncate(plan, self.p.get("stop_after"))
        self._refuse_alarms_before_writes(plan)
        if plan.mode == "capacity_paced" and "capacity" in phases and not self.check_mode:
            self.phase_capacity(plan)  # reads only: a batch that cannot be placed is refused before any write, the lock's included
        if self.guard is not None and not self.check_mode and self._writes_ahead(plan, phases):
            plan, phases = self._plan_under_lock()
        self._end(entry, "ok", f"{plan.action}: {plan.reason}")
        if self.check_mode:
            if "capacity" in phases:
                self.phase_capacity(plan)  # reads only: a standby the real run could not place fails the dry run too
            full = self.desired_count()
            if plan.mode == "capacity_paced" and "rollback" in phases:
                full = self.rollback_full_count(plan)
                self.size_batch(
                    full,
                    placement.task_needs(self.task_definition),
                    placement.usable_instances(ecs_svc.container_instances(self.aws.ecs, self.p["cluster"])),
                )
            self.writes = bg.planned_writes(
                plan, phases, self.colors, self.td_arn, full, self.weights, self.scale_down_old, batch_size=self.batch_size
            )
            if self.grpc_tgs:  # the gRPC route's forward moves with each weight write
                self.writes = [w for write in self.writes for w in _with_grpc(write)]
            if "drain" in phases and not self.drain_skip_reason(plan):
                self.drain_watched = self.drain_watch(plan.old)  # reads only; whether the controller reaches them is not probed
            if self.scaling is not None:
                self.writes += self.scaling.planned(plan, phases)
            return self._result(plan, phases, start, planned=True)
        if self.scaling is not None and plan.action == "noop":
            if self.guard is not None:
                self.guard.check_controller()  # no lock is taken for a noop; check_free above saw no other run
            self.scaling.set_scale_in(plan.live, False)  # a cutover that never finished (a killed controller) held it
        failure = ""
        try:
            if plan.restore_first and phases:
                self.set_weights({plan.old: 100, plan.new: 0})
            for phase in phases:
                getattr(self, f"phase_{phase}")(plan)
        except CutoverFailed as e:
            failure = str(e)
            self.phase_rollback(plan, reason=failure)
        result = self._result(plan, phases, start)
        result["failed_reason"] = failure
        return result

    def _decide(self) -> bg.Plan:
        return bg.decide(
            self.p["state"],
            self.td_arn,
            self.desired_count(),
            self.p["traffic_steps"],
            self.weights,
            self.colors,
            self.scale_down_old,
            mode=self.p.get("mode") or "blue_green",
        )

    def _read_record(self) -> None:
        """A capacity-paced run reads the cutover record (its full count, and the old colour's to restore)."""
        if self.paced and self.guard is not None:
            self.record = self.guard.recorded()

    def _refuse_alarms_before_writes(self, plan: bg.Plan) -> None:
        """An alarm already in ALARM fails a cutover (or the scale-down of the old colour) before its first write.
        Traffic already split is left to the gates, which roll back."""
        split = all(self.weights[c] > 0 for c in bg.COLORS)
        if plan.action not in ("cutover", "finish") or split or not self.p.get("alarm_names"):
            return
        problems = gates.alarm_problems(self.alarms, self.p["alarm_names"])  # read by validate_aws in this discover
        if problems:
            what = "the cutover" if plan.action == "cutover" else f"scaling down {plan.old} (the instant rollback)"
            raise bg.PlanError([f"{p}: {what} does not start while it is; nothing was written" for p in problems])

    def _writes_ahead(self, plan: bg.Plan, phases: list[str]) -> bool:
        """Whether this call works on a cutover (any phase to run): it holds the lock, refreshed through its waits
        (a long drain included). A run with nothing to do takes no lock and writes nothing."""
        return bool(phases) or plan.restore_first

    def _plan_under_lock(self) -> tuple[bg.Plan, list[str]]:
        """Take the lock, then observe and plan again: what this run acts on is read after the lock is held."""
        self.guard.take_lock()
        self.observe()
        self._read_record()
        self.before = self._snapshot()
        plan = self._decide()
        if plan.action == "cutover":
            self.guard.record(plan.old, plan.new, self.td_arn, self.desired_count() if plan.mode == "capacity_paced" else None)
            self.record = self.guard.recorded()
        return plan, bg.truncate(plan, self.p.get("stop_after"))

    def _hook_phases(self, plan: bg.Plan) -> tuple[list[str], list[int]]:
        """The phases and traffic steps the hooks see: a capacity-paced plan's batches hold the standby, gates and
        traffic stages, each batch's weight a step (known once the capacity phase sized the batch)."""
        if "batches" not in plan.phases:
            return plan.phases, plan.steps
        weights = []
        if self.batch_size and self.colors:
            new, old = self.colors[plan.new], self.colors[plan.old]
            batches = paced.schedule(self.desired_count(), self.batch_size, bg.growing_count(new, self.td_arn), old.desired)
            weights = [b.weight for b in batches]
        return [*plan.phases, "standby_up", "gates", "traffic"], weights

    def _restore_scale_in_after_failure(self) -> None:
        """A failed run that wrote leaves scale-in restored on the colour with traffic (the next cutover suspends it
        again). A run refused before its first write restores nothing: another run may hold the cutover and its scale-in."""
        if self.scaling is None or not self.weights or self.check_mode or not self.writes:
            return
        try:
            self.scaling.set_scale_in(bg.live_color(self.weights), False)
        except Exception as e:  # the run's own error is the one to report; this one is added to its actions
            self.writes.append(f"could not restore scale-in: {e}")

    def _result(self, plan: bg.Plan, phases: list[str], start: float, planned: bool = False) -> dict[str, Any]:
        for entry in self.timeline:
            entry.pop("_t0", None)
        after = self._snapshot()
        live = bg.live_color(self.weights)
        return {
            "changed": bool(self.writes),
            "decision": plan.action,
            "plan": plan.as_dict(),
            "phases_run": phases,
            "planned": planned,
            "actions": list(self.writes),
            "timeline": self.timeline,
            "weights": after["weights"],
            "live_color": live,
            "task_definitions": after["task_definitions"],
            "desired_counts": after["desired_counts"],
            "colors": {c: s.as_dict() for c, s in self.colors.items()},
            "rollback": self.rollback,
            "batches": list(self.batches),
            "capacity_plan": dict(self.capacity_plan),
            "told_waits_s": round(self.clock.told_waits_s, 3),
            "wall_s": round(self.clock.monotonic() - start, 3),
            "diff": {"before": self.before, "after": after},
            "autoscaling": self.scaling.summary() if self.scaling is not None else {},
            "drain_watch": self.drain_watched.as_dict() if self.drain_watched is not None else {},
            "canary": self.canary_watch.summary() if self.canary_watch is not None else {"enabled": False},
            "hooks": list(self.hook_runner.runs),
            "hooks_planned": hooks.planned(self.p.get("hooks"), *self._hook_phases(plan)),
        }


def _with_grpc(write: str) -> list[str]:
    """A planned write, followed by the gRPC route's when it sets the production weights."""
    if write.startswith("set production weights"):
        return [write, write.replace("set production weights", "set gRPC weights")]
    return [write]
