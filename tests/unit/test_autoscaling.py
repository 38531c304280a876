"""Application Auto Scaling of the live colour: validation, rendering, comparison, and the cutover's moves over an
in-memory fake of Application Auto Scaling and CloudWatch (mocked at the client-call boundary)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import autoscaling as sc
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import scaling_policies as policies
from tests.unit.one_page_listings import OnePageListings

PUBLISHED = ["nv_inference_request_success", "nv_inference_queue_duration_us", "nv_gpu_utilization"]
TRACKING = {"enabled": True, "metric": "nv_inference_request_success", "statistic": "Sum", "per": "task", "target": 600.0,
            "scale_out_cooldown_s": 60, "scale_in_cooldown_s": 300}  # fmt: skip
STEP = {"enabled": True, "metric": "nv_gpu_utilization", "statistic": "Average", "scale_out_threshold": 0.85, "scale_out_periods": 5,
        "scale_in_threshold": 0.4, "scale_in_periods": 15, "period_s": 60, "scale_out_step": 1, "scale_in_step": 1, "cooldown_s": 300}  # fmt: skip


def params(**overrides: Any) -> dict[str, Any]:
    base = {
        "cluster": "inference",
        "cluster_name": "inference",
        "name": "triton",
        "min_capacity": 2,
        "max_capacity": 8,
        "target_tracking": dict(TRACKING),
        "step_scaling": dict(STEP),
        "metrics": {"namespace": "Triton", "dimensions": {"ClusterName": "inference", "App": "triton"}, "published": PUBLISHED},
    }
    base.update(overrides)
    return base


# ---------------------------------------------------------------- validation


def test_good_input_has_no_errors():
    assert policies.validate(params(), PUBLISHED) == []


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"min_capacity": 5, "max_capacity": 3}, "min_capacity 5 is above max_capacity 3: swap them"),
        ({"min_capacity": 0}, "min_capacity is 0"),
        ({"target_tracking": dict(TRACKING, metric="nv_gpu_power_usage")}, "'nv_gpu_power_usage' is not published by the metrics sidecar"),
        ({"target_tracking": dict(TRACKING, target=0)}, "target_tracking.target is 0"),
        ({"target_tracking": dict(TRACKING, target=-1.5)}, "target_tracking.target is -1.5"),
        ({"step_scaling": dict(STEP, scale_in_threshold=0.9)}, "scale_in_threshold 0.9 must be below scale_out_threshold 0.85"),
        ({"step_scaling": dict(STEP, period_s=45)}, "step_scaling.period_s is 45"),
        ({"target_tracking": dict(TRACKING, enabled=False), "step_scaling": dict(STEP, enabled=False)}, "enable at least one policy"),
    ],
)
def test_bad_input_names_field_value_and_fix(overrides, message):
    errors = policies.validate(params(**overrides), PUBLISHED)
    assert any(message in e for e in errors), errors


def test_per_request_needs_the_request_counter_published():
    errors = policies.validate(params(target_tracking=dict(TRACKING, metric="nv_gpu_utilization", per="request")), ["nv_gpu_utilization"])
    assert any("does not publish nv_inference_request_success" in e for e in errors)


# ---------------------------------------------------------------- rendering and comparing


def test_target_tracking_per_task_divides_by_the_live_colours_running_tasks():
    policy = policies.target_tracking_policy(params(), "triton-blue")
    spec = policy["TargetTrackingScalingPolicyConfiguration"]["CustomizedMetricSpecification"]
    divisor = spec["Metrics"][1]["MetricStat"]["Metric"]
    assert divisor["MetricName"] == "RunningTaskCount"
    assert {"Name": "ServiceName", "Value": "triton-blue"} in divisor["Dimensions"]
    assert spec["Metrics"][2] == {
        "Id": "per_task",
        "Expression": "signal / divisor",
        "Label": "nv_inference_request_success per task",
        "ReturnData": True,
    }


def test_target_tracking_as_is_uses_a_plain_metric():
    tracking = dict(TRACKING, metric="nv_gpu_utilization", statistic="Average", per="none", target=0.7)
    spec = policies.target_tracking_policy(params(target_tracking=tracking), "triton-blue")["TargetTrackingScalingPolicyConfiguration"]
    assert spec["CustomizedMetricSpecification"]["MetricName"] == "nv_gpu_utilization" and spec["TargetValue"] == 0.7


def test_step_policies_and_alarms_follow_seed_001():
    out, scale_in = policies.step_policies(params())
    assert out["StepScalingPolicyConfiguration"]["StepAdjustments"] == [{"MetricIntervalLowerBound": 0.0, "ScalingAdjustment": 1}]
    assert scale_in["StepScalingPolicyConfiguration"]["StepAdjustments"] == [{"MetricIntervalUpperBound": 0.0, "ScalingAdjustment": -1}]
    high, low = policies.step_alarms(params(), {"triton-step-scale-out": "arn:out", "triton-step-scale-in": "arn:in"})
    assert (high["Threshold"], high["EvaluationPeriods"], high["AlarmActions"]) == (0.85, 5, ["arn:out"])
    assert (low["Threshold"], low["EvaluationPeriods"], low["AlarmActions"]) == (0.4, 15, ["arn:in"])


def test_aws_answering_ints_for_floats_is_not_a_change():
    wanted = policies.target_tracking_policy(params(), "triton-blue")
    described = copy.deepcopy(wanted)
    described["TargetTrackingScalingPolicyConfiguration"]["TargetValue"] = 600  # AWS answers an int
    described["TargetTrackingScalingPolicyConfiguration"]["Extra"] = "added by AWS"
    assert not policies.policy_differs(described, wanted)
    described["TargetTrackingScalingPolicyConfiguration"]["TargetValue"] = 300
    assert policies.policy_differs(described, wanted)


def test_a_policy_moved_to_the_other_colour_names_the_other_service():
    described = {**policies.target_tracking_policy(params(), "triton-blue"), "PolicyARN": "arn:old", "Alarms": []}
    moved = sc.policy_for_service(described, "triton-blue", "triton-green")
    dims = moved["TargetTrackingScalingPolicyConfiguration"]["CustomizedMetricSpecification"]["Metrics"][1]["MetricStat"]["Metric"][
        "Dimensions"
    ]
    assert {"Name": "ServiceName", "Value": "triton-green"} in dims and "PolicyARN" not in moved


def test_alarms_acting_on_old_policies_act_on_the_new_ones():
    alarms = [
        {"AlarmName": "triton-autoscaling-high", "AlarmActions": ["arn:old-out"], "MetricName": "m", "Namespace": "Triton", "Threshold": 0.85,
         "StateValue": "OK", "AlarmArn": "arn:alarm"},
        {"AlarmName": "unrelated", "AlarmActions": ["arn:sns"]},
    ]  # fmt: skip
    [args] = sc.alarms_to_repoint(alarms, {"arn:old-out": "arn:new-out"})
    assert args["AlarmActions"] == ["arn:new-out"] and "StateValue" not in args and "AlarmArn" not in args


def test_standby_desired_is_the_live_count_never_below_the_configured_one():
    assert sc.standby_desired(5, 2) == 5
    assert sc.standby_desired(1, 2) == 2


# ---------------------------------------------------------------- the cutover's moves over a fake


class FakeScaling(OnePageListings):
    """Application Auto Scaling and CloudWatch in memory; `calls` lists every call by name."""

    def __init__(self) -> None:
        self.targets: dict[str, dict[str, Any]] = {}
        self.policies: dict[tuple[str, str], dict[str, Any]] = {}
        self.alarms: dict[str, dict[str, Any]] = {}
        self.calls: list[str] = []

    def describe_scalable_targets(self, aws_retry: bool, ServiceNamespace: str, ResourceIds: list, ScalableDimension: str) -> dict:
        self.calls.append("describe_scalable_targets")
        return {"ScalableTargets": [copy.deepcopy(self.targets[r]) for r in ResourceIds if r in self.targets]}

    def register_scalable_target(self, aws_retry: bool, ServiceNamespace: str, ResourceId: str, ScalableDimension: str, **fields) -> dict:
        self.calls.append("register_scalable_target")
        self.targets.setdefault(ResourceId, {"ResourceId": ResourceId}).update(fields)
        return {}

    def deregister_scalable_target(self, aws_retry: bool, ServiceNamespace: str, ResourceId: str, ScalableDimension: str) -> dict:
        self.calls.append("deregister_scalable_target")
        del self.targets[ResourceId]
        self.policies = {k: v for k, v in self.policies.items() if k[0] != ResourceId}  # as AWS does
        return {}

    def describe_scaling_policies(self, aws_retry: bool, ServiceNamespace: str, ResourceId: str, ScalableDimension: str) -> dict:
        self.calls.append("describe_scaling_policies")
        return {"ScalingPolicies": [copy.deepcopy(p) for (rid, _name), p in self.policies.items() if rid == ResourceId]}

    def put_scaling_policy(self, aws_retry: bool, ServiceNamespace: str, ResourceId: str, ScalableDimension: str, **policy) -> dict:
        self.calls.append("put_scaling_policy")
        arn = f"arn:{ResourceId}:{policy['PolicyName']}"
        self.policies[(ResourceId, policy["PolicyName"])] = {**policy, "PolicyARN": arn, "ResourceId": ResourceId}
        return {"PolicyARN": arn}

    def describe_alarms(self, aws_retry: bool, AlarmNamePrefix: str, AlarmTypes: list) -> dict:
        self.calls.append("describe_alarms")
        return {"MetricAlarms": [copy.deepcopy(a) for n, a in self.alarms.items() if n.startswith(AlarmNamePrefix)]}

    def put_metric_alarm(self, aws_retry: bool, **alarm) -> None:
        self.calls.append("put_metric_alarm")
        self.alarms[alarm["AlarmName"]] = alarm


BLUE, GREEN = "service/inference/triton-blue", "service/inference/triton-green"
SERVICES = {"blue": "triton-blue", "green": "triton-green"}


def fake_with_policies_on_blue() -> FakeScaling:
    aws = FakeScaling()
    assert sc.ensure(aws, aws, params(), "blue", PUBLISHED, check_mode=False)["changed"]
    aws.calls.clear()
    return aws


def test_ensure_is_idempotent_and_check_mode_writes_nothing():
    aws = FakeScaling()
    planned = sc.ensure(aws, aws, params(), "blue", PUBLISHED, check_mode=True)
    assert planned["changed"] and aws.targets == {} and aws.alarms == {}
    done = sc.ensure(aws, aws, params(), "blue", PUBLISHED, check_mode=False)
    assert done["actions"] == planned["actions"] and len(aws.policies) == 3 and len(aws.alarms) == 2
    aws.calls.clear()
    again = sc.ensure(aws, aws, params(), "blue", PUBLISHED, check_mode=False)
    assert not again["changed"] and not any(c.startswith(("put", "register", "delete")) for c in aws.calls)


def test_suspend_then_move_then_nothing_left_on_the_old_colour():
    aws = fake_with_policies_on_blue()
    writes: list[str] = []
    scaling = sc.CutoverScaling(aws, aws, "inference", SERVICES, "triton", writes)
    scaling.set_scale_in("blue", True)
    assert aws.targets[BLUE]["SuspendedState"]["DynamicScalingInSuspended"]
    scaling.set_scale_in("blue", True)  # already suspended: no call
    scaling.move("blue", "green")
    assert set(aws.targets) == {GREEN} and not aws.targets[GREEN]["SuspendedState"]["DynamicScalingInSuspended"]
    assert (aws.targets[GREEN]["MinCapacity"], aws.targets[GREEN]["MaxCapacity"]) == (2, 8)
    assert sorted(name for rid, name in aws.policies if rid == GREEN) == [
        "triton-step-scale-in",
        "triton-step-scale-out",
        "triton-target-tracking",
    ]
    assert all(a["AlarmActions"][0].startswith(f"arn:{GREEN}") for a in aws.alarms.values())
    assert scaling.calls == len(aws.calls) <= 12
    assert writes == ["suspend scale-in of triton-blue", "move scalable target (2-8) and 3 policies from triton-blue to triton-green"]


def test_move_when_already_moved_only_restores_scale_in():
    aws = fake_with_policies_on_blue()
    aws.targets[BLUE]["SuspendedState"] = {"DynamicScalingInSuspended": True}
    scaling = sc.CutoverScaling(aws, aws, "inference", SERVICES, "triton", [])
    scaling.move("green", "blue")  # a rollback before finish: the target never left blue
    assert set(aws.targets) == {BLUE} and not aws.targets[BLUE]["SuspendedState"]["DynamicScalingInSuspended"]
    assert aws.calls == ["describe_scalable_targets", "register_scalable_target"]


def test_an_operators_other_suspensions_are_kept():
    target = {"SuspendedState": {"DynamicScalingOutSuspended": True}}
    assert sc.with_scale_in(target, True) == {
        "DynamicScalingInSuspended": True,
        "DynamicScalingOutSuspended": True,
        "ScheduledScalingSuspended": False,
    }


def test_a_capacity_paced_cutover_holds_scale_out_too_and_restores_both():
    aws = fake_with_policies_on_blue()
    writes: list[str] = []
    scaling = sc.CutoverScaling(aws, aws, "inference", SERVICES, "triton", writes, hold_scale_out=True)
    scaling.set_scale_in("blue", True)
    state = aws.targets[BLUE]["SuspendedState"]
    assert state["DynamicScalingInSuspended"] and state["DynamicScalingOutSuspended"] and not state["ScheduledScalingSuspended"]
    scaling.set_scale_in("blue", True)  # already held: no call
    scaling.move("blue", "green")
    state = aws.targets[GREEN]["SuspendedState"]
    assert not state["DynamicScalingInSuspended"] and not state["DynamicScalingOutSuspended"]
    assert writes[0] == "suspend scale-in and scale-out of triton-blue"


def test_a_capacity_paced_restore_releases_a_target_held_in_only():
    aws = fake_with_policies_on_blue()
    aws.targets[BLUE]["SuspendedState"] = {"DynamicScalingInSuspended": True}
    scaling = sc.CutoverScaling(aws, aws, "inference", SERVICES, "triton", [], hold_scale_out=True)
    scaling.set_scale_in("blue", False)
    assert not aws.targets[BLUE]["SuspendedState"]["DynamicScalingInSuspended"]
