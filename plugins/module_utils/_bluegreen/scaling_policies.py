# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The scaling policies and step-scaling alarms of a blue/green service: the input they come from, checked; the
policies and alarms rendered from it; and whether what AWS has differs from them. Pure functions.

`autoscaling.py` converges them on the live colour and moves them at a cutover.
"""

from __future__ import annotations

import copy
import math
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import application_autoscaling as _aas

# What target tracking can divide the chosen metric by (docs/infrastructure.md, "Picking the target").
PER_CHOICES = ("task", "request", "none")
STATISTICS = ("Average", "Sum", "Maximum", "Minimum", "SampleCount")
# The metric that counts requests (the divisor of per: request) and the one that counts a colour's tasks.
REQUEST_METRIC = "nv_inference_request_success"
TASK_COUNT = ("ECS/ContainerInsights", "RunningTaskCount")
# Application Auto Scaling's range of a target-tracking TargetValue (its API reference).
TARGET_VALUE_RANGE = (8.515920e-109, 1.174271e108)
# ECS's quota of tasks per service: a larger max_capacity can never be reached.
MAX_TASKS_PER_SERVICE = 5000
# CloudWatch: an alarm's evaluation periods times its period may not exceed a day; a cooldown longer than that is a typo.
DAY_S = 86400


# ---------------------------------------------------------------- input


def validate(params: dict[str, Any], published: list[str]) -> list[str]:
    """Every problem with the scaling input, each naming the option, the value and the fix; [] when none."""
    errors: list[str] = []
    low, high = params.get("min_capacity"), params.get("max_capacity")
    if high is not None and high > MAX_TASKS_PER_SERVICE:
        errors.append(
            f"max_capacity is {high}: ECS runs at most {MAX_TASKS_PER_SERVICE} tasks per service; give the most tasks the "
            "fleet's GPUs can hold, e.g. 8"
        )
    if low is None or low < 1:
        errors.append(f"min_capacity is {low}: the live colour needs at least 1 task, e.g. 2")
    if high is None or high < 1:
        errors.append(f"max_capacity is {high}: give the most tasks the live colour may run, e.g. 8")
    if low is not None and high is not None and low > high:
        errors.append(f"min_capacity {low} is above max_capacity {high}: swap them, or raise max_capacity to at least {low}")
    tracking = params.get("target_tracking") or {}
    step = params.get("step_scaling") or {}
    if not tracking.get("enabled") and not step.get("enabled"):
        errors.append("target_tracking.enabled and step_scaling.enabled are both false: enable at least one policy, or skip the role")
    if tracking.get("enabled"):
        errors += _metric_errors("target_tracking", tracking.get("metric"), published)
        if tracking.get("per") not in PER_CHOICES:
            errors.append(f"target_tracking.per is {tracking.get('per')!r}: one of {', '.join(PER_CHOICES)}")
        if tracking.get("per") == "request" and REQUEST_METRIC not in published:
            errors.append(
                f"target_tracking.per is request but the metrics sidecar does not publish {REQUEST_METRIC}: add it to its metrics"
            )
        if tracking.get("statistic") not in STATISTICS:
            errors.append(f"target_tracking.statistic is {tracking.get('statistic')!r}: one of {', '.join(STATISTICS)}")
        target = tracking.get("target")
        low_target, high_target = TARGET_VALUE_RANGE
        if _not_finite(target) or target <= 0:
            errors.append(
                f"target_tracking.target is {target}: the value to hold the metric at must be a finite number above 0, "
                "e.g. 600 requests per task a minute"
            )
        elif not low_target <= target <= high_target:
            errors.append(
                f"target_tracking.target is {target}: Application Auto Scaling takes {low_target:g} to {high_target:g}; "
                "give the metric's value per task, e.g. 600 requests per task a minute"
            )
        errors += _seconds_errors("target_tracking", tracking, ("scale_in_cooldown_s", "scale_out_cooldown_s"))
    if step.get("enabled"):
        errors += _metric_errors("step_scaling", step.get("metric"), published)
        if step.get("statistic") not in STATISTICS:
            errors.append(f"step_scaling.statistic is {step.get('statistic')!r}: one of {', '.join(STATISTICS)}")
        out_at, in_at = step.get("scale_out_threshold"), step.get("scale_in_threshold")
        for key, value in (("scale_out_threshold", out_at), ("scale_in_threshold", in_at)):
            if value is not None and _not_finite(value):
                errors.append(f"step_scaling.{key} is {value}: give a finite number, e.g. 0.85 (85 % GPU utilisation)")
        if out_at is None or in_at is None or (not _not_finite(out_at) and not _not_finite(in_at) and in_at >= out_at):
            errors.append(
                f"step_scaling.scale_in_threshold {in_at} must be below scale_out_threshold {out_at}: e.g. scale in below 40, out above 85"
            )
        for key in ("scale_out_periods", "scale_in_periods", "scale_out_step", "scale_in_step"):
            if (step.get(key) or 0) < 1:
                errors.append(f"step_scaling.{key} is {step.get(key)}: 1 or more")
        if (step.get("period_s") or 0) not in (10, 30) and (step.get("period_s") or 0) % 60:
            errors.append(f"step_scaling.period_s is {step.get('period_s')}: CloudWatch alarm periods are 10, 30 or a multiple of 60")
        for key in ("scale_out_periods", "scale_in_periods"):
            window = (step.get(key) or 0) * (step.get("period_s") or 0)
            if window > DAY_S:
                errors.append(
                    f"step_scaling.{key} is {step.get(key)} periods of {step.get('period_s')} s ({window} s): CloudWatch "
                    f"evaluates at most a day ({DAY_S} s); lower it to at most {DAY_S // step['period_s']}"
                )
        span = (high or 0) - (low or 0)
        for key in ("scale_out_step", "scale_in_step"):
            if span > 0 and (step.get(key) or 0) > span:
                errors.append(
                    f"step_scaling.{key} is {step.get(key)}: the live colour moves between min_capacity {low} and "
                    f"max_capacity {high}, so a step above {span} tasks is never taken whole; give 1 to {span}"
                )
        errors += _seconds_errors("step_scaling", step, ("cooldown_s",))
    return errors


def _not_finite(value: Any) -> bool:
    """Not a usable number: missing, not a number, NaN or infinite (Ansible's float type takes "nan" and "inf")."""
    return isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)


