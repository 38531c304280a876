"""The bluegreen module's capacity-paced mode end to end: ansible-playbook against a private moto server (ECS, ELBv2,
CloudWatch, Auto Scaling, EC2).

Stand-ins (see tests/harness/bluegreen.py): moto's ECS starts no tasks and registers no targets, so a follower
thread registers one healthy IP target per desired task in each colour's target group, as ECS would, and removes
them when the desired count drops; moto's container instances report no GPU, so the fleet's spare is what its GPU
Auto Scaling group can still add (4 instances of one 1-GPU task each, max size 5: one spare instance). The gates
are the CloudWatch alarm gate (an alarm set to ALARM through CloudWatch's own `set_alarm_state` fails a batch);
the Triton gates on real tasks are tests/integration/test_frugal_cutover.py's.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from tests.harness import aws_calls
from tests.harness.ansible import run_playbook
from tests.harness.autoscaling import AUTOSCALING_PLAYBOOK, policies, scaling_args, targets
from tests.harness.bluegreen import ALARM, APP, CUTOVER_PLAYBOOK, EMERGENCY_PLAYBOOK, BlueGreenApp, create_app, rollback_traffic_vars

FULL = 4
NEW_TD = "triton:2"
POLICIES = [f"{APP}-step-scale-in", f"{APP}-step-scale-out", f"{APP}-target-tracking"]


class TargetFollower:
    """Keeps each colour's target group at its service's desired count of healthy targets (ECS's part)."""

    def __init__(self, app: BlueGreenApp, on_change: Callable[[dict[str, int]], None] | None = None) -> None:
        self.app = app
        self.on_change = on_change
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.seen: dict[str, int] = {}

    def __enter__(self) -> TargetFollower:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=5)

    def _loop(self) -> None:
        ecs, elbv2 = self.app.ecs(), self.app.elbv2()
        while not self.stop.is_set():
            desired = {c: s["desiredCount"] for c, s in self.app.services().items()}
            for color, count in desired.items():
                arn = self.app.target_groups[color]
                octet = 1 if color == "blue" else 2
                have = {t["Target"]["Id"] for t in elbv2.describe_target_health(TargetGroupArn=arn)["TargetHealthDescriptions"]}
                want = {f"10.0.{octet}.{10 + i}" for i in range(count)}
                if want - have:
                    elbv2.register_targets(TargetGroupArn=arn, Targets=[{"Id": t, "Port": 8000} for t in sorted(want - have)])
                if have - want:
                    elbv2.deregister_targets(TargetGroupArn=arn, Targets=[{"Id": t, "Port": 8000} for t in sorted(have - want)])
            if desired != self.seen:
                self.seen = desired
                if self.on_change is not None:
                    self.on_change(desired)
            self.stop.wait(0.1)
        del ecs


def fleet(moto_server, max_size: int = FULL + 1) -> BlueGreenApp:
    """Blue live with 4 tasks on 4 GPU instances; the group may add max_size - 4 more."""
    app = create_app(moto_server, live_tasks=FULL)
    moto_server.client("autoscaling").update_auto_scaling_group(AutoScalingGroupName="gpu", MaxSize=max_size, DesiredCapacity=FULL)
    return app


@pytest.fixture
def app(moto_server) -> BlueGreenApp:
    return fleet(moto_server)


def run(app: BlueGreenApp, check: bool = False, **args) -> tuple[object, dict]:
    module_args = app.module_args(NEW_TD, **{"desired_count": FULL, "mode": "capacity_paced", **args})
    module_args = {k: v for k, v in module_args.items() if v is not None}
    result = run_playbook(CUTOVER_PLAYBOOK, {"bg_args": module_args}, check=check, diff=True, env=app.moto.env())
    return result, result.result("Cutover")


def counts_along(actions: list[str], start: dict[str, int]) -> list[dict[str, int]]:
    """The desired counts after each service update in `actions`, from `start`."""
    counts, seen = dict(start), []
    for action in actions:
        found = re.search(r"update service triton-(blue|green): .*?(\d+) tasks", action)
        if found:
            counts[found.group(1)] = int(found.group(2))
            seen.append(dict(counts))
    return seen


