"""The bluegreen runner with autoscaling over in-memory fakes (ECS, ELBv2, CloudWatch from test_bluegreen_runner,
Application Auto Scaling from test_autoscaling), time simulated: desired count carried over, scale-in held during
the cutover, target and policies moved at finish, what check mode plans, a re-run that keeps autoscaling's count."""

from __future__ import annotations

import pytest

from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import autoscaling as sc
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.cutover_state import Clients
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.plan import PlanError
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.runner import Runner
from tests.unit.one_page_listings import OnePageListings
from tests.unit.test_autoscaling import PUBLISHED, FakeScaling
from tests.unit.test_autoscaling import params as scaling_params
from tests.unit.test_bluegreen_runner import TD2, FakeAws, FakeClock, FakeTriton, params

BLUE, GREEN = "service/inference/triton-blue", "service/inference/triton-green"


def setup() -> tuple[FakeAws, FakeScaling]:
    """Blue live, scaled by autoscaling to 5 (the configured count is 2), with its target and 3 policies."""
    aws, scaling = FakeAws(), FakeScaling()
    aws.services["triton-blue"].update(desiredCount=5, runningCount=5)
    aws.gpus_free = 5  # a registered instance with room for the 5 standby tasks
    sc.ensure(scaling, scaling, scaling_params(), "blue", PUBLISHED, check_mode=False)
    return aws, scaling


class CloudWatch(OnePageListings):
    """The cutover-gate alarms from FakeAws, the step-scaling alarms (read by prefix, re-put) from FakeScaling."""

    def __init__(self, aws: FakeAws, scaling: FakeScaling) -> None:
        self.aws, self.scaling = aws, scaling

    def describe_alarms(self, aws_retry: bool, **kwargs) -> dict:
        owner = self.scaling if "AlarmNamePrefix" in kwargs else self.aws
        return owner.describe_alarms(aws_retry, **kwargs)

    def put_metric_alarm(self, aws_retry: bool, **alarm) -> None:
        self.scaling.put_metric_alarm(aws_retry, **alarm)


def run(aws: FakeAws, scaling: FakeScaling, check_mode: bool = False, **kw) -> dict:
    clients = Clients(aws, aws, CloudWatch(aws, scaling), aws, aws, scaling)
    runner = Runner(params(autoscaling=True, bake_time_s=0, **kw), clients, check_mode=check_mode, clock=FakeClock(), triton=FakeTriton)
    return runner.run()


def test_check_mode_plans_the_carried_count_and_the_moves_without_writing():
    aws, scaling = setup()
    before = dict(scaling.targets)
    result = run(aws, scaling, check_mode=True)
    assert f"update service triton-green: task definition {TD2}, 5 tasks" in result["actions"]
    assert "suspend scale-in of triton-blue" in result["actions"]
    assert "move scalable target and policies from triton-blue to triton-green" in result["actions"]
    assert aws.calls == [] and scaling.targets == before


def test_cutover_carries_the_count_holds_scale_in_and_moves_the_target():
    aws, scaling = setup()
    seen: list[bool] = []
    original = aws.update_service

    def watch(*args, **kwargs):  # when the standby is scaled up, blue's scale-in is already held
        if kwargs["service"] == "triton-green":
            seen.append(scaling.targets[BLUE]["SuspendedState"]["DynamicScalingInSuspended"])
        return original(*args, **kwargs)

    aws.update_service = watch
    result = run(aws, scaling)
    assert result["failed_reason"] == "" and aws.services["triton-green"]["desiredCount"] == 5
    assert seen == [True]
    assert set(scaling.targets) == {GREEN} and not scaling.targets[GREEN]["SuspendedState"]["DynamicScalingInSuspended"]
    assert result["autoscaling"]["api_calls"] == 11 and aws.services["triton-blue"]["desiredCount"] == 0

    # autoscaling takes green to 7: the same task definition again is a no-op, the count is kept
    aws.services["triton-green"].update(desiredCount=7, runningCount=7)
    again = run(aws, scaling)
    assert again["decision"] == "noop" and not again["changed"] and aws.services["triton-green"]["desiredCount"] == 7


def test_a_noop_run_restores_scale_in_left_held_by_a_killed_controller():
    aws, scaling = setup()
    aws.services["triton-blue"]["taskDefinition"] = TD2  # blue already runs what is asked: nothing to cut over
    scaling.targets[BLUE]["SuspendedState"] = {"DynamicScalingInSuspended": True}
    result = run(aws, scaling)
    assert result["decision"] == "noop" and result["actions"] == ["restore scale-in of triton-blue"]
    assert not scaling.targets[BLUE]["SuspendedState"]["DynamicScalingInSuspended"]


def test_a_run_refused_before_writing_leaves_another_runs_scale_in_hold_alone():
    aws, scaling = setup()
    scaling.targets[BLUE]["SuspendedState"] = {"DynamicScalingInSuspended": True}  # another cutover holds it
    aws.gpus_free, aws.managed_scaling = 0, False  # the capacity phase refuses this one before any write
    with pytest.raises(PlanError, match="cannot place the standby"):
        run(aws, scaling)
    assert scaling.targets[BLUE]["SuspendedState"]["DynamicScalingInSuspended"] and aws.calls == []
