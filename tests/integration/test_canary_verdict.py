"""The cutover's relative canary verdict and its hooks, end to end: ansible-playbook against a moto server, each
colour a real tritonserver behind the rehearsal's routing (AlbRoute: the production and test listeners following
moto's weights and targets), clients at a low request rate on the production route.

Stand-ins (tests/harness/README.md): moto for ECS, ELBv2, CloudWatch, IAM and Lambda; the ALB's per-target-group
metrics published into moto's CloudWatch by the route (AlbRoute publish_metrics), as the ALB publishes them; the
metrics sidecar's Triton counters with their Color dimension (SidecarStandIn); Lambda hooks in moto's simple Lambda,
answering what each test queued. moto evaluates no alarm: the absolute 5xx alarm is set OK, and the test checks that
the standby's 5xx per minute stayed under the threshold fleet_alarms gives it (5), so a real alarm would have stayed OK.
The tests start two tritonservers: run this file under `flock /tmp/inferops-heavy.lock`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.harness.alb import AlbRoute
from tests.harness.ansible import run_playbook
from tests.harness.bluegreen import ALARM, CUTOVER_PLAYBOOK, BlueGreenApp, create_app
from tests.harness.canary import MODEL, PacedClients, SidecarStandIn, canary_cutover_args, hook_function, queue_hook_answers
from tests.harness.triton import TritonServer, write_model

ALARM_THRESHOLD_PER_MINUTE = 5  # roles/fleet_alarms: fleet_alarms_target_5xx_threshold
CANARY = {"enabled": True, "min_requests": 40, "max_wait_s": 120, "triton_dimensions": {"App": "triton"}}


def start_fleet(moto, tmp: Path, green_fail_every: int) -> tuple[BlueGreenApp, dict[str, TritonServer]]:
    """Blue live (1 task, a healthy model), green's task ready (its model failing every Nth request, or not), each
    a real tritonserver registered in its colour's target group as ECS would register the task."""
    app = create_app(moto, live_tasks=1)
    servers = {}
    for color, fail_every in (("blue", 0), ("green", green_fail_every)):
        write_model(tmp / color, MODEL, offset=1.0, fail_every=fail_every)
        servers[color] = TritonServer(tmp / color, tmp, models=(MODEL,)).start()
        app.serve_only(color, servers[color].http_port)
    moto.client("cloudwatch").set_alarm_state(AlarmName=ALARM, StateValue="OK", StateReason="no 5xx")
    return app, servers


@pytest.fixture
def fleet(moto_server, tmp_path) -> Iterator[Any]:
    started: list[dict[str, TritonServer]] = []

    def make(green_fail_every: int = 0) -> BlueGreenApp:
        app, servers = start_fleet(moto_server, tmp_path, green_fail_every)
        started.append(servers)
        app.servers = servers  # type: ignore[attr-defined]
        return app

    yield make
    for servers in started:
        for server in servers.values():
            server.stop()


def cutover(app: BlueGreenApp, test_url: str, check: bool = False, **overrides: Any) -> tuple[Any, dict]:
    args = canary_cutover_args(app, app.task_definitions[1], test_url, **{"canary": CANARY, **overrides})
    run = run_playbook(CUTOVER_PLAYBOOK, {"bg_args": args}, check=check, env=app.moto.env())
    return run, run.result("Cutover")


def through_routes(app: BlueGreenApp, rate: float, **overrides: Any) -> tuple[Any, dict, PacedClients, AlbRoute]:
    """The cutover with clients at `rate` requests/s on the production route, the sidecar stand-in publishing."""
    metrics = {c: [s.metrics_url] for c, s in app.servers.items()}  # type: ignore[attr-defined]
    with (
        AlbRoute(app.moto, listener_arn=app.listener_arn, publish_metrics=True) as production,
        AlbRoute(app.moto, listener_arn=app.test_listener_arn) as test,
        SidecarStandIn(app.moto, metrics, {"App": "triton"}),
        PacedClients(production.url, rate) as clients,
    ):
        run, result = cutover(app, test.url, **overrides)
    return run, result, clients, production


def test_a_standby_failing_a_few_percent_at_low_traffic_is_rolled_back_at_the_first_step(fleet):
    app = fleet(green_fail_every=25)  # 4 % of green's requests fail
    run, result, _clients, production = through_routes(app, rate=4.0)
    assert run.rc != 0
    assert "canary verdict at 50%: green is worse than blue" in result["msg"]
    assert app.weights() == {"blue": 100, "green": 0}
    step = result["canary"]["steps"][0]
    assert step["step"] == 50 and step["outcome"] == "fail" and step["standby"]["requests"] >= CANARY["min_requests"]
    assert step["standby"]["error_ratio"] > 0.01 and step["live"]["error_ratio"] == 0
    assert step["standby"]["inference_failures"] >= 1  # the sidecar's Triton figures, by colour
    assert [e["phase"] for e in result["timeline"]][-2:] == ["traffic 50%", "rollback"]
    # the absolute alarm stayed OK: never as many 5xx in a minute as its threshold
    green_5xx = sum(n for (group, status), n in production.statuses().items() if group == app.target_groups["green"] and status >= 500)
    minutes = max(result["wall_s"] / 60.0, 1.0)
    assert 0 < green_5xx / minutes < ALARM_THRESHOLD_PER_MINUTE
    alarm = app.moto.client("cloudwatch").describe_alarms(AlarmNames=[ALARM])["MetricAlarms"][0]
    assert alarm["StateValue"] == "OK"


