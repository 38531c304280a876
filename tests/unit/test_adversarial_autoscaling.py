"""Adversarial numbers for bluegreen_autoscaling (issue 28, class "autoscaling cuts the live colour"): NaN, infinite
and absurd targets, thresholds, steps, periods and cooldowns, and a max_capacity under what the live colour runs.

Stand-in: none - the pure validation (`scaling_policies.validate`), the rendering of what would be sent, and
`autoscaling.live_capacity_errors` on a service as ECS describes it; tests/integration/test_autoscaling.py runs the
same refusals through ansible-playbook against a moto server. The numbers are generated (property-style, a fixed
seed): an input passes exactly when every number is one AWS takes and the fleet can use, and whatever passes renders
policies and alarms of finite numbers only.
"""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import autoscaling as sc
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import scaling_policies as policies

PUBLISHED = ["nv_inference_request_success", "nv_gpu_utilization"]
NAN, INF = float("nan"), float("inf")


def params(tracking: dict[str, Any] | None = None, step: dict[str, Any] | None = None, **top: Any) -> dict[str, Any]:
    values = {
        "cluster": "inference",
        "cluster_name": "inference",
        "name": "triton",
        "min_capacity": 2,
        "max_capacity": 8,
        "target_tracking": {"enabled": True, "metric": "nv_inference_request_success", "statistic": "Sum", "per": "task",
                            "target": 600.0, "scale_out_cooldown_s": 60, "scale_in_cooldown_s": 300, **(tracking or {})},
        "step_scaling": {"enabled": True, "metric": "nv_gpu_utilization", "statistic": "Average", "scale_out_threshold": 0.85,
                         "scale_out_periods": 5, "scale_in_threshold": 0.4, "scale_in_periods": 15, "period_s": 60,
                         "scale_out_step": 1, "scale_in_step": 1, "cooldown_s": 300, **(step or {})},
        "metrics": {"namespace": "Triton", "dimensions": {"ClusterName": "inference"}, "published": PUBLISHED},
    }  # fmt: skip
    values.update(top)
    return values


BAD_NUMBER_IDS = ["nan", "inf", "-inf", "huge", "tiny", "threshold-nan", "threshold-inf", "step-50", "step-over-span",
                  "periods-day", "cooldown-years", "cooldown-negative", "max-absurd"]  # fmt: skip


@pytest.mark.parametrize(
    ("tracking", "step", "top", "message"),
    [
        ({"target": NAN}, {}, {}, "target_tracking.target is nan"),
        ({"target": INF}, {}, {}, "target_tracking.target is inf"),
        ({"target": -INF}, {}, {}, "target_tracking.target is -inf"),
        ({"target": 1e300}, {}, {}, "Application Auto Scaling takes"),
        ({"target": 1e-200}, {}, {}, "Application Auto Scaling takes"),
        ({}, {"scale_out_threshold": NAN}, {}, "step_scaling.scale_out_threshold is nan"),
        ({}, {"scale_in_threshold": -INF}, {}, "step_scaling.scale_in_threshold is -inf"),
        ({}, {"scale_out_step": 50}, {}, "step_scaling.scale_out_step is 50"),
        ({}, {"scale_in_step": 7}, {}, "a step above 6 tasks is never taken whole"),
        ({}, {"scale_in_periods": 2000}, {}, "CloudWatch evaluates at most a day"),
        ({"scale_in_cooldown_s": 10**9}, {}, {}, "target_tracking.scale_in_cooldown_s is 1000000000"),
        ({}, {"cooldown_s": -5}, {}, "step_scaling.cooldown_s is -5"),
        ({}, {}, {"max_capacity": 10**6}, "ECS runs at most 5000 tasks per service"),
    ],
    ids=BAD_NUMBER_IDS,
)
def test_adversarial_autoscaling_bad_numbers_name_the_option_the_value_and_the_fix(tracking, step, top, message):
    errors = policies.validate(params(tracking, step, **top), PUBLISHED)
    assert any(message in e for e in errors), errors


# ---------------------------------------------------------------- property-style: generated numbers

ODD_FLOATS = [NAN, INF, -INF, 0.0, -1.0, 1e-200, 1e300, 5e-324]
GOOD_TARGETS = [0.5, 1.0, 70.0, 600.0, 12345.678]


