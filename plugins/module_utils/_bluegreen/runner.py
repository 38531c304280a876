# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""Carries out a blue/green plan: observes AWS, asks `_bluegreen.decide()`, runs each phase, rolls back on failure.

The AWS calls go through the thin client files (`_aws/ecs.py`, `_aws/elbv2.py`, `_aws/cloudwatch.py`);
Triton gates and drains through `_triton_client.py`. Time comes from a `Clock`, so tests can count the waits.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import cloudwatch as cw
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import ec2
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import ecs as ecs_svc
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import elbv2 as elb
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import autoscaling as scaling
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import listener_actions, placement
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import plan as bg
from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet import capacity_provider as capacity
from ansible_collections.inferops.triton_ecs.plugins.module_utils._triton_client import TritonClient, TritonError, unready_models


class Clock:
    """Monotonic time and sleeps; `told_waits_s` adds up the waits the caller asked for (bake, termination, quiet)."""

    def __init__(self) -> None:
        self.told_waits_s = 0.0

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    def told_sleep(self, seconds: float) -> None:
        start = self.monotonic()
        self.sleep(seconds)
        self.told_waits_s += self.monotonic() - start

    @staticmethod
    def stamp() -> str:
        return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


class CutoverFailed(Exception):
    """A gate, alarm or timeout failed after the cutover began: the runner rolls back."""


class Clients:
    """The AWS clients of one module run (Auto Scaling, EC2 and Application Auto Scaling for capacity and autoscaling)."""

    def __init__(
        self, ecs: Any, elbv2: Any, cloudwatch: Any, autoscaling: Any = None, ec2: Any = None, application_autoscaling: Any = None
    ) -> None:
        self.ecs = ecs
        self.elbv2 = elbv2
        self.cloudwatch = cloudwatch
        self.autoscaling = autoscaling
        self.ec2 = ec2
        self.application_autoscaling = application_autoscaling


