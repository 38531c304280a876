"""Benchmark of the bluegreen module against a moto server (ECS, ELBv2, CloudWatch).

Prints, one per line as `name: value`:
- cutover_wall_seconds: wall time of the cutover task (Ansible's own start and end stamps for the task: module
  transfer, Python start, AWS clients and every phase) in a full blue -> green cutover, traffic steps [10, 50, 100]
  with zero bake time, alarm gate, drain quiet period 0;
- module_overhead_seconds: that wall time minus the waits the module was told to make (bake, termination wait,
  drain quiet periods; all zero here);
- api_calls: AWS API requests the cutover made (moto's access log);
- rollback_seconds: in a second cutover (green -> blue), an alarm is set to ALARM during the first step's bake;
  time from the module detecting the failed gate to the production weights restored (the module's own stamps).

Targets: module_overhead_seconds <= 5, rollback_seconds <= 2. Exits non-zero only when it cannot measure.
moto stands in for ECS registering tasks in the target groups (see tests/harness/bluegreen.py).
"""

from __future__ import annotations

import json
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.harness.ansible import run_playbook
from tests.harness.bluegreen import CUTOVER_PLAYBOOK, create_app
from tests.harness.figures import report
from tests.harness.moto import MotoServer


def task_seconds(json_stdout: str, name: str) -> float:
    """A task's duration from the json callback's start and end stamps."""
    from datetime import datetime

    for play in json.loads(json_stdout)["plays"]:
        for task in play["tasks"]:
            if task["task"]["name"] == name:
                stamps = task["task"]["duration"]
                return (datetime.fromisoformat(stamps["end"]) - datetime.fromisoformat(stamps["start"])).total_seconds()
    raise KeyError(name)


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        moto = MotoServer(workdir).start()
        try:
            app = create_app(moto)
            app.register_targets("green", 2)

            before = moto.request_count()
            run = run_playbook(CUTOVER_PLAYBOOK, {"bg_args": app.module_args("triton:2")}, env=moto.env())
            api_calls = moto.request_count() - before
            if run.rc != 0:
                print(f"cannot measure: the cutover failed\n{run.stdout[-3000:]}{run.stderr[-2000:]}", file=sys.stderr)
                return 1
            result = run.result("Cutover")
            wall = task_seconds(run.stdout, "Cutover")

            # Second cutover back to blue; an alarm fires during the bake of the first step.
            thread = threading.Thread(target=app.alarm_once_it_has_traffic, args=("blue", "benchmark", 60))
            thread.start()
            args = app.module_args("triton:3", traffic_steps=[10, 100], bake_time_s=30, watch_interval_s=1)
            rolled = run_playbook(CUTOVER_PLAYBOOK, {"bg_args": args}, env=moto.env())
            thread.join()
            rollback = rolled.result("Cutover").get("rollback") if rolled.tasks else None
            if not rollback or app.weights() != {"blue": 0, "green": 100}:
                print(f"cannot measure: no rollback happened\n{rolled.stdout[-3000:]}", file=sys.stderr)
                return 1
        finally:
            moto.stop()

    return report(
        {
            "cutover_wall_seconds": f"{wall:.3f}",
            "module_overhead_seconds": f"{wall - result['told_waits_s']:.3f}",
            "api_calls": api_calls,
            "rollback_seconds": f"{rollback['seconds']:.3f}",
        }
    )


if __name__ == "__main__":
    raise SystemExit(main())