def service_and_weight_writes(actions: list[str]) -> list[str]:
    return [a for a in actions if a.startswith(("update service", "set production weights"))]


def test_a_fleet_with_one_spare_changes_colour_batch_by_batch(app):
    aws_calls.start_recording(app.moto)
    before = app.snapshot()
    check_run, planned = run(app, check=True)
    assert check_run.rc == 0, check_run.stderr
    assert planned["changed"] and planned["planned"]
    assert aws_calls.writes(app.moto) == [] and app.snapshot() == before  # check mode writes nothing
    assert planned["plan"]["phases"] == ["capacity", "batches", "finish"]
    assert planned["capacity_plan"]["batch_size"] == 1  # one spare g5.xlarge holds one task
    assert planned["capacity_plan"]["spare_instances_needed"] == 1
    assert planned["capacity_plan"]["batches"] == 4
    assert [a for a in planned["actions"] if a.startswith("batch 2/4")] == [
        "batch 2/4: update service triton-green: 2 tasks",
        "batch 2/4: set production weights green=50 blue=50",
        "batch 2/4: update service triton-blue: 2 tasks",
    ]

    with TargetFollower(app):
        run_, res = run(app)
    assert run_.rc == 0, run_.stderr + run_.stdout[-3000:]
    writes = service_and_weight_writes(res["actions"])
    assert writes == [
        f"update service triton-green: task definition {app.task_definitions[1]}, 1 tasks",
        "set production weights blue=75 green=25",
        "update service triton-blue: 3 tasks",
        "update service triton-green: 2 tasks",
        "set production weights blue=50 green=50",
        "update service triton-blue: 2 tasks",
        "update service triton-green: 3 tasks",
        "set production weights blue=25 green=75",
        "update service triton-blue: 1 tasks",
        "update service triton-green: 4 tasks",
        "set production weights blue=0 green=100",
        "update service triton-blue: 0 tasks",
    ]
    assert all(c["blue"] + c["green"] <= FULL + 1 for c in counts_along(res["actions"], {"blue": FULL, "green": 0}))
    assert [(b["index"], b["new_count"], b["old_count"], b["weights"]["green"], b["status"]) for b in res["batches"]] == [
        (1, 1, 3, 25, "ok"),
        (2, 2, 2, 50, "ok"),
        (3, 3, 1, 75, "ok"),
        (4, 4, 0, 100, "ok"),
    ]
    assert [e["phase"] for e in res["timeline"] if e["phase"].startswith("batch")] == ["batch 1/4", "batch 2/4", "batch 3/4", "batch 4/4"]
    second = next(e for e in res["timeline"] if e["phase"] == "batch 2/4")
    assert second["outcome"] == "ok" and second["detail"].startswith("batch 2/4: green 2, blue 2, weights green=50 blue=50")
    assert app.weights() == {"blue": 0, "green": 100}
    tags = app.elbv2().describe_tags(ResourceArns=[app.listener_arn])["TagDescriptions"][0]["Tags"]
    assert {
        "Key": "inferops:cutover",
        "Value": "from=blue to=green task_definition=triton:2 count=4",
    } in tags  # the emergency rollback reads it
    assert {c: (s["taskDefinition"], s["desiredCount"]) for c, s in app.services().items()} == {
        "blue": (app.task_definitions[0], 0),
        "green": (app.task_definitions[1], FULL),
    }

    aws_calls.start_recording(app.moto)
    again, res = run(app)
    assert again.rc == 0 and not res["changed"] and res["decision"] == "noop" and res["batches"] == []
    assert aws_calls.writes(app.moto) == []
    check_again, res = run(app, check=True)
    assert check_again.rc == 0 and not res["changed"]


