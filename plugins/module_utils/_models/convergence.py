# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""Whether the fleet runs its release: one verdict per instance from its agent's status object, and the wait for all.

Pure functions (the wait takes the reader, the clock and the sleep); `rollout` reads the status objects.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

RUNBOOK = "docs/runbook.md, section 'Stuck hydration'"


class RolloutError(Exception):
    """The fleet did not converge (a timeout or a failed instance); the message names the instances and why."""

    def __init__(self, message: str, verdicts: list[dict[str, Any]]) -> None:
        super().__init__(message)
        self.verdicts = verdicts


def failures_total(status: dict[str, Any] | None) -> int:
    """nv_inference_request_failure summed over every task and model the status reports."""
    per_task = (status or {}).get("inference_failures") or {}
    return sum(int(count) for models in per_task.values() if isinstance(models, dict) for count in models.values())


def instance_verdict(
    instance_id: str, status: dict[str, Any] | None, wanted: dict[str, Any] | None, failures_before: int | None = None, problem: str = ""
) -> dict[str, Any]:
    """Whether one instance runs its target release. `failures_before` (a canary check) also demands no error and no new failures.

    `failed` marks a verdict that waiting cannot change: the agent reports the wanted release failed, or failures rose.
    """
    wanted_id = wanted["release_id"] if wanted else None
    status = status or {}
    # The instance's entry for this release (each colour's release has one); an agent of schema 1 reports only its target.
    held = (status.get("releases") or {}).get(wanted_id) if wanted_id else None
    on_target = status.get("release_id") == wanted_id
    applied = bool(held["applied"]) if held is not None else on_target and bool(status.get("applied"))
    errors = "; ".join(held.get("errors") or []) if held is not None else ""
    verdict = {
        "instance_id": instance_id,
        "wanted_release_id": wanted_id,
        "release_id": status.get("release_id"),
        "state": status.get("state"),
        "applied": applied,
        "last_error": errors or status.get("last_error"),
        "inference_failures": failures_total(status),
        "updated": status.get("updated"),
        "ok": False,
        "failed": False,
        "reason": "",
    }
    if problem:
        verdict["reason"] = problem
    elif not status:
        verdict["reason"] = "no status object yet (its model agent has not reported)"
    elif held is None and not on_target:
        verdict["reason"] = f"reports release {status.get('release_id')} (state {status.get('state')}), not yet {wanted_id}"
    elif errors or (on_target and status.get("state") == "failed" and not applied):
        verdict.update(failed=True, reason=f"failed to apply {wanted_id}: {verdict['last_error'] or 'no error text'}")
    elif not applied:
        verdict["reason"] = f"still {status.get('state')} {wanted_id}"
    elif failures_before is not None and status.get("last_error"):
        verdict.update(failed=True, reason=f"applied {wanted_id} with an error: {status['last_error']}")
    elif failures_before is not None and verdict["inference_failures"] > failures_before:
        verdict.update(failed=True, reason=f"inference failures rose from {failures_before} to {verdict['inference_failures']}")
    else:
        verdict["ok"] = True
    if verdict["last_error"] and not verdict["ok"] and verdict["last_error"] not in verdict["reason"]:
        verdict["reason"] += f"; last_error: {verdict['last_error']}"
    return verdict


def laggard_message(verdicts: list[dict[str, Any]], waited_s: float, status_url: str) -> str:
    """The instances not on their release, each with why; the fix says where to look."""
    behind = [v for v in verdicts if not v["ok"]]
    failed = [v for v in behind if v["failed"]]
    named = "; ".join(f"{v['instance_id']}: {v['reason']}" for v in (failed or behind))
    if failed:
        head = f"{len(failed)} of {len(verdicts)} instances failed the release"
    else:
        head = f"{len(behind)} of {len(verdicts)} instances did not report their release applied within {waited_s:.0f} s"
    return f"{head}: {named}. Status objects: {status_url}<instance-id>.json; see {RUNBOOK}"


def wait_converged(
    read_verdicts: Callable[[], list[dict[str, Any]]],
    timeout_s: float,
    poll_interval_s: float,
    bake_s: float = 0,
    status_url: str = "",
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[list[dict[str, Any]], float]:
    """Polls until every verdict is ok (and stays ok for `bake_s`); a failed verdict or the timeout raises RolloutError."""
    start = clock()
    ok_since: float | None = None
    while True:
        verdicts = read_verdicts()
        now = clock()
        waited = now - start
        if any(v["failed"] for v in verdicts):
            raise RolloutError(laggard_message(verdicts, waited, status_url), verdicts)
        if verdicts and all(v["ok"] for v in verdicts):  # no verdict at all (no instance) is no proof
            ok_since = now if ok_since is None else ok_since
            if now - ok_since >= bake_s:
                return verdicts, waited
        else:
            ok_since = None
        if waited >= timeout_s:
            raise RolloutError(laggard_message(verdicts, waited, status_url), verdicts)
        remaining_bake = bake_s - (now - ok_since) if ok_since is not None else poll_interval_s
        sleep(max(0.0, min(poll_interval_s, timeout_s - waited, remaining_bake)))