def test_a_healthy_standby_passes_every_step_on_its_verdict(fleet):
    app = fleet(green_fail_every=0)
    run, result, clients, _production = through_routes(app, rate=4.0)
    assert run.rc == 0, run.stdout[-3000:]
    assert result["weights"] == {"blue": 0, "green": 100}
    assert [(s["step"], s["outcome"]) for s in result["canary"]["steps"]] == [(50, "pass"), (100, "pass")]
    assert result["canary"]["steps"][1]["live"]["requests"] > 0  # the 100 % step's baseline reached back
    assert clients.failed() == []


def test_a_failing_hook_rolls_back(moto_server):
    app = create_app(moto_server)
    app.register_targets("green", 2)
    arn = hook_function(moto_server, "acceptance")
    queue_hook_answers(moto_server, [{"hookStatus": "SUCCEEDED"}, {"hookStatus": "FAILED", "reason": "3 of 40 acceptance requests failed"}])
    hooks = [{"stage": "standby_healthy", "lambda_arn": arn}, {"stage": "before_traffic", "lambda_arn": arn, "name": "acceptance"}]
    run = run_playbook(CUTOVER_PLAYBOOK, {"bg_args": app.module_args("triton:2", hooks=hooks)}, env=moto_server.env())
    result = run.result("Cutover")
    assert run.rc != 0 and "hook acceptance at before_traffic failed: 3 of 40 acceptance requests failed" in result["msg"]
    assert app.weights() == {"blue": 100, "green": 0} and app.services()["green"]["desiredCount"] == 0
    assert [(h["stage"], h["outcome"]) for h in result["hooks"]] == [("standby_healthy", "succeeded"), ("before_traffic", "failed")]


def test_check_mode_lists_the_hooks_and_invokes_none(moto_server):
    app = create_app(moto_server)
    app.register_targets("green", 2)
    arn = hook_function(moto_server, "notify")
    hooks = [{"stage": "after_step", "lambda_arn": arn}, {"stage": "after_cutover", "lambda_arn": arn}]
    before = app.snapshot()
    run = run_playbook(
        CUTOVER_PLAYBOOK, {"bg_args": app.module_args("triton:2", hooks=hooks, traffic_steps=[50, 100])}, check=True, env=moto_server.env()
    )
    result = run.result("Cutover")
    assert run.rc == 0 and result["hooks"] == []
    assert result["hooks_planned"] == [
        f"after_step 50%: invoke notify ({arn})",
        f"after_step 100%: invoke notify ({arn})",
        f"after_cutover: invoke notify ({arn})",
    ]
    assert app.snapshot() == before


ROLE_PLAYBOOK = Path(__file__).parent / "playbooks" / "bluegreen_role_hooks.yml"
HOOK_TASKS = Path(__file__).parent / "playbooks" / "hooks"


def test_a_failing_tasks_file_hook_rolls_back_through_the_role(moto_server):
    app = create_app(moto_server)
    app.register_targets("green", 2)
    args = app.module_args("triton:2")
    hooks = [
        {"stage": "standby_healthy", "tasks_file": str(HOOK_TASKS / "record.yml")},
        {"stage": "before_traffic", "tasks_file": str(HOOK_TASKS / "acceptance.yml"), "name": "acceptance"},
        {"stage": "after_rollback", "tasks_file": str(HOOK_TASKS / "record.yml")},
    ]
    role_vars = {k: args[k] for k in ("cluster", "name", "task_definition", "desired_count", "target_groups", "listener_arn")}
    run = run_playbook(ROLE_PLAYBOOK, {"role_vars": {**role_vars, "hooks": hooks}, "hook_should_fail": True}, env=moto_server.env())
    assert run.rc != 0
    assert "hook acceptance at before_traffic failed: acceptance check failed on green" in run.stdout
    assert app.weights() == {"blue": 100, "green": 0} and app.services()["green"]["desiredCount"] == 0
    recorded = [r.get("msg") for task in run.tasks if "Record the" in task["name"] for r in task["hosts"].values()]
    assert recorded == ["hook ran at standby_healthy", "hook ran at after_rollback"], recorded
    published = run.result("The failed cutover's result")["bluegreen_cutover_failed_result"]
    assert published["msg"] == "hook acceptance at before_traffic failed: acceptance check failed on green"
    assert published["canary"] == {"enabled": False} and published["rollback"]["reason"], published


def test_the_role_publishes_the_failed_phases_result_for_the_ledger(moto_server):
    """A Lambda hook failing inside the module: the role's own fail carries the message only, so the module's result
    (the hooks, the rollback, the canary's) is published in bluegreen_cutover_failed_result, which deploy.yml records."""
    app = create_app(moto_server)
    app.register_targets("green", 2)
    arn = hook_function(moto_server, "acceptance")
    queue_hook_answers(moto_server, [{"hookStatus": "FAILED", "reason": "change ticket rejected"}])
    args = app.module_args("triton:2")
    role_vars = {k: args[k] for k in ("cluster", "name", "task_definition", "desired_count", "target_groups", "listener_arn")}
    hooks = [{"stage": "before_traffic", "lambda_arn": arn, "name": "change"}]
    run = run_playbook(ROLE_PLAYBOOK, {"role_vars": {**role_vars, "hooks": hooks}}, env=moto_server.env())
    assert run.rc != 0 and app.weights() == {"blue": 100, "green": 0}
    published = run.result("The failed cutover's result")["bluegreen_cutover_failed_result"]
    assert published["msg"] == "rolled back to blue: hook change at before_traffic failed: change ticket rejected"
    assert [(h["stage"], h["outcome"]) for h in published["hooks"]] == [("before_traffic", "failed")]
    assert published["rollback"] and published["canary"] == {"enabled": False}