class Runner:
    DRAIN_POLL_S = 0.5  # how often the old colour's metrics are sampled during the drain

    def __init__(
        self,
        params: dict[str, Any],
        clients: Clients,
        check_mode: bool = False,
        clock: Clock | None = None,
        triton: Callable[[str, float], Any] = TritonClient,
        guard: Any = None,
    ) -> None:
        self.p = params
        self.aws = clients
        self.check_mode = check_mode
        self.clock = clock or Clock()
        self.triton = triton
        self.tgs: dict[str, str] = params["target_groups"]
        self.services = {c: f"{params['name']}-{c}" for c in bg.COLORS}
        self.timeline: list[dict[str, Any]] = []
        self.writes: list[str] = []
        self.rollback: dict[str, Any] | None = None
        self.weights: dict[str, int] = {}
        self.colors: dict[str, bg.ColorState] = {}
        self.prod_actions: list[dict[str, Any]] = []
        self.td_arn = ""
        self.task_definition: dict[str, Any] = {}
        self.before: dict[str, Any] = {}
        self.guard = guard  # _bluegreen_guard.CutoverGuard: controller alive and lock held before each write
        self.scaling = (
            scaling.CutoverScaling(
                clients.application_autoscaling, clients.cloudwatch, params["cluster"], self.services, params["name"], self.writes
            )
            if params.get("autoscaling")
            else None
        )

    # ------------------------------------------------------------ timeline

    def _phase(self, name: str) -> dict[str, Any]:
        entry = {
            "phase": name,
            "start": self.clock.stamp(),
            "duration_s": 0.0,
            "outcome": "running",
            "detail": "",
            "_t0": self.clock.monotonic(),
        }
        self.timeline.append(entry)
        return entry

    def _end(self, entry: dict[str, Any], outcome: str, detail: str = "") -> None:
        entry["duration_s"] = round(self.clock.monotonic() - entry.pop("_t0"), 3)
        entry["outcome"] = outcome
        entry["detail"] = detail

    # ------------------------------------------------------------ observe

    def validate_aws(self) -> None:
        """Every check that needs AWS and must pass before the first write; raises PlanError naming what is wrong."""
        errors: list[str] = []
        found_tgs = elb.describe_target_groups(self.aws.elbv2, [self.tgs[c] for c in bg.COLORS])
        for color in bg.COLORS:
            if found_tgs.get(self.tgs[color]) is None:
                errors.append(f"target_groups.{color} {self.tgs[color]} does not exist: give the ARN of an existing target group")
        described = self._describe_services()
        for color, name in self.services.items():
            service = described.get(name)
            if service is None or service.get("status") != "ACTIVE":
                errors.append(f"service {name} does not exist in cluster {self.p['cluster']}: create {name} (the {color} colour) first")
                continue
            lbs = [lb.get("targetGroupArn") for lb in service.get("loadBalancers") or []]
            if lbs and self.tgs[color] not in lbs:
                errors.append(f"service {name} is attached to {lbs}, not to target_groups.{color} {self.tgs[color]}")
        found = ecs_svc.describe_task_definition(self.aws.ecs, self.p["task_definition"])
        if found is None or found["taskDefinition"].get("status", "ACTIVE") != "ACTIVE":
            errors.append(
                f"task_definition {self.p['task_definition']} does not exist (or is INACTIVE): register it first (inferops.triton_ecs.task_definition)"
            )
        else:
            self.task_definition = found["taskDefinition"]
            self.td_arn = self.task_definition["taskDefinitionArn"]
        if self.p.get("alarm_names"):
            missing = bg.missing_alarms(cw.describe_alarms(self.aws.cloudwatch, self.p["alarm_names"]), self.p["alarm_names"])
            errors += [f"alarm_names: CloudWatch alarm {n} does not exist: create it or remove it from alarm_names" for n in missing]
        if self.p.get("test_listener_arn") and elb.describe_listener(self.aws.elbv2, self.p["test_listener_arn"]) is None:
            errors.append(f"test_listener_arn {self.p['test_listener_arn']} does not exist")
        if errors:
            raise bg.PlanError(errors)
        self.described = described

    def _production_actions(self) -> list[dict[str, Any]]:
        if self.p.get("listener_rule_arn"):
            rule = elb.describe_rule(self.aws.elbv2, self.p["listener_rule_arn"])
            if rule is None:
                raise bg.PlanError(f"listener_rule_arn {self.p['listener_rule_arn']} does not exist")
            return rule["Actions"]
        listener = elb.describe_listener(self.aws.elbv2, self.p["listener_arn"])
        if listener is None:
            raise bg.PlanError(f"listener_arn {self.p['listener_arn']} does not exist")
        return listener["DefaultActions"]

    def observe(self, services: dict[str, dict[str, Any]] | None = None) -> None:
        self.prod_actions = self._production_actions()
        self.weights = listener_actions.read_percent_weights(self.prod_actions, self.tgs)
        self.colors = self._color_states(services)

    def _color_states(self, services: dict[str, dict[str, Any]] | None = None) -> dict[str, bg.ColorState]:
        if services is None:
            services = self._describe_services()
        return {c: bg.color_state(services[self.services[c]], elb.describe_target_health(self.aws.elbv2, self.tgs[c])) for c in bg.COLORS}

    def _describe_services(self) -> dict[str, dict[str, Any]]:
        return {s.get("serviceName"): s for s in ecs_svc.describe_services(self.aws.ecs, self.p["cluster"], list(self.services.values()))}

    def _snapshot(self) -> dict[str, Any]:
        return {
            "weights": dict(self.weights),
            "task_definitions": {c: s.task_definition for c, s in self.colors.items()},
            "desired_counts": {c: s.desired for c, s in self.colors.items()},
        }

    # ------------------------------------------------------------ writes

    def set_weights(self, weights: dict[str, int]) -> None:
        if weights == self.weights:
            return
        self._check_before_write()
        actions = listener_actions.actions_with_weights(self.prod_actions, self.tgs, weights)
        if self.p.get("listener_rule_arn"):
            elb.modify_rule(self.aws.elbv2, self.p["listener_rule_arn"], {"Actions": actions})
        else:
            elb.modify_listener(self.aws.elbv2, self.p["listener_arn"], {"DefaultActions": actions})
        self.prod_actions = actions
        self.weights = dict(weights)
        self.writes.append(f"set production weights blue={weights['blue']} green={weights['green']}")

    def scale(self, color: str, desired: int, task_definition: str | None = None) -> None:
        state = self.colors[color]
        if state.desired == desired and (task_definition is None or state.task_definition == task_definition):
            return
        self._check_before_write(color, desired)
        fields: dict[str, Any] = {"desiredCount": desired}
        if task_definition:
            fields["taskDefinition"] = task_definition
        ecs_svc.update_service(self.aws.ecs, self.p["cluster"], state.service, fields)
        state.desired = desired
        if task_definition:
            state.task_definition = task_definition
        self.writes.append(
            f"update service {state.service}: " + (f"task definition {task_definition}, " if task_definition else "") + f"{desired} tasks"
        )

    def point_test_listener(self, color: str) -> None:
        arn = self.p.get("test_listener_arn")
        if not arn:
            return
        listener = elb.describe_listener(self.aws.elbv2, arn)
        if listener and listener_actions.forwards_only_to(listener["DefaultActions"], self.tgs[color]):
            return
        actions = listener_actions.single_forward(listener["DefaultActions"] if listener else [], self.tgs[color])
        self._check_before_write()
        elb.modify_listener(self.aws.elbv2, arn, {"DefaultActions": actions})
        self.writes.append(f"point test listener at {color}")

    # ------------------------------------------------------------ run

    def run(self) -> dict[str, Any]:
        try:
            result = self._run()
        except Exception as e:
            for entry in self.timeline:  # the phase that raised ends as failed; the module reports the timeline
                if "_t0" in entry:
                    self._end(entry, "failed", entry["detail"])
            if self.guard is not None:
                self.guard.end(complete=True, error=e)
            if self.guard is None or not self.guard.refuses(e):
                self._restore_scale_in_after_failure()
            raise
        if self.guard is not None:
            self.guard.end(complete=bool(result.get("failed_reason")) or result["phases_run"] == result["plan"]["phases"])
        return result

    def _run(self) -> dict[str, Any]:
        start = self.clock.monotonic()
        entry = self._phase("discover")
        self.validate_aws()
        if self.guard is not None:
            self.guard.check_free()
        self.observe(self.described)
        self.before = self._snapshot()
        plan = self._decide()
        phases = bg.truncate(plan, self.p.get("stop_after"))
        self._refuse_alarms_before_writes(plan)
        if self.guard is not None and not self.check_mode and self._writes_ahead(plan, phases):
            plan, phases = self._plan_under_lock()
        self._end(entry, "ok", f"{plan.action}: {plan.reason}")
        if self.check_mode:
            self.writes = bg.planned_writes(plan, phases, self.colors, self.td_arn, self.desired_count(), self.weights, self.scale_down_old)
            if self.scaling is not None:
                self.writes += self.scaling.planned(plan, phases)
            return self._result(plan, phases, start, planned=True)
        if self.scaling is not None and plan.action == "noop":
            if self.guard is not None:
                self.guard.check_controller()  # no lock is taken for a noop; check_free above saw no other run
            self.scaling.set_scale_in(plan.live, False)  # a cutover that never finished (a killed controller) held it
        failure = ""
        try:
            if plan.restore_first and phases:
                self.set_weights({plan.old: 100, plan.new: 0})
            for phase in phases:
                getattr(self, f"phase_{phase}")(plan)
        except CutoverFailed as e:
            failure = str(e)
            self.phase_rollback(plan, reason=failure)
        result = self._result(plan, phases, start)
        result["failed_reason"] = failure
        return result

    def _decide(self) -> bg.Plan:
        return bg.decide(
            self.p["state"],
            self.td_arn,
            self.desired_count(),
            self.p["traffic_steps"],
            self.weights,
            self.colors,
            self.scale_down_old,
        )

    def _refuse_alarms_before_writes(self, plan: bg.Plan) -> None:
        """An alarm already in ALARM fails a cutover (or the scale-down of the old colour) before its first write.
        Traffic already split is left to the gates, which roll back."""
        split = all(self.weights[c] > 0 for c in bg.COLORS)
        if plan.action not in ("cutover", "finish") or split or not self.p.get("alarm_names"):
            return
        problems = bg.alarm_problems(cw.describe_alarms(self.aws.cloudwatch, self.p["alarm_names"]), self.p["alarm_names"])
        if problems:
            what = "the cutover" if plan.action == "cutover" else f"scaling down {plan.old} (the instant rollback)"
            raise bg.PlanError([f"{p}: {what} does not start while it is; nothing was written" for p in problems])

    def _writes_ahead(self, plan: bg.Plan, phases: list[str]) -> bool:
        """Whether this call works on a cutover (any phase to run): it holds the lock, refreshed through its waits
        (a long drain included). A run with nothing to do takes no lock and writes nothing."""
        return bool(phases) or plan.restore_first

    def _guard_write(self) -> None:
        """Before a write that AWS state does not describe (autoscaling): the controller runs and the lock is held."""
        if self.guard is not None:
            self.guard.before_write()

    def _plan_under_lock(self) -> tuple[bg.Plan, list[str]]:
        """Take the lock, then observe and plan again: what this run acts on is read after the lock is held."""
        self.guard.take_lock()
        self.observe()
        self.before = self._snapshot()
        plan = self._decide()
        if plan.action == "cutover":
            self.guard.record(plan.old, plan.new, self.td_arn)
        return plan, bg.truncate(plan, self.p.get("stop_after"))

    def _check_before_write(self, color: str | None = None, desired: int | None = None) -> None:
        """Before each write: the controller still runs, the lock is still held, and AWS still shows what this run last
        saw or wrote (weights, each colour's task definition); a colour that has traffic is never scaled to 0."""
        if self.guard is not None:
            self.guard.before_write()
        actions = self._production_actions()
        services = self._describe_services()
        problems = bg.changes_since_seen(
            self.weights,
            listener_actions.read_percent_weights(actions, self.tgs),
            {c: s.task_definition for c, s in self.colors.items()},
            {c: services.get(self.services[c], {}).get("taskDefinition") for c in bg.COLORS},
        )
        if color is not None and desired == 0 and listener_actions.read_percent_weights(actions, self.tgs)[color] > 0:
            problems.append(f"{self.services[color]} has production traffic: it is not scaled to 0")
        if problems:
            raise bg.StateChanged("AWS changed under this cutover, which stops without writing: " + "; ".join(problems))
        self.prod_actions = actions

    @property
    def scale_down_old(self) -> bool:
        return self.p.get("old_color", "scale_down") == "scale_down"

    def _restore_scale_in_after_failure(self) -> None:
        """A failed run that wrote leaves scale-in restored on the colour with traffic (the next cutover suspends it
        again). A run refused before its first write restores nothing: another run may hold the cutover and its scale-in."""
        if self.scaling is None or not self.weights or self.check_mode or not self.writes:
            return
        try:
            self.scaling.set_scale_in(bg.live_color(self.weights), False)
        except Exception as e:  # the run's own error is the one to report; this one is added to its actions
            self.writes.append(f"could not restore scale-in: {e}")

    def desired_count(self) -> int:
        """Tasks the new colour runs: desired_count, or with autoscaling the live colour's current count when larger
        (a cutover during a peak does not shrink the fleet, and a re-run never resets what autoscaling set)."""
        configured = self.p["desired_count"] or 0
        if not self.p.get("autoscaling") or not self.weights:
            return configured
        return scaling.standby_desired(self.colors[bg.live_color(self.weights)].desired, configured)

    def _result(self, plan: bg.Plan, phases: list[str], start: float, planned: bool = False) -> dict[str, Any]:
        for entry in self.timeline:
            entry.pop("_t0", None)
        after = self._snapshot()
        live = bg.live_color(self.weights)
        return {
            "changed": bool(self.writes),
            "decision": plan.action,
            "plan": plan.as_dict(),
            "phases_run": phases,
            "planned": planned,
            "actions": list(self.writes),
            "timeline": self.timeline,
            "weights": after["weights"],
            "live_color": live,
            "task_definitions": after["task_definitions"],
            "desired_counts": after["desired_counts"],
            "colors": {c: s.as_dict() for c, s in self.colors.items()},
            "rollback": self.rollback,
            "told_waits_s": round(self.clock.told_waits_s, 3),
            "wall_s": round(self.clock.monotonic() - start, 3),
            "diff": {"before": self.before, "after": after},
            "autoscaling": self.scaling.summary() if self.scaling is not None else {},
        }

    # ------------------------------------------------------------ phases

    def phase_capacity(self, plan: bg.Plan) -> None:
        entry = self._phase("capacity")
        need = placement.task_needs(self.task_definition)
        standby = self.colors[plan.new]
        # standby tasks already running the new task definition keep their place; others are replaced
        count = self.desired_count() - (standby.running if standby.task_definition == self.td_arn else 0)
        instances: dict[str, placement.Resources] = {}
        headroom: list[placement.Headroom] = []
        if count > 0:
            instances = placement.usable_instances(ecs_svc.container_instances(self.aws.ecs, self.p["cluster"]))
            if sum(placement.place(need, count, instances).values()) < count:
                headroom = self._scaling_headroom()
        verdict = placement.verdict(need, count, instances, headroom, self.p["cluster"])
        self._end(entry, "ok" if verdict.ok else "failed", verdict.why)
        if not verdict.ok:
            raise bg.PlanError(verdict.why)

    def _scaling_headroom(self) -> list[placement.Headroom]:
        """What each managed-scaling capacity provider's Auto Scaling group can still add."""
        cluster = ecs_svc.describe_cluster(self.aws.ecs, self.p["cluster"]) or {}
        names = [n for n in cluster.get("capacityProviders") or [] if n not in ("FARGATE", "FARGATE_SPOT")]
        providers = ecs_svc.describe_capacity_providers(self.aws.ecs, names)
        rooms = []
        for provider in providers:
            if provider["name"] not in bg.managed_scaling_providers([provider]):
                continue
            arn = (provider.get("autoScalingGroupProvider") or {}).get("autoScalingGroupArn", "")
            group = capacity.describe_asg(self.aws.autoscaling, capacity.asg_name_of(arn))
            if group is None:
                raise bg.PlanError(
                    f"capacity provider {provider['name']} uses Auto Scaling group {arn}, which does not exist: "
                    "fix the capacity provider (role fleet_capacity)"
                )
            spec, overrides = placement.group_launch_template(group)
            data = ec2.launch_template_data(self.aws.ec2, spec) if spec else None
            types = overrides or [(data or {}).get("InstanceType")]
            described = ec2.describe_instance_types(self.aws.ec2, [t for t in types if t])
            if not described:
                raise bg.PlanError(
                    f"Auto Scaling group {group['AutoScalingGroupName']}: cannot tell its instance type (launch template {spec or 'none'}): "
                    "give the group a launch template with an InstanceType (role fleet_capacity)"
                )
            # with several instance types, count the smallest: the group may launch any of them
            smallest = min(described, key=lambda t: placement.instance_type_resources(t).gpus)
            rooms.append(
                placement.Headroom(
                    group=group["AutoScalingGroupName"],
                    instance_type=smallest["InstanceType"],
                    max_size=int(group.get("MaxSize") or 0),
                    current=placement.group_current_size(group),
                    per_instance=placement.instance_type_resources(smallest),
                )
            )
        return rooms

    def phase_standby_up(self, plan: bg.Plan) -> None:
        entry = self._phase("standby_up")
        if self.scaling is not None:
            self._guard_write()
            self.scaling.set_scale_in(plan.old, True)  # from here to the end of the cutover, the live colour does not shrink
        desired = self.desired_count()
        self.point_test_listener(plan.new)
        self.scale(plan.new, desired, self.td_arn)
        timeout = self.p["timeouts"]["standby_up_s"]
        deadline = self.clock.monotonic() + timeout
        while True:
            self.colors = self._color_states()
            problems = bg.serving_problems(self.colors[plan.new], self.td_arn, desired)
            if not problems:
                self._end(entry, "ok", f"{self.colors[plan.new].service}: {self.colors[plan.new].healthy} healthy targets")
                return
            if self.clock.monotonic() >= deadline:
                self._end(entry, "failed", "; ".join(problems))
                raise CutoverFailed(f"standby {plan.new} not serving after {timeout} s: " + "; ".join(problems))
            self.clock.sleep(min(self.p["timeouts"]["poll_interval_s"], max(deadline - self.clock.monotonic(), 0)))

    def gate_problems(self, color: str) -> list[str]:
        problems: list[str] = []
        if self.p.get("alarm_names"):
            problems += bg.alarm_problems(cw.describe_alarms(self.aws.cloudwatch, self.p["alarm_names"]), self.p["alarm_names"])
        url = self._test_url(color)
        if not url:
            return problems
        gates = self.p["gates"]
        client = self.triton(url, gates["request_timeout_s"])
        try:
            if not client.live():
                return [*problems, f"Triton at {url} is not live"]
            if not client.ready():
                problems.append(f"Triton at {url} is not ready")
            if gates.get("expected_models"):
                problems += unready_models(client.repository_index(), gates["expected_models"])
            smoke = gates.get("smoke")
            if smoke and not problems:
                outputs = client.infer(smoke["model"], smoke.get("inputs") or [], str(smoke.get("version") or ""))
                problems += bg.smoke_problems(outputs, smoke.get("expected_outputs") or [], smoke.get("tolerance") or 0.0)
        except TritonError as e:
            problems.append(f"Triton gate on {url}: {e}")
        return problems

    def phase_gates(self, plan: bg.Plan) -> None:
        entry = self._phase("gates")
        timeout = self.p["gates"]["timeout_s"]
        deadline = self.clock.monotonic() + timeout
        while True:
            problems = self.gate_problems(plan.new)
            if not problems:
                self._end(
                    entry,
                    "ok",
                    "alarms OK" + (", Triton ready, models READY, smoke inference as expected" if self._test_url(plan.new) else ""),
                )
                return
            if self.clock.monotonic() >= deadline:
                self._end(entry, "failed", "; ".join(problems))
                raise CutoverFailed(f"gate failed on {plan.new}: " + "; ".join(problems))
            self.clock.sleep(min(self.p["gates"]["interval_s"], max(deadline - self.clock.monotonic(), 0)))

    def _test_url(self, color: str) -> str | None:
        return (self.p.get("test_route_urls") or {}).get(color) or self.p.get("test_route_url")

    def _watch(self, color: str, seconds: float, what: str) -> None:
        """Wait `seconds` (a told wait), checking alarms and gates every watch_interval_s; raise on the first failure."""
        end = self.clock.monotonic() + seconds
        interval = self.p["watch_interval_s"] or 1
        while self.clock.monotonic() < end:
            self.clock.told_sleep(min(interval, end - self.clock.monotonic()))
            problems = self.gate_problems(color)
            if problems:
                raise CutoverFailed(f"{what} on {color}: " + "; ".join(problems))

    def phase_traffic(self, plan: bg.Plan) -> None:
        for step in plan.steps:
            entry = self._phase(f"traffic {step}%")
            self.set_weights({plan.new: step, plan.old: 100 - step})
            try:
                self._watch(plan.new, self.p["bake_time_s"], f"bake at {step}%")
            except CutoverFailed as e:
                self._end(entry, "failed", str(e))
                raise
            self._end(entry, "ok", f"{plan.new}={step} {plan.old}={100 - step}, baked {self.p['bake_time_s']} s")
        if not plan.steps:
            self._end(self._phase("traffic"), "skipped", f"{plan.new} already has 100%")

    def phase_drain(self, plan: bg.Plan) -> None:
        entry = self._phase("drain")
        drain = self.p["drain"]
        urls = (drain.get("metrics_urls") or {}).get(plan.old) or []
        if self.colors[plan.old].desired == 0 or not self.scale_down_old:
            self._end(
                entry, "skipped", f"{plan.old} is " + ("already scaled down" if self.colors[plan.old].desired == 0 else "kept at full size")
            )
            return
        if not urls:
            self.clock.told_sleep(drain["quiet_period_s"])
            self._end(entry, "ok", f"no metrics URL for {plan.old}: waited the quiet period of {drain['quiet_period_s']} s")
            return
        quiet_for = drain["quiet_period_s"]
        deadline = self.clock.monotonic() + drain["timeout_s"]
        previous = self._samples(urls)
        last_activity = self.clock.monotonic()
        while True:
            self.clock.told_sleep(min(self.DRAIN_POLL_S, quiet_for or self.DRAIN_POLL_S, max(deadline - self.clock.monotonic(), 0)))
            current = self._samples(urls)
            now = self.clock.monotonic()
            if previous is None or current is None or not bg.is_quiet(previous, current):
                last_activity = now
            previous = current
            if now - last_activity >= quiet_for:
                self._end(entry, "ok", f"{plan.old} quiet for {quiet_for} s on {len(urls)} endpoint(s)")
                return
            if now >= deadline:
                pending = sum(bg.in_flight(m) for m in current or [])
                self._end(
                    entry, "timed_out", f"{plan.old} still busy after {drain['timeout_s']} s ({pending:g} queued): scaling down anyway"
                )
                return

    def _samples(self, urls: list[str]) -> list[dict[str, float]] | None:
        try:
            return [self.triton(url, self.p["gates"]["request_timeout_s"]).metrics(url) for url in urls]
        except (TritonError, OSError):
            return None  # an endpoint that stopped answering is not proof of quiet; the timeout bounds the wait

    def phase_finish(self, plan: bg.Plan) -> None:
        entry = self._phase("finish")
        if self.scaling is not None:
            self._guard_write()
            self.scaling.move(plan.old, plan.new)  # before the old colour is scaled down: its target would scale it back up
        old = self.colors[plan.old]
        if not self.scale_down_old:
            self._end(entry, "ok", f"{old.service} kept at {old.desired} tasks for instant rollback (old_color=keep)")
            return
        if old.desired == 0:
            self._end(entry, "skipped", f"{old.service} already scaled down")
            return
        wait = self.p["termination_wait_s"]
        if wait:
            try:
                self._watch(plan.new, wait, "termination wait")
            except CutoverFailed as e:
                self._end(entry, "failed", str(e))
                raise
        self.scale(plan.old, 0)
        if self.p["drain"]["wait_deregistration"]:
            deadline = self.clock.monotonic() + self.p["drain"]["timeout_s"]
            while self.clock.monotonic() < deadline and any(
                h.get("TargetHealth", {}).get("State") == "draining" for h in elb.describe_target_health(self.aws.elbv2, self.tgs[plan.old])
            ):
                self.clock.sleep(self.p["timeouts"]["poll_interval_s"])
        self._end(entry, "ok", f"{old.service} scaled to 0" + (f" after a termination wait of {wait} s" if wait else ""))

    def phase_rollback(self, plan: bg.Plan, reason: str = "") -> None:
        entry = self._phase("rollback")
        reason = reason or plan.reason
        detected = self.clock.monotonic()
        detected_at = self.clock.stamp()
        self.set_weights({plan.old: 100, plan.new: 0})
        restored = self.clock.monotonic()
        restored_at = self.clock.stamp()
        if self.scaling is not None:
            self._guard_write()
            self.scaling.move(plan.new, plan.old)  # the target and policies stay on (or go back to) the colour that serves
        self.scale(plan.new, 0)
        self.rollback = {
            "reason": reason,
            "to_color": plan.old,
            "detected_at": detected_at,
            "weights_restored_at": restored_at,
            "seconds": round(restored - detected, 3),
        }
        self._end(entry, "ok", f"traffic back on {plan.old}: {reason}")
