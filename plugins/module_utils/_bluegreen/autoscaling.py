# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""Application Auto Scaling of a blue/green Triton service: the pure functions that render, compare and move
scaling targets and policies, and the runs that converge them (the calls are in `_aws/application_autoscaling.py`).

The scalable target (`ecs:service:DesiredCount`) and its policies live on the LIVE colour's service. A cutover
suspends dynamic scale-in on the live colour, carries its desired count over to the standby, and at finish moves
the target and its policies to the new live colour and deregisters the old colour's target (which deletes its
policies and their target-tracking alarms in AWS), so the old colour can no longer scale up.

Clients are made by `AnsibleAWSModule.client(..., retry_decorator=AWSRetry.jittered_backoff())`; botocore errors
propagate for the module to report through `fail_json_aws`.
"""

from __future__ import annotations

import copy
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import application_autoscaling as _aas
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import cloudwatch as _cw

# What target tracking can divide the chosen metric by (docs/infrastructure.md, "Picking the target").
PER_CHOICES = ("task", "request", "none")
STATISTICS = ("Average", "Sum", "Maximum", "Minimum", "SampleCount")
# The metric that counts requests (the divisor of per: request) and the one that counts a colour's tasks.
REQUEST_METRIC = "nv_inference_request_success"
TASK_COUNT = ("ECS/ContainerInsights", "RunningTaskCount")


# ---------------------------------------------------------------- suspended state


def suspended_state(target: dict[str, Any] | None) -> dict[str, bool]:
    state = (target or {}).get("SuspendedState") or {}
    return {k: bool(state.get(k, False)) for k in ("DynamicScalingInSuspended", "DynamicScalingOutSuspended", "ScheduledScalingSuspended")}


def scale_in_suspended(target: dict[str, Any] | None) -> bool:
    return suspended_state(target)["DynamicScalingInSuspended"]


def with_scale_in(target: dict[str, Any] | None, suspended: bool) -> dict[str, bool]:
    """The target's suspended state with only dynamic scale-in changed (an operator's other suspensions are kept)."""
    return {**suspended_state(target), "DynamicScalingInSuspended": suspended}


# ---------------------------------------------------------------- desired count


def standby_desired(live_desired: int, configured: int) -> int:
    """The standby comes up at the live colour's current size, never below the configured count."""
    return max(int(live_desired or 0), int(configured or 0))


# ---------------------------------------------------------------- input


def validate(params: dict[str, Any], published: list[str]) -> list[str]:
    """Every problem with the scaling input, each naming the option, the value and the fix; [] when none."""
    errors: list[str] = []
    low, high = params.get("min_capacity"), params.get("max_capacity")
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
        if target is None or target <= 0:
            errors.append(
                f"target_tracking.target is {target}: the value to hold the metric at must be above 0, e.g. 600 requests per task a minute"
            )
        errors += _seconds_errors("target_tracking", tracking, ("scale_in_cooldown_s", "scale_out_cooldown_s"))
    if step.get("enabled"):
        errors += _metric_errors("step_scaling", step.get("metric"), published)
        if step.get("statistic") not in STATISTICS:
            errors.append(f"step_scaling.statistic is {step.get('statistic')!r}: one of {', '.join(STATISTICS)}")
        out_at, in_at = step.get("scale_out_threshold"), step.get("scale_in_threshold")
        if out_at is None or in_at is None or in_at >= out_at:
            errors.append(
                f"step_scaling.scale_in_threshold {in_at} must be below scale_out_threshold {out_at}: e.g. scale in below 40, out above 85"
            )
        for key in ("scale_out_periods", "scale_in_periods", "scale_out_step", "scale_in_step"):
            if (step.get(key) or 0) < 1:
                errors.append(f"step_scaling.{key} is {step.get(key)}: 1 or more")
        if (step.get("period_s") or 0) not in (10, 30) and (step.get("period_s") or 0) % 60:
            errors.append(f"step_scaling.period_s is {step.get('period_s')}: CloudWatch alarm periods are 10, 30 or a multiple of 60")
        errors += _seconds_errors("step_scaling", step, ("cooldown_s",))
    return errors


def _metric_errors(option: str, metric: str | None, published: list[str]) -> list[str]:
    if metric in published:
        return []
    return [
        f"{option}.metric {metric!r} is not published by the metrics sidecar (playbooks/vars/metrics_sidecar.yml): "
        f"pick one of {', '.join(sorted(published))}, or add it to the sidecar's metrics first"
    ]


def _seconds_errors(option: str, values: dict[str, Any], keys: tuple[str, ...]) -> list[str]:
    return [f"{option}.{k} is {values[k]}: seconds, 0 or more" for k in keys if (values.get(k) or 0) < 0]


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


# ---------------------------------------------------------------- moving at a cutover


