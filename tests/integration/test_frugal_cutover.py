"""The capacity-paced cutover on real tritonserver tasks: a 4-task service on a fleet with one spare GPU instance.

Stand-ins (tests/harness/README.md): a private moto server (ECS, ELBv2, EC2, Auto Scaling, CloudWatch) with
`create_app`'s application; `EcsScheduler` (tests/harness/ecs_scheduler.py), ECS's service scheduler on simulated
one-GPU container instances (the GPU Auto Scaling group at its max size, so the fleet is what is registered): each
task an awsvpc task container running the image's real entrypoint over a real tritonserver (CPU), registered in its
colour's target group once Triton is ready, and on scale-in deregistered, reported `draining` for a 1 s
deregistration delay, then stopped with SIGTERM (the entrypoint's drain); the module's endpoint is `EcsView`, moto
with ECS's answers about what runs (running counts, free GPUs in remainingResources, tasks, draining targets); the
production and test listeners are AlbRoutes following moto's weights and targets; clients send inferences on the
production route throughout. An alarm is raised through CloudWatch's own `set_alarm_state`.

Heavy (up to 5 task containers at once, ansible-playbook runs): run this file under `flock /tmp/inferops-heavy.lock`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.harness import aws_calls
from tests.harness.alb import AlbRoute
from tests.harness.ansible import run_playbook
from tests.harness.bluegreen import ALARM, CUTOVER_PLAYBOOK
from tests.harness.canary import PacedClients
from tests.harness.ecs_scheduler import ScheduledApp, scheduled_app
from tests.harness.triton import write_model

pytestmark = pytest.mark.slow

FULL = 4
CLIENT_RATE = 20.0  # inferences per second on the production route
SMOKE = {
    "model": "simple",
    "inputs": [{"name": "INPUT0", "shape": [2], "datatype": "FP32", "data": [1.0, 2.0]}],
    "expected_outputs": [{"name": "OUTPUT0", "data": [2.0, 3.0]}],
}
BAD_REVISION = 3  # its tasks serve a model that answers INPUT0 + 5: the smoke inference fails


@pytest.fixture(scope="module")
def repositories(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("repositories")
    write_model(root / "good", "simple", offset=1.0)
    write_model(root / "bad", "simple", offset=5.0)
    return root


def task_env(task_definition: str) -> dict[str, str]:
    """What the model agent's view of each revision would hold: revision 3 a model that answers wrongly."""
    repository = "bad" if task_definition.endswith(f":{BAD_REVISION}") else "good"
    return {"TRITON_MODEL_REPOSITORY": f"/models/{repository}", "TRITON_LOAD_MODELS": "simple"}


class Routes:
    """The production and test routes, and clients on the production one (tests/harness/canary.PacedClients)."""

    def __init__(self, fleet: ScheduledApp) -> None:
        self.production = AlbRoute(fleet.moto, listener_arn=fleet.app.listener_arn)
        self.test = AlbRoute(fleet.moto, listener_arn=fleet.app.test_listener_arn)
        self.clients = PacedClients(self.production.url, rate=CLIENT_RATE, model="simple")

    @property
    def answers(self) -> int:
        return len(self.clients.answers) - len(self.failed)

    @property
    def failed(self) -> list[tuple[float, str, int | str]]:
        return self.clients.failed()

    def __enter__(self) -> Routes:
        self.production.start()
        self.test.start()
        self.clients.__enter__()
        time.sleep(1)
        return self

    def __exit__(self, *exc: object) -> None:
        self.clients.__exit__()
        self.production.stop()
        self.test.stop()


@pytest.fixture
def fleet(tmp_path: Path, repositories: Path, request: pytest.FixtureRequest) -> Iterator[ScheduledApp]:
    """Blue live with 4 tasks of revision 1 on a fleet of `instances` (default 5: one spare) one-GPU instances."""
    instances = getattr(request, "param", FULL + 1)
    with scheduled_app(tmp_path, instances, FULL, repositories, task_env) as app:
        yield app


def cutover(fleet: ScheduledApp, test_url: str, revision: int, **args: Any) -> tuple[Any, dict[str, Any]]:
    settings: dict[str, Any] = {
        "desired_count": FULL,
        "mode": "capacity_paced",
        "test_route_url": test_url,
        "bake_time_s": 1,
        "gates": {"expected_models": ["simple"], "smoke": SMOKE, "timeout_s": 20, "interval_s": 1},
        "timeouts": {"standby_up_s": 240, "poll_interval_s": 1},
        "drain": {"quiet_period_s": 0, "timeout_s": 120},
    }
    module_args = fleet.app.module_args(fleet.app.task_definitions[revision - 1], **{**settings, **args})
    run = run_playbook(CUTOVER_PLAYBOOK, {"bg_args": module_args}, env=fleet.view.env(), timeout_s=1200)
    return run, run.result("Cutover")


def batch_phases(result: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e["phase"], e["outcome"]) for e in result["timeline"] if "batch" in e["phase"]]


