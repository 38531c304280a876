# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""What a cutover checks before and between its steps: each colour's service and target health, the capacity
providers that can grow, the CloudWatch alarms, the smoke inference, and the quiet of a drain.

Pure functions over what AWS and Triton answer; the planner (`plan.py`) and the phases (`cutover_phases.py`) use them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils import _triton_client as triton

# ALB target states that mean "this target is not serving yet, or is failing".
NOT_SERVING = frozenset({"initial", "unhealthy", "unavailable", "unused"})


# ---------------------------------------------------------------- services and target health


@dataclass
class ColorState:
    """What AWS shows for one colour: its service and its target group's health."""

    service: str
    task_definition: str | None = None
    desired: int = 0
    running: int = 0
    pending: int = 0
    deployments: int = 1
    rollout_state: str | None = None
    healthy: int = 0
    not_serving: int = 0
    draining: int = 0
    target_group_arns: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def color_state(service: dict[str, Any], health: list[dict[str, Any]]) -> ColorState:
    deployments = service.get("deployments") or []
    primary = next((d for d in deployments if d.get("status") == "PRIMARY"), {})
    states = [h.get("TargetHealth", {}).get("State") for h in health]
    return ColorState(
        service=service.get("serviceName", ""),
        task_definition=service.get("taskDefinition"),
        desired=int(service.get("desiredCount", 0)),
        running=int(service.get("runningCount", 0)),
        pending=int(service.get("pendingCount", 0)),
        deployments=len(deployments) or 1,
        rollout_state=primary.get("rolloutState"),
        healthy=states.count("healthy"),
        not_serving=sum(1 for s in states if s in NOT_SERVING),
        draining=states.count("draining"),
        target_group_arns=[lb["targetGroupArn"] for lb in service.get("loadBalancers") or [] if lb.get("targetGroupArn")],
    )


def serving_problems(state: ColorState, task_definition: str | None, desired: int) -> list[str]:
    """Why this colour is not yet serving `task_definition` at `desired` tasks, all targets healthy ([] when it is).

    The ServicesStable waiter only looks at the deployment and the counts; a cutover must also see every target
    of the colour's target group healthy.
    """
    problems = []
    if task_definition is not None and state.task_definition != task_definition:
        problems.append(f"{state.service} runs {state.task_definition}, not {task_definition}")
    if state.desired != desired:
        problems.append(f"{state.service} wants {state.desired} tasks, not {desired}")
    if state.deployments > 1:
        problems.append(f"{state.service} has {state.deployments} deployments (the old one is still draining)")
    if state.rollout_state not in (None, "COMPLETED"):
        problems.append(f"{state.service} deployment is {state.rollout_state}")
    if state.running != desired or state.pending:
        problems.append(f"{state.service} runs {state.running} of {desired} tasks ({state.pending} pending)")
    if state.healthy < desired:
        problems.append(f"{state.service} has {state.healthy} healthy targets of {desired}")
    if state.not_serving:
        problems.append(f"{state.service} has {state.not_serving} targets not healthy")
    return problems


# ---------------------------------------------------------------- capacity


def managed_scaling_providers(providers: list[dict[str, Any]]) -> list[str]:
    return [
        p["name"]
        for p in providers
        if p.get("status", "ACTIVE") == "ACTIVE"
        and ((p.get("autoScalingGroupProvider") or {}).get("managedScaling") or {}).get("status") == "ENABLED"
    ]


# ---------------------------------------------------------------- alarms and gates


def alarm_problems(alarms: list[dict[str, Any]], names: list[str]) -> list[str]:
    """One line per named alarm that is in ALARM (INSUFFICIENT_DATA does not block, as with CodeDeploy)."""
    return [
        f"alarm {a['AlarmName']} is ALARM: {a.get('StateReason', '')}".rstrip(": ")
        for a in alarms
        if a.get("AlarmName") in names and a.get("StateValue") == "ALARM"
    ]


def missing_alarms(alarms: list[dict[str, Any]], names: list[str]) -> list[str]:
    found = {a.get("AlarmName") for a in alarms}
    return [n for n in names if n not in found]


def not_live(url: str) -> str:
    return f"Triton at {url} is not live"


def triton_problems(client: Any, url: str, options: dict[str, Any]) -> list[str]:
    """Triton's gates through one route (`client` a `TritonClient` on `url`): live, ready, the expected models READY at
    the expected versions, then the smoke inference; a Triton error is a problem, never an exception."""
    problems: list[str] = []
    try:
        if not client.live():
            return [not_live(url)]
        if not client.ready():
            problems.append(f"Triton at {url} is not ready")
        if options.get("expected_models") or options.get("expected_versions"):
            index = client.repository_index()
            problems += triton.unready_models(index, options.get("expected_models") or [])
            problems += triton.version_problems(index, options.get("expected_versions") or {})
        smoke = options.get("smoke")
        if smoke and not problems:
            outputs = client.infer(smoke["model"], smoke.get("inputs") or [], str(smoke.get("version") or ""))
            problems += smoke_problems(outputs, smoke.get("expected_outputs") or [], smoke.get("tolerance") or 0.0)
    except triton.TritonError as e:
        problems.append(f"Triton gate on {url}: {e}")
    return problems


def smoke_problems(outputs: list[dict[str, Any]], expected: list[dict[str, Any]], tolerance: float) -> list[str]:
    """Differences between a smoke inference's outputs and the expected ones (by output name, element-wise)."""
    by_name = {o.get("name"): o for o in outputs}
    problems = []
    for want in expected:
        got = by_name.get(want["name"])
        if got is None:
            problems.append(f"smoke inference returned no output {want['name']}")
            continue
        data, want_data = list(got.get("data") or []), list(want.get("data") or [])
        if len(data) != len(want_data) or any(abs(float(data[i]) - float(want_data[i])) > tolerance for i in range(len(data))):
            problems.append(f"smoke inference output {want['name']} is {data}, expected {want_data} (tolerance {tolerance})")
    return problems


# ---------------------------------------------------------------- drain


def in_flight(metrics: dict[str, float]) -> float:
    return triton.sample_from(metrics).pending


def is_quiet(before: list[dict[str, float]], after: list[dict[str, float]]) -> bool:
    """Quiet on every endpoint (the container drain's definition, `_triton_client.is_quiet`), one scrape of each."""
    if len(before) != len(after):
        return False
    return all(triton.is_quiet(triton.sample_from(b), triton.sample_from(a)) for b, a in zip(before, after))
