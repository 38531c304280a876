"""bluegreen_autoscaling and a blue/green cutover with autoscaling, end to end: ansible-playbook against a moto
server (ECS, ELBv2, CloudWatch, Application Auto Scaling, Auto Scaling, EC2).

Stand-ins, where moto cannot behave like AWS (tests/harness/bluegreen.py, tests/harness/autoscaling.py): moto runs
no tasks, so each colour's healthy targets are registered by the test as ECS would; moto runs no scaling policy,
so "autoscaling scaled the live colour to 5" is the test setting the desired count to 5; moto keeps a deregistered
target's policies (AWS deletes them), so a colour's policies are read only while it has a scalable target.
"""

from __future__ import annotations

import threading

import pytest

from tests.harness.ansible import run_playbook
from tests.harness.autoscaling import AUTOSCALING_PLAYBOOK, REPO_ROOT, policies, scale_in_suspended, scale_live, scaling_args, targets
from tests.harness.bluegreen import APP, CUTOVER_PLAYBOOK, BlueGreenApp, create_app

ONE_TASK = REPO_ROOT / "tests" / "integration" / "playbooks" / "autoscaling_module.yml"
POLICIES = [f"{APP}-step-scale-in", f"{APP}-step-scale-out", f"{APP}-target-tracking"]


@pytest.fixture
def app(moto_server) -> BlueGreenApp:
    return create_app(moto_server)


def autoscaling(app: BlueGreenApp, check: bool = False, **overrides):
    run = run_playbook(ONE_TASK, {"as_args": scaling_args(app, **overrides)}, check=check, diff=True, env=app.moto.env())
    return run, run.result("Autoscaling")


def cutover(app: BlueGreenApp, td: str, **overrides):
    args = app.module_args(td, autoscaling=True, **overrides)
    run = run_playbook(CUTOVER_PLAYBOOK, {"bg_args": args}, diff=True, env=app.moto.env())
    return run, run.result("Cutover")


def step_alarm_actions(app: BlueGreenApp) -> dict[str, list[str]]:
    alarms = app.moto.client("cloudwatch").describe_alarms(AlarmNamePrefix=f"{APP}-autoscaling-")["MetricAlarms"]
    return {a["AlarmName"]: a["AlarmActions"] for a in alarms}


def test_policies_created_then_idempotent(app):
    """Check mode, run, check mode, run: changed only the first two times; the target and policies on blue (live)."""
    run = run_playbook(AUTOSCALING_PLAYBOOK, {"as_args": scaling_args(app)}, env=app.moto.env())
    assert run.rc == 0, run.stdout[-3000:]
    assert run.result("Check mode on a fresh service")["actions"] == run.result("Create")["actions"]
    found = targets(app)
    assert set(found) == {"blue"} and (found["blue"]["MinCapacity"], found["blue"]["MaxCapacity"]) == (2, 8)
    assert policies(app, "blue") == POLICIES
    arns = {
        p["PolicyName"]: p["PolicyARN"]
        for p in app.moto.client("application-autoscaling").describe_scaling_policies(
            ServiceNamespace="ecs", ResourceId=f"service/inference/{APP}-blue"
        )["ScalingPolicies"]
    }
    assert step_alarm_actions(app) == {
        f"{APP}-autoscaling-high": [arns[f"{APP}-step-scale-out"]],
        f"{APP}-autoscaling-low": [arns[f"{APP}-step-scale-in"]],
    }
    # a changed target converges in place; turning step scaling off removes its policies and alarms
    _run, res = autoscaling(app, max_capacity=10, step_scaling={"enabled": False})
    assert res["changed"] and targets(app)["blue"]["MaxCapacity"] == 10
    assert policies(app, "blue") == [f"{APP}-target-tracking"] and step_alarm_actions(app) == {}


def test_check_mode_writes_nothing(app):
    run, res = autoscaling(app, check=True)
    assert run.rc == 0 and res["changed"] and res["actions"]
    assert targets(app) == {} and step_alarm_actions(app) == {}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"min_capacity": 5, "max_capacity": 3}, "min_capacity 5 is above max_capacity 3"),
        ({"target_tracking": {"metric": "nv_gpu_power_usage"}}, "'nv_gpu_power_usage' is not published by the metrics sidecar"),
        ({"target_tracking": {"target": 0}}, "target_tracking.target is 0.0"),
    ],
)
def test_bad_input_rejected_before_any_write(app, overrides, message):
    """The issue's three bad inputs through ansible-playbook; every other rule is in tests/unit/test_autoscaling.py."""
    run, res = autoscaling(app, **overrides)
    assert run.rc != 0 and message in res["msg"], res.get("msg")
    assert targets(app) == {} and step_alarm_actions(app) == {}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"target_tracking": {"target": "nan"}}, "target_tracking.target is nan"),
        ({"target_tracking": {"target": "inf"}}, "target_tracking.target is inf"),
        ({"step_scaling": {"enabled": True, "scale_out_threshold": "-inf"}}, "step_scaling.scale_out_threshold is -inf"),
        ({"step_scaling": {"enabled": True, "scale_out_step": 1000}}, "step_scaling.scale_out_step is 1000"),
        ({"max_capacity": 100000}, "max_capacity is 100000"),
    ],
    ids=["nan-target", "infinite-target", "infinite-threshold", "absurd-step", "absurd-max"],
)
def test_adversarial_numbers_rejected_before_any_write(app, overrides, message):
    """Adversarial (issue 28): NaN and infinities (Ansible's float type takes "nan" and "inf") and absurd steps never
    reach AWS. Stand-in: moto server (no target, policy or alarm is written)."""
    run, res = autoscaling(app, **overrides)
    assert run.rc != 0 and message in res["msg"], res.get("msg")
    assert targets(app) == {} and step_alarm_actions(app) == {}


