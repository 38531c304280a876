# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The canary verdict of each traffic step: read both colours' figures over the step's window, judge, hold the step
until there is a verdict, and keep what was judged for the cutover's result (and the release ledger).

`CanaryWatch` is a collaborator the traffic phase calls with explicit inputs (the CloudWatch client, the options,
each colour's target groups, the clock, and the phases' watch of alarms and gates). The live colour's baseline is the
same window when it served at least `min_requests` in it; otherwise (the 100 % step, when it serves nothing) its
window reaches back `baseline_lookback_s` before the step, over the earlier steps.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import canary
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import canary_metrics as metrics

# The phases' watch of alarms and gates: watch(seconds, what, also) waits `seconds`, checking them (and `also`, the
# verdict) every watch interval, and raises when one fails.
Watch = Callable[[float, str, Callable[[], None]], None]
# What a step did when its bake ended without a verdict (on_insufficient_data rollback, or pass).
INSUFFICIENT_FAIL, INSUFFICIENT_PASS = "insufficient_data", "insufficient_data_pass"


class CanaryFailed(Exception):
    """The standby is worse than the live colour, or no verdict came in time: the cutover rolls back."""


class CanaryWatch:
    """`target_groups`: colour -> its target group ARNs (HTTP, and gRPC when the application has one)."""

    def __init__(self, cloudwatch: Any, options: dict[str, Any], target_groups: dict[str, list[str]], clock: Any) -> None:
        self.cloudwatch = cloudwatch
        self.options = canary.settings(options)
        self.target_groups = target_groups
        self.clock = clock
        self.groups: dict[str, list[dict[str, str]]] = {}  # colour -> [{arn, load_balancer_arn}], once attached
        dims = self.options.get("triton_dimensions") or {}
        self.triton = {"namespace": self.options["triton_namespace"], "dimensions": dict(dims)} if dims else None
        self.steps: list[dict[str, Any]] = []  # one verdict per judged step, for the result

    def attach(self, descriptions: dict[str, dict[str, Any] | None]) -> list[str]:
        """Each target group's load balancer (its metrics' LoadBalancer dimension), from describe_target_groups;
        before the first write, the groups behind none (their RequestCount cannot be read)."""
        problems = []
        for color, arns in self.target_groups.items():
            self.groups[color] = []
            for arn in arns:
                balancers = (descriptions.get(arn) or {}).get("LoadBalancerArns") or []
                if not balancers:
                    problems.append(
                        f"target group {arn} is behind no load balancer: its RequestCount cannot be read for the canary verdict; "
                        "attach it to the production listener or set canary.enabled false"
                    )
                self.groups[color].append({"arn": arn, "load_balancer_arn": balancers[0] if balancers else ""})
        return problems

    def judge(self, standby: str, live: str, since: datetime, now: datetime) -> canary.Verdict:
        period = int(self.options["period_s"])
        spec = {c: (self.groups[c], self.triton) for c in (standby, live)}
        read = metrics.read(self.cloudwatch, spec, since, now, period)
        baseline = read[live]
        if baseline.requests < self.options["min_requests"] and self.options["baseline_lookback_s"]:
            earlier = since - timedelta(seconds=self.options["baseline_lookback_s"])
            baseline = metrics.read(self.cloudwatch, {live: spec[live]}, earlier, now, period)[live]
        return canary.verdict(read[standby], baseline, self.options)

    def bake(self, step: int, standby: str, live: str, since: datetime, bake_time_s: float, interval_s: float, watch: Watch) -> str:
        """Hold the step `bake_time_s` under `watch`, judging the standby against the live colour at each check; when
        the bake is over without a verdict, wait for one (up to max_wait_s). Returns what the bake ended on, for the
        timeline; raises CanaryFailed on a failing verdict or none in time."""
        latest: list[canary.Verdict] = []

        def judge() -> None:
            found = self.judge(standby, live, since, self.clock.utcnow())
            latest[:] = [found]
            if found.outcome == canary.FAIL:
                self.record(step, found, canary.FAIL, 0.0)
                raise CanaryFailed(f"canary verdict at {step}%: {standby} is worse than {live}: " + "; ".join(found.reasons))

        watch(bake_time_s, f"bake at {step}%", judge)
        bake_end = self.clock.monotonic()
        if not latest:
            judge()  # a bake of 0 s judges once at its end
        while True:
            waited = self.clock.monotonic() - bake_end
            decision = canary.insufficient(latest[0], waited, self.options)
            if decision == canary.PASS:
                passed = latest[0].outcome == canary.PASS
                self.record(step, latest[0], canary.PASS if passed else INSUFFICIENT_PASS, waited)
                if passed:
                    more = f" (waited {waited:.0f} s more)" if waited >= 1 else ""
                    return f"baked {bake_time_s} s, canary verdict pass on {latest[0].standby.requests:g} requests{more}"
                return (
                    f"baked {bake_time_s} s, no canary verdict after {waited:.0f} s more ({latest[0].reasons[0]}): "
                    "passed (on_insufficient_data pass)"
                )
            if decision == canary.FAIL:
                self.record(step, latest[0], INSUFFICIENT_FAIL, waited)
                raise CanaryFailed(
                    f"canary verdict at {step}%: none after the bake and {waited:.0f} s more ({latest[0].reasons[0]}); "
                    "raise the step's weight or bake_time_s, lower canary.min_requests, or set canary.on_insufficient_data pass"
                )
            watch(interval_s or 1, f"canary wait at {step}%", judge)

    def record(self, step: int, verdict: canary.Verdict, outcome: str, waited_s: float) -> dict[str, Any]:
        """The verdict a step ended on: `outcome` is what the step did (pass, fail, or pass/fail on insufficient data)."""
        entry = {"step": step, **verdict.as_dict()}
        entry["verdict"] = entry.pop("outcome")  # what the figures said; `outcome` is what the step did
        entry.update(outcome=outcome, waited_beyond_bake_s=round(waited_s, 3))
        self.steps.append(entry)
        return entry

    def summary(self) -> dict[str, Any]:
        """The cutover's verdict: fail when a step failed (on its figures or for want of them), pass when every step
        passed on its figures, insufficient_data_pass when some passed without a verdict (on_insufficient_data pass)."""
        outcomes = {s["outcome"] for s in self.steps}
        if outcomes & {canary.FAIL, INSUFFICIENT_FAIL}:
            overall = canary.FAIL
        elif INSUFFICIENT_PASS in outcomes:
            overall = INSUFFICIENT_PASS
        else:
            overall = canary.PASS if self.steps else "none"
        return {
            "enabled": True,
            "verdict": overall,
            "options": {k: v for k, v in self.options.items() if k != "enabled"},
            "steps": list(self.steps),
        }
