"""`deploy.yml --check --diff` on the local rehearsal, and the preflight on inventories/example.

A real deploy of inventories/local into a fresh moto server first; then check runs on it (no-op, and with one input
changed: the target groups' slow start, owned by one task), and one on an empty moto server (a fresh account).
Prints `name: value` lines:
  check_noop_changed_tasks        tasks reported changed by the no-op check run (target 0)
  check_one_change_changed_tasks  tasks reported changed with the slow start changed (target 1, the task that owns it)
  check_writes                    AWS write calls of all the check runs, from moto's request recorder (target 0)
  check_run_seconds               wall time of the no-op check run
  preflight_placeholders_reported placeholders one preflight run names on inventories/example
  preflight_placeholders_present  the values of inventories/example that carry a placeholder marker
Exits 1 only when it cannot measure.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.harness.ansible import REPO_ROOT, run_playbook
from tests.harness.aws_calls import start_recording, writes
from tests.harness.figures import report
from tests.harness.images import local_rehearsal_base
from tests.harness.local_rehearsal import standby
from tests.harness.moto import MotoServer
from tests.integration.test_preflight import PREFLIGHT_TASK, _example_placeholder_lines

CONTAINER = "inferops-bench-dry-run-standby"
LOCAL = str(REPO_ROOT / "inventories" / "local")


def _extra(moto: MotoServer, port: int, container: str = CONTAINER) -> dict:
    return {
        "aws_endpoint_url": moto.endpoint,
        "triton_image_revision": "bench-dry-run",
        "triton_image_version": "bench-dry-run",
        "deploy_local_standby": standby(container, port),
    }


def _fail(what: str, run) -> int:
    print(f"{what} failed (rc {run.rc}):\n{run.stderr[-2000:]}\n{run.stdout[-2000:]}", file=sys.stderr)
    return 1


def main() -> int:
    local_rehearsal_base()
    with tempfile.TemporaryDirectory() as tmp:
        moto = MotoServer(Path(tmp)).start()
        empty = MotoServer(Path(tmp)).start()
        try:
            deploy = run_playbook(REPO_ROOT / "deploy.yml", extra_vars=_extra(moto, 18220), inventory=LOCAL)
            if deploy.rc != 0:
                return _fail("the deploy", deploy)
            start_recording(moto)
            started = time.monotonic()
            noop = run_playbook(REPO_ROOT / "deploy.yml", extra_vars=_extra(moto, 18220), inventory=LOCAL, check=True, diff=True)
            noop_s = time.monotonic() - started
            if noop.rc != 0:
                return _fail("the no-op check run", noop)
            one = run_playbook(
                REPO_ROOT / "deploy.yml",
                extra_vars={**_extra(moto, 18220), "fleet_load_balancing_slow_start_s": 90},
                inventory=LOCAL,
                check=True,
                diff=True,
            )
            if one.rc != 0:
                return _fail("the one-change check run", one)
            start_recording(empty)
            fresh = run_playbook(
                REPO_ROOT / "deploy.yml",
                extra_vars=_extra(empty, 18221, CONTAINER + "-fresh"),
                inventory=LOCAL,
                check=True,
                diff=True,
            )
            if fresh.rc != 0:
                return _fail("the fresh-account check run", fresh)
            check_writes = len(writes(moto)) + len(writes(empty))
        finally:
            subprocess.run(["docker", "rm", "-f", CONTAINER], check=False, capture_output=True)
            moto.stop()
            empty.stop()
    preflight = run_playbook(REPO_ROOT / "playbooks" / "preflight.yml", inventory=str(REPO_ROOT / "inventories" / "example"))
    try:
        reported = len(preflight.result(PREFLIGHT_TASK)["placeholders"])
    except KeyError:
        return _fail("the preflight on inventories/example", preflight)
    return report(
        {
            "check_noop_changed_tasks": len(noop.changed_tasks),
            "check_one_change_changed_tasks": len(one.changed_tasks),
            "check_writes": check_writes,
            "check_run_seconds": f"{noop_s:.1f}",
            "preflight_placeholders_reported": reported,
            "preflight_placeholders_present": len(_example_placeholder_lines()),
        }
    )


if __name__ == "__main__":
    sys.exit(main())
