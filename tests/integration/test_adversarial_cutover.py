"""Adversarial cutovers (issue 12, class 1): one cutover at a time, a killed controller stops writing, bad input is
refused before the first write, and the emergency rollback puts traffic back from what AWS shows.

Stand-ins: a moto server for ECS, ELBv2 and CloudWatch (as in test_bluegreen.py: moto runs no containers, so the
tests register one healthy IP target per task, as ECS would); real ansible-playbook processes, started together or
killed with SIGKILL to their process group as an operator's Ctrl-C or a CI runner's timeout would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.harness.ansible import REPO_ROOT, PlaybookRun, playbook_env, run_playbook
from tests.harness.bluegreen import (
    ALARM,
    CUTOVER_PLAYBOOK,
    EMERGENCY_PLAYBOOK,
    LEDGER_BUCKET,
    BlueGreenApp,
    create_app,
    rollback_traffic_vars,
)

REFUSED_PLAYBOOK = REPO_ROOT / "tests" / "integration" / "playbooks" / "bluegreen_refused.yml"
LOCK_PREFIX = "inferops:cutover-lock:"


@pytest.fixture
def app(moto_server) -> BlueGreenApp:
    app = create_app(moto_server)
    app.register_targets("green", 2)  # stands in for ECS registering the green tasks once they run
    return app


def start(playbook: Path, extra_vars: dict, env: dict[str, str], out: Path) -> subprocess.Popen:
    """ansible-playbook in its own process group (json callback into `out`), as a terminal or CI job runs it."""
    full_env = playbook_env(env)
    full_env["ANSIBLE_STDOUT_CALLBACK"] = "json"
    cmd = [
        str(Path(sys.executable).with_name("ansible-playbook")),
        str(playbook),
        "-i",
        "localhost,",
        "-c",
        "local",
        "-e",
        json.dumps(extra_vars),
    ]
    return subprocess.Popen(cmd, stdout=out.open("w"), stderr=subprocess.STDOUT, env=full_env, cwd=REPO_ROOT, start_new_session=True)


def cutover_result(out: Path) -> dict:
    report = json.loads(out.read_text()[out.read_text().index("{") :])
    return next(h for p in report["plays"] for t in p["tasks"] if t["task"]["name"] == "Cutover" for h in t["hosts"].values())


def wait_for(condition: Callable[[], bool], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.1)


def lock_tags(app: BlueGreenApp) -> dict[str, str]:
    tags = app.elbv2().describe_tags(ResourceArns=[app.listener_arn])["TagDescriptions"][0]["Tags"]
    return {t["Key"]: t["Value"] for t in tags if t["Key"].startswith(LOCK_PREFIX)}


def bluegreen_modules(app: BlueGreenApp) -> list[int]:
    """Live bluegreen module processes that talk to this test's moto server (their environment names its port)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if b"AnsiballZ_bluegreen" in (proc / "cmdline").read_bytes() and app.moto.endpoint.encode() in (proc / "environ").read_bytes():
                found.append(int(proc.name))
        except (OSError, ValueError):
            continue
    return found


def emergency(app: BlueGreenApp, **extra: object) -> tuple[PlaybookRun, dict]:
    run = run_playbook(EMERGENCY_PLAYBOOK, {**rollback_traffic_vars(app), **extra}, env=app.moto.env())
    return run, run.result("Put production traffic back on the previous colour")


# ---------------------------------------------------------------- one cutover at a time


@pytest.mark.parametrize(("first", "second"), [("triton:2", "triton:2"), ("triton:2", "triton:3"), ("triton:3", "triton:2")])
def test_adversarial_two_cutovers_started_together(app, tmp_path, first, second):
    """Stand-ins: moto server, two real ansible-playbook processes started at the same instant. Exactly one
    writes; the other fails before any write and names the run that holds the lock; no lock is left behind."""
    procs = []
    for i, td in enumerate((first, second)):
        args = app.module_args(td, bake_time_s=4, watch_interval_s=1, traffic_steps=[50, 100])
        procs.append((start(CUTOVER_PLAYBOOK, {"bg_args": args}, app.moto.env(), tmp_path / f"run{i}.json"), tmp_path / f"run{i}.json"))
    results = []
    for proc, out in procs:
        proc.wait(timeout=600)
        results.append(cutover_result(out))
    wrote = [r for r in results if r.get("actions")]
    refused = [r for r in results if not r.get("actions")]
    assert len(wrote) == 1 and len(refused) == 1, [r.get("msg") for r in results]
    assert refused[0].get("failed") and "another cutover of triton is running" in refused[0]["msg"]
    assert "owner " in refused[0]["msg"] and "break_lock" in refused[0]["msg"]
    assert not wrote[0].get("failed")
    assert app.weights() == {"blue": 0, "green": 100}
    assert lock_tags(app) == {}