def _metric_errors(option: str, metric: str | None, published: list[str]) -> list[str]:
    if metric in published:
        return []
    return [
        f"{option}.metric {metric!r} is not published by the metrics sidecar (playbooks/vars/metrics_sidecar.yml): "
        f"pick one of {', '.join(sorted(published))}, or add it to the sidecar's metrics first"
    ]


def _seconds_errors(option: str, values: dict[str, Any], keys: tuple[str, ...]) -> list[str]:
    return [f"{option}.{k} is {values[k]}: seconds, 0 to {DAY_S} (a day), e.g. 300" for k in keys if not 0 <= (values.get(k) or 0) <= DAY_S]


# ---------------------------------------------------------------- rendering


def _dimensions(dimensions: dict[str, str]) -> list[dict[str, str]]:
    return [{"Name": k, "Value": str(v)} for k, v in sorted(dimensions.items())]


def target_tracking_policy(params: dict[str, Any], service: str) -> dict[str, Any]:
    """The target-tracking policy: the sidecar's metric, divided per task or per request when asked."""
    tracking = params["target_tracking"]
    metrics = params["metrics"]
    metric = {"Namespace": metrics["namespace"], "MetricName": tracking["metric"], "Dimensions": _dimensions(metrics["dimensions"])}
    if tracking["per"] == "none":
        spec: dict[str, Any] = {**metric, "Statistic": tracking["statistic"]}
    else:
        if tracking["per"] == "task":
            namespace, name = TASK_COUNT
            divisor = {
                "Namespace": namespace,
                "MetricName": name,
                "Dimensions": _dimensions({"ClusterName": params["cluster_name"], "ServiceName": service}),
            }
            divisor_stat = "Average"
        else:
            divisor = {**metric, "MetricName": REQUEST_METRIC}
            divisor_stat = "Sum"
        spec = {
            "Metrics": [
                {"Id": "signal", "MetricStat": {"Metric": metric, "Stat": tracking["statistic"]}, "ReturnData": False},
                {"Id": "divisor", "MetricStat": {"Metric": divisor, "Stat": divisor_stat}, "ReturnData": False},
                {
                    "Id": "per_" + tracking["per"],
                    "Expression": "signal / divisor",
                    "Label": f"{tracking['metric']} per {tracking['per']}",
                    "ReturnData": True,
                },
            ]
        }
    config: dict[str, Any] = {
        "TargetValue": float(tracking["target"]),
        "CustomizedMetricSpecification": spec,
        "ScaleOutCooldown": tracking["scale_out_cooldown_s"],
        "ScaleInCooldown": tracking["scale_in_cooldown_s"],
        "DisableScaleIn": False,
    }
    return {
        "PolicyName": f"{params['name']}-target-tracking",
        "PolicyType": "TargetTrackingScaling",
        "TargetTrackingScalingPolicyConfiguration": config,
    }


