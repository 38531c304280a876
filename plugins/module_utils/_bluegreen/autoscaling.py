# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""Application Auto Scaling of a blue/green Triton service: the scalable target and its policies on the live
colour, converged (`ensure`) and moved at a cutover (`CutoverScaling`). What the policies and alarms should be is
in `scaling_policies.py`; the calls are in `_aws/application_autoscaling.py`.

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
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import InputError
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import application, scaling_policies
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.colors import other, service_names

# ---------------------------------------------------------------- suspended state


def suspended_state(target: dict[str, Any] | None) -> dict[str, bool]:
    state = (target or {}).get("SuspendedState") or {}
    return {k: bool(state.get(k, False)) for k in ("DynamicScalingInSuspended", "DynamicScalingOutSuspended", "ScheduledScalingSuspended")}


def scale_in_suspended(target: dict[str, Any] | None) -> bool:
    return suspended_state(target)["DynamicScalingInSuspended"]


def with_scale_in(target: dict[str, Any] | None, suspended: bool, scale_out: bool = False) -> dict[str, bool]:
    """The target's suspended state with only dynamic scale-in changed (an operator's other suspensions are kept);
    `scale_out`: dynamic scale-out too (a capacity-paced cutover holds both)."""
    state = {**suspended_state(target), "DynamicScalingInSuspended": suspended}
    if scale_out:
        state["DynamicScalingOutSuspended"] = suspended
    return state


# ---------------------------------------------------------------- desired count


def standby_desired(live_desired: int, configured: int) -> int:
    """The standby comes up at the live colour's current size, never below the configured count."""
    return max(int(live_desired or 0), int(configured or 0))


def live_capacity_errors(params: dict[str, Any], service: dict[str, Any]) -> list[str]:
    """max_capacity under what the live colour runs: Application Auto Scaling would scale it in to max_capacity at
    once, dropping the tasks that serve production. [] when max_capacity holds every task it runs or wants."""
    running = max(int(service.get("desiredCount") or 0), int(service.get("runningCount") or 0))
    if params["max_capacity"] >= running:
        return []
    return [
        f"max_capacity is {params['max_capacity']} but the live colour's service {service.get('serviceName')} runs {running} "
        f"tasks: Application Auto Scaling would scale it in to {params['max_capacity']} at once; raise max_capacity to at "
        f"least {running}, or scale the service in first and run again"
    ]


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
        args = scaling_policies.alarm_put_args(alarm)
        args["AlarmActions"] = [arn_map.get(a, a) for a in actions]
        out.append(args)
    return out


class CutoverScaling:
    """The autoscaling side of one bluegreen run: suspend scale-in on the live colour, move the target and its
    policies to the new live colour, restore scale-in. `calls` counts the API calls made; each write is added to `writes`."""

    def __init__(
        self, aas: Any, cloudwatch: Any, cluster: str, services: dict[str, str], app: str, writes: list[str], hold_scale_out: bool = False
    ) -> None:
        self.aas = aas
        self.cloudwatch = cloudwatch
        self.services = services
        self.app = app
        self.rids = {color: _aas.resource_id(cluster, name) for color, name in services.items()}
        self.calls = 0
        self.actions = writes  # the run's list of writes
        # A capacity-paced cutover shrinks the live colour batch by batch: its target must not scale it back out
        # (nor change the full count mid-way), so scale-out is held with scale-in and restored with it.
        self.hold_scale_out = hold_scale_out
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
        if target is None or (self._held(target) if suspended else self._released(target)):
            return
        state = with_scale_in(target, suspended, self.hold_scale_out)
        self.calls += 1
        _aas.set_suspended(self.aas, self.rids[color], state)
        target["SuspendedState"] = state
        what = "scale-in and scale-out" if self.hold_scale_out else "scale-in"
        self.actions.append(f"{'suspend' if suspended else 'restore'} {what} of {self.services[color]}")

    def _held(self, target: dict[str, Any]) -> bool:
        state = suspended_state(target)
        if self.hold_scale_out:
            return state["DynamicScalingInSuspended"] and state["DynamicScalingOutSuspended"]
        return state["DynamicScalingInSuspended"]

    def _released(self, target: dict[str, Any]) -> bool:
        state = suspended_state(target)
        if self.hold_scale_out:
            return not (state["DynamicScalingInSuspended"] or state["DynamicScalingOutSuspended"])
        return not state["DynamicScalingInSuspended"]

    def move(self, old: str, new: str) -> None:
        """The target and policies of `old` to `new` (scale-in not suspended there), then `old` deregistered."""
        targets = self.targets()
        source = targets.get(old)
        if source is None:
            self.set_scale_in(new, False)
            return
        self.calls += 1
        policies = _aas.describe_policies(self.aas, self.rids[old])
        state = with_scale_in(source, False, self.hold_scale_out)
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
            for args in alarms_to_repoint(
                _cw.describe_alarms_with_prefix(self.cloudwatch, f"{self.app}{scaling_policies.ALARM_PREFIX}"), arn_map
            ):
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
        what = "scale-in and scale-out" if self.hold_scale_out else "scale-in"
        held = [c for c in (plan.old, plan.new) if "batches" in phases and c in targets and not self._held(targets[c])]
        if "standby_up" in phases and plan.old in targets and not self._held(targets[plan.old]):
            held = [plan.old]
        writes += [f"suspend {what} of {self.services[c]}" for c in held]
        moves = [(plan.old, plan.new)] if "finish" in phases else [(plan.new, plan.old)] if "rollback" in phases else []
        for source, dest in moves:
            if source in targets:
                writes.append(f"move scalable target and policies from {self.services[source]} to {self.services[dest]}")
            elif dest in targets and not self._released(targets[dest]):
                writes.append(f"restore {what} of {self.services[dest]}")
        if plan.action == "noop" and plan.live in targets and not self._released(targets[plan.live]):
            writes.append(f"restore {what} of {self.services[plan.live]}")
        return writes

    def summary(self) -> dict[str, Any]:
        targets = self._targets or {}
        return {
            "targets": {c: {k: t.get(k) for k in ("MinCapacity", "MaxCapacity", "SuspendedState")} for c, t in targets.items()},
            "api_calls": self.calls,
        }


