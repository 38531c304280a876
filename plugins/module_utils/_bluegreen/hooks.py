# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""User hooks at a cutover's phase boundaries, as ECS native deployments and CodeDeploy run lifecycle hooks.

A hook is a Lambda function invoked synchronously with the cutover's context (`context()`); it answers
`{"hookStatus": "SUCCEEDED" | "FAILED" | "IN_PROGRESS"}`, the shape ECS native blue/green expects of its hooks.
IN_PROGRESS is asked again every `retry_interval_s` until `timeout_s`. A failure, an error raised in the function, an
answer without hookStatus or a timeout fails the hook, and the cutover rolls back (a hook after the rollback cannot
roll anything back: its failure is reported). The role adds tasks-file hooks at the same boundaries (roles/bluegreen_cutover).

Stages, in run order: standby_healthy (every standby target healthy, no production traffic yet), before_traffic
(the gates passed, before the first production step), after_step (each step's bake passed), after_cutover (the new
colour has 100 %, before the drain: a rollback is still one listener write), after_rollback.
"""

from __future__ import annotations

from typing import Any

STAGES = ("standby_healthy", "before_traffic", "after_step", "after_cutover", "after_rollback")
SUCCEEDED, FAILED, IN_PROGRESS = "SUCCEEDED", "FAILED", "IN_PROGRESS"
# The phase whose run passes each stage (check mode lists the hooks of the phases it plans).
STAGE_PHASE = {
    "standby_healthy": "standby_up",
    "before_traffic": "traffic",
    "after_step": "traffic",
    "after_cutover": "traffic",
    "after_rollback": "rollback",
}
_LAMBDA_ARN_PREFIXES = ("arn:aws:lambda:", "arn:aws-cn:lambda:", "arn:aws-us-gov:lambda:")


class HookFailed(Exception):
    """A hook said FAILED, raised, answered something else, or ran out of time."""


def name_of(hook: dict[str, Any]) -> str:
    return hook.get("name") or (hook.get("lambda_arn") or "").split(":function:")[-1] or "hook"


def option_errors(hooks: Any) -> list[str]:
    """Each bad hook, with its value and the fix."""
    if hooks is None:
        return []
    if not isinstance(hooks, list):
        return [f"hooks is {hooks!r}: give a list of {{stage, lambda_arn}}"]
    errors = []
    for i, hook in enumerate(hooks):
        where = f"hooks[{i}]"
        if not isinstance(hook, dict):
            errors.append(f"{where} is {hook!r}: give {{stage, lambda_arn}}")
            continue
        if hook.get("stage") not in STAGES:
            errors.append(f"{where}.stage is {hook.get('stage')!r}: one of {', '.join(STAGES)}")
        arn = hook.get("lambda_arn")
        if not isinstance(arn, str) or not arn.startswith(_LAMBDA_ARN_PREFIXES) or ":function:" not in arn:
            errors.append(
                f"{where}.lambda_arn is {arn!r}: a Lambda function ARN, e.g. arn:aws:lambda:eu-west-1:111111111111:function:acceptance"
            )
        for key, low, high in (("timeout_s", 1, 3600), ("retry_interval_s", 1, 600)):
            value = hook.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high):
                errors.append(f"{where}.{key} is {value!r}: give a whole number between {low} and {high}")
    return errors


def at(hooks: list[dict[str, Any]] | None, stage: str) -> list[dict[str, Any]]:
    return [h for h in hooks or [] if h.get("stage") == stage]


def planned(hooks: list[dict[str, Any]] | None, phases: list[str], steps: list[int]) -> list[str]:
    """The hook invocations the phases would make, in order (what check mode and the plan show)."""
    out = []
    for stage in STAGES:
        if stage == "after_rollback":
            if not phases:
                continue
            label = stage if "rollback" in phases else f"{stage} (if it rolls back)"
        elif STAGE_PHASE[stage] not in phases:
            continue
        else:
            label = stage
        for hook in at(hooks, stage):
            for step in steps if stage == "after_step" else [None]:
                out.append(f"{label}" + (f" {step}%" if step is not None else "") + f": invoke {name_of(hook)} ({hook['lambda_arn']})")
    return out


def interpret(answer: dict[str, Any]) -> tuple[str, str]:
    """(SUCCEEDED | FAILED | IN_PROGRESS, why) from a Lambda invocation's answer (`_aws/lambda_.invoke`)."""
    if answer.get("function_error"):
        return FAILED, f"the function raised ({answer['function_error']}): {str(answer.get('payload'))[:500]}"
    payload = answer.get("payload")
    status = payload.get("hookStatus") if isinstance(payload, dict) else None
    if status in (SUCCEEDED, FAILED, IN_PROGRESS):
        reason = payload.get("reason") or payload.get("message") or ""
        return status, str(reason)[:500]
    return FAILED, f'it answered {str(payload)[:200]!r}: a hook answers {{"hookStatus": "SUCCEEDED"}} (or FAILED, IN_PROGRESS)'


def context(params: dict[str, Any], stage: str, new: str | None, old: str | None, weights: dict[str, int], **extra: Any) -> dict[str, Any]:
    """What a hook is told: the application, the stage, the colours, the weights and the task definition, plus
    `extra` (the step, the canary verdict, the rollback's reason)."""
    return {
        "source": "inferops.triton_ecs.bluegreen",
        "stage": stage,
        "application": params.get("name"),
        "cluster": params.get("cluster"),
        "task_definition": params.get("task_definition"),
        "new_color": new,
        "old_color": old,
        "weights": dict(weights),
        "target_groups": dict(params.get("target_groups") or {}),
        "test_route_url": params.get("test_route_url") or (params.get("test_route_urls") or {}).get(new or ""),
        **extra,
    }
