# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""Blue/green planning: pure functions from what AWS shows (and what the gates saw) to what to do next.

Nothing here calls AWS or Triton. The runner (`runner.py`) observes, asks `decide()` for the plan,
and carries it out phase by phase; every decision is a function of the observed state, so a re-run after an
interruption continues (or rolls back) from whatever AWS shows, with no local state file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import InputError
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import paced
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.colors import COLORS, is_split, live_color, other
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.gates import ColorState, serving_problems

# The phases in run order; `stop_after` names one of them but the last. A capacity-paced cutover runs capacity,
# batches and finish; a blue/green one every phase but batches.
PHASES = ("discover", "capacity", "standby_up", "gates", "traffic", "drain", "batches", "finish")
MODES = ("blue_green", "capacity_paced")


PlanError = InputError  # bad input or an AWS state the cutover cannot start from; raised before any write


# ---------------------------------------------------------------- the plan


@dataclass
class Plan:
    """What to do, from the observed state. `phases` lists the phases to run in order."""

    action: str  # noop | cutover | finish | rollback | fail
    phases: list[str]
    new: str | None = None
    old: str | None = None
    live: str | None = None
    steps: list[int] = field(default_factory=list)
    restore_first: bool = False
    reason: str = ""
    mode: str = "blue_green"  # capacity_paced: batches forward, and a rollback batch by batch

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def remaining_steps(steps: list[int], current: int) -> list[int]:
    """The steps still to take when the new colour already has `current` percent."""
    return [s for s in steps if s > current]


def decide(
    state: str,
    task_definition: str,
    desired_count: int,
    steps: list[int],
    weights: dict[str, int],
    colors: dict[str, ColorState],
    scale_down_old: bool,
    mode: str = "blue_green",
) -> Plan:
    """The plan from what AWS shows. Pure; every branch is covered by tests/unit/test_bluegreen_plan.py (the
    capacity-paced ones by tests/unit/test_paced_plan.py)."""
    if state == "rolled_back":
        plan = _decide_rollback(task_definition, weights, colors)
        plan.mode = mode
        return plan
    split = is_split(weights)
    if mode == "capacity_paced":
        return _decide_paced(task_definition, desired_count, weights, colors, scale_down_old, split)
    if split:
        running_new = [c for c in COLORS if colors[c].task_definition == task_definition]
        if len(running_new) == 1:
            new = running_new[0]
            return Plan(
                "cutover",
                ["standby_up", "gates", "traffic", "drain", "finish"],
                new=new,
                old=other(new),
                live=other(new),
                steps=remaining_steps(steps, weights[new]),
                reason=f"resuming: {new} runs the requested task definition and has {weights[new]}% of the traffic",
            )
        live = live_color(weights)
        return Plan(
            "cutover",
            ["capacity", "standby_up", "gates", "traffic", "drain", "finish"],
            new=other(live),
            old=live,
            live=live,
            steps=list(steps),
            restore_first=True,
            reason=f"traffic is split {weights['blue']}/{weights['green']} and no single colour runs the requested task "
            f"definition: {live} (the larger share) takes all traffic back before the cutover",
        )
    live = live_color(weights)
    standby = other(live)
    served = _served(task_definition, desired_count, colors, live, scale_down_old, mode)
    if served is not None:
        return served
    return Plan(
        "cutover",
        ["capacity", "standby_up", "gates", "traffic", "drain", "finish"],
        new=standby,
        old=live,
        live=live,
        steps=list(steps),
        reason=f"{live} is live with {colors[live].task_definition} x{colors[live].desired}: {standby} takes {task_definition} x{desired_count}",
    )


def _served(
    task_definition: str, desired_count: int, colors: dict[str, ColorState], live: str, scale_down_old: bool, mode: str
) -> Plan | None:
    """The plan when the live colour (all traffic) already runs the requested task definition at its count: the other
    colour drained and scaled down (a capacity-paced cutover: its last batch's shrink), else nothing; None otherwise."""
    standby = other(live)
    if colors[live].task_definition != task_definition or colors[live].desired != desired_count:
        return None
    if scale_down_old and colors[standby].desired > 0:
        last = " (the last batch's shrink)" if mode == "capacity_paced" else ""
        return Plan(
            "finish",
            ["drain", "finish"],
            new=live,
            old=standby,
            live=live,
            mode=mode,
            reason=f"{live} is live with the requested task definition; {standby} still runs {colors[standby].desired} tasks and is "
            f"drained, then scaled down{last}",
        )
    return Plan(
        "noop", [], live=live, mode=mode, reason=f"{live} is live at 100% with the requested task definition and {desired_count} tasks"
    )