def test_a_failing_gate_at_the_middle_batch_rolls_back_batch_by_batch(app):
    cloudwatch = app.moto.client("cloudwatch")

    def alarm_at_second_batch(desired: dict[str, int]) -> None:
        if desired.get("green") == 2 and desired.get("blue") == 3:
            cloudwatch.set_alarm_state(AlarmName=ALARM, StateValue="ALARM", StateReason="5xx on the second batch")

    with TargetFollower(app, alarm_at_second_batch):
        run_, res = run(app, gates={"timeout_s": 2, "interval_s": 1})
    assert run_.rc != 0
    assert "rolled back to blue" in res["msg"] and ALARM in res["msg"]
    writes = service_and_weight_writes(res["actions"])
    assert writes == [
        f"update service triton-green: task definition {app.task_definitions[1]}, 1 tasks",
        "set production weights blue=75 green=25",
        "update service triton-blue: 3 tasks",
        "update service triton-green: 2 tasks",  # batch 2 grows; its gate fails: roll back batch by batch
        "update service triton-green: 1 tasks",  # blue 3 still has 75%: green shrinks first (3 + 2 is already 4 + 1)
        "update service triton-blue: 4 tasks",
        "set production weights blue=100 green=0",
        "update service triton-green: 0 tasks",
    ]
    assert all(c["blue"] + c["green"] <= FULL + 1 for c in counts_along(res["actions"], {"blue": FULL, "green": 0}))
    assert res["rollback"]["to_color"] == "blue" and res["rollback"]["batches"] >= 1
    assert [b["status"] for b in res["batches"]][:2] == ["ok", "failed"]
    assert app.weights() == {"blue": 100, "green": 0}
    assert {c: s["desiredCount"] for c, s in app.services().items()} == {"blue": FULL, "green": 0}


def test_a_fleet_with_no_spare_is_refused_before_any_write(moto_server):
    app = fleet(moto_server, max_size=FULL)  # the group is at its max size and no registered instance has a free GPU
    before = app.snapshot()
    aws_calls.start_recording(moto_server)
    run_, res = run(app)
    assert run_.rc != 0
    assert aws_calls.writes(moto_server) == []
    assert app.snapshot() == before
    msg = res["msg"]
    assert "cannot place one capacity-paced batch: 1 task(s) of 1 GPU" in msg
    assert "Auto Scaling group gpu at 4 of max 4" in msg
    assert "raise the max size of Auto Scaling group gpu by 1 to 5" in msg
    assert "mode blue_green would need room for 4 task(s)" in msg


def test_batch_size_below_1_is_refused_with_the_field(app):
    before = app.snapshot()
    run_, res = run(app, batch_size=0)
    assert run_.rc != 0
    assert "batch_size is 0" in res["msg"]
    assert app.snapshot() == before


@pytest.fixture
def mid_batch(app) -> Iterator[BlueGreenApp]:
    """A run killed in batch 2 after its weights and before its shrink: green 2 of revision 2 at 50%, blue still 3."""
    ecs = app.ecs()
    ecs.update_service(cluster="inference", service="triton-green", taskDefinition=app.task_definitions[1], desiredCount=2)
    ecs.update_service(cluster="inference", service="triton-blue", desiredCount=3)
    app.set_weights({"blue": 50, "green": 50})
    yield app


def test_a_killed_run_resumes_from_what_aws_shows(mid_batch):
    app = mid_batch
    with TargetFollower(app):
        run_, res = run(app)
    assert run_.rc == 0, run_.stderr + run_.stdout[-3000:]
    assert res["plan"]["reason"].startswith("resuming a capacity-paced cutover")
    assert service_and_weight_writes(res["actions"]) == [
        "update service triton-blue: 2 tasks",  # batch 2 goes on with its shrink
        "update service triton-green: 3 tasks",
        "set production weights blue=25 green=75",
        "update service triton-blue: 1 tasks",
        "update service triton-green: 4 tasks",
        "set production weights blue=0 green=100",
        "update service triton-blue: 0 tasks",
    ]
    assert app.weights() == {"blue": 0, "green": 100}


def test_a_run_resumes_at_weight_0_when_the_new_colour_already_has_tasks(app):
    app.ecs().update_service(cluster="inference", service="triton-green", taskDefinition=app.task_definitions[1], desiredCount=1)
    with TargetFollower(app):
        run_, res = run(app, stop_after="capacity")
        assert run_.rc == 0 and not res["changed"]  # the capacity check reads only
        run_, res = run(app)
    assert run_.rc == 0, run_.stderr + run_.stdout[-3000:]
    assert res["plan"]["reason"].startswith("resuming a capacity-paced cutover at weight 0")
    assert service_and_weight_writes(res["actions"])[:2] == [
        "set production weights blue=75 green=25",
        "update service triton-blue: 3 tasks",
    ]
    assert app.weights() == {"blue": 0, "green": 100}


