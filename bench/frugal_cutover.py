"""The GPU-frugal cutover beside the full blue/green, on a fleet of one-GPU instances, clients on the production route.

A service of 4 tasks (one GPU each) changes release twice in each mode through the bluegreen module (the playbook
the integration tests run): once to the end, once with a CloudWatch alarm raised at the middle of the cutover
(capacity-paced: batch 2 of 4, weights 50/50; blue/green: its 50 % step), which rolls back. Clients send inferences
on the production route throughout. Capacity-paced runs on 5 instances (the 4 of the live colour plus one spare),
batch size 1; blue/green, which starts the whole new colour beside the live one, on 8. Both use the same gates
(a smoke inference on the test route), bakes (1 s a step; blue/green steps 25/50/75/100, the weights paced batches
give) and drain timeouts.

Prints, one per line as `name: value`:
- spare_instances_peak: the most instances that held a task at once during the capacity-paced cutover and its
  rollback, less the 4 the live colour used before it; target <= 1;
- failed_requests: requests that failed on the production route through both capacity-paced runs (the cutover,
  and the rollback at the middle batch); target 0;
- cutover_seconds: the capacity-paced cutover's module time (`wall_s`: discover to finish, Ansible's start-up out);
- rollback_seconds: from the alarm's detection at batch 2 until all production traffic is back on the old colour,
  grown back batch by batch (the module's `rollback.seconds`);
- blue_green_spare_instances_peak, blue_green_cutover_seconds, blue_green_rollback_seconds: the same figures of the
  full blue/green on its 8-instance fleet (its rollback is one listener write: the old colour kept its tasks);
- blue_green_failed_requests: the blue/green runs' failed requests;
- requests: requests sent on the production route in all.

Stand-ins (tests/harness/README.md): a fresh moto server per mode (ECS, ELBv2, EC2, Auto Scaling, CloudWatch);
`EcsScheduler` (tests/harness/ecs_scheduler.py), ECS's service scheduler on simulated one-GPU container instances of
the GPU Auto Scaling group at its max size: each task an awsvpc task container running the image's real entrypoint
over a real tritonserver (CPU), registered in its target group once ready, deregistered, held `draining` for a
1 s deregistration delay, then stopped with SIGTERM (the entrypoint's drain); the controller's endpoint is
`EcsView`, moto with ECS's answers about what runs (running counts, free GPUs, tasks, draining targets); the ALB's
production and test listeners stood in by routes that follow moto's weights and registered targets (AlbRoute).
Exits 1 only when it cannot measure.
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(1, str(Path(__file__).resolve().parents[1] / ".build" / "collections"))

from tests.harness.alb import AlbRoute
from tests.harness.ansible import run_playbook
from tests.harness.bluegreen import ALARM, CUTOVER_PLAYBOOK
from tests.harness.canary import PacedClients
from tests.harness.ecs_scheduler import ScheduledApp, scheduled_app
from tests.harness.figures import report
from tests.harness.triton import write_model

FULL = 4  # tasks of the service, one GPU each
CLIENT_RATE = 40.0  # inferences per second on the production route
SMOKE = {
    "model": "simple",
    "inputs": [{"name": "INPUT0", "shape": [2], "datatype": "FP32", "data": [1.0, 2.0]}],
    "expected_outputs": [{"name": "OUTPUT0", "data": [2.0, 3.0]}],
}


def task_env(_task_definition: str) -> dict[str, str]:
    """Every revision serves the same model repository (what differs between releases is not measured here)."""
    return {"TRITON_MODEL_REPOSITORY": "/models/good", "TRITON_LOAD_MODELS": "simple"}


def alarm_at(fleet: ScheduledApp, weights: dict[str, int]) -> threading.Thread:
    """A thread that raises the cutover's alarm once production weights reach `weights`."""
    app = fleet.app

    def watch() -> None:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            if app.weights() == weights:
                app.moto.client("cloudwatch").set_alarm_state(AlarmName=ALARM, StateValue="ALARM", StateReason="bench: 5xx at the middle")
                return
            time.sleep(0.1)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def cutover(fleet: ScheduledApp, test_url: str, revision: int, **args: Any) -> dict[str, Any]:
    """One bluegreen run to task definition `revision` through ansible-playbook, the controller on EcsView."""
    module_args = fleet.app.module_args(
        fleet.app.task_definitions[revision - 1],
        desired_count=FULL,
        test_route_url=test_url,
        bake_time_s=1,
        watch_interval_s=1,
        gates={"expected_models": ["simple"], "smoke": SMOKE, "timeout_s": 60, "interval_s": 1},
        timeouts={"standby_up_s": 240, "poll_interval_s": 1},
        drain={"quiet_period_s": 0, "timeout_s": 120},
        **args,
    )
    run = run_playbook(CUTOVER_PLAYBOOK, {"bg_args": module_args}, env=fleet.view.env(), timeout_s=1200)
    result = run.result("Cutover")
    result["_rc"], result["_output"] = run.rc, run.stdout[-3000:] + run.stderr[-2000:]
    return result