PACED_PHASES = ["capacity", "batches", "finish"]


def _decide_paced(
    task_definition: str, desired_count: int, weights: dict[str, int], colors: dict[str, ColorState], scale_down_old: bool, split: bool
) -> Plan:
    """A capacity-paced cutover: the capacity check of one batch (read-only, it also sizes the default batch), the
    batches, then finish. The batches themselves are computed from the desired counts at run time (paced.py)."""
    if split:
        running_new = [c for c in COLORS if colors[c].task_definition == task_definition]
        if len(running_new) != 1:
            raise PlanError(
                f"traffic is split {weights['blue']}/{weights['green']} and {len(running_new)} colours run {task_definition}: "
                "a capacity-paced cutover of another release is half done and its old colour may have shrunk, so traffic "
                "cannot go back to it at once. Finish it (run again with its task definition) or roll it back "
                "(state rolled_back with its task definition), then run this one"
            )
        new = running_new[0]
        return Plan(
            "cutover",
            list(PACED_PHASES),
            new=new,
            old=other(new),
            live=other(new),
            mode="capacity_paced",
            reason=f"resuming a capacity-paced cutover: {new} runs the requested task definition x{colors[new].desired} "
            f"with {weights[new]}% of the traffic, {other(new)} runs {colors[other(new)].desired}",
        )
    live = live_color(weights)
    standby = other(live)
    served = _served(task_definition, desired_count, colors, live, True, "capacity_paced")
    if served is not None:
        return served
    started = colors[standby].task_definition == task_definition and colors[standby].desired > 0
    return Plan(
        "cutover",
        list(PACED_PHASES),
        new=standby,
        old=live,
        live=live,
        mode="capacity_paced",
        reason=(
            f"resuming a capacity-paced cutover at weight 0: {standby} already runs {task_definition} x{colors[standby].desired}"
            if started
            else f"{live} is live with {colors[live].task_definition} x{colors[live].desired}: {standby} takes "
            f"{task_definition} x{desired_count} batch by batch"
        ),
    )


def _decide_rollback(task_definition: str, weights: dict[str, int], colors: dict[str, ColorState]) -> Plan:
    running_new = [c for c in COLORS if colors[c].task_definition == task_definition]
    split = is_split(weights)
    if split:
        if len(running_new) != 1:
            raise PlanError(
                f"traffic is split {weights['blue']}/{weights['green']} and {len(running_new)} colours run {task_definition}: "
                "cannot tell which colour to roll back to; give the task_definition of the cutover to undo"
            )
        new = running_new[0]
        _require_serving(colors[other(new)], "roll back to")
        return Plan("rollback", ["rollback"], new=new, old=other(new), live=other(new), reason="rollback requested during a cutover")
    live = live_color(weights)
    if colors[live].task_definition != task_definition:
        standby = other(live)
        if colors[standby].task_definition == task_definition and colors[standby].desired > 0:
            _require_serving(colors[live], "leave all traffic on")
            return Plan(
                "rollback",
                ["rollback"],
                new=standby,
                old=live,
                live=live,
                reason=f"traffic is already on {live}; {standby} still runs {task_definition} and is scaled down",
            )
        return Plan("noop", [], live=live, reason=f"already rolled back: {live} is live and does not run {task_definition}")
    old = other(live)
    if colors[old].desired == 0:
        raise PlanError(
            f"cannot roll back: {live} is live with {task_definition} and {colors[old].service} is scaled down to 0 "
            f"(it last ran {colors[old].task_definition}). Deploy that task definition with state=present instead"
        )
    _require_serving(colors[old], "roll back to")
    return Plan(
        "rollback",
        ["rollback"],
        new=live,
        old=old,
        live=live,
        reason=f"rollback requested: {old} (kept at full size by the termination wait) takes the traffic back",
    )


def _require_serving(state: ColorState, what: str) -> None:
    problems = serving_problems(state, None, state.desired) if state.desired else [f"{state.service} runs no tasks"]
    if problems:
        raise PlanError(f"cannot {what} {state.service}: " + "; ".join(problems))


