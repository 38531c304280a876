# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""Emergency rollback of a blue/green application: production traffic back to the colour it came from, in one call.

Everything comes from AWS (`application.discover`): the colour services `<name>-blue` and `<name>-green` give the
target groups, the target groups give the load balancers, and the production listener (or rule) is the one that
forwards to the colours and carries the record of the last cutover (`inferops:cutover`, written by the bluegreen
module). No task
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
from dataclasses import dataclass
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import ecs as ecs_svc
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import InputError
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import application, gates
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.application import Application
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.colors import is_split, live_color, other
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.guard import CutoverGuard, StateChanged
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.lock import CutoverLock


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


def decide(app: Application, scale_down_new: bool) -> RollbackPlan:
    """Where traffic goes back to, from the record of the last cutover (or, without one, the other running colour)."""
    weights, colors = app.weights, app.colors
    if app.record:
        to_color, from_color = app.record["from"], app.record["to"]
        source = f"the last cutover went from {to_color} to {from_color} ({app.record.get('task_definition', '?')})"
    elif is_split(weights):
        raise InputError(
            f"traffic is split blue={weights['blue']} green={weights['green']} and no cutover is recorded on {app.http.arn}: "
            "cannot tell which colour to go back to. Set the weights by hand, or run the bluegreen module with state: rolled_back "
            "and the task_definition of the cutover"
        )
    else:
        from_color = live_color(weights)
        to_color = other(from_color)
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
            raise InputError(
                f"cannot roll back to {to_color}: {target.service} is scaled to 0 ({source}). Traffic stays where it is. "
                f"Scale {target.service} up (it runs {target.task_definition}) and run this again, or deploy that task definition"
            )
        problems = gates.serving_problems(target, None, target.desired)
        if problems:
            raise InputError(f"cannot roll back to {to_color}, it is not serving: {'; '.join(problems)}. Traffic stays where it is")
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


def rollback(
    ecs: Any, elbv2: Any, params: dict[str, Any], guard: CutoverGuard, check_mode: bool, make_lock: Callable[[str], CutoverLock]
) -> dict[str, Any]:
    """The module's run: discover, plan, and (unless check mode or nothing to do) take the lock and roll back.
    `make_lock(arn)` makes the lock of the production resource, known once the application is discovered."""
    start = time.monotonic()
    app = application.discover(ecs, elbv2, params)
    before = _view(app)
    scale_down_new = params["new_color"] == "scale_down"
    plan = decide(app, scale_down_new)
    actions: list[str] = []
    seconds = 0.0
    capacity: dict[str, Any] = {}
    if plan.action == "rollback" and not check_mode:
        guard.lock = make_lock(app.http.arn)
        guard.take_lock()
        error: BaseException | None = None
        try:
            application.observe(ecs, elbv2, app, record=True)  # what the lock's holder last wrote has landed: act on what AWS shows now
            plan = decide(app, scale_down_new)
            if plan.set_weights:
                guard.before_write()
                restore_started = time.monotonic()
                application.write_weights(elbv2, app.http, {plan.to_color: 100, plan.from_color: 0})
                seconds = time.monotonic() - restore_started
                actions.append(f"set production weights {plan.to_color}=100 {plan.from_color}=0")
            if plan.set_grpc_weights and app.grpc is not None:
                guard.before_write()
                application.write_weights(elbv2, app.grpc, {plan.to_color: 100, plan.from_color: 0})
                actions.append(f"set gRPC weights {plan.to_color}=100 {plan.from_color}=0")
            if plan.scale_down:
                guard.before_write()
                for route in app.routes():
                    application.read_route(elbv2, route)
                if app.weights[plan.from_color] > 0 or (app.grpc is not None and app.grpc.weights[plan.from_color] > 0):
                    raise StateChanged(f"{plan.from_color} has production traffic again: it is not scaled to 0")
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
        "production_arn": app.http.arn,
        "target_groups": app.http.target_groups,
        "record": app.record,
        "weights": after["weights"],
        "desired_counts": after["desired_counts"],
        "grpc": {
            "production_arn": app.grpc.arn,
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
