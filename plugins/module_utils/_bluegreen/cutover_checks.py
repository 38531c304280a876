# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""What a cutover checks between its writes besides the gates: the bake of each traffic step with its canary
verdict (`canary.py`, figures from `canary_watch.py`), and the user hooks at the phase boundaries (`hooks.py`).
A failing verdict or hook raises CutoverFailed, which rolls back like an alarm.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import lambda_
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import BotoCoreError, ClientError, error_code
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import canary, hooks
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import plan as bg
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.canary_watch import CanaryWatch
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.cutover_state import CutoverState


class CutoverFailed(Exception):
    """A gate, alarm, canary verdict, hook or timeout failed after the cutover began: the runner rolls back."""


class CutoverChecks(CutoverState):
    """The bake with its canary verdict, and the hooks; `_watch` (alarms and gates) is the phases'."""

    _canary_watch: CanaryWatch | None = None

    def validate_aws(self) -> None:
        """The state's checks, then the canary's target groups and the hooks' functions: all before the first write."""
        super().validate_aws()
        problems = self.canary_problems() + self.hook_problems()
        if problems:
            raise bg.PlanError(problems)

    # ------------------------------------------------------------ canary

    def canary_enabled(self) -> bool:
        return bool((self.p.get("canary") or {}).get("enabled"))

    def colour_target_groups(self, color: str) -> list[str]:
        """The target groups whose metrics are this colour's: HTTP, and gRPC when the application has one."""
        grpc = ((self.p.get("grpc") or {}).get("target_groups") or {}).get(color)
        return [self.tgs[color]] + ([grpc] if grpc else [])

    def canary_problems(self) -> list[str]:
        """Before the first write: each target group of the verdict must be behind a load balancer (its metrics
        carry the LoadBalancer dimension)."""
        if not self.canary_enabled():
            return []
        return [
            f"target group {arn} is behind no load balancer: its RequestCount cannot be read for the canary verdict; "
            "attach it to the production listener or set canary.enabled false"
            for color in bg.COLORS
            for arn in self.colour_target_groups(color)
            if not (self.target_group_descriptions.get(arn) or {}).get("LoadBalancerArns")
        ]

    def canary(self) -> CanaryWatch:
        if self._canary_watch is None:
            groups = {
                color: [
                    {"arn": arn, "load_balancer_arn": (self.target_group_descriptions.get(arn) or {}).get("LoadBalancerArns", [""])[0]}
                    for arn in self.colour_target_groups(color)
                ]
                for color in bg.COLORS
            }
            self._canary_watch = CanaryWatch(self.aws.cloudwatch, self.p.get("canary") or {}, groups)
        return self._canary_watch

    def bake(self, plan: bg.Plan, step: int, since: datetime) -> str:
        """Hold the step `bake_time_s` while alarms and gates are watched; with the canary, judge the standby against
        the live colour during the bake and, when the bake is over without a verdict, wait for one (up to
        canary.max_wait_s). Returns what the bake ended on, for the timeline."""
        what = f"bake at {step}%"
        if not self.canary_enabled():
            self._watch(plan.new, self.p["bake_time_s"], what)
            return f"baked {self.p['bake_time_s']} s"
        watch = self.canary()
        latest: list[canary.Verdict] = []

        def judge() -> None:
            found = watch.judge(plan.new, plan.old, since, self.clock.utcnow())
            latest[:] = [found]
            if found.outcome == canary.FAIL:
                watch.record(step, found, canary.FAIL, 0.0)
                raise CutoverFailed(f"canary verdict at {step}%: {plan.new} is worse than {plan.old}: " + "; ".join(found.reasons))

        self._watch(plan.new, self.p["bake_time_s"], what, judge)
        bake_end = self.clock.monotonic()
        if not latest:
            judge()  # a bake of 0 s judges once at its end
        while True:
            waited = self.clock.monotonic() - bake_end
            decision = canary.insufficient(latest[0], waited, watch.options)
            if decision == canary.PASS:
                passed = latest[0].outcome == canary.PASS
                watch.record(step, latest[0], canary.PASS if passed else "insufficient_data_pass", waited)
                served = latest[0].standby.requests
                if passed:
                    return f"baked {self.p['bake_time_s']} s, canary verdict pass on {served:g} requests" + (
                        f" (waited {waited:.0f} s more)" if waited >= 1 else ""
                    )
                return f"baked {self.p['bake_time_s']} s, no canary verdict after {waited:.0f} s more ({latest[0].reasons[0]}): passed (on_insufficient_data pass)"
            if decision == canary.FAIL:
                watch.record(step, latest[0], "insufficient_data", waited)
                raise CutoverFailed(
                    f"canary verdict at {step}%: none after the bake and {waited:.0f} s more ({latest[0].reasons[0]}); "
                    "raise the step's weight or bake_time_s, lower canary.min_requests, or set canary.on_insufficient_data pass"
                )
            self._watch(plan.new, self.p["watch_interval_s"] or 1, f"canary wait at {step}%", judge)

    # ------------------------------------------------------------ hooks

    def hook_problems(self) -> list[str]:
        """Before the first write: each hook's function exists (lambda:GetFunction)."""
        problems = []
        for i, hook in enumerate(self.p.get("hooks") or []):
            try:
                if not lambda_.get_function(self.aws.lambda_, hook["lambda_arn"]):
                    problems.append(f"hooks[{i}].lambda_arn {hook['lambda_arn']} does not exist: create the function or fix the ARN")
            except (BotoCoreError, ClientError) as e:
                problems.append(
                    f"hooks[{i}].lambda_arn {hook['lambda_arn']} could not be read ({error_code(e) or e}): grant lambda:GetFunction and lambda:InvokeFunction on it"
                )
        return problems

    def run_hooks(self, stage: str, plan: bg.Plan, **extra: Any) -> None:
        """Each hook of `stage`, in order; the first that fails raises CutoverFailed."""
        for hook in hooks.at(self.p.get("hooks"), stage):
            try:
                self._run_hook(hook, stage, plan, extra)
            except hooks.HookFailed as e:
                raise CutoverFailed(str(e)) from None

    def _run_hook(self, hook: dict[str, Any], stage: str, plan: bg.Plan, extra: dict[str, Any]) -> None:
        name = hooks.name_of(hook)
        label = f"{stage}" + (f" {extra['step']}%" if "step" in extra else "")
        entry = self._phase(f"hook {label} {name}")
        start = self.clock.monotonic()
        deadline = start + (hook.get("timeout_s") or 300)
        payload = hooks.context(self.p, stage, plan.new, plan.old, self.weights, **extra)
        run = {"stage": stage, "name": name, "lambda_arn": hook["lambda_arn"], "step": extra.get("step"), "invocations": 0}
        self.hook_runs.append(run)
        while True:
            self._guard_write()  # the controller still runs and holds the lock before a hook acts on its behalf
            run["invocations"] += 1
            try:
                status, why = hooks.interpret(lambda_.invoke(self.aws.lambda_, hook["lambda_arn"], payload))
            except (BotoCoreError, ClientError) as e:
                status, why = hooks.FAILED, f"the invocation failed ({error_code(e) or e})"
            now = self.clock.monotonic()
            run["seconds"] = round(now - start, 3)
            if status == hooks.SUCCEEDED:
                run["outcome"] = "succeeded"
                self._end(entry, "ok", f"{name} succeeded" + (f": {why}" if why else ""))
                return
            if status == hooks.IN_PROGRESS and now < deadline:
                self.clock.sleep(min(hook.get("retry_interval_s") or 10, max(deadline - now, 0)))
                continue
            timed_out = status == hooks.IN_PROGRESS
            run["outcome"] = "timed_out" if timed_out else "failed"
            detail = f"still IN_PROGRESS after {hook.get('timeout_s') or 300} s" if timed_out else why
            self._end(entry, "failed", detail)
            raise hooks.HookFailed(f"hook {name} at {label} failed: {detail}")

    def run_hooks_after_rollback(self, plan: bg.Plan, reason: str) -> None:
        """The after_rollback hooks: a failure is reported in the timeline and `hooks`, nothing is left to roll back."""
        for hook in hooks.at(self.p.get("hooks"), "after_rollback"):
            try:
                self._run_hook(hook, "after_rollback", plan, {"reason": reason})
            except hooks.HookFailed:
                continue
