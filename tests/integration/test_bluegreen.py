"""The bluegreen module end to end: ansible-playbook against a moto server (ECS, ELBv2, CloudWatch), with real
tritonservers standing in for each colour's test route.

Simulated where moto cannot behave like AWS (see tests/harness/bluegreen.py): moto's ECS starts no tasks and
registers no targets, so the tests register one healthy IP target per task in a colour's target group, as ECS
would; a colour whose targets are never registered stands for a standby that never becomes healthy. moto applies
a new desired count at once (runningCount follows). Alarms change state through CloudWatch's own
`set_alarm_state`, as an operator or a test would on AWS.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from tests.harness.ansible import REPO_ROOT, PlaybookRun, run_playbook
from tests.harness.bluegreen import ALARM, CUTOVER_PLAYBOOK, BlueGreenApp, create_app
from tests.harness.triton import TritonServer, write_model

# The bluegreen module once per bad argument set (each merged over the good ones): one ansible-playbook run for all.
REFUSED_PLAYBOOK = REPO_ROOT / "tests" / "integration" / "playbooks" / "bluegreen_refused.yml"
SMOKE = {
    "model": "simple",
    "inputs": [{"name": "INPUT0", "shape": [2], "datatype": "FP32", "data": [1.0, 2.0]}],
    "expected_outputs": [{"name": "OUTPUT0", "data": [2.0, 3.0]}],
}


@pytest.fixture(scope="module")
def routes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, TritonServer]]:
    """Two real tritonservers: `good` (simple READY, plus a slow model) and `broken` (simple fails to load)."""
    base = tmp_path_factory.mktemp("routes")
    good_repo, broken_repo = base / "good", base / "broken"
    write_model(good_repo, "simple", offset=1.0)
    write_model(good_repo, "slow", offset=1.0, delay_ms=1500)
    write_model(broken_repo, "simple", fail_to_load=True)
    good = TritonServer(good_repo, base, models=("simple", "slow")).start()
    broken = TritonServer(broken_repo, base, extra_args=("--strict-readiness=false",)).start(wait_ready=False)
    broken.post("/v2/repository/models/simple/load")  # fails: the model's initialize raises
    yield {"good": good, "broken": broken}
    good.stop()
    broken.stop()


@pytest.fixture
def playbook() -> Path:
    return CUTOVER_PLAYBOOK


@pytest.fixture
def app(moto_server) -> BlueGreenApp:
    app = create_app(moto_server)
    app.register_targets("green", 2)  # stands in for ECS registering the green tasks once they run
    return app


def run(app: BlueGreenApp, playbook: Path, check: bool = False, **args) -> tuple[PlaybookRun, dict]:
    td = args.pop("task_definition", "triton:2")
    module_args = {k: v for k, v in app.module_args(td, **args).items() if v is not None}
    result = run_playbook(playbook, {"bg_args": module_args}, check=check, diff=True, env=app.moto.env())
    return result, result.result("Cutover")


def triton_args(routes: dict[str, TritonServer], green: str = "good", blue: str = "good") -> dict:
    return {
        "test_route_urls": {"blue": routes[blue].url, "green": routes[green].url},
        "gates": {"expected_models": ["simple"], "smoke": SMOKE, "timeout_s": 0, "interval_s": 1},
    }


def phases(res: dict) -> list[tuple[str, str]]:
    return [(e["phase"], e["outcome"]) for e in res["timeline"]]


def phase_names(res: dict) -> list[str]:
    return [e["phase"] for e in res["timeline"]]


# ---------------------------------------------------------------- full cutover


def test_full_cutover_blue_to_green_and_back(app, playbook, routes):
    args = triton_args(routes)
    td2 = app.task_definitions[1]

    run_, res = run(app, playbook, check=True, **args)
    assert run_.rc == 0 and res["changed"] and res["planned"]
    assert res["actions"][0] == f"update service triton-green: task definition {td2}, 2 tasks"
    assert app.weights() == {"blue": 100, "green": 0}

    run_, res = run(app, playbook, **args)
    assert run_.rc == 0, run_.stderr
    assert res["changed"] and res["weights"] == {"blue": 0, "green": 100} and res["live_color"] == "green"
    assert phases(res) == [
        ("discover", "ok"),
        ("capacity", "ok"),
        ("standby_up", "ok"),
        ("gates", "ok"),
        ("traffic 10%", "ok"),
        ("traffic 50%", "ok"),
        ("traffic 100%", "ok"),
        ("drain", "ok"),
        ("finish", "ok"),
    ]
    assert "smoke inference as expected" in res["timeline"][3]["detail"]
    assert res["task_definitions"] == {"blue": app.task_definitions[0], "green": td2}
    assert app.weights() == {"blue": 0, "green": 100}
    assert app.snapshot()["services"] == {"blue": (app.task_definitions[0], 0), "green": (td2, 2)}
    test_listener = app.snapshot()["test_listener"][0]["ForwardConfig"]["TargetGroups"]
    assert [t["TargetGroupArn"] for t in test_listener if t["Weight"]] == [app.target_groups["green"]]

    for check in (True, False):  # check mode again, then a real run again: no change
        run_, res = run(app, playbook, check=check, **args)
        assert run_.rc == 0 and not res["changed"] and res["decision"] == "noop" and res["actions"] == []

    # back to blue with revision 3 (blue's targets are still registered: moto never deregisters them)
    run_, res = run(app, playbook, task_definition="triton:3", **args)
    assert run_.rc == 0, run_.stderr
    assert res["weights"] == {"blue": 100, "green": 0}
    assert app.snapshot()["services"] == {"blue": (app.task_definitions[2], 2), "green": (td2, 0)}
    run_, res = run(app, playbook, task_definition="triton:3", **args)
    assert run_.rc == 0 and not res["changed"]


def test_check_mode_writes_nothing(app, playbook, routes):
    before = app.snapshot()
    run_, res = run(app, playbook, check=True, **triton_args(routes))
    assert run_.rc == 0 and res["changed"] and len(res["actions"]) == 5
    assert app.snapshot() == before


# ---------------------------------------------------------------- rollbacks


def test_rollback_on_a_failed_gate(app, playbook, routes):
    run_, res = run(app, playbook, **triton_args(routes, green="broken"))
    assert run_.rc != 0
    assert res["msg"].startswith("rolled back to blue")
    assert "model simple is not READY" in res["rollback"]["reason"]
    assert ("gates", "failed") in phases(res) and ("rollback", "ok") in phases(res)
    assert not any(p.startswith("traffic") for p in phase_names(res))
    assert app.weights() == {"blue": 100, "green": 0}
    assert app.snapshot()["services"]["green"][1] == 0


def test_rollback_on_an_alarm_during_bake(app, playbook, routes):
    raised: list[bool] = []
    thread = threading.Thread(target=lambda: raised.append(app.alarm_once_it_has_traffic("green", "5xx from green", 60)))
    thread.start()
    run_, res = run(app, playbook, traffic_steps=[10, 100], bake_time_s=20, **triton_args(routes))
    thread.join()
    assert raised == [True]
    assert run_.rc != 0
    assert f"alarm {ALARM} is ALARM" in res["rollback"]["reason"]
    assert ("traffic 10%", "failed") in phases(res) and ("traffic 100%", "ok") not in phases(res)
    assert res["weights"] == {"blue": 100, "green": 0} == app.weights()
    assert res["rollback"]["seconds"] < 2
    # the bake was cut short by the alarm, not served in full
    assert next(e for e in res["timeline"] if e["phase"] == "traffic 10%")["duration_s"] < 15


def test_rollback_when_the_standby_never_becomes_healthy(moto_server, playbook):
    app = create_app(moto_server)  # green's targets are never registered: its tasks never pass health checks
    run_, res = run(app, playbook, timeouts={"standby_up_s": 2, "poll_interval_s": 1})
    assert run_.rc != 0
    assert ("standby_up", "failed") in phases(res)
    assert "0 healthy targets of 2" in res["rollback"]["reason"]
    assert app.weights() == {"blue": 100, "green": 0}
    assert app.snapshot()["services"]["green"][1] == 0


def test_rolled_back_on_demand_uses_the_kept_old_colour(app, playbook):
    run_, res = run(app, playbook, old_color="keep")
    assert run_.rc == 0 and app.weights() == {"blue": 0, "green": 100}
    assert app.snapshot()["services"]["blue"][1] == 2  # kept at full size for instant rollback

    run_, res = run(app, playbook, check=True, state="rolled_back")
    assert run_.rc == 0 and res["changed"] and app.weights() == {"blue": 0, "green": 100}
    run_, res = run(app, playbook, state="rolled_back")
    assert run_.rc == 0 and res["changed"] and res["decision"] == "rollback"
    assert app.weights() == {"blue": 100, "green": 0}
    assert app.snapshot()["services"]["green"][1] == 0
    run_, res = run(app, playbook, state="rolled_back")
    assert run_.rc == 0 and not res["changed"]


def test_rolled_back_refused_when_the_old_colour_is_gone(app, playbook):
    run(app, playbook)
    before = app.snapshot()
    run_, res = run(app, playbook, state="rolled_back")
    assert run_.rc != 0 and "scaled down to 0" in res["msg"]
    assert app.snapshot() == before


# ---------------------------------------------------------------- resumption


@pytest.mark.parametrize("stop_after", ["discover", "capacity", "standby_up", "gates", "traffic", "drain"])
def test_resumes_after_an_interruption_at_each_phase(app, playbook, stop_after):
    run_, res = run(app, playbook, stop_after=stop_after)
    assert run_.rc == 0, run_.stderr
    expected_green = 2 if stop_after in ("standby_up", "gates", "traffic", "drain") else 0
    assert app.snapshot()["services"]["green"][1] == expected_green
    assert app.weights() == ({"blue": 0, "green": 100} if stop_after in ("traffic", "drain") else {"blue": 100, "green": 0})
    assert app.snapshot()["services"]["blue"][1] == 2  # nothing scales the old colour before the finish phase

    run_, res = run(app, playbook)
    assert run_.rc == 0, run_.stderr
    assert app.weights() == {"blue": 0, "green": 100}
    assert app.snapshot()["services"] == {"blue": (app.task_definitions[0], 0), "green": (app.task_definitions[1], 2)}
    if stop_after in ("traffic", "drain"):
        assert res["decision"] == "finish" and phase_names(res) == ["discover", "drain", "finish"]
    run_, res = run(app, playbook)
    assert run_.rc == 0 and not res["changed"]


def test_resumes_mid_traffic_from_the_next_step(app, playbook):
    run(app, playbook, stop_after="gates")
    app.set_weights({"blue": 90, "green": 10})  # as an interrupted run leaves it after the first step
    run_, res = run(app, playbook)
    assert run_.rc == 0, run_.stderr
    assert [p for p in phase_names(res) if p.startswith("traffic")] == ["traffic 50%", "traffic 100%"]
    assert "capacity" not in phase_names(res)
    assert app.weights() == {"blue": 0, "green": 100}


# ---------------------------------------------------------------- drain


def test_drain_waits_for_work_in_flight_on_the_old_colour(app, playbook, routes):
    good = routes["good"]
    finished: list[float] = []
    stop = threading.Event()

    def keep_old_colour_busy() -> None:
        # four slow requests (1.5 s each) in a row, started while the cutover runs
        done = 0
        while done < 4 and not stop.is_set():
            good.infer("slow", [1.0])
            done += 1
        finished.append(time.time())

    # Triton counts a request when it finishes and its pending gauge counts only queued requests, so the quiet
    # period must outlast the longest request (1.5 s here); a 1 s quiet period could fall inside one request.
    args = {"drain": {"quiet_period_s": 2, "timeout_s": 60, "metrics_urls": {"blue": [good.metrics_url]}}}
    thread = threading.Thread(target=keep_old_colour_busy)
    thread.start()
    run_, res = run(app, playbook, **args)
    stop.set()
    thread.join()
    assert run_.rc == 0, run_.stderr
    drain = next(e for e in res["timeline"] if e["phase"] == "drain")
    assert drain["outcome"] == "ok" and "quiet" in drain["detail"]
    finish = next(e for e in res["timeline"] if e["phase"] == "finish")

    assert finished and datetime.fromisoformat(finish["start"]).timestamp() >= finished[0]


def test_drain_times_out_when_the_old_colour_stays_busy(app, playbook, routes):
    good = routes["good"]
    stop = threading.Event()

    def hammer() -> None:
        while not stop.is_set():
            good.infer("slow", [1.0])

    thread = threading.Thread(target=hammer)
    thread.start()
    try:
        run_, res = run(app, playbook, drain={"quiet_period_s": 2, "timeout_s": 5, "metrics_urls": {"blue": [good.metrics_url]}})
    finally:
        stop.set()
        thread.join()
    assert run_.rc == 0, run_.stderr
    drain = next(e for e in res["timeline"] if e["phase"] == "drain")
    assert drain["outcome"] == "timed_out" and drain["duration_s"] >= 5
    assert app.snapshot()["services"]["blue"][1] == 0  # scaled down anyway: SIGTERM reaches Triton's own drain


# ---------------------------------------------------------------- bad input


def _bad_args(app: BlueGreenApp) -> dict[str, dict]:
    """Argument sets the module must refuse before its first write, by what is wrong with them."""
    unknown_green = app.target_groups["green"].rsplit("/", 1)[0] + "/0000000000000000"
    return {
        "unknown service": {"name": "nope"},
        "unknown target group": {"target_groups": {"blue": app.target_groups["blue"], "green": unknown_green}},
        "steps not ending at 100": {"traffic_steps": [10, 50]},
        "negative bake": {"bake_time_s": -1},
        "missing task definition": {"task_definition": "triton:99"},
        "missing alarm": {"alarm_names": ["no-such-alarm"]},
    }


@pytest.fixture(scope="module")
def refused(shared_moto_server) -> tuple[dict[str, dict], dict, dict]:
    """Every bad argument set through one ansible-playbook run (bluegreen_refused.yml loops over them) on one
    application: each case's result, and the application before and after the run."""
    app = create_app(shared_moto_server)
    app.register_targets("green", 2)
    before = app.snapshot()
    cases = _bad_args(app)
    run_ = run_playbook(REFUSED_PLAYBOOK, {"bg_args": app.module_args("triton:2"), "bad_args": list(cases.values())}, env=app.moto.env())
    results = dict(zip(cases, run_.result("Refused")["results"], strict=True))
    return results, before, app.snapshot()