# ---------------------------------------------------------------- the bluegreen_autoscaling module's run


def ensure_live(ecs: Any, elbv2: Any, aas: Any, cloudwatch: Any, params: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    """The bluegreen_autoscaling module's run: the colour AWS shows live (read by `application.py`) gets the scalable target
    and policies. Nothing is done while it runs no tasks (the first cutover is still to come: a target now would scale
    an ungated revision up), and a maximum below what production runs is refused before any write."""
    app = application.from_options(params)
    application.read_route(elbv2, app.http)  # the live colour, and its service: no target health needed here
    live = app.live
    name = app.service_names[live]
    service = application.describe_services(ecs, app.cluster, app.name).get(name)
    if service is None or service.get("status") != "ACTIVE":
        raise InputError(f"service {name} does not exist in cluster {params['cluster']}: create it first (role fleet_services)")
    if int(service.get("desiredCount", 0)) == 0:
        return {
            "changed": False,
            "actions": [],
            "live_color": live,
            "resource_id": "",
            "policies": [],
            "alarm_names": [],
            "skipped_reason": f"{name} runs no tasks yet: the scalable target is registered once a cutover has made a colour live",
        }
    errors = live_capacity_errors(params, service)
    if errors:
        raise InputError(errors)
    return ensure(aas, cloudwatch, params, live, params["metrics"]["published"], check_mode)


def ensure(aas: Any, cloudwatch: Any, params: dict[str, Any], live: str, published: list[str], check_mode: bool) -> dict[str, Any]:
    """The scalable target and policies on the live colour's service (and the step alarms), converged.

    The target's min and max are converged; its suspended state is left alone (a cutover may hold scale-in).
    Input is validated by the caller before this runs.
    """
    services = service_names(params["name"])
    rid = _aas.resource_id(params["cluster"], services[live])
    standby_rid = _aas.resource_id(params["cluster"], services[other(live)])
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
    wanted = scaling_policies.wanted_policies(scaling, services[live])
    for policy in wanted:
        if scaling_policies.policy_differs(current.get(policy["PolicyName"]), policy):
            actions.append(f"put scaling policy {policy['PolicyName']}")
            arns[policy["PolicyName"]] = _aas.put_policy(aas, rid, policy) if not check_mode else f"(new) {policy['PolicyName']}"
    wanted_names = {p["PolicyName"] for p in wanted}
    for name in sorted(set(current) - wanted_names):
        if name.startswith(f"{params['name']}-"):  # ours, no longer asked for (e.g. step scaling turned off)
            actions.append(f"delete scaling policy {name}")
            if not check_mode:
                _aas.delete_policy(aas, rid, name)
    alarms_before = {
        a["AlarmName"]: a for a in _cw.describe_alarms_with_prefix(cloudwatch, f"{params['name']}{scaling_policies.ALARM_PREFIX}")
    }
    alarms_wanted = scaling_policies.step_alarms(scaling, arns) if params["step_scaling"].get("enabled") else []
    for alarm in alarms_wanted:
        if scaling_policies.alarm_differs(alarms_before.get(alarm["AlarmName"]), alarm):
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