def step_policies(params: dict[str, Any]) -> list[dict[str, Any]]:
    """The seed's step scaling: +scale_out_step above the high threshold, -scale_in_step below the low one."""
    step = params["step_scaling"]

    def policy(direction: str, adjustment: int, bound: str) -> dict[str, Any]:
        return {
            "PolicyName": f"{params['name']}-step-scale-{direction}",
            "PolicyType": "StepScaling",
            "StepScalingPolicyConfiguration": {
                "AdjustmentType": "ChangeInCapacity",
                "StepAdjustments": [{bound: 0.0, "ScalingAdjustment": adjustment}],
                "Cooldown": step["cooldown_s"],
                "MetricAggregationType": step["statistic"] if step["statistic"] in ("Average", "Minimum", "Maximum") else "Average",
            },
        }

    return [
        policy("out", step["scale_out_step"], "MetricIntervalLowerBound"),
        policy("in", -step["scale_in_step"], "MetricIntervalUpperBound"),
    ]


def step_alarms(params: dict[str, Any], policy_arns: dict[str, str]) -> list[dict[str, Any]]:
    """put_metric_alarm arguments of the two step-scaling alarms, each acting on its policy."""
    step = params["step_scaling"]
    metrics = params["metrics"]
    common = {
        "Namespace": metrics["namespace"],
        "MetricName": step["metric"],
        "Dimensions": _dimensions(metrics["dimensions"]),
        "Statistic": step["statistic"],
        "Period": step["period_s"],
        "TreatMissingData": "missing",
    }
    return [
        {
            **common,
            "AlarmName": alarm_name(params["name"], "high"),
            "AlarmDescription": f"{step['metric']} above {step['scale_out_threshold']}: add {step['scale_out_step']} task(s)",
            "EvaluationPeriods": step["scale_out_periods"],
            "Threshold": float(step["scale_out_threshold"]),
            "ComparisonOperator": "GreaterThanThreshold",
            "AlarmActions": [policy_arns[f"{params['name']}-step-scale-out"]],
        },
        {
            **common,
            "AlarmName": alarm_name(params["name"], "low"),
            "AlarmDescription": f"{step['metric']} below {step['scale_in_threshold']}: remove {step['scale_in_step']} task(s)",
            "EvaluationPeriods": step["scale_in_periods"],
            "Threshold": float(step["scale_in_threshold"]),
            "ComparisonOperator": "LessThanThreshold",
            "AlarmActions": [policy_arns[f"{params['name']}-step-scale-in"]],
        },
    ]


ALARM_PREFIX = "-autoscaling-"


def alarm_name(app: str, which: str) -> str:
    return f"{app}{ALARM_PREFIX}{which}"


def wanted_policies(params: dict[str, Any], service: str) -> list[dict[str, Any]]:
    out = []
    if params["target_tracking"].get("enabled"):
        out.append(target_tracking_policy(params, service))
    if params["step_scaling"].get("enabled"):
        out += step_policies(params)
    return out


# ---------------------------------------------------------------- comparing


def _canonical(value: Any) -> Any:
    """Numbers as floats, booleans as they are, dicts and lists recursively: AWS answers 85 for 85.0."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    return value


def policy_differs(current: dict[str, Any] | None, wanted: dict[str, Any]) -> bool:
    if current is None or current.get("PolicyType") != wanted["PolicyType"]:
        return True
    key = _aas.CONFIG_KEYS[wanted["PolicyType"]]
    have = current.get(key) or {}
    want = wanted[key]
    # compare only what we set: AWS may add fields (e.g. a default MinAdjustmentMagnitude) we never asked for
    return _canonical({k: have.get(k) for k in want}) != _canonical(want)


def alarm_differs(current: dict[str, Any] | None, wanted: dict[str, Any]) -> bool:
    if current is None:
        return True
    return any(_canonical(current.get(k)) != _canonical(v) for k, v in wanted.items())


def alarm_put_args(alarm: dict[str, Any]) -> dict[str, Any]:
    """put_metric_alarm arguments that recreate a described metric alarm as it is."""
    keys = ("AlarmName", "AlarmDescription", "ActionsEnabled", "OKActions", "AlarmActions", "InsufficientDataActions", "MetricName",
            "Namespace", "Statistic", "ExtendedStatistic", "Dimensions", "Period", "Unit", "EvaluationPeriods", "DatapointsToAlarm",
            "Threshold", "ComparisonOperator", "TreatMissingData")  # fmt: skip
    return {k: copy.deepcopy(alarm[k]) for k in keys if alarm.get(k) not in (None, "")}