def measure(workdir: Path, mode: str, instances: int, alarm_weights: dict[str, int], **args: Any) -> dict[str, Any] | None:
    """Cutover blue -> green (revision 2), then green -> blue (revision 3) with the alarm at the middle."""
    repositories = workdir / "repositories"
    write_model(repositories / "good", "simple", offset=1.0)
    with scheduled_app(workdir / mode, instances, FULL, repositories, task_env) as fleet:
        app = fleet.app
        with (
            AlbRoute(fleet.moto, listener_arn=app.listener_arn) as production,
            AlbRoute(fleet.moto, listener_arn=app.test_listener_arn) as test,
        ):
            fleet.scheduler.reset_peak()
            with PacedClients(production.url, rate=CLIENT_RATE, model="simple") as clients:
                time.sleep(1)
                done = cutover(fleet, test.url, 2, mode=mode, **args)
                if done["_rc"] != 0 or app.weights() != {"blue": 0, "green": 100}:
                    print(f"cannot measure: the {mode} cutover failed\n{done['_output']}", file=sys.stderr)
                    return None
                fleet.scheduler.wait_serving({fleet.services["blue"]: 0, fleet.services["green"]: FULL})
                watcher = alarm_at(fleet, alarm_weights)
                rolled = cutover(fleet, test.url, 3, mode=mode, **args)
                watcher.join(1)
                app.moto.client("cloudwatch").set_alarm_state(AlarmName=ALARM, StateValue="OK", StateReason="bench: over")
                if rolled["_rc"] == 0 or not rolled.get("rollback") or app.weights() != {"blue": 0, "green": 100}:
                    print(f"cannot measure: the {mode} cutover with an alarm did not roll back\n{rolled['_output']}", file=sys.stderr)
                    return None
                fleet.scheduler.wait_serving({fleet.services["blue"]: 0, fleet.services["green"]: FULL})
                time.sleep(1)
        if fleet.scheduler.errors:
            print(f"cannot measure: the ECS scheduler stand-in failed: {fleet.scheduler.errors}", file=sys.stderr)
            return None
        return {
            "spare": fleet.scheduler.peak_instances - FULL,
            "failed": clients.failed(),
            "requests": len(clients.answers),
            "cutover_seconds": done["wall_s"],
            "rollback_seconds": rolled["rollback"]["seconds"],
            "unclean_stops": [s for s in fleet.scheduler.stops if s.exit_code != 0],
        }


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="frugal-cutover-") as tmp:
        paced = measure(Path(tmp), "capacity_paced", FULL + 1, {"blue": 50, "green": 50}, batch_size=1)
        if paced is None:
            return 1
        full = measure(Path(tmp), "blue_green", 2 * FULL, {"blue": 50, "green": 50}, traffic_steps=[25, 50, 75, 100])
        if full is None:
            return 1
    for failure in paced["failed"] + full["failed"]:
        print(f"failed request: {failure}", file=sys.stderr)
    for stop in paced["unclean_stops"] + full["unclean_stops"]:
        print(f"task stopped with exit code {stop.exit_code}: {stop.task}", file=sys.stderr)
    figures = {
        "spare_instances_peak": paced["spare"],
        "failed_requests": len(paced["failed"]),
        "cutover_seconds": paced["cutover_seconds"],
        "rollback_seconds": paced["rollback_seconds"],
        "blue_green_spare_instances_peak": full["spare"],
        "blue_green_cutover_seconds": full["cutover_seconds"],
        "blue_green_rollback_seconds": full["rollback_seconds"],
        "blue_green_failed_requests": len(full["failed"]),
        "requests": paced["requests"] + full["requests"],
    }
    return report(figures)


if __name__ == "__main__":
    raise SystemExit(main())
