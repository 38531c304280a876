# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The relative canary verdict: during each bake, the standby colour against the live colour over the same window.

Absolute alarms (`HTTPCode_Target_5XX_Count >= N` a minute) stay quiet when a step sends a few requests a minute to
the standby, so a standby that fails 5 % of them passes by silence. The verdict here compares ratios and latencies
of the two colours instead (as Argo Rollouts' analysis and Kayenta judge a canary against its baseline), and gives
none until the standby served `min_requests`: below that the step waits, up to a limit, rather than passing.

Pure functions over the figures of each colour (`ColorFigures`, read from CloudWatch by `canary_metrics.py`):
- error ratio: target 5xx over the target group's requests, and Triton's inference failures over its inferences
  (gRPC errors are not HTTP 5xx to the load balancer; Triton counts both protocols), each against the live colour's;
- latency: the target group's p99 response time, and Triton's mean queue + compute time per inference, each as a
  ratio to the live colour's (above an absolute slack, so two fast colours are not told apart by noise);
- optionally, a one-sided Fisher exact test on each error count: the standby fails only when its excess is also
  unlikely under "both colours fail alike".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

PASS, FAIL, WAIT = "pass", "fail", "wait"
TESTS = ("none", "fisher")
INSUFFICIENT = ("rollback", "pass")

# option -> (default, minimum, maximum); the bluegreen module's `canary` suboptions and their ranges.
DEFAULTS: dict[str, tuple[float, float, float]] = {
    "min_requests": (50, 0, 1_000_000),
    "max_wait_s": (600, 0, 86400),
    "max_error_ratio_increase": (0.01, 0.0, 1.0),
    "max_latency_ratio": (1.5, 1.0, 1000.0),
    "latency_slack_ms": (25, 0, 600_000),
    "significance": (0.05, 0.0001, 0.5),
    "baseline_lookback_s": (600, 0, 86400),
    "period_s": (60, 1, 3600),
}


@dataclass
class ColorFigures:
    """One colour over one window. None: no data point (the metric is not published, or nothing happened)."""

    requests: float = 0.0  # target group RequestCount
    target_5xx: float = 0.0  # HTTPCode_Target_5XX_Count
    p99_s: float | None = None  # TargetResponseTime p99
    inferences: float | None = None  # Triton success + failure
    inference_failures: float | None = None
    queue_compute_us: float | None = None  # Triton queue + compute time, summed over the window
    window: dict[str, str] = field(default_factory=dict)  # {start, end} of the figures, ISO 8601

    def mean_queue_compute_ms(self) -> float | None:
        if self.queue_compute_us is None or not self.inferences:
            return None
        return self.queue_compute_us / self.inferences / 1000.0

    def as_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["error_ratio"] = ratio(self.target_5xx, self.requests)
        out["inference_failure_ratio"] = ratio(self.inference_failures, self.inferences)
        out["mean_queue_compute_ms"] = self.mean_queue_compute_ms()
        return out


@dataclass
class Verdict:
    outcome: str  # pass | fail | wait
    reasons: list[str]
    checks: list[dict[str, Any]]
    standby: ColorFigures
    live: ColorFigures

    def as_dict(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "reasons": list(self.reasons),
            "checks": list(self.checks),
            "standby": self.standby.as_dict(),
            "live": self.live.as_dict(),
        }


def settings(given: dict[str, Any] | None) -> dict[str, Any]:
    """The canary options with their defaults filled in."""
    out: dict[str, Any] = {name: default for name, (default, _low, _high) in DEFAULTS.items()}
    out.update({"enabled": False, "statistical_test": "none", "on_insufficient_data": "rollback", "triton_namespace": "Triton"})
    out["triton_dimensions"] = {}
    out.update({k: v for k, v in (given or {}).items() if v is not None})
    return out


def option_errors(given: dict[str, Any] | None) -> list[str]:
    """Each bad canary option, with its value and the fix."""
    errors = []
    for name, value in (given or {}).items():
        if value is None or name not in DEFAULTS:
            continue
        _default, low, high = DEFAULTS[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
            errors.append(f"canary.{name} is {value!r}: give a number between {low:g} and {high:g}")
    given = given or {}
    if given.get("statistical_test") not in (None, *TESTS):
        errors.append(f"canary.statistical_test is {given['statistical_test']!r}: one of {', '.join(TESTS)}")
    if given.get("on_insufficient_data") not in (None, *INSUFFICIENT):
        errors.append(f"canary.on_insufficient_data is {given['on_insufficient_data']!r}: one of {', '.join(INSUFFICIENT)}")
    dims = given.get("triton_dimensions")
    if dims is not None and (not isinstance(dims, dict) or not all(isinstance(v, str) for v in dims.values())):
        errors.append(
            f"canary.triton_dimensions is {dims!r}: give the sidecar's dimensions as names to strings, e.g. {{ClusterName: inference, App: triton}}"
        )
    return errors


def ratio(part: float | None, whole: float | None) -> float | None:
    if part is None or not whole:
        return None
    return part / whole


# ---------------------------------------------------------------- the statistical test


def _log_choose(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def fisher_one_sided(standby_errors: int, standby_total: int, live_errors: int, live_total: int) -> float:
    """P(the standby shows at least `standby_errors` of all errors) when both colours fail alike: the upper tail of
    the hypergeometric distribution (one-sided Fisher exact test). Exact at the small counts a quiet service has."""
    total = standby_total + live_total
    errors = standby_errors + live_errors
    if standby_total <= 0 or errors <= 0:
        return 1.0
    denominator = _log_choose(total, standby_total)
    highest = min(errors, standby_total)
    p = 0.0
    for k in range(standby_errors, highest + 1):
        if errors - k > live_total:
            continue
        p += math.exp(_log_choose(errors, k) + _log_choose(total - errors, standby_total - k) - denominator)
    return min(p, 1.0)


# ---------------------------------------------------------------- the verdict


def _error_check(
    name: str, errors: float | None, total: float | None, live_errors: float | None, live_total: float | None, opts: dict
) -> dict:
    standby_ratio = ratio(errors, total)
    live_ratio = ratio(live_errors, live_total) or 0.0
    check: dict[str, Any] = {"check": name, "standby": standby_ratio, "live": live_ratio if live_total else None, "limit": None, "ok": True}
    if standby_ratio is None:
        check["detail"] = "no data"
        return check
    limit = live_ratio + opts["max_error_ratio_increase"]
    check["limit"] = limit
    worse = standby_ratio > limit
    if worse and opts["statistical_test"] == "fisher":
        p = fisher_one_sided(round(errors or 0), round(total or 0), round(live_errors or 0), round(live_total or 0))
        check["p_value"] = round(p, 6)
        worse = p < opts["significance"]
    check["ok"] = not worse
    return check


def _latency_check(name: str, standby: float | None, live: float | None, slack: float, opts: dict) -> dict:
    check: dict[str, Any] = {"check": name, "standby": standby, "live": live, "limit": None, "ok": True}
    if standby is None or live is None:
        check["detail"] = "no data" if standby is None else "no baseline"
        return check
    limit = max(live * opts["max_latency_ratio"], live + slack)
    check["limit"] = limit
    check["ok"] = standby <= limit
    return check


def _describe(check: dict[str, Any]) -> str:
    extra = f", p={check['p_value']:g}" if "p_value" in check else ""
    return f"{check['check']} {check['standby']:.4g} above {check['limit']:.4g} (live {check['live'] if check['live'] is not None else 'none'}{extra})"


def verdict(standby: ColorFigures, live: ColorFigures, options: dict[str, Any]) -> Verdict:
    """pass, fail or wait, from the two colours' figures over the same window (the live colour's may reach back
    `baseline_lookback_s` when it served too little in it, see `canary_metrics.py`). Wait: the standby served fewer
    than `min_requests` requests (and, with Triton's figures, inferences)."""
    opts = settings(options)
    served = max(standby.requests, standby.inferences or 0.0)
    if served < opts["min_requests"]:
        reason = f"standby served {served:g} of the {opts['min_requests']:g} requests a verdict needs"
        return Verdict(WAIT, [reason], [], standby, live)
    slack_s = opts["latency_slack_ms"] / 1000.0
    checks = [
        _error_check("target 5xx ratio", standby.target_5xx, standby.requests, live.target_5xx, live.requests, opts),
        _error_check(
            "Triton inference failure ratio", standby.inference_failures, standby.inferences, live.inference_failures, live.inferences, opts
        ),
        _latency_check("target p99 response time (s)", standby.p99_s, live.p99_s, slack_s, opts),
        _latency_check(
            "Triton mean queue + compute (ms)",
            standby.mean_queue_compute_ms(),
            live.mean_queue_compute_ms(),
            opts["latency_slack_ms"],
            opts,
        ),
    ]
    failed = [_describe(c) for c in checks if not c["ok"]]
    return Verdict(FAIL if failed else PASS, failed, checks, standby, live)


def insufficient(outcome: Verdict, waited_s: float, options: dict[str, Any]) -> str:
    """What a step does when its bake is over and the verdict still waits: wait on, or (after `max_wait_s` more)
    roll back (the default) or pass, as `on_insufficient_data` says. Returns WAIT, FAIL or PASS."""
    opts = settings(options)
    if outcome.outcome != WAIT or waited_s < opts["max_wait_s"]:
        return outcome.outcome
    return FAIL if opts["on_insufficient_data"] == "rollback" else PASS