def _number(rng: random.Random, good: list[float]) -> float:
    return rng.choice(ODD_FLOATS) if rng.random() < 0.25 else rng.choice(good)


def _acceptable(p: dict[str, Any]) -> bool:
    """The oracle, written from AWS's and the fleet's limits independently of the code under test."""
    t, s = p["target_tracking"], p["step_scaling"]
    span = p["max_capacity"] - p["min_capacity"]
    finite = all(math.isfinite(v) for v in (t["target"], s["scale_out_threshold"], s["scale_in_threshold"]))
    return (
        finite
        and 8.515920e-109 <= t["target"] <= 1.174271e108
        and s["scale_in_threshold"] < s["scale_out_threshold"]
        and 1 <= p["min_capacity"] <= p["max_capacity"] <= 5000
        and all(s[k] >= 1 and (span == 0 or s[k] <= span) for k in ("scale_out_step", "scale_in_step"))
        and all(s[k] * s["period_s"] <= 86400 for k in ("scale_out_periods", "scale_in_periods"))
        and all(0 <= v <= 86400 for v in (t["scale_out_cooldown_s"], t["scale_in_cooldown_s"], s["cooldown_s"]))
    )


CASES = 500


def test_adversarial_autoscaling_generated_numbers_pass_exactly_when_aws_and_the_fleet_can_use_them():
    rng = random.Random(28)
    accepted = 0
    for case in range(CASES):
        low = rng.choice([1, 2, 4])
        p = params(
            {
                "target": _number(rng, GOOD_TARGETS),
                "scale_in_cooldown_s": rng.choice([0, 300, 86400, 86401, -1]),
                "scale_out_cooldown_s": rng.choice([0, 60]),
            },
            {
                "scale_out_threshold": _number(rng, [0.85, 0.9, 80.0]),
                "scale_in_threshold": _number(rng, [0.1, 0.4, 40.0]),
                "scale_out_step": rng.choice([1, 2, 3, 8, 100]),
                "scale_in_step": rng.choice([1, 2, 50]),
                "scale_out_periods": rng.choice([1, 5, 1440, 1441]),
                "scale_in_periods": rng.choice([1, 15]),
                "cooldown_s": rng.choice([0, 300, 10**7]),
            },
            min_capacity=low,
            max_capacity=rng.choice([low, low + 2, low + 6, 5000, 5001]),
        )
        errors = policies.validate(p, PUBLISHED)
        assert (errors == []) == _acceptable(p), (case, p, errors)
        if not errors:
            accepted += 1
            rendered = policies.wanted_policies(p, "triton-blue")
            arns = {policy["PolicyName"]: "arn" for policy in rendered}
            numbers = _numbers(rendered) + _numbers(policies.step_alarms(p, arns))
            assert numbers and all(math.isfinite(n) for n in numbers), (case, numbers)
    assert 0.05 * CASES < accepted < 0.95 * CASES  # both kinds were generated


def _numbers(value: Any) -> list[float]:
    if isinstance(value, bool):
        return []
    if isinstance(value, (int, float)):
        return [float(value)]
    if isinstance(value, dict):
        return [n for v in value.values() for n in _numbers(v)]
    if isinstance(value, list):
        return [n for v in value for n in _numbers(v)]
    return []


# ---------------------------------------------------------------- the live colour's running count


@pytest.mark.parametrize(
    ("desired", "running", "maximum", "refused"),
    [(6, 6, 4, True), (2, 6, 4, True), (6, 2, 4, True), (4, 4, 4, False), (0, 0, 1, False), (3, 2, 8, False)],
    ids=["both-above", "running-above", "desired-above", "equal", "idle", "below"],
)
def test_adversarial_autoscaling_max_capacity_never_cuts_what_the_live_colour_runs(desired, running, maximum, refused):
    service = {"serviceName": "triton-blue", "desiredCount": desired, "runningCount": running}
    errors = sc.live_capacity_errors(params(max_capacity=maximum), service)
    assert bool(errors) == refused
    if refused:
        (error,) = errors
        assert f"max_capacity is {maximum}" in error and "triton-blue" in error
        assert f"raise max_capacity to at least {max(desired, running)}" in error