def truncate(plan: Plan, stop_after: str | None) -> list[str]:
    """The plan's phases up to and including `stop_after` (all when None)."""
    if not stop_after or stop_after not in PHASES:
        return list(plan.phases)
    limit = PHASES.index(stop_after)
    return [p for p in plan.phases if p == "rollback" or PHASES.index(p) <= limit]


def planned_writes(
    plan: Plan,
    phases: list[str],
    colors: dict[str, ColorState],
    task_definition: str,
    desired_count: int,
    weights: dict[str, int],
    scale_down_old: bool,
    batch_size: int = 0,
) -> list[str]:
    """The writes these phases would make (what check mode reports); `batch_size` sizes the batches phase."""
    writes: list[str] = []
    if plan.restore_first and phases:
        writes.append(f"set production weights {plan.old}=100 {plan.new}=0")
    for phase in phases:
        if phase == "standby_up":
            new = colors[plan.new]
            if new.task_definition != task_definition or new.desired != desired_count:
                writes.append(f"update service {new.service}: task definition {task_definition}, {desired_count} tasks")
        elif phase == "traffic":
            writes += [f"set production weights {plan.new}={s} {plan.old}={100 - s}" for s in plan.steps]
        elif phase == "batches":
            writes += batch_writes(plan, colors, task_definition, desired_count, batch_size)
        elif phase == "finish" and scale_down_old and colors[plan.old].desired > 0 and "batches" not in phases:
            writes.append(f"update service {colors[plan.old].service}: 0 tasks")
        elif phase == "rollback" and plan.mode == "capacity_paced":
            writes += rollback_batch_writes(plan, colors, desired_count, batch_size)
        elif phase == "rollback":
            if weights.get(plan.old) != 100:
                writes.append(f"set production weights {plan.old}=100 {plan.new}=0")
            if colors[plan.new].desired > 0:
                writes.append(f"update service {colors[plan.new].service}: 0 tasks")
    return writes


def growing_count(state: ColorState, task_definition: str) -> int:
    """The tasks of a colour that count toward the new release: its desired count when it runs the task definition."""
    return state.desired if state.task_definition == task_definition else 0


def batch_writes(plan: Plan, colors: dict[str, ColorState], task_definition: str, full_count: int, batch_size: int) -> list[str]:
    """Each batch's writes, in order, from the desired counts AWS shows."""
    new = colors[plan.new]
    new_definition = "" if new.task_definition == task_definition else task_definition
    return _walk_writes("batch", plan.new, plan.old, colors, growing_count(new, task_definition), full_count, batch_size, new_definition)


def rollback_batch_writes(plan: Plan, colors: dict[str, ColorState], full_count: int, batch_size: int) -> list[str]:
    """A capacity-paced rollback's writes: the old colour grows back batch by batch as the new one shrinks."""
    return _walk_writes("rollback batch", plan.old, plan.new, colors, colors[plan.old].desired, full_count, batch_size, "")


def _walk_writes(
    label: str,
    grows: str,
    shrinks: str,
    colors: dict[str, ColorState],
    growing: int,
    full_count: int,
    batch_size: int,
    new_definition: str,
) -> list[str]:
    """The writes of the paced walk in which `grows` takes over from `shrinks`; `new_definition` is the task
    definition the growing colour's first update sets ("" when it runs it already)."""
    writes: list[str] = []
    shrinking = colors[shrinks].desired
    for batch in paced.schedule(full_count, batch_size, growing, shrinking):
        prefix = f"{label} {batch.index}/{batch.total}: "
        if new_definition:
            writes.append(f"{prefix}update service {colors[grows].service}: task definition {new_definition}, {batch.grow_to} tasks")
            new_definition = ""
        elif batch.grow_to != growing:
            writes.append(f"{prefix}update service {colors[grows].service}: {batch.grow_to} tasks")
        writes.append(f"{prefix}set production weights {grows}={batch.weight} {shrinks}={100 - batch.weight}")
        if batch.shrink_to != shrinking:
            writes.append(f"{prefix}update service {colors[shrinks].service}: {batch.shrink_to} tasks")
        growing, shrinking = batch.grow_to, batch.shrink_to
    return writes