# ---------------------------------------------------------------- a killed controller stops writing


def _kill_during_bake(app: BlueGreenApp) -> tuple[dict, Callable[[], bool]]:
    return app.module_args("triton:2", traffic_steps=[10, 100], bake_time_s=20), lambda: app.weights()["green"] == 10


def _kill_while_standby_comes_up(app: BlueGreenApp) -> tuple[dict, Callable[[], bool]]:
    app.elbv2().deregister_targets(TargetGroupArn=app.target_groups["green"], Targets=[{"Id": "10.0.2.10", "Port": 8000}])
    args = app.module_args("triton:2", timeouts={"standby_up_s": 30, "poll_interval_s": 1})
    return args, lambda: app.snapshot()["services"]["green"][1] == 2


def _kill_during_termination_wait(app: BlueGreenApp) -> tuple[dict, Callable[[], bool]]:
    return app.module_args("triton:2", termination_wait_s=20), lambda: app.weights()["green"] == 100


@pytest.mark.parametrize(
    "scenario", [_kill_during_bake, _kill_while_standby_comes_up, _kill_during_termination_wait], ids=lambda f: f.__name__[1:]
)
def test_adversarial_killed_controller_stops_writing(app, tmp_path, scenario):
    """Stand-ins: moto server, a real ansible-playbook killed with SIGKILL to its process group mid-cutover (Ansible's
    worker and the module run in their own session and survive it). The orphaned module exits within seconds and
    writes nothing more; the emergency rollback that follows (it breaks the dead run's lock) is not undone later."""
    args, moved = scenario(app)
    proc = start(CUTOVER_PLAYBOOK, {"bg_args": args}, app.moto.env(), tmp_path / "killed.json")
    wait_for(moved)
    wait_for(lambda: bool(bluegreen_modules(app)), 30)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    wait_for(lambda: not bluegreen_modules(app), 15)  # the module noticed and exited; it did not outlive the play
    after_kill = app.snapshot()
    time.sleep(3)
    assert app.snapshot() == after_kill  # nothing written after the kill
    assert len(lock_tags(app)) == 1  # the dead run's lock stays until it expires or is broken

    if app.snapshot()["services"]["blue"][1] > 0:  # the old colour still runs: roll back to it
        run, res = emergency(app)
        assert run.rc == 0, res.get("msg")
        time.sleep(3)
        assert app.weights() == {"blue": 100, "green": 0} and app.snapshot()["services"]["blue"][1] == 2
        assert app.snapshot()["services"]["green"][1] == 0 and lock_tags(app) == {}


# ---------------------------------------------------------------- refused before the first write


BAD_ARGS = [
    ({}, f"alarm {ALARM} is ALARM"),  # an alarm already in ALARM (set below): no standby is scaled up
    ({"drain": {"metrics_urls": {"blue": "http://10.0.1.10:8002/metrics"}}}, "drain.metrics_urls.blue is"),
    ({"gates": {"smoke": {"model": "simple", "inputs": "INPUT0"}}}, "gates.smoke.inputs is 'INPUT0'"),
    ({"gates": {"interval_s": 0}}, "gates.interval_s is 0"),
    ({"gates": {"request_timeout_s": 100000}}, "gates.request_timeout_s is 100000"),
    ({"timeouts": {"poll_interval_s": 0}}, "timeouts.poll_interval_s is 0"),
    ({"bake_time_s": 100000}, "bake_time_s is 100000"),
    ({"desired_count": 6000}, "desired_count is 6000"),
    ({"traffic_steps": [*range(1, 21), 100]}, "traffic_steps has 21 steps"),
    ({"test_route_url": "triton-test:8080"}, "test_route_url is 'triton-test:8080'"),
    ({"lock_owner": "Deploy Run"}, "lock_owner is 'Deploy Run'"),
    ({"lock_ttl_s": 5}, "lock_ttl_s is 5"),
    ({"watch_interval_s": "often"}, "watch_interval_s"),
]