def test_one_spare_instance_changes_release_batch_by_batch(fleet):
    fleet.scheduler.reset_peak()
    with Routes(fleet) as routes:
        run, res = cutover(fleet, routes.test.url, 2)
        assert run.rc == 0, run.stdout[-3000:] + run.stderr[-2000:]
        fleet.scheduler.wait_serving({fleet.services["blue"]: 0, fleet.services["green"]: FULL})
    # the default batch is what the spare instance holds, read from the free GPUs ECS reports
    assert res["capacity_plan"]["batch_size"] == 1 and res["capacity_plan"]["on_registered"] == 1
    assert [(b["index"], b["new_count"], b["old_count"], b["weights"]["green"], b["status"]) for b in res["batches"]] == [
        (1, 1, 3, 25, "ok"),
        (2, 2, 2, 50, "ok"),
        (3, 3, 1, 75, "ok"),
        (4, 4, 0, 100, "ok"),
    ]
    assert routes.test.counts().get(fleet.app.target_groups["green"], 0) >= 4  # each batch's gates, on green's real tasks
    assert fleet.app.weights() == {"blue": 0, "green": 100}
    assert routes.failed == [] and routes.answers > 0
    assert fleet.scheduler.peak_instances <= FULL + 1  # never more than one spare instance in use
    blue_stops = [s for s in fleet.scheduler.stops if s.service == fleet.services["blue"]]
    assert len(blue_stops) == FULL and all(s.exit_code == 0 for s in blue_stops)  # each drained on SIGTERM
    assert fleet.scheduler.errors == []


def test_an_alarm_at_the_middle_batch_rolls_back_batch_by_batch(fleet):
    cloudwatch = fleet.moto.client("cloudwatch")
    raised = threading.Event()

    def alarm_at_the_middle() -> None:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and not raised.is_set():
            if fleet.app.weights() == {"blue": 50, "green": 50}:
                cloudwatch.set_alarm_state(AlarmName=ALARM, StateValue="ALARM", StateReason="5xx at batch 2")
                raised.set()
            time.sleep(0.1)

    fleet.scheduler.reset_peak()
    watcher = threading.Thread(target=alarm_at_the_middle, daemon=True)
    with Routes(fleet) as routes:
        watcher.start()
        run, res = cutover(fleet, routes.test.url, 2)
        raised.set()
        fleet.scheduler.wait_serving({fleet.services["blue"]: FULL, fleet.services["green"]: 0})
    assert run.rc != 0
    assert ALARM in res["rollback"]["reason"] and res["rollback"]["to_color"] == "blue"
    assert res["rollback"]["batches"] == 2  # blue 3 -> 4 and green 2 -> 0, one task at a time
    assert [b["status"] for b in res["batches"]] == ["ok", "failed", "rolled_back", "rolled_back"]
    assert [b["weights"]["blue"] for b in res["batches"] if b["status"] == "rolled_back"] == [75, 100]
    assert fleet.app.weights() == {"blue": 100, "green": 0}
    assert routes.failed == [] and routes.answers > 0
    assert fleet.scheduler.peak_instances <= FULL + 1
    assert all(s.exit_code == 0 for s in fleet.scheduler.stops)
    assert fleet.scheduler.errors == []


def test_a_new_release_failing_its_smoke_inference_never_gets_traffic(fleet):
    with Routes(fleet) as routes:
        gates = {"expected_models": ["simple"], "smoke": SMOKE, "timeout_s": 3, "interval_s": 1}
        run, res = cutover(fleet, routes.test.url, BAD_REVISION, gates=gates)
        fleet.scheduler.wait_serving({fleet.services["blue"]: FULL, fleet.services["green"]: 0})
    assert run.rc != 0
    assert "OUTPUT0" in res["rollback"]["reason"]  # the smoke inference's answer differs
    assert batch_phases(res)[0] == ("batch 1/4", "failed")
    assert res["batches"][0]["status"] == "failed"
    assert fleet.app.weights() == {"blue": 100, "green": 0}
    assert routes.failed == [] and routes.answers > 0
    assert routes.production.counts().get(fleet.app.target_groups["green"], 0) == 0  # no production request reached it
    assert fleet.scheduler.peak_instances <= FULL + 1


@pytest.mark.parametrize("fleet", [FULL], indirect=True)
def test_a_fleet_with_no_spare_is_refused_before_any_write(fleet):
    before = fleet.app.snapshot()
    aws_calls.start_recording(fleet.moto)
    run, res = cutover(fleet, "http://127.0.0.1:9", 2)
    assert run.rc != 0
    assert aws_calls.writes(fleet.moto) == []
    assert fleet.app.snapshot() == before
    msg = res["msg"]
    assert "cannot place one capacity-paced batch: 1 task(s) of 1 GPU" in msg
    assert f"{FULL} registered instance(s) with 0 free GPU(s) take 0" in msg
    assert f"Auto Scaling group gpu at {FULL} of max {FULL}" in msg
    assert f"raise the max size of Auto Scaling group gpu by 1 to {FULL + 1}" in msg
    assert fleet.scheduler.service_tasks(fleet.services["blue"], ("RUNNING",)) and fleet.scheduler.errors == []
