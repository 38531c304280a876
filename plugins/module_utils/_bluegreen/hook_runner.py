# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The user hooks of one cutover, run at its phase boundaries (`hooks.py` says what a hook is and answers).

`HookRunner` is a collaborator the phases call with explicit inputs: the hooks, the Lambda client, the clock, the
timeline's phase/end functions, the guard check made before each invocation and the context of the cutover. It
records every invocation in `runs` (the result's `hooks`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import lambda_
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import BotoCoreError, ClientError, error_code
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import hooks

DEFAULT_TIMEOUT_S = 300
DEFAULT_RETRY_INTERVAL_S = 10


class HookRunner:
    """`phase(name)` opens a timeline entry and `end(entry, outcome, detail)` closes it; `before_invoke()` raises when
    the controller may no longer act (lock lost); `context(stage, new, old, extra)` is what the hook is told."""

    def __init__(
        self,
        given: list[dict[str, Any]] | None,
        lambda_client: Any,
        clock: Any,
        phase: Callable[[str], dict[str, Any]],
        end: Callable[[dict[str, Any], str, str], None],
        before_invoke: Callable[[], None],
        context: Callable[[str, str, str, dict[str, Any]], dict[str, Any]],
    ) -> None:
        self.hooks = list(given or [])
        self.lambda_client = lambda_client
        self.clock = clock
        self.phase = phase
        self.end = end
        self.before_invoke = before_invoke
        self.context = context
        self.runs: list[dict[str, Any]] = []  # each invocation: stage, name, ARN, step, outcome, seconds

    def problems(self) -> list[str]:
        """Before the first write: each hook's function exists (lambda:GetFunction)."""
        found = []
        for i, hook in enumerate(self.hooks):
            try:
                if not lambda_.get_function(self.lambda_client, hook["lambda_arn"]):
                    found.append(f"hooks[{i}].lambda_arn {hook['lambda_arn']} does not exist: create the function or fix the ARN")
            except (BotoCoreError, ClientError) as e:
                found.append(
                    f"hooks[{i}].lambda_arn {hook['lambda_arn']} could not be read ({error_code(e) or e}): "
                    "grant lambda:GetFunction and lambda:InvokeFunction on it"
                )
        return found

    def run(self, stage: str, new: str, old: str, **extra: Any) -> None:
        """Each hook of `stage`, in order; the first that fails raises hooks.HookFailed."""
        for hook in hooks.at(self.hooks, stage):
            self._run_one(hook, stage, new, old, extra)

    def run_after_rollback(self, new: str, old: str, reason: str) -> None:
        """The after_rollback hooks: a failure is reported in the timeline and `runs`; nothing is left to roll back."""
        for hook in hooks.at(self.hooks, "after_rollback"):
            try:
                self._run_one(hook, "after_rollback", new, old, {"reason": reason})
            except hooks.HookFailed:
                continue

    def _run_one(self, hook: dict[str, Any], stage: str, new: str, old: str, extra: dict[str, Any]) -> None:
        name = hooks.name_of(hook)
        label = stage + (f" {extra['step']}%" if "step" in extra else "")
        entry = self.phase(f"hook {label} {name}")
        start = self.clock.monotonic()
        timeout = hook.get("timeout_s") or DEFAULT_TIMEOUT_S
        deadline = start + timeout
        payload = self.context(stage, new, old, extra)
        run = {"stage": stage, "name": name, "lambda_arn": hook["lambda_arn"], "step": extra.get("step"), "invocations": 0}
        self.runs.append(run)
        while True:
            self.before_invoke()  # the controller still runs and holds the lock before a hook acts on its behalf
            run["invocations"] += 1
            try:
                status, why = hooks.interpret(lambda_.invoke(self.lambda_client, hook["lambda_arn"], payload))
            except (BotoCoreError, ClientError) as e:
                status, why = hooks.FAILED, f"the invocation failed ({error_code(e) or e})"
            now = self.clock.monotonic()
            run["seconds"] = round(now - start, 3)
            if status == hooks.SUCCEEDED:
                run["outcome"] = "succeeded"
                self.end(entry, "ok", f"{name} succeeded" + (f": {why}" if why else ""))
                return
            if status == hooks.IN_PROGRESS and now < deadline:
                self.clock.sleep(min(hook.get("retry_interval_s") or DEFAULT_RETRY_INTERVAL_S, max(deadline - now, 0)))
                continue
            timed_out = status == hooks.IN_PROGRESS
            run["outcome"] = "timed_out" if timed_out else "failed"
            detail = f"still IN_PROGRESS after {timeout} s" if timed_out else why
            self.end(entry, "failed", detail)
            raise hooks.HookFailed(f"hook {name} at {label} failed: {detail}")