@pytest.mark.parametrize(
    ("what", "message"),
    [
        ("unknown service", "service nope-blue does not exist"),
        ("unknown target group", "target_groups.green"),
        ("steps not ending at 100", "the last step must be 100"),
        ("negative bake", "bake_time_s is -1"),
        ("missing task definition", "task_definition triton:99 does not exist"),
        ("missing alarm", "CloudWatch alarm no-such-alarm does not exist"),
    ],
)
def test_bad_input_fails_before_writing(refused, what, message):
    results, before, after = refused
    res = results[what]
    assert res.get("failed")
    assert message in res["msg"]
    assert res.get("actions", []) == []
    assert after == before


def test_weights_not_summing_to_100_fail_before_writing(app, playbook):
    app.set_weights({"blue": 1, "green": 1})
    before = app.snapshot()
    run_, res = run(app, playbook)
    assert run_.rc != 0
    assert "do not sum to 100" in res["msg"]
    assert res.get("actions", []) == []
    assert app.snapshot() == before


def test_capacity_check_fails_early_without_gpus_or_managed_scaling(moto_server, playbook):
    app = create_app(moto_server, managed_scaling=False)
    app.register_targets("green", 2)
    before = app.snapshot()
    run_, res = run(app, playbook)
    assert run_.rc != 0
    assert "cannot place the standby colour: 2 task(s) of 1 GPU" in res["msg"]
    assert app.snapshot() == before


def test_cutover_through_a_listener_rule(app, playbook):
    elbv2 = app.elbv2()
    groups = [{"TargetGroupArn": app.target_groups["blue"], "Weight": 100}, {"TargetGroupArn": app.target_groups["green"], "Weight": 0}]
    rule = elbv2.create_rule(
        ListenerArn=app.listener_arn,
        Priority=10,
        Conditions=[{"Field": "path-pattern", "Values": ["/v2/*"]}],
        Actions=[{"Type": "forward", "ForwardConfig": {"TargetGroups": groups}}],
    )["Rules"][0]["RuleArn"]
    args = {"listener_arn": None, "listener_rule_arn": rule}
    run_, res = run(app, playbook, **args)
    assert run_.rc == 0, run_.stderr
    action = elbv2.describe_rules(RuleArns=[rule])["Rules"][0]["Actions"][0]
    weights = {g["TargetGroupArn"]: g["Weight"] for g in action["ForwardConfig"]["TargetGroups"]}
    assert weights == {app.target_groups["blue"]: 0, app.target_groups["green"]: 100}
    assert app.weights() == {"blue": 100, "green": 0}  # the listener's default action is not the rule's to change
    run_, res = run(app, playbook, **args)
    assert run_.rc == 0 and not res["changed"]
