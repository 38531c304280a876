# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""Emergency rollback of a blue/green application: production traffic back to the colour it came from, in one call.

Everything comes from AWS: the colour services `<name>-blue` and `<name>-green` give the target groups, the
target groups give the load balancers, and the production listener (or rule) is the one that forwards to the
colours and carries the record of the last cutover (`inferops:cutover`, written by the bluegreen module). No task
definition, image, registry or checkout is needed. The rollback takes the cutover lock from any run that holds it
(a live cutover stops at its next write), waits for that run's last write to land, reads the state again, then
writes the weights in one ModifyListener / ModifyRule call, and only then scales the colour it left down.

An application with a gRPC route (each colour's service also in a target group of protocol version GRPC) has its
gRPC production forward moved to the same weights right after the HTTP one: the listener or rule that forwards to
both gRPC target groups (`grpc_listener_arn` / `grpc_listener_rule_arn` when there are several).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import ecs as ecs_svc
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import elbv2 as elb
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import gates, listener_actions
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import plan as bg
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.guard import CutoverGuard
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.lock import RECORD_KEY, CutoverLock, parse_record

PlanError = bg.PlanError


@dataclass
class Application:
    """What AWS shows of one application: its services, target groups, production resource, weights and record."""

    cluster: str
    name: str
    services: dict[str, dict[str, Any]] = field(default_factory=dict)
    target_groups: dict[str, str] = field(default_factory=dict)
    production_arn: str = ""
    is_rule: bool = False
    actions: list[dict[str, Any]] = field(default_factory=list)
    weights: dict[str, int] = field(default_factory=dict)
    record: dict[str, str] = field(default_factory=dict)
    colors: dict[str, gates.ColorState] = field(default_factory=dict)
    grpc: Route | None = None  # the gRPC route, when the services are also in gRPC target groups


@dataclass
class Route:
    """The gRPC route: its target groups, the listener or rule forwarding to both, and its weights."""

    target_groups: dict[str, str]
    production_arn: str = ""
    is_rule: bool = False
    actions: list[dict[str, Any]] = field(default_factory=list)
    weights: dict[str, int] = field(default_factory=dict)


@dataclass
class RollbackPlan:
    action: str  # noop | rollback
    to_color: str = ""
    from_color: str = ""
    set_weights: bool = False
    scale_down: bool = False
    reason: str = ""
    set_grpc_weights: bool = False
    scale_up_to: int = 0  # a capacity-paced cutover shrank the colour traffic goes back to: its full count, restored after


# ---------------------------------------------------------------- pure


def target_groups_of(services: dict[str, dict[str, Any]], cluster: str, name: str) -> dict[str, list[str]]:
    """{blue, green}: each colour service's target group ARNs (HTTP, and gRPC when it has one); PlanError naming what
    is missing."""
    errors, tgs = [], {}
    for color in bg.COLORS:
        service = services.get(f"{name}-{color}")
        if service is None or service.get("status") != "ACTIVE":
            errors.append(
                f"service {name}-{color} does not exist in cluster {cluster}: check cluster and name (the application's services)"
            )
            continue
        arns = [lb["targetGroupArn"] for lb in service.get("loadBalancers") or [] if lb.get("targetGroupArn")]
        if not arns:
            errors.append(f"service {name}-{color} is behind no target group: it is not a blue/green colour service")
            continue
        tgs[color] = arns
    if errors:
        raise PlanError(errors)
    return tgs


def split_by_protocol(arns: dict[str, list[str]], described: dict[str, dict[str, Any] | None]) -> tuple[dict[str, str], dict[str, str]]:
    """({blue, green} HTTP target groups, {blue, green} gRPC ones or {}), by each group's protocol version."""
    http: dict[str, str] = {}
    grpc: dict[str, str] = {}
    errors = []
    for color, found in arns.items():
        for arn in found:
            kind = grpc if ((described.get(arn) or {}).get("ProtocolVersion") == "GRPC") else http
            if color in kind:
                errors.append(f"service of {color} is in two target groups of one protocol ({kind[color]}, {arn}): give listener_arn")
            kind[color] = arn
    missing = [c for c in bg.COLORS if c not in http]
    if missing:
        errors.append(f"the {', '.join(missing)} service is in no HTTP target group: it is not a blue/green colour service")
    if grpc and len(grpc) != len(bg.COLORS):
        errors.append(f"only {', '.join(grpc)} is in a gRPC target group: attach both colours' services (role fleet_services)")
    if errors:
        raise PlanError(errors)
    return http, grpc


def production_candidates(resources: list[dict[str, Any]], tgs: dict[str, str]) -> list[dict[str, Any]]:
    """Listeners and rules (`{arn, actions, port, is_rule}`) whose one forward goes to both colours' target groups only."""
    found = []
    for resource in resources:
        weights = listener_actions.weights_if_ours(resource["actions"], tgs)
        entries = [e for a in resource["actions"] if a.get("Type") == "forward" for e in listener_actions.forward_entries(a)]
        if weights is not None and len(entries) == 2:
            found.append(resource)
    return found


def pick_production(candidates: list[dict[str, Any]], tags: dict[str, dict[str, str]], name: str) -> dict[str, Any]:
    """The candidate carrying the cutover record; else the only candidate; else PlanError listing them."""
    recorded = [c for c in candidates if RECORD_KEY in tags.get(c["arn"], {})]
    if len(recorded) == 1:
        return recorded[0]
    if not recorded and len(candidates) == 1:
        return candidates[0]
    pool = recorded or candidates
    if not pool:
        raise PlanError(f"no listener or listener rule forwards to both target groups of {name}: give listener_arn or listener_rule_arn")
    listed = ", ".join(f"{c['arn']} (port {c['port']})" for c in pool)
    raise PlanError(
        f"{len(pool)} listeners or rules could be the production one of {name} ({listed}): give listener_arn or listener_rule_arn"
    )


def decide(app: Application, scale_down_new: bool) -> RollbackPlan:
    """Where traffic goes back to, from the record of the last cutover (or, without one, the other running colour)."""
    weights, colors = app.weights, app.colors
    if app.record:
        to_color, from_color = app.record["from"], app.record["to"]
        source = f"the last cutover went from {to_color} to {from_color} ({app.record.get('task_definition', '?')})"
    elif all(weights[c] > 0 for c in bg.COLORS):
        raise PlanError(
            f"traffic is split blue={weights['blue']} green={weights['green']} and no cutover is recorded on {app.production_arn}: "
            "cannot tell which colour to go back to. Set the weights by hand, or run the bluegreen module with state: rolled_back "
            "and the task_definition of the cutover"
        )
    else:
        from_color = bg.live_color(weights)
        to_color = bg.other(from_color)
        source = f"no cutover is recorded; {from_color} is live and {to_color} is the other colour"
    set_weights = weights[to_color] != 100
    set_grpc = app.grpc is not None and app.grpc.weights.get(to_color) != 100
    scale_down = scale_down_new and colors[from_color].desired > 0
    full = recorded_full_count(app.record)
    scale_up_to = full if full and 0 < colors[to_color].desired < full else 0
    if not set_weights and not scale_down and not set_grpc and not scale_up_to:
        return RollbackPlan("noop", to_color, from_color, reason=f"{to_color} already has all production traffic ({source})")
    target = colors[to_color]
    if set_weights or set_grpc:
        if target.desired == 0:
            raise PlanError(
                f"cannot roll back to {to_color}: {target.service} is scaled to 0 ({source}). Traffic stays where it is. "
                f"Scale {target.service} up (it runs {target.task_definition}) and run this again, or deploy that task definition"
            )
        problems = gates.serving_problems(target, None, target.desired)
        if problems:
            raise PlanError(f"cannot roll back to {to_color}, it is not serving: {'; '.join(problems)}. Traffic stays where it is")
    reason = f"{source}: traffic goes back to {to_color}"
    if scale_up_to:
        reason += (
            f" at once, where {target.service} runs {target.desired} of its {scale_up_to} tasks (a capacity-paced cutover shrank it); "
            f"it is scaled back to {scale_up_to}"
        )
    return RollbackPlan("rollback", to_color, from_color, set_weights, scale_down, reason, set_grpc, scale_up_to)


def recorded_full_count(record: dict[str, str]) -> int:
    """The full count a capacity-paced cutover recorded (0 for a blue/green one)."""
    count = record.get("count", "")
    return int(count) if count.isdigit() else 0


def old_capacity(plan: RollbackPlan, before: gates.ColorState, after_desired: int) -> dict[str, Any]:
    """What the colour that takes the traffic back runs, before and after its scale-up, and the warning to give."""
    if not plan.scale_up_to:
        return {}
    return {
        "color": plan.to_color,
        "full_count": plan.scale_up_to,
        "before": {"running": before.running, "desired": before.desired},
        "after": {"desired": after_desired},
        "warning": (
            f"{before.service} takes all production traffic with {before.running} of {plan.scale_up_to} tasks running until its "
            f"scale-up to {plan.scale_up_to} completes (a capacity-paced cutover had shrunk it; docs/cutover.md, Emergency rollback)"
        ),
    }


# ---------------------------------------------------------------- AWS


def discover(ecs: Any, elbv2: Any, params: dict[str, Any]) -> Application:
    """Read the application from AWS (read-only)."""
    cluster, name = params["cluster"], params["name"]
    names = [f"{name}-{c}" for c in bg.COLORS]
    services = {s["serviceName"]: s for s in ecs_svc.describe_services(ecs, cluster, names) if s.get("serviceName")}
    arns = target_groups_of(services, cluster, name)
    described = elb.describe_target_groups(elbv2, sorted({a for found in arns.values() for a in found}))
    http, grpc = split_by_protocol(arns, described)
    app = Application(cluster, name, services, http)
    resources = None
    given = params.get("listener_rule_arn") or params.get("listener_arn")
    if given:
        app.production_arn, app.is_rule = given, bool(params.get("listener_rule_arn"))
    else:
        resources = _forwarding_resources(elbv2, described)
        candidates = production_candidates(resources, app.target_groups)
        tags = elb.describe_tags(elbv2, [c["arn"] for c in candidates]) if candidates else {}
        chosen = pick_production(candidates, tags, name)
        app.production_arn, app.is_rule = chosen["arn"], chosen["is_rule"]
    if grpc:
        app.grpc = Route(grpc)
        given = params.get("grpc_listener_rule_arn") or params.get("grpc_listener_arn")
        if given:
            app.grpc.production_arn, app.grpc.is_rule = given, bool(params.get("grpc_listener_rule_arn"))
        else:
            candidates = production_candidates(resources if resources is not None else _forwarding_resources(elbv2, described), grpc)
            if len(candidates) > 1:
                # A gRPC test listener not yet pointed at one colour forwards to both: the production route is the
                # one at the HTTP production's weights (the cutover moves both together).
                http_weights = listener_actions.read_percent_weights(_actions(elbv2, app.production_arn, app.is_rule, ""), http)
                candidates = [
                    c for c in candidates if listener_actions.read_percent_weights(c["actions"], grpc) == http_weights
                ] or candidates
            if len(candidates) != 1:
                listed = ", ".join(f"{c['arn']} (port {c['port']})" for c in candidates) or "none"
                raise PlanError(
                    f"{len(candidates)} listeners or rules forward to both gRPC target groups of {name} ({listed}): "
                    "give grpc_listener_arn or grpc_listener_rule_arn"
                )
            app.grpc.production_arn, app.grpc.is_rule = candidates[0]["arn"], candidates[0]["is_rule"]
    observe(ecs, elbv2, app)
    return app


def _forwarding_resources(elbv2: Any, described: dict[str, dict[str, Any] | None]) -> list[dict[str, Any]]:
    """Every listener and rule of the load balancers the application's target groups are behind."""
    balancers = sorted({lb for tg in described.values() for lb in (tg or {}).get("LoadBalancerArns") or []})
    resources = []
    for balancer in balancers:
        for listener in elb.describe_listeners(elbv2, balancer):
            port = listener.get("Port")
            resources.append(
                {"arn": listener["ListenerArn"], "actions": listener.get("DefaultActions") or [], "port": port, "is_rule": False}
            )
            for rule in elb.describe_rules(elbv2, listener["ListenerArn"]):
                if not rule.get("IsDefault"):
                    resources.append({"arn": rule["RuleArn"], "actions": rule.get("Actions") or [], "port": port, "is_rule": True})
    return resources


def observe(ecs: Any, elbv2: Any, app: Application) -> None:
    """Fresh weights, record and colour states of an application whose production resource is known."""
    observe_weights(elbv2, app)
    app.record = parse_record(elb.describe_tags(elbv2, [app.production_arn]).get(app.production_arn, {}))
    services = {s["serviceName"]: s for s in ecs_svc.describe_services(ecs, app.cluster, [f"{app.name}-{c}" for c in bg.COLORS])}
    app.colors = {
        c: gates.color_state(services[f"{app.name}-{c}"], elb.describe_target_health(elbv2, app.target_groups[c])) for c in bg.COLORS
    }


def observe_weights(elbv2: Any, app: Application) -> None:
    app.actions = _actions(elbv2, app.production_arn, app.is_rule, "")
    app.weights = listener_actions.read_percent_weights(app.actions, app.target_groups)
    if app.grpc is not None:
        app.grpc.actions = _actions(elbv2, app.grpc.production_arn, app.grpc.is_rule, "grpc_")
        app.grpc.weights = listener_actions.read_percent_weights(app.grpc.actions, app.grpc.target_groups)


def _actions(elbv2: Any, arn: str, is_rule: bool, option: str) -> list[dict[str, Any]]:
    listener_arn, rule_arn = (None, arn) if is_rule else (arn, None)
    actions = elb.production_actions(elbv2, listener_arn, rule_arn)
    if actions is None:
        raise PlanError(f"{option}{'listener_rule_arn' if is_rule else 'listener_arn'} {arn} does not exist")
    return actions


def _write_forward(elbv2: Any, arn: str, is_rule: bool, actions: list[dict[str, Any]]) -> None:
    if is_rule:
        elb.modify_rule(elbv2, arn, {"Actions": actions})
    else:
        elb.modify_listener(elbv2, arn, {"DefaultActions": actions})


def rollback(
    ecs: Any, elbv2: Any, params: dict[str, Any], guard: CutoverGuard, check_mode: bool, make_lock: Callable[[str], CutoverLock]
) -> dict[str, Any]:
    """The module's run: discover, plan, and (unless check mode or nothing to do) take the lock and roll back.
    `make_lock(arn)` makes the lock of the production resource, known once the application is discovered."""
    start = time.monotonic()
    app = discover(ecs, elbv2, params)
    before = _view(app)
    scale_down_new = params["new_color"] == "scale_down"
    plan = decide(app, scale_down_new)
    actions: list[str] = []
    seconds = 0.0
    capacity: dict[str, Any] = {}
    if plan.action == "rollback" and not check_mode:
        guard.lock = make_lock(app.production_arn)
        guard.take_lock()
        error: BaseException | None = None
        try:
            observe(ecs, elbv2, app)  # what the lock's holder last wrote has landed: act on what AWS shows now
            plan = decide(app, scale_down_new)
            if plan.set_weights:
                guard.before_write()
                restore_started = time.monotonic()
                weights = {plan.to_color: 100, plan.from_color: 0}
                fields = listener_actions.actions_with_weights(app.actions, app.target_groups, weights)
                _write_forward(elbv2, app.production_arn, app.is_rule, fields)
                seconds = time.monotonic() - restore_started
                app.weights = weights
                actions.append(f"set production weights {plan.to_color}=100 {plan.from_color}=0")
            if plan.set_grpc_weights and app.grpc is not None:
                guard.before_write()
                weights = {plan.to_color: 100, plan.from_color: 0}
                fields = listener_actions.actions_with_weights(app.grpc.actions, app.grpc.target_groups, weights)
                _write_forward(elbv2, app.grpc.production_arn, app.grpc.is_rule, fields)
                app.grpc.weights = weights
                actions.append(f"set gRPC weights {plan.to_color}=100 {plan.from_color}=0")
            if plan.scale_down:
                guard.before_write()
                observe_weights(elbv2, app)
                if app.weights[plan.from_color] > 0 or (app.grpc is not None and app.grpc.weights[plan.from_color] > 0):
                    raise bg.StateChanged(f"{plan.from_color} has production traffic again: it is not scaled to 0")
                ecs_svc.update_service(ecs, app.cluster, app.colors[plan.from_color].service, {"desiredCount": 0})
                app.colors[plan.from_color].desired = 0
                actions.append(f"update service {app.colors[plan.from_color].service}: 0 tasks")
            if plan.scale_up_to:
                # after the scale-down: the GPUs the new colour frees are where the old colour's tasks go back
                guard.before_write()
                target = app.colors[plan.to_color]
                capacity = old_capacity(plan, copy.copy(target), plan.scale_up_to)
                ecs_svc.update_service(ecs, app.cluster, target.service, {"desiredCount": plan.scale_up_to})
                target.desired = plan.scale_up_to
                actions.append(f"update service {target.service}: {plan.scale_up_to} tasks")
        except BaseException as e:
            error = e
            raise
        finally:
            guard.end(complete=True, error=error)
    elif plan.action == "rollback":
        if plan.set_weights:
            actions.append(f"set production weights {plan.to_color}=100 {plan.from_color}=0")
        if plan.set_grpc_weights:
            actions.append(f"set gRPC weights {plan.to_color}=100 {plan.from_color}=0")
        if plan.scale_down:
            actions.append(f"update service {app.colors[plan.from_color].service}: 0 tasks")
        if plan.scale_up_to:
            capacity = old_capacity(plan, app.colors[plan.to_color], plan.scale_up_to)
            actions.append(f"update service {app.colors[plan.to_color].service}: {plan.scale_up_to} tasks")
    after = _view(app)
    if check_mode and plan.set_weights:
        after["weights"] = {plan.to_color: 100, plan.from_color: 0}
    if check_mode and plan.set_grpc_weights:
        after["grpc_weights"] = {plan.to_color: 100, plan.from_color: 0}
    return {
        "changed": bool(actions),
        "decision": plan.action,
        "reason": plan.reason,
        "to_color": plan.to_color,
        "from_color": plan.from_color,
        "actions": actions,
        "production_arn": app.production_arn,
        "target_groups": app.target_groups,
        "record": app.record,
        "weights": after["weights"],
        "desired_counts": after["desired_counts"],
        "grpc": {
            "production_arn": app.grpc.production_arn,
            "target_groups": app.grpc.target_groups,
            "weights": after["grpc_weights"],
        }
        if app.grpc is not None
        else {},
        "old_capacity": capacity,
        "weights_restore_seconds": round(seconds, 3),
        "wall_s": round(time.monotonic() - start, 3),
        "diff": {"before": before, "after": after},
    }


def _view(app: Application) -> dict[str, Any]:
    """What the diff shows: the weights (of the gRPC route too) and the desired counts."""
    view = {"weights": dict(app.weights), "desired_counts": {c: s.desired for c, s in app.colors.items()}}
    if app.grpc is not None:
        view["grpc_weights"] = dict(app.grpc.weights)
    return view