def test_the_emergency_rollback_moves_traffic_at_once_and_scales_the_shrunk_colour_back(mid_batch):
    """playbooks/rollback_traffic.yml given only the cluster and the application name, in the middle of a
    capacity-paced cutover (batch 2 done: green 2 of revision 2, blue shrunk to 2, 50/50). The record a paced run
    writes (checked by the first test) carries the full count: traffic goes back to blue in one write, green is scaled
    to 0, blue is scaled back to 4, and the module says blue serves with 2 of 4 tasks until then."""
    app = mid_batch
    app.ecs().update_service(cluster="inference", service="triton-blue", desiredCount=2)
    app.elbv2().add_tags(
        ResourceArns=[app.listener_arn], Tags=[{"Key": "inferops:cutover", "Value": "from=blue to=green task_definition=triton:2 count=4"}]
    )
    extra_vars = rollback_traffic_vars(app)
    with TargetFollower(app):
        time.sleep(1)  # the follower registers the targets the colours want, as ECS would
        run_ = run_playbook(EMERGENCY_PLAYBOOK, extra_vars, env=app.moto.env())
    res = run_.result("Put production traffic back on the previous colour")
    assert run_.rc == 0, res.get("msg")
    assert res["actions"] == [
        "set production weights blue=100 green=0",
        "update service triton-green: 0 tasks",
        "update service triton-blue: 4 tasks",
    ]
    assert res["old_capacity"]["before"] == {"running": 2, "desired": 2} and res["old_capacity"]["after"] == {"desired": 4}
    assert "with 2 of 4 tasks running until its scale-up" in res["old_capacity"]["warning"]
    assert app.weights() == {"blue": 100, "green": 0}
    assert {c: s["desiredCount"] for c, s in app.services().items()} == {"blue": 4, "green": 0}


def test_autoscaling_is_held_in_and_out_during_the_batches_and_moves_at_finish(app):
    """Application Auto Scaling (moto): blue's scalable target (min 2, max 8) with its policies; autoscaling had set
    blue to 4 while the inventory says 2. The full count 4 is carried; during the batches neither scale-in nor
    scale-out of blue runs (its shrink is the cutover's, not a policy's); at finish the target and policies move to
    green with nothing suspended."""
    run_ = run_playbook(AUTOSCALING_PLAYBOOK, {"as_args": scaling_args(app)}, env=app.moto.env())
    assert run_.rc == 0, run_.stderr
    seen: list[dict] = []

    def suspended_at_second_batch(desired: dict[str, int]) -> None:
        if desired.get("green") == 2:
            seen.append(dict(targets(app)["blue"]["SuspendedState"]))

    with TargetFollower(app, suspended_at_second_batch):
        run_, res = run(app, desired_count=2, autoscaling=True)
    assert run_.rc == 0, run_.stderr + run_.stdout[-3000:]
    assert seen and seen[0]["DynamicScalingInSuspended"] and seen[0]["DynamicScalingOutSuspended"]
    assert res["actions"][0] == "suspend scale-in and scale-out of triton-blue"
    assert {c: s["desiredCount"] for c, s in app.services().items()} == {"blue": 0, "green": FULL}
    found = targets(app)
    assert set(found) == {"green"} and (found["green"]["MinCapacity"], found["green"]["MaxCapacity"]) == (2, 8)
    state = found["green"]["SuspendedState"]
    assert not state["DynamicScalingInSuspended"] and not state["DynamicScalingOutSuspended"]
    assert policies(app, "green") == POLICIES
    app.ecs().update_service(cluster="inference", service="triton-green", desiredCount=5)  # autoscaling scales green out
    with TargetFollower(app):
        again, res = run(app, desired_count=2, autoscaling=True)
    assert again.rc == 0 and res["decision"] == "noop" and not res["changed"]  # what autoscaling set is never reset
    assert app.services()["green"]["desiredCount"] == 5