def test_adversarial_bad_input_refused_before_any_write(app):
    """Stand-ins: moto server, real ansible-playbook (one task, looped over the bad argument sets). Each is refused
    with its option, value and fix; AWS is exactly as before - services, weights, test listener, no lock tag."""
    app.moto.client("cloudwatch").set_alarm_state(AlarmName=ALARM, StateValue="ALARM", StateReason="5xx before the cutover")
    before = app.snapshot()
    run = run_playbook(
        REFUSED_PLAYBOOK, {"bg_args": app.module_args("triton:2"), "bad_args": [args for args, _message in BAD_ARGS]}, env=app.moto.env()
    )
    results = run.result("Refused")["results"]
    assert len(results) == len(BAD_ARGS)
    for result, (_args, message) in zip(results, BAD_ARGS, strict=True):
        assert result.get("failed") and message in result["msg"], (message, result.get("msg"))
        assert result.get("actions", []) == []
    assert app.snapshot() == before and lock_tags(app) == {}


# ---------------------------------------------------------------- emergency rollback


def _after_a_kept_cutover(app: BlueGreenApp, tmp_path: Path) -> None:
    assert run_playbook(CUTOVER_PLAYBOOK, {"bg_args": app.module_args("triton:2", old_color="keep")}, env=app.moto.env()).rc == 0


def _mid_cutover(app: BlueGreenApp, tmp_path: Path) -> None:
    assert run_playbook(CUTOVER_PLAYBOOK, {"bg_args": app.module_args("triton:2", stop_after="gates")}, env=app.moto.env()).rc == 0
    app.set_weights({"blue": 90, "green": 10})  # as an interrupted run leaves it after the first step


def _while_a_cutover_runs(app: BlueGreenApp, tmp_path: Path) -> None:
    args = app.module_args("triton:2", traffic_steps=[10, 100], bake_time_s=15)
    proc = start(CUTOVER_PLAYBOOK, {"bg_args": args}, app.moto.env(), tmp_path / "running.json")
    wait_for(lambda: app.weights()["green"] == 10)
    app.running = (proc, tmp_path / "running.json")  # type: ignore[attr-defined]


@pytest.mark.parametrize("situation", [_after_a_kept_cutover, _mid_cutover, _while_a_cutover_runs], ids=lambda f: f.__name__[1:])
def test_adversarial_emergency_rollback(app, tmp_path, situation):
    """Stand-ins: moto server, real ansible-playbook of playbooks/rollback_traffic.yml given only the cluster and
    the application name. Production traffic is back on blue in one listener write, green is scaled to 0, a second run
    changes nothing; a cutover running at the time stops at its next write instead of moving traffic again."""
    situation(app, tmp_path)
    run, res = emergency(app)
    assert run.rc == 0, res.get("msg")
    assert res["decision"] == "rollback" and res["to_color"] == "blue"
    assert [a for a in res["actions"] if a.startswith("set production weights")] == ["set production weights blue=100 green=0"]
    assert app.weights() == {"blue": 100, "green": 0}
    assert app.snapshot()["services"]["green"][1] == 0 and app.snapshot()["services"]["blue"][1] == 2
    running = getattr(app, "running", None)
    if running is not None:
        running[0].wait(timeout=600)
        stopped = cutover_result(running[1])
        assert stopped.get("failed") and ("lock" in stopped["msg"] or "changed under this cutover" in stopped["msg"])
        assert app.weights() == {"blue": 100, "green": 0}  # the preempted cutover wrote nothing more
    run, res = emergency(app)
    assert run.rc == 0 and not res["changed"] and res["decision"] == "noop"
    assert lock_tags(app) == {}
    # the release ledger has the rollback that moved traffic, and not the run that found it done
    listed = app.moto.client("s3").list_objects_v2(Bucket=LEDGER_BUCKET, Prefix="models/ledger/triton/").get("Contents", [])
    assert len(listed) == 1
    entry = json.loads(app.moto.client("s3").get_object(Bucket=LEDGER_BUCKET, Key=listed[0]["Key"])["Body"].read())
    assert (entry["kind"], entry["color"], entry["production_color"], entry["verdicts"]["from_color"]) == (
        "cutover_rollback",
        "blue",
        "blue",
        "green",
    )


def test_adversarial_emergency_rollback_refused_when_the_old_colour_is_gone(app):
    """Stand-ins: moto server, real ansible-playbook. After a finished cutover the old colour runs no task: the
    emergency rollback writes nothing and says how to get the previous version back."""
    assert run_playbook(CUTOVER_PLAYBOOK, {"bg_args": app.module_args("triton:2")}, env=app.moto.env()).rc == 0
    before = app.snapshot()
    run, res = emergency(app)
    assert run.rc != 0 and "scaled to 0" in res["msg"] and "Traffic stays where it is" in res["msg"]
    assert app.snapshot() == before and lock_tags(app) == {}