def policy_for_service(policy: dict[str, Any], old_service: str, new_service: str) -> dict[str, Any]:
    """A described policy, ready to put on the new colour: any dimension naming the old service names the new one."""

    def swap(value: Any) -> Any:
        if isinstance(value, dict):
            if value.get("Name") == "ServiceName" and value.get("Value") == old_service:
                return {**value, "Value": new_service}
            return {k: swap(v) for k, v in value.items()}
        if isinstance(value, list):
            return [swap(v) for v in value]
        return value

    key = _aas.CONFIG_KEYS.get(policy.get("PolicyType", ""), "")
    return {"PolicyName": policy["PolicyName"], "PolicyType": policy["PolicyType"], key: swap(copy.deepcopy(policy.get(key) or {}))}


def alarms_to_repoint(alarms: list[dict[str, Any]], arn_map: dict[str, str]) -> list[dict[str, Any]]:
    """put_metric_alarm arguments for each alarm acting on an old policy, now acting on the new one."""
    out = []
    for alarm in alarms:
        actions = alarm.get("AlarmActions") or []
        if not any(a in arn_map for a in actions):
            continue
        args = alarm_put_args(alarm)
        args["AlarmActions"] = [arn_map.get(a, a) for a in actions]
        out.append(args)
    return out


class CutoverScaling:
    """The autoscaling side of one bluegreen run: suspend scale-in on the live colour, move the target and its
    policies to the new live colour, restore scale-in. `calls` counts the API calls made; each write is added to `writes`."""

    def __init__(self, aas: Any, cloudwatch: Any, cluster: str, services: dict[str, str], app: str, writes: list[str]) -> None:
        self.aas = aas
        self.cloudwatch = cloudwatch
        self.services = services
        self.app = app
        self.rids = {color: _aas.resource_id(cluster, name) for color, name in services.items()}
        self.calls = 0
        self.actions = writes  # the run's list of writes
        self._targets: dict[str, dict[str, Any]] | None = None

    def targets(self) -> dict[str, dict[str, Any]]:
        """Each colour's scalable target, read once a run (the writes below keep it current)."""
        if self._targets is None:
            self.calls += 1
            by_rid = _aas.describe_targets(self.aas, list(self.rids.values()))
            self._targets = {color: by_rid[rid] for color, rid in self.rids.items() if rid in by_rid}
        return self._targets

    def set_scale_in(self, color: str, suspended: bool) -> None:
        """Suspend (or restore) dynamic scale-in on the colour's target; nothing when it has none or it already is."""
        target = self.targets().get(color)
        if target is None or scale_in_suspended(target) == suspended:
            return
        state = with_scale_in(target, suspended)
        self.calls += 1
        _aas.set_suspended(self.aas, self.rids[color], state)
        target["SuspendedState"] = state
        self.actions.append(f"{'suspend' if suspended else 'restore'} scale-in of {self.services[color]}")

    def move(self, old: str, new: str) -> None:
        """The target and policies of `old` to `new` (scale-in not suspended there), then `old` deregistered."""
        targets = self.targets()
        source = targets.get(old)
        if source is None:
            self.set_scale_in(new, False)
            return
        self.calls += 1
        policies = _aas.describe_policies(self.aas, self.rids[old])
        state = with_scale_in(source, False)
        self.calls += 1
        _aas.register_target(self.aas, self.rids[new], source["MinCapacity"], source["MaxCapacity"], state)
        arn_map: dict[str, str] = {}
        for policy in policies:
            self.calls += 1
            arn_map[policy["PolicyARN"]] = _aas.put_policy(
                self.aas, self.rids[new], policy_for_service(policy, self.services[old], self.services[new])
            )
        if any(p.get("PolicyType") == "StepScaling" for p in policies):
            self.calls += 1
            for args in alarms_to_repoint(_cw.describe_alarms_with_prefix(self.cloudwatch, f"{self.app}{ALARM_PREFIX}"), arn_map):
                self.calls += 1
                _cw.put_metric_alarm(self.cloudwatch, args)
        self.calls += 1
        _aas.deregister_target(self.aas, self.rids[old])  # AWS deletes its policies and their target-tracking alarms
        targets[new] = {**source, "ResourceId": self.rids[new], "SuspendedState": state}
        del targets[old]
        self.actions.append(
            f"move scalable target ({source['MinCapacity']}-{source['MaxCapacity']}) and {len(policies)} policies "
            f"from {self.services[old]} to {self.services[new]}"
        )

    def planned(self, plan: Any, phases: list[str]) -> list[str]:
        """The writes these phases of a bluegreen plan would make here (check mode)."""
        targets = self.targets()
        writes = []
        if "standby_up" in phases and plan.old in targets and not scale_in_suspended(targets[plan.old]):
            writes.append(f"suspend scale-in of {self.services[plan.old]}")
        moves = [(plan.old, plan.new)] if "finish" in phases else [(plan.new, plan.old)] if "rollback" in phases else []
        for source, dest in moves:
            if source in targets:
                writes.append(f"move scalable target and policies from {self.services[source]} to {self.services[dest]}")
            elif dest in targets and scale_in_suspended(targets[dest]):
                writes.append(f"restore scale-in of {self.services[dest]}")
        if plan.action == "noop" and plan.live in targets and scale_in_suspended(targets[plan.live]):
            writes.append(f"restore scale-in of {self.services[plan.live]}")
        return writes

    def summary(self) -> dict[str, Any]:
        targets = self._targets or {}
        return {
            "targets": {c: {k: t.get(k) for k in ("MinCapacity", "MaxCapacity", "SuspendedState")} for c, t in targets.items()},
            "api_calls": self.calls,
        }


