"""The relative canary verdict (pure), its CloudWatch queries, and the runner's bakes and hooks over fake clients.

The fakes extend tests/unit/test_bluegreen_runner.py's: CloudWatch's GetMetricData answers per-colour figures that a
test sets (what the load balancer and the metrics sidecar would have published); Lambda answers each hook's status.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import canary, canary_metrics, hooks
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.canary_watch import CanaryFailed, CanaryWatch
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.cutover_state import Clients
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.hook_runner import HookRunner
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.input import all_input_errors
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.runner import Runner
from tests.unit.test_bluegreen_runner import TGS, FakeAws, FakeClock, FakeTriton, params

LB = "arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/app/triton/abc"
HOOK = "arn:aws:lambda:us-east-1:123456789012:function:acceptance"


def figures(requests: float, errors: float = 0, p99: float | None = 0.05, **kw: Any) -> canary.ColorFigures:
    return canary.ColorFigures(requests=requests, target_5xx=errors, p99_s=p99, **kw)


# ---------------------------------------------------------------- the verdict


def test_no_verdict_below_the_minimum_request_count():
    found = canary.verdict(figures(49, errors=10), figures(1000), {"min_requests": 50})
    assert found.outcome == canary.WAIT and "49 of the 50" in found.reasons[0]


def test_a_standby_failing_3_percent_against_a_clean_live_colour_fails():
    found = canary.verdict(figures(100, errors=3), figures(900, errors=0), {})
    assert found.outcome == canary.FAIL
    assert "target 5xx ratio 0.03 above 0.01" in found.reasons[0]


def test_the_same_errors_on_both_colours_pass():
    assert canary.verdict(figures(100, errors=3), figures(900, errors=27), {}).outcome == canary.PASS


def test_triton_failures_count_when_the_load_balancer_sees_none():
    # gRPC errors are HTTP 200 to the load balancer; Triton's failure counter sees them
    standby = figures(100, inferences=100, inference_failures=4)
    live = figures(900, inferences=900, inference_failures=0)
    found = canary.verdict(standby, live, {})
    assert found.outcome == canary.FAIL and "Triton inference failure ratio" in found.reasons[0]


def test_latency_fails_above_the_ratio_and_the_slack_only():
    assert canary.verdict(figures(100, p99=0.30), figures(900, p99=0.10), {}).outcome == canary.FAIL
    # 3x slower but only 10 ms more: under the slack
    assert canary.verdict(figures(100, p99=0.015), figures(900, p99=0.005), {}).outcome == canary.PASS


def test_queue_and_compute_mean_compares_per_inference():
    standby = figures(100, inferences=100, inference_failures=0, queue_compute_us=100 * 80_000)  # 80 ms each
    live = figures(900, inferences=900, inference_failures=0, queue_compute_us=900 * 20_000)  # 20 ms each
    found = canary.verdict(standby, live, {})
    assert found.outcome == canary.FAIL and "queue + compute" in found.reasons[0]


def test_fisher_test_spares_a_difference_that_noise_explains():
    standby, live = figures(60, errors=2), figures(600, errors=6)  # 3.3 % vs 1 %: above the 1 pp margin
    assert canary.verdict(standby, live, {}).outcome == canary.FAIL
    tested = canary.verdict(standby, live, {"statistical_test": "fisher"})
    assert tested.outcome == canary.PASS and tested.checks[0]["p_value"] > 0.05
    assert canary.verdict(figures(200, errors=12), figures(600, errors=6), {"statistical_test": "fisher"}).outcome == canary.FAIL


def test_fisher_one_sided_matches_the_hypergeometric_tail():
    # 3 errors of 3 all on the standby, half the requests each: (1/2)^3 without replacement = 10*9*8/(20*19*18)
    assert canary.fisher_one_sided(3, 10, 0, 10) == pytest.approx(720 / 6840)
    assert canary.fisher_one_sided(0, 10, 5, 10) == pytest.approx(1.0)


def test_insufficient_data_waits_then_rolls_back_or_passes():
    waiting = canary.verdict(figures(3), figures(100), {})
    assert canary.insufficient(waiting, 10, {"max_wait_s": 60}) == canary.WAIT
    assert canary.insufficient(waiting, 60, {"max_wait_s": 60}) == canary.FAIL
    assert canary.insufficient(waiting, 60, {"max_wait_s": 60, "on_insufficient_data": "pass"}) == canary.PASS


def test_bad_options_name_the_option_the_value_and_the_fix():
    errors = all_input_errors(params(canary={"enabled": True, "min_requests": -1, "statistical_test": "t"}, hooks=[{"stage": "x"}]))
    assert any(e.startswith("canary.min_requests is -1") for e in errors)
    assert any(e.startswith("canary.statistical_test is 't'") for e in errors)
    assert any(e.startswith("hooks[0].stage is 'x'") for e in errors)
    assert any(e.startswith("hooks[0].lambda_arn is None: a Lambda function ARN") for e in errors)


# ---------------------------------------------------------------- queries


def test_queries_name_the_load_balancer_target_group_and_colour_dimensions():
    found = canary_metrics.queries(
        "green",
        [{"arn": "arn:aws:elasticloadbalancing:r:1:targetgroup/triton-green/123", "load_balancer_arn": LB}],
        {"namespace": "Triton", "dimensions": {"App": "triton"}},
        60,
    )
    dims = {q["Id"]: {d["Name"]: d["Value"] for d in q["MetricStat"]["Metric"]["Dimensions"]} for q in found}
    assert dims["green_tg0_requests"] == {"LoadBalancer": "app/triton/abc", "TargetGroup": "targetgroup/triton-green/123"}
    assert dims["green_triton_failure"] == {"App": "triton", "Color": "green"}
    assert {q["MetricStat"]["Stat"] for q in found} == {"Sum", "p99"}


# ---------------------------------------------------------------- the runner's bakes and hooks


class CanaryAws(FakeAws):
    """FakeAws with target groups behind a load balancer, GetMetricData per colour, and Lambda hooks."""

    def __init__(self) -> None:
        super().__init__()
        self.figures = {"blue": {"requests": 500.0, "target_5xx": 0.0}, "green": {"requests": 100.0, "target_5xx": 0.0}}
        self.hook_answers: list[dict] = []
        self.invocations: list[dict] = []

    def describe_target_groups(self, aws_retry: bool, TargetGroupArns: list) -> dict:
        return {"TargetGroups": [{"TargetGroupArn": TargetGroupArns[0], "LoadBalancerArns": [LB]}]}

    def get_metric_data(self, aws_retry: bool = True, **query: Any) -> dict:
        results = []
        for q in query["MetricDataQueries"]:
            color, _group, key = q["Id"].split("_", 2)
            value = {k.replace("_", ""): v for k, v in self.figures[color].items()}.get(key)
            results.append({"Id": q["Id"], "Values": [] if value is None else [value]})
        return {"MetricDataResults": results}

    def get_function(self, aws_retry: bool, FunctionName: str) -> dict:
        return {"Configuration": {"FunctionArn": FunctionName}}

    def invoke(self, aws_retry: bool, FunctionName: str, InvocationType: str, Payload: str) -> dict:
        self.invocations.append(json.loads(Payload))
        answer = self.hook_answers.pop(0) if len(self.hook_answers) > 1 else (self.hook_answers or [{"hookStatus": "SUCCEEDED"}])[0]
        out = {"StatusCode": 200, "Payload": io.BytesIO(json.dumps(answer.get("body", answer)).encode())}
        if answer.get("error"):
            out["FunctionError"] = "Unhandled"
        return out


def canary_runner(aws: CanaryAws, clock: FakeClock | None = None, check_mode: bool = False, **kw: Any) -> Runner:
    kw.setdefault("canary", {"enabled": True, "min_requests": 50})
    return Runner(
        params(**kw),
        Clients(aws, aws, aws, aws, aws, lambda_client=aws),
        check_mode=check_mode,
        clock=clock or FakeClock(),
        triton=FakeTriton,
    )


def test_a_failing_standby_rolls_back_at_the_first_step_while_the_alarms_stay_ok():
    aws = CanaryAws()
    aws.figures["green"] = {"requests": 100.0, "target_5xx": 3.0}
    result = canary_runner(aws).run()
    assert "canary verdict at 10%: green is worse than blue" in result["failed_reason"]
    assert aws.weights == {"blue": 100, "green": 0} and aws.alarms == {"5xx": "OK"}
    assert result["canary"]["verdict"] == "fail"
    step = result["canary"]["steps"][0]
    assert step["step"] == 10 and step["outcome"] == "fail" and step["standby"]["error_ratio"] == 0.03
    assert step["standby"]["window"]["start"] <= step["standby"]["window"]["end"]


def test_a_healthy_standby_passes_every_step_with_its_verdict_recorded():
    result = canary_runner(CanaryAws()).run()
    assert result["failed_reason"] == "" and result["weights"] == {"blue": 0, "green": 100}
    assert [s["outcome"] for s in result["canary"]["steps"]] == ["pass", "pass", "pass"]


def test_a_quiet_standby_waits_past_its_bake_then_rolls_back():
    aws, clock = CanaryAws(), FakeClock()
    aws.figures["green"] = {"requests": 4.0, "target_5xx": 0.0}
    result = canary_runner(aws, clock, canary={"enabled": True, "min_requests": 50, "max_wait_s": 120}).run()
    assert "none after the bake and 120 s more (standby served 4 of the 50" in result["failed_reason"]
    assert result["canary"]["steps"][0]["outcome"] == "insufficient_data"
    assert aws.weights == {"blue": 100, "green": 0}


def test_hooks_run_at_each_boundary_with_the_cutover_context():
    aws = CanaryAws()
    stages = ["standby_healthy", "before_traffic", "after_step", "after_cutover"]
    result = canary_runner(aws, hooks=[{"stage": s, "lambda_arn": HOOK} for s in stages]).run()
    assert result["failed_reason"] == ""
    seen = [(i["stage"], i.get("step")) for i in aws.invocations]
    assert seen == [
        ("standby_healthy", None),
        ("before_traffic", None),
        ("after_step", 10),
        ("after_step", 50),
        ("after_step", 100),
        ("after_cutover", None),
    ]
    assert aws.invocations[2]["canary"]["outcome"] == "pass" and aws.invocations[0]["new_color"] == "green"


def test_a_failing_hook_rolls_back_and_the_after_rollback_hook_is_told_why():
    aws = CanaryAws()
    aws.hook_answers = [{"hookStatus": "FAILED", "reason": "acceptance test: 2 of 40 failed"}, {"hookStatus": "SUCCEEDED"}]
    result = canary_runner(
        aws,
        canary={},
        hooks=[{"stage": "before_traffic", "lambda_arn": HOOK}, {"stage": "after_rollback", "lambda_arn": HOOK, "name": "notify"}],
    ).run()
    assert "hook acceptance at before_traffic failed: acceptance test: 2 of 40 failed" in result["failed_reason"]
    assert aws.weights == {"blue": 100, "green": 0} and aws.services["triton-green"]["desiredCount"] == 0
    assert [h["outcome"] for h in result["hooks"]] == ["failed", "succeeded"]
    assert "acceptance test" in aws.invocations[-1]["reason"]


def test_a_hook_in_progress_past_its_timeout_rolls_back():
    aws, clock = CanaryAws(), FakeClock()
    aws.hook_answers = [{"hookStatus": "IN_PROGRESS"}]
    result = canary_runner(
        aws, clock, canary={}, hooks=[{"stage": "standby_healthy", "lambda_arn": HOOK, "timeout_s": 30, "retry_interval_s": 10}]
    ).run()
    assert "still IN_PROGRESS after 30 s" in result["failed_reason"] and result["hooks"][0]["invocations"] == 4


def test_a_hook_that_raises_or_answers_nothing_fails():
    assert hooks.interpret({"function_error": "Unhandled", "payload": {"errorMessage": "boom"}})[0] == hooks.FAILED
    status, why = hooks.interpret({"payload": None})
    assert status == hooks.FAILED and '{"hookStatus": "SUCCEEDED"}' in why


def test_check_mode_lists_the_hooks_and_invokes_none():
    aws = CanaryAws()
    result = canary_runner(
        aws, check_mode=True, hooks=[{"stage": "after_step", "lambda_arn": HOOK}, {"stage": "after_rollback", "lambda_arn": HOOK}]
    ).run()
    assert result["hooks_planned"] == [
        f"after_step 10%: invoke acceptance ({HOOK})",
        f"after_step 50%: invoke acceptance ({HOOK})",
        f"after_step 100%: invoke acceptance ({HOOK})",
        f"after_rollback (if it rolls back): invoke acceptance ({HOOK})",
    ]
    assert aws.invocations == [] and aws.calls == []


def test_a_target_group_behind_no_load_balancer_fails_before_any_write():
    aws = CanaryAws()
    aws.describe_target_groups = lambda aws_retry, TargetGroupArns: {"TargetGroups": [{"TargetGroupArn": TargetGroupArns[0]}]}
    with pytest.raises(Exception, match="behind no load balancer"):
        canary_runner(aws).run()
    assert aws.calls == [] and TGS


# ---------------------------------------------------------------- the collaborators on their own


def test_the_hook_runner_asks_again_while_in_progress_then_times_out():
    aws, clock = CanaryAws(), FakeClock()
    aws.hook_answers = [{"hookStatus": "IN_PROGRESS"}]
    timeline: list[tuple[str, str, str]] = []
    guarded: list[int] = []
    runner = HookRunner(
        [{"stage": "before_traffic", "lambda_arn": HOOK, "name": "acceptance", "timeout_s": 30, "retry_interval_s": 10}],
        aws,
        clock,
        lambda name: {"phase": name},
        lambda entry, outcome, detail: timeline.append((entry["phase"], outcome, detail)),
        lambda: guarded.append(1),
        lambda stage, new, old, extra: {"stage": stage, "new_color": new, "old_color": old, **extra},
    )
    assert runner.problems() == []
    with pytest.raises(hooks.HookFailed, match="hook acceptance at before_traffic failed: still IN_PROGRESS after 30 s"):
        runner.run("before_traffic", "green", "blue")
    assert runner.runs[0]["outcome"] == "timed_out" and runner.runs[0]["invocations"] == len(guarded) == 4
    assert timeline == [("hook before_traffic acceptance", "failed", "still IN_PROGRESS after 30 s")]
    runner.run("after_step", "green", "blue", step=10)  # no hook at that stage: nothing invoked
    assert len(aws.invocations) == 4 and aws.invocations[0] == {"stage": "before_traffic", "new_color": "green", "old_color": "blue"}


def test_the_canary_watch_judges_during_the_bake_and_fails_a_worse_standby():
    aws, clock = CanaryAws(), FakeClock()
    aws.figures["green"] = {"requests": 100.0, "target_5xx": 5.0}
    watch = CanaryWatch(aws, {"enabled": True, "min_requests": 50}, {"blue": ["arn:tg/blue"], "green": ["arn:tg/green"]}, clock)
    assert watch.attach({"arn:tg/blue": {"LoadBalancerArns": [LB]}, "arn:tg/green": {}}) == [
        "target group arn:tg/green is behind no load balancer: its RequestCount cannot be read for the canary verdict; "
        "attach it to the production listener or set canary.enabled false"
    ]
    watch.attach({"arn:tg/blue": {"LoadBalancerArns": [LB]}, "arn:tg/green": {"LoadBalancerArns": [LB]}})
    checks: list[str] = []

    def gates_and_alarms(seconds: float, what: str, also) -> None:  # the phases' watch: one check, then the verdict
        checks.append(what)
        clock.told_sleep(seconds)
        also()

    with pytest.raises(CanaryFailed, match="canary verdict at 10%: green is worse than blue"):
        watch.bake(10, "green", "blue", clock.utcnow(), 5, 1, gates_and_alarms)
    assert checks == ["bake at 10%"] and watch.summary()["verdict"] == "fail"
    aws.figures["green"] = {"requests": 100.0, "target_5xx": 0.0}
    assert watch.bake(50, "green", "blue", clock.utcnow(), 5, 1, gates_and_alarms) == "baked 5 s, canary verdict pass on 100 requests"


def test_a_step_passed_without_a_verdict_is_not_reported_as_a_failed_cutover():
    aws, clock = CanaryAws(), FakeClock()
    aws.figures["green"] = {"requests": 3.0, "target_5xx": 0.0}
    options = {"enabled": True, "min_requests": 50, "max_wait_s": 2, "on_insufficient_data": "pass"}
    watch = CanaryWatch(aws, options, {"blue": ["arn:tg/blue"], "green": ["arn:tg/green"]}, clock)
    watch.attach({"arn:tg/blue": {"LoadBalancerArns": [LB]}, "arn:tg/green": {"LoadBalancerArns": [LB]}})

    def told_wait(seconds: float, what: str, also) -> None:
        clock.told_sleep(seconds)
        also()

    assert "passed (on_insufficient_data pass)" in watch.bake(10, "green", "blue", clock.utcnow(), 5, 1, told_wait)
    assert watch.summary()["verdict"] == "insufficient_data_pass" and watch.steps[0]["outcome"] == "insufficient_data_pass"
    aws.figures["green"] = {"requests": 100.0, "target_5xx": 0.0}
    watch.bake(100, "green", "blue", clock.utcnow(), 5, 1, told_wait)
    assert watch.summary()["verdict"] == "insufficient_data_pass"  # one step passed without a verdict
    aws.figures["green"] = {"requests": 100.0, "target_5xx": 9.0}
    with pytest.raises(CanaryFailed):
        watch.bake(100, "green", "blue", clock.utcnow(), 5, 1, told_wait)
    assert watch.summary()["verdict"] == "fail"
