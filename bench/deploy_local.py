"""deploy.yml on inventories/local (the local rehearsal), first run and no-op re-run, against a fresh moto server.

Prints `name: value` lines: first_run_seconds, noop_run_seconds (wall time of `ansible-playbook deploy.yml -i
inventories/local`, what `make deploy-local` runs after its setup), noop_api_calls (AWS requests the re-run made,
from moto's access log), noop_changed_tasks (tasks the re-run reported changed; 0 is the goal), deprecation_warnings
(deprecations in both runs: those the modules returned, which the default callback prints as "[DEPRECATION WARNING]",
and those printed by the controller; 0 is the goal).
The first run builds the image only if dockerd does not have it cached already. Exits 1 only when it cannot measure.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.harness.ansible import REPO_ROOT, PlaybookRun, run_playbook
from tests.harness.figures import report
from tests.harness.images import local_rehearsal_base
from tests.harness.local_rehearsal import standby
from tests.harness.moto import MotoServer

CONTAINER = "inferops-bench-deploy-standby"
# Actions that run on the controller only (no AnsiballZ payload, no interpreter on the host).
CONTROLLER_ACTIONS = {
    "set_fact",
    "debug",
    "assert",
    "fail",
    "include_tasks",
    "include_role",
    "include_vars",
    "meta",
    "validate_argument_spec",
}


def module_runs(run) -> dict[str, int]:
    """Per task name, the module runs its results show: one per host result, or per loop item, that was not skipped."""
    runs: dict[str, int] = {}
    for task in run.tasks:
        for result in task["hosts"].values():
            if result.get("skipped") or str(result.get("action", "")).rsplit(".", 1)[-1] in CONTROLLER_ACTIONS:
                continue
            items = result.get("results")
            count = sum(1 for item in items if not item.get("skipped")) if isinstance(items, list) else 1
            if count:
                runs[task["name"]] = runs.get(task["name"], 0) + count
    return runs


def timed_deploy(extra: dict, what: str) -> tuple[PlaybookRun | None, float]:
    """deploy.yml on inventories/local and its wall time; no run when it failed (said on stderr)."""
    started = time.monotonic()
    run = run_playbook(REPO_ROOT / "deploy.yml", extra_vars=extra, inventory=str(REPO_ROOT / "inventories" / "local"))
    seconds = time.monotonic() - started
    if run.rc != 0:
        # The json callback reports a failed task on stdout; stderr carries only warnings.
        print(f"{what} failed (rc {run.rc}), failed tasks {run.failed_tasks}:\n{run.stderr[-2000:]}", file=sys.stderr)
        return None, seconds
    return run, seconds


def main() -> int:
    local_rehearsal_base()
    with tempfile.TemporaryDirectory() as tmp:
        moto = MotoServer(Path(tmp)).start()
        extra = {"aws_endpoint_url": moto.endpoint, "deploy_local_standby": standby(CONTAINER, 18200)}
        try:
            first, first_s = timed_deploy(extra, "first run")
            if first is None:
                return 1
            calls_before = moto.request_count()
            noop, noop_s = timed_deploy(extra, "no-op run")
            if noop is None:
                return 1
            noop_calls = moto.request_count() - calls_before
        finally:
            subprocess.run(["docker", "rm", "-f", CONTAINER], check=False, capture_output=True)
            moto.stop()
    runs = module_runs(noop)
    for name, count in runs.items():
        print(f"  {count} {name}", file=sys.stderr)
    return report(
        {
            "first_run_seconds": f"{first_s:.1f}",
            "noop_run_seconds": f"{noop_s:.1f}",
            "noop_api_calls": noop_calls,
            "noop_changed_tasks": len(noop.changed_tasks),
            "deprecation_warnings": len(first.deprecations) + len(noop.deprecations),
            "noop_module_runs": sum(runs.values()),
        }
    )


if __name__ == "__main__":
    sys.exit(main())