# ---------------------------------------------------------------- the bluegreen_autoscaling module's run


def ensure(aas: Any, cloudwatch: Any, params: dict[str, Any], live: str, published: list[str], check_mode: bool) -> dict[str, Any]:
    """The scalable target and policies on the live colour's service (and the step alarms), converged.

    The target's min and max are converged; its suspended state is left alone (a cutover may hold scale-in).
    Input is validated by the caller before this runs.
    """
    services = {c: f"{params['name']}-{c}" for c in ("blue", "green")}
    rid = _aas.resource_id(params["cluster"], services[live])
    standby_rid = _aas.resource_id(params["cluster"], services["green" if live == "blue" else "blue"])
    scaling = {**params, "cluster_name": params["cluster"].rsplit("/", 1)[-1]}
    targets = _aas.describe_targets(aas, [rid, standby_rid])
    target = targets.get(rid)
    actions: list[str] = []
    if standby_rid in targets:
        # an interrupted cutover moved nothing yet or moved half: the cutover's finish moves it; never two owners here
        actions.append(f"leave the standby's scalable target {standby_rid} to the cutover")
    if target is None or (target["MinCapacity"], target["MaxCapacity"]) != (params["min_capacity"], params["max_capacity"]):
        actions.append(f"register scalable target {rid} {params['min_capacity']}-{params['max_capacity']}")
        if not check_mode:
            _aas.register_target(aas, rid, params["min_capacity"], params["max_capacity"])
    current = {p["PolicyName"]: p for p in (_aas.describe_policies(aas, rid) if target is not None else [])}
    arns = {name: p.get("PolicyARN", "") for name, p in current.items()}
    wanted = wanted_policies(scaling, services[live])
    for policy in wanted:
        if policy_differs(current.get(policy["PolicyName"]), policy):
            actions.append(f"put scaling policy {policy['PolicyName']}")
            arns[policy["PolicyName"]] = _aas.put_policy(aas, rid, policy) if not check_mode else f"(new) {policy['PolicyName']}"
    wanted_names = {p["PolicyName"] for p in wanted}
    for name in sorted(set(current) - wanted_names):
        if name.startswith(f"{params['name']}-"):  # ours, no longer asked for (e.g. step scaling turned off)
            actions.append(f"delete scaling policy {name}")
            if not check_mode:
                _aas.delete_policy(aas, rid, name)
    alarms_before = {a["AlarmName"]: a for a in _cw.describe_alarms_with_prefix(cloudwatch, f"{params['name']}{ALARM_PREFIX}")}
    alarms_wanted = step_alarms(scaling, arns) if params["step_scaling"].get("enabled") else []
    for alarm in alarms_wanted:
        if alarm_differs(alarms_before.get(alarm["AlarmName"]), alarm):
            actions.append(f"put alarm {alarm['AlarmName']}")
            if not check_mode:
                _cw.put_metric_alarm(cloudwatch, alarm)
    stale_alarms = sorted(set(alarms_before) - {a["AlarmName"] for a in alarms_wanted})
    if stale_alarms:
        actions.append(f"delete alarms {', '.join(stale_alarms)}")
        if not check_mode:
            _cw.delete_alarms(cloudwatch, stale_alarms)
    writes = [a for a in actions if not a.startswith("leave ")]
    return {
        "changed": bool(writes),
        "actions": actions,
        "live_color": live,
        "resource_id": rid,
        "policies": sorted(p["PolicyName"] for p in wanted),
        "alarm_names": [a["AlarmName"] for a in alarms_wanted],
        "diff": {
            "before": {"target": _target_summary(target), "policies": sorted(current)},
            "after": {
                "target": {"MinCapacity": params["min_capacity"], "MaxCapacity": params["max_capacity"]},
                "policies": sorted(wanted_names),
            },
        },
    }


def _target_summary(target: dict[str, Any] | None) -> dict[str, Any]:
    return {k: target[k] for k in ("MinCapacity", "MaxCapacity") if k in target} if target else {}
