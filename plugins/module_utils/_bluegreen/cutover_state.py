# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""What one blue/green run reads from AWS, and the writes it makes, each checked against AWS first.

`CutoverState` holds the run's view (production weights, each colour's service and target health, the task
definition), its timeline, and the three writes a cutover makes: production weights, a service's size and task
definition, the test listener. The phases (`cutover_phases.py`) and the run (`runner.py`) build on it. It also
makes the run's two collaborators, each with explicit inputs: the canary watch (`canary_watch.py`, when
canary.enabled) and the hook runner (`hook_runner.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import cloudwatch as cw
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import ecs as ecs_svc
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import elbv2 as elb
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import autoscaling as scaling
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import gates, hooks, listener_actions
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import plan as bg
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.canary_watch import CanaryWatch
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.clock import Clock
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.drain_endpoints import DrainWatch
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.hook_runner import HookRunner
from ansible_collections.inferops.triton_ecs.plugins.module_utils._triton_client import TritonClient


class CutoverFailed(Exception):
    """A gate, alarm, canary verdict, hook or timeout failed after the cutover began: the runner rolls back."""


class Clients:
    """The AWS clients of one module run. Auto Scaling, EC2 and Application Auto Scaling (capacity and autoscaling)
    are made on first use by `connect` when not given: most phases never call them, and EC2's API model alone takes
    about half a second to load."""

    def __init__(
        self,
        ecs: Any,
        elbv2: Any,
        cloudwatch: Any,
        autoscaling: Any = None,
        ec2: Any = None,
        application_autoscaling: Any = None,
        connect: Callable[[str], Any] | None = None,
        lambda_client: Any = None,
    ) -> None:
        self.ecs = ecs
        self.elbv2 = elbv2
        self.cloudwatch = cloudwatch
        self._made = {
            "autoscaling": autoscaling,
            "ec2": ec2,
            "application-autoscaling": application_autoscaling,
            "lambda": lambda_client,
        }
        self._connect = connect

    def _client(self, service: str) -> Any:
        if self._made[service] is None and self._connect is not None:
            self._made[service] = self._connect(service)
        return self._made[service]

    @property
    def autoscaling(self) -> Any:
        return self._client("autoscaling")

    @property
    def ec2(self) -> Any:
        return self._client("ec2")

    @property
    def application_autoscaling(self) -> Any:
        return self._client("application-autoscaling")

    @property
    def lambda_(self) -> Any:
        """Lambda, for the hooks."""
        return self._client("lambda")


class CutoverState:
    """The run's view of one application in AWS, its timeline, and its checked writes."""

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
        self.drain_watched: DrainWatch | None = None  # what the drain watched (in check mode: would watch)
        self.target_group_descriptions: dict[str, dict[str, Any] | None] = {}  # as discover read them (load balancers)
        self.weights: dict[str, int] = {}
        self.colors: dict[str, gates.ColorState] = {}
        self.prod_actions: list[dict[str, Any]] = []
        self.grpc = params.get("grpc") or {}
        self.grpc_tgs: dict[str, str] = self.grpc.get("target_groups") or {}
        self.grpc_actions: list[dict[str, Any]] = []  # the gRPC route's forward, moved with the HTTP one
        self.grpc_weights: dict[str, int] = {}
        self.alarms: list[dict[str, Any]] = []  # alarm_names as discover read them
        self.record: dict[str, str] = {}  # the cutover record (a capacity-paced cutover's full count), read in discover
        self.batch_size = 0  # a capacity-paced cutover's batch, sized by the capacity phase
        self.capacity_plan: dict[str, Any] = {}
        self.capacity_checked: tuple[str | None, str | None] | None = None  # the colours the paced capacity check saw
        self.batches: list[dict[str, Any]] = []  # one entry per batch run
        self.td_arn = ""
        self.task_definition: dict[str, Any] = {}
        self.before: dict[str, Any] = {}
        self.guard = guard  # guard.CutoverGuard: controller alive and lock held before each write
        self.scaling = (
            scaling.CutoverScaling(
                clients.application_autoscaling,
                clients.cloudwatch,
                params["cluster"],
                self.services,
                params["name"],
                self.writes,
                hold_scale_out=params.get("mode") == "capacity_paced",
            )
            if params.get("autoscaling")
            else None
        )
        # Collaborators: the canary verdict of each step (its target groups' load balancers are read by validate_aws),
        # and the hooks at the phase boundaries.
        self.canary_watch = (
            CanaryWatch(clients.cloudwatch, params.get("canary") or {}, {c: self._colour_groups(c) for c in bg.COLORS}, self.clock)
            if (params.get("canary") or {}).get("enabled")
            else None
        )
        self.hook_runner = HookRunner(
            params.get("hooks"),
            clients.lambda_ if params.get("hooks") else None,
            self.clock,
            self._phase,
            self._end,
            self._guard_write,
            lambda stage, new, old, extra: hooks.context(self.p, stage, new, old, self.weights, **extra),
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
        arns = [self.tgs[c] for c in bg.COLORS] + [self.grpc_tgs[c] for c in bg.COLORS if self.grpc_tgs]
        found_tgs = self.target_group_descriptions = elb.describe_target_groups(self.aws.elbv2, arns)
        for color in bg.COLORS:
            if found_tgs.get(self.tgs[color]) is None:
                errors.append(f"target_groups.{color} {self.tgs[color]} does not exist: give the ARN of an existing target group")
            if self.grpc_tgs and found_tgs.get(self.grpc_tgs[color]) is None:
                errors.append(
                    f"grpc.target_groups.{color} {self.grpc_tgs[color]} does not exist: create it (role fleet_load_balancing, grpc)"
                )
        described = self._describe_services()
        for color, name in self.services.items():
            service = described.get(name)
            if service is None or service.get("status") != "ACTIVE":
                errors.append(f"service {name} does not exist in cluster {self.p['cluster']}: create {name} (the {color} colour) first")
                continue
            lbs = [lb.get("targetGroupArn") for lb in service.get("loadBalancers") or []]
            if lbs and self.tgs[color] not in lbs:
                errors.append(f"service {name} is attached to {lbs}, not to target_groups.{color} {self.tgs[color]}")
            if lbs and self.grpc_tgs and self.grpc_tgs[color] not in lbs:
                errors.append(f"service {name} is attached to {lbs}, not to grpc.target_groups.{color} {self.grpc_tgs[color]}")
        found = ecs_svc.describe_task_definition(self.aws.ecs, self.p["task_definition"])
        if found is None or found["taskDefinition"].get("status", "ACTIVE") != "ACTIVE":
            errors.append(
                f"task_definition {self.p['task_definition']} does not exist (or is INACTIVE): register it first (inferops.triton_ecs.task_definition)"
            )
        else:
            self.task_definition = found["taskDefinition"]
            self.td_arn = self.task_definition["taskDefinitionArn"]
        if self.p.get("alarm_names"):
            self.alarms = cw.describe_alarms(self.aws.cloudwatch, self.p["alarm_names"])
            missing = gates.missing_alarms(self.alarms, self.p["alarm_names"])
            errors += [f"alarm_names: CloudWatch alarm {n} does not exist: create it or remove it from alarm_names" for n in missing]
        if self.p.get("test_listener_arn") and elb.describe_listener(self.aws.elbv2, self.p["test_listener_arn"]) is None:
            errors.append(f"test_listener_arn {self.p['test_listener_arn']} does not exist")
        if self.grpc.get("test_listener_arn") and elb.describe_listener(self.aws.elbv2, self.grpc["test_listener_arn"]) is None:
            errors.append(f"grpc.test_listener_arn {self.grpc['test_listener_arn']} does not exist")
        if self.canary_watch is not None:
            errors += self.canary_watch.attach(found_tgs)
        errors += self.hook_runner.problems()
        if errors:
            raise bg.PlanError(errors)
        self.described = described

    def _production_actions(self) -> list[dict[str, Any]]:
        actions = elb.production_actions(self.aws.elbv2, self.p.get("listener_arn"), self.p.get("listener_rule_arn"))
        if actions is None:
            field = "listener_rule_arn" if self.p.get("listener_rule_arn") else "listener_arn"
            raise bg.PlanError(f"{field} {self.p[field]} does not exist")
        return actions

    def _grpc_actions(self) -> list[dict[str, Any]]:
        actions = elb.production_actions(self.aws.elbv2, self.grpc.get("listener_arn"), self.grpc.get("listener_rule_arn"))
        if actions is None:
            field = "listener_rule_arn" if self.grpc.get("listener_rule_arn") else "listener_arn"
            raise bg.PlanError(f"grpc.{field} {self.grpc[field]} does not exist")
        return actions

    def observe(self, services: dict[str, dict[str, Any]] | None = None) -> None:
        self.prod_actions = self._production_actions()
        self.weights = listener_actions.read_percent_weights(self.prod_actions, self.tgs)
        if self.grpc_tgs:
            # The HTTP weights lead; a gRPC route left behind (a run stopped between the two writes) follows at the next write.
            self.grpc_actions = self._grpc_actions()
            self.grpc_weights = listener_actions.read_percent_weights(self.grpc_actions, self.grpc_tgs)
        self.colors = self._color_states(services)

    def _color_states(self, services: dict[str, dict[str, Any]] | None = None) -> dict[str, gates.ColorState]:
        if services is None:
            services = self._describe_services()
        states = {}
        for c in bg.COLORS:
            # A task is registered in each of its colour's target groups (HTTP, gRPC): every one must be healthy.
            each = [
                gates.color_state(services[self.services[c]], elb.describe_target_health(self.aws.elbv2, arn))
                for arn in self._colour_groups(c)
            ]
            state = each[0]
            state.healthy = min(s.healthy for s in each)
            state.not_serving = sum(s.not_serving for s in each)
            state.draining = sum(s.draining for s in each)
            states[c] = state
        return states

    def _colour_groups(self, color: str) -> list[str]:
        return [self.tgs[color]] + ([self.grpc_tgs[color]] if self.grpc_tgs else [])

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
            if self.grpc_tgs and weights != self.grpc_weights:
                self._guard_write()
                self._set_grpc_weights(weights)
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
        self._set_grpc_weights(weights)

    def _set_grpc_weights(self, weights: dict[str, int]) -> None:
        """The gRPC route's forward at the same weights, right after the HTTP one."""
        if not self.grpc_tgs or weights == self.grpc_weights:
            return
        actions = listener_actions.actions_with_weights(self.grpc_actions, self.grpc_tgs, weights)
        if self.grpc.get("listener_rule_arn"):
            elb.modify_rule(self.aws.elbv2, self.grpc["listener_rule_arn"], {"Actions": actions})
        else:
            elb.modify_listener(self.aws.elbv2, self.grpc["listener_arn"], {"DefaultActions": actions})
        self.grpc_actions, self.grpc_weights = actions, dict(weights)
        self.writes.append(f"set gRPC weights blue={weights['blue']} green={weights['green']}")

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

    def point_grpc_test_listener(self, color: str) -> None:
        arn = self.grpc.get("test_listener_arn")
        if not arn:
            return
        listener = elb.describe_listener(self.aws.elbv2, arn)
        if listener and listener_actions.forwards_only_to(listener["DefaultActions"], self.grpc_tgs[color]):
            return
        actions = listener_actions.single_forward(listener["DefaultActions"] if listener else [], self.grpc_tgs[color])
        self._check_before_write()
        elb.modify_listener(self.aws.elbv2, arn, {"DefaultActions": actions})
        self.writes.append(f"point gRPC test listener at {color}")

    def _guard_write(self) -> None:
        """Before a write that AWS state does not describe (autoscaling): the controller runs and the lock is held."""
        if self.guard is not None:
            self.guard.before_write()

    def _check_before_write(self, color: str | None = None, desired: int | None = None) -> None:
        """Before each write: the controller still runs, the lock is still held, and AWS still shows what this run last
        saw or wrote (weights, each colour's task definition); a colour that has traffic is never scaled to 0."""
        self._guard_write()
        actions = self._production_actions()
        services = self._describe_services()
        weights_now = listener_actions.read_percent_weights(actions, self.tgs)
        problems = bg.changes_since_seen(
            self.weights,
            weights_now,
            {c: s.task_definition for c, s in self.colors.items()},
            {c: services.get(self.services[c], {}).get("taskDefinition") for c in bg.COLORS},
        )
        if color is not None and desired == 0 and weights_now[color] > 0:
            problems.append(f"{self.services[color]} has production traffic: it is not scaled to 0")
        if problems:
            raise bg.StateChanged("AWS changed under this cutover, which stops without writing: " + "; ".join(problems))
        self.prod_actions = actions

    @property
    def scale_down_old(self) -> bool:
        return self.p.get("old_color", "scale_down") == "scale_down"

    @property
    def paced(self) -> bool:
        return self.p.get("mode") == "capacity_paced"

    def desired_count(self) -> int:
        """Tasks the new colour runs: desired_count, or with autoscaling the live colour's current count when larger
        (a cutover during a peak does not shrink the fleet, and a re-run never resets what autoscaling set).

        A capacity-paced cutover shrinks the live colour as it goes, so its count is read from the cutover record
        (`count`, written before the first write) once the cutover of this task definition has begun."""
        configured = self.p["desired_count"] or 0
        if not self.p.get("autoscaling") or not self.weights:
            return configured
        live = self.colors[bg.live_color(self.weights)]
        done = live.task_definition == self.td_arn and self.weights[bg.live_color(self.weights)] == 100
        if self.paced and not done:  # once done, the live colour's count is autoscaling's again
            recorded = self.record.get("count", "")
            if recorded.isdigit() and self.record.get("task_definition") == self.td_arn.rsplit("/", 1)[-1]:
                return max(int(recorded), configured)
        return scaling.standby_desired(live.desired, configured)

    def rollback_full_count(self, plan: bg.Plan) -> int:
        """The count the old colour grows back to in a capacity-paced rollback: the recorded full count, else
        desired_count, else what both colours want together (at most one batch more than the full count)."""
        recorded = self.record.get("count", "")
        if recorded.isdigit() and self.record.get("to") == plan.new:
            return int(recorded)
        return self.p.get("desired_count") or self.colors[plan.old].desired + self.colors[plan.new].desired
