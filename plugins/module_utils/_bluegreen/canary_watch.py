# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The canary verdict of one traffic step: read both colours' figures over the step's window, judge, and keep
what was judged for the cutover's result (and the release ledger).

The live colour's baseline is the same window when it served at least `min_requests` in it; otherwise (the 100 %
step, when it serves nothing) its window reaches back `baseline_lookback_s` before the step, over the earlier steps.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import canary
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import canary_metrics as metrics


class CanaryWatch:
    """`groups`: colour -> its target groups ([{arn, load_balancer_arn}], HTTP and gRPC)."""

    def __init__(self, cloudwatch: Any, options: dict[str, Any], groups: dict[str, list[dict[str, str]]]) -> None:
        self.cloudwatch = cloudwatch
        self.options = canary.settings(options)
        self.groups = groups
        dims = self.options.get("triton_dimensions") or {}
        self.triton = {"namespace": self.options["triton_namespace"], "dimensions": dict(dims)} if dims else None
        self.steps: list[dict[str, Any]] = []  # one verdict per judged step, for the result

    def judge(self, standby: str, live: str, since: datetime, now: datetime) -> canary.Verdict:
        period = int(self.options["period_s"])
        spec = {c: (self.groups[c], self.triton) for c in (standby, live)}
        read = metrics.read(self.cloudwatch, spec, since, now, period)
        baseline = read[live]
        if baseline.requests < self.options["min_requests"] and self.options["baseline_lookback_s"]:
            earlier = since - timedelta(seconds=self.options["baseline_lookback_s"])
            baseline = metrics.read(self.cloudwatch, {live: spec[live]}, earlier, now, period)[live]
        return canary.verdict(read[standby], baseline, self.options)

    def record(self, step: int, verdict: canary.Verdict, outcome: str, waited_s: float) -> dict[str, Any]:
        """The verdict a step ended on: `outcome` is what the step did (pass, fail, or pass/fail on insufficient data)."""
        entry = {"step": step, **verdict.as_dict()}
        entry["verdict"] = entry.pop("outcome")  # what the figures said; `outcome` is what the step did
        entry.update(outcome=outcome, waited_beyond_bake_s=round(waited_s, 3))
        self.steps.append(entry)
        return entry

    def summary(self) -> dict[str, Any]:
        failed = [s for s in self.steps if s["outcome"] != canary.PASS]
        return {
            "enabled": True,
            "verdict": canary.FAIL if failed else (canary.PASS if self.steps else "none"),
            "options": {k: v for k, v in self.options.items() if k != "enabled"},
            "steps": list(self.steps),
        }
