"""The emergency rollback after a cutover on the local rehearsal, and two cutovers started together.

Prints, one per line as `name: value`:
- emergency_rollback_seconds: wall time of `ansible-playbook playbooks/rollback_traffic.yml -i inventories/local`
  (Ansible start-up included) after two deploy.yml runs of the local rehearsal, the second a new task-definition
  revision with the old colour kept; target <= 10 s;
- emergency_rollback_builds: image builds, tags and pushes dockerd reported while the rollback ran (`docker events`),
  plus tasks of the triton_image role it ran; target 0;
- concurrent_cutovers_started: of two bluegreen cutovers of one application started at the same instant (two
  ansible-playbook processes), how many wrote anything; target 1.

Stand-ins: a fresh moto server for AWS; the local rehearsal's registry and Docker engine (as bench/deploy_local.py).
Exits 1 only when it cannot measure.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.harness.ansible import REPO_ROOT, playbook_env, run_playbook
from tests.harness.bluegreen import CUTOVER_PLAYBOOK, create_app
from tests.harness.figures import report
from tests.harness.images import local_rehearsal_base
from tests.harness.local_rehearsal import standby
from tests.harness.moto import MotoServer

CONTAINER = "inferops-bench-rollback-standby"
IMAGE_ACTIONS = ("build", "tag", "push", "import", "load")


def image_events(since: str, until: str) -> list[str]:
    out = subprocess.run(
        ["docker", "events", "--since", since, "--until", until, "--filter", "type=image", "--format", "{{.Action}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [a for a in out.split() if a in IMAGE_ACTIONS]


def emergency_rollback(tmp: Path) -> tuple[float, int] | None:
    moto = MotoServer(tmp).start()
    inventory = str(REPO_ROOT / "inventories" / "local")
    extra = {"aws_endpoint_url": moto.endpoint, "deploy_local_standby": standby(CONTAINER, 18210)}
    try:
        first = run_playbook(REPO_ROOT / "deploy.yml", extra_vars=extra, inventory=inventory)
        # A new task-definition revision (same image), the old colour kept: what an emergency rollback returns to.
        second_vars = {**extra, "task_definition_environment": {"INFEROPS_BENCH_RELEASE": "2"}, "bluegreen_cutover_old_color": "keep"}
        second = run_playbook(REPO_ROOT / "deploy.yml", extra_vars=second_vars, inventory=inventory)
        for run in (first, second):
            if run.rc != 0:
                print(f"cannot measure: a deploy.yml run failed\n{run.stdout[-2000:]}{run.stderr[-2000:]}", file=sys.stderr)
                return None
        since = datetime.now(timezone.utc).isoformat()  # noqa: UP017
        started = time.monotonic()
        rollback = run_playbook(
            REPO_ROOT / "playbooks" / "rollback_traffic.yml", extra_vars={"aws_endpoint_url": moto.endpoint}, inventory=inventory
        )
        seconds = time.monotonic() - started
        until = datetime.now(timezone.utc).isoformat()  # noqa: UP017
        if rollback.rc != 0 or not rollback.result("Put production traffic back on the previous colour").get("changed"):
            print(f"cannot measure: the emergency rollback did not roll back\n{rollback.stdout[-3000:]}", file=sys.stderr)
            return None
        builds = len(image_events(since, until)) + len([t for t in rollback.tasks if "image" in t["name"].lower()])
        return seconds, builds
    finally:
        subprocess.run(["docker", "rm", "-f", CONTAINER], check=False, capture_output=True)
        moto.stop()


def concurrent_cutovers(tmp: Path) -> int | None:
    moto = MotoServer(tmp).start()
    try:
        app = create_app(moto)
        app.register_targets("green", 2)
        env = playbook_env(moto.env())
        env["ANSIBLE_STDOUT_CALLBACK"] = "json"
        procs = []
        for i, td in enumerate(("triton:2", "triton:3")):
            args = app.module_args(td, traffic_steps=[50, 100], bake_time_s=2)
            cmd = [str(Path(sys.executable).with_name("ansible-playbook")), str(CUTOVER_PLAYBOOK), "-i", "localhost,", "-c", "local"]
            out = (tmp / f"cutover{i}.json").open("w")
            procs.append(
                (
                    subprocess.Popen([*cmd, "-e", json.dumps({"bg_args": args})], stdout=out, env=env, cwd=REPO_ROOT),
                    tmp / f"cutover{i}.json",
                )
            )
        started = 0
        for proc, path in procs:
            proc.wait(timeout=900)
            report = json.loads(path.read_text())
            result = next(h for p in report["plays"] for t in p["tasks"] if t["task"]["name"] == "Cutover" for h in t["hosts"].values())
            started += bool(result.get("actions"))
        return started
    except (json.JSONDecodeError, StopIteration) as e:
        print(f"cannot measure: a cutover run gave no result ({e})", file=sys.stderr)
        return None
    finally:
        moto.stop()


def main() -> int:
    local_rehearsal_base()
    with tempfile.TemporaryDirectory() as tmp:
        measured = emergency_rollback(Path(tmp))
        started = concurrent_cutovers(Path(tmp))
    if measured is None or started is None:
        return 1
    return report(
        {
            "emergency_rollback_seconds": f"{measured[0]:.1f}",
            "emergency_rollback_builds": measured[1],
            "concurrent_cutovers_started": started,
        }
    )


if __name__ == "__main__":
    raise SystemExit(main())