def test_adversarial_max_capacity_under_what_the_live_colour_runs_is_refused(app):
    """Adversarial (issue 28): autoscaling scaled the live colour out to 6 tasks; a max_capacity of 4 would have
    Application Auto Scaling scale production in to 4 at once. Stand-in: moto server; scale_live sets the desired count
    as Application Auto Scaling would."""
    autoscaling(app)
    scale_live(app, "blue", 6)
    run, res = autoscaling(app, max_capacity=4)
    assert run.rc != 0 and "max_capacity is 4 but the live colour's service" in res["msg"] and "at least 6" in res["msg"], res.get("msg")
    assert targets(app)["blue"]["MaxCapacity"] == 8
    run, res = autoscaling(app, max_capacity=6)
    assert run.rc == 0 and targets(app)["blue"]["MaxCapacity"] == 6


def test_nothing_registered_while_no_colour_serves(moto_server):
    """Before the first cutover the live colour runs no tasks: a target's minimum would scale an ungated revision up."""
    app = create_app(moto_server, live_tasks=0)
    run, res = autoscaling(app)
    assert run.rc == 0 and not res["changed"] and "runs no tasks yet" in res["skipped_reason"]
    assert targets(app) == {}


def test_cutover_there_and_back_with_autoscaling(app):
    """Desired count carried over, scale-in suspended during, target and policies on the live colour after, a re-run
    keeps what autoscaling set, and a rollback leaves them on the colour that serves with scale-in restored."""
    assert autoscaling(app)[0].rc == 0
    scale_live(app, "blue", 5)  # autoscaling scaled blue out during a peak; the inventory says 2
    app.register_targets("green", 5)

    # the group can add 4 one-GPU instances, the standby needs 5: refused before any write, with the fix
    before = app.snapshot()
    run, res = cutover(app, "triton:2")
    assert run.rc != 0 and "raise the max size of Auto Scaling group gpu to at least 5" in res["msg"]
    assert app.snapshot() == before and not scale_in_suspended(app, "blue")
    app.moto.client("autoscaling").update_auto_scaling_group(AutoScalingGroupName="gpu", MaxSize=12)

    run, res = cutover(app, "triton:2", stop_after="standby_up")
    assert run.rc == 0, res.get("msg")
    assert app.services()["green"]["desiredCount"] == 5
    assert scale_in_suspended(app, "blue") and policies(app, "blue") == POLICIES

    run, res = cutover(app, "triton:2")
    assert run.rc == 0, res.get("msg")
    assert res["live_color"] == "green" and app.services()["blue"]["desiredCount"] == 0
    found = targets(app)
    assert set(found) == {"green"} and (found["green"]["MinCapacity"], found["green"]["MaxCapacity"]) == (2, 8)
    assert not scale_in_suspended(app, "green") and policies(app, "green") == POLICIES
    assert all("triton-green" in action[0] for action in step_alarm_actions(app).values())
    assert res["autoscaling"]["api_calls"] <= 12

    # autoscaling takes green to 6; deploy.yml again with the same task definition changes nothing
    scale_live(app, "green", 6)
    run, res = cutover(app, "triton:2")
    assert run.rc == 0 and res["decision"] == "noop" and not res["changed"]
    assert app.services()["green"]["desiredCount"] == 6

    # an alarm fires during the next release's bake: rolled back, the target stays on green with scale-in restored
    app.register_targets("blue", 6)
    alarm = threading.Thread(target=app.alarm_once_it_has_traffic, args=("blue", "test"))
    alarm.start()
    run, res = cutover(app, "triton:3", traffic_steps=[50, 100], bake_time_s=30)
    alarm.join()
    assert run.rc != 0 and res["rollback"]["to_color"] == "green"
    assert app.services()["blue"]["desiredCount"] == 0 and app.services()["green"]["desiredCount"] == 6
    assert set(targets(app)) == {"green"} and not scale_in_suspended(app, "green")
    assert policies(app, "green") == POLICIES


def test_rolled_back_on_demand_brings_the_target_back(app):
    """old_color: keep, then state rolled_back: traffic, target and policies back on blue; green scaled to 0."""
    assert autoscaling(app, step_scaling={"enabled": False})[0].rc == 0
    app.register_targets("green", 2)
    run, res = cutover(app, "triton:2", old_color="keep")
    assert run.rc == 0 and set(targets(app)) == {"green"}
    run, res = cutover(app, "triton:2", state="rolled_back")
    assert run.rc == 0, res.get("msg")
    assert res["live_color"] == "blue" and set(targets(app)) == {"blue"}
    assert policies(app, "blue") == [f"{APP}-target-tracking"] and not scale_in_suspended(app, "blue")
    assert app.services()["green"]["desiredCount"] == 0
