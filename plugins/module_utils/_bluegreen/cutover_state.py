# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""What one blue/green run reads from AWS, and the writes it makes, each checked against AWS first.

`CutoverState` holds the run's view of the application (`application.py` reads it: production weights, each
colour's service and target health), the task definition it cuts over to, and the three writes a cutover makes:
production weights, a service's size and task definition, the test listeners. `Timeline` is the run's record of
its phases. The phases (`cutover_phases.py`) and the run (`runner.py`) are given both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import cloudwatch as cw
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import ecs as ecs_svc
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import elbv2 as elb
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import application, gates, listener_actions
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import autoscaling as scaling
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.clock import Clock
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.colors import COLORS
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.guard import StateChanged
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.plan import Plan


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


class Timeline:
    """The run's phases as the module reports them: each with its start, duration, outcome and detail."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.entries: list[dict[str, Any]] = []

    def start(self, name: str) -> dict[str, Any]:
        entry = {
            "phase": name,
            "start": self.clock.stamp(),
            "duration_s": 0.0,
            "outcome": "running",
            "detail": "",
            "_t0": self.clock.monotonic(),
        }
        self.entries.append(entry)
        return entry

    def end(self, entry: dict[str, Any], outcome: str, detail: str = "") -> None:
        entry["duration_s"] = round(self.clock.monotonic() - entry.pop("_t0"), 3)
        entry["outcome"] = outcome
        entry["detail"] = detail

    def fail_running(self) -> None:
        """The phase that raised ends as failed (the module reports the timeline)."""
        for entry in self.entries:
            if "_t0" in entry:
                self.end(entry, "failed", entry["detail"])

    def report(self) -> list[dict[str, Any]]:
        for entry in self.entries:
            entry.pop("_t0", None)
        return self.entries


class CutoverState:
    """The run's view of one application in AWS and its checked writes. `params` are the bluegreen module's options;
    `guard` (guard.CutoverGuard) checks that the controller runs and the lock is held before each write."""

    def __init__(self, params: dict[str, Any], clients: Clients, guard: Any = None) -> None:
        self.p = params
        self.aws = clients
        self.guard = guard
        self.app = application.from_options(params)
        self.writes: list[str] = []
        self.described: dict[str, dict[str, Any]] = {}  # the services as aws_problems read them
        self.target_group_descriptions: dict[str, dict[str, Any] | None] = {}  # as aws_problems read them (load balancers)
        self.alarms: list[dict[str, Any]] = []  # alarm_names as aws_problems read them
        self.task_definition: dict[str, Any] = {}
        self.td_arn = ""

    @property
    def weights(self) -> dict[str, int]:
        return self.app.weights

    @property
    def colors(self) -> dict[str, gates.ColorState]:
        return self.app.colors

    @property
    def record(self) -> dict[str, str]:
        """The cutover record (a capacity-paced cutover's full count), read by `read_record`."""
        return self.app.record

    @property
    def scale_down_old(self) -> bool:
        return self.p.get("old_color", "scale_down") == "scale_down"

    @property
    def paced(self) -> bool:
        return self.p.get("mode") == "capacity_paced"

    # ------------------------------------------------------------ observe

    def aws_problems(self) -> list[str]:
        """Every problem that needs AWS to see and must be refused before the first write."""
        errors: list[str] = []
        arns = [arn for route in self.app.routes() for arn in route.target_groups.values()]
        found_tgs = self.target_group_descriptions = elb.describe_target_groups(self.aws.elbv2, arns)
        for route in self.app.routes():
            for color in COLORS:
                arn = route.target_groups[color]
                if found_tgs.get(arn) is not None:
                    continue
                errors.append(
                    f"grpc.target_groups.{color} {arn} does not exist: create it (role fleet_load_balancing, grpc)"
                    if route.option
                    else f"target_groups.{color} {arn} does not exist: give the ARN of an existing target group"
                )
        self.described = application.describe_services(self.aws.ecs, self.app.cluster, self.app.name)
        for color, name in self.app.service_names.items():
            service = self.described.get(name)
            if service is None or service.get("status") != "ACTIVE":
                errors.append(f"service {name} does not exist in cluster {self.app.cluster}: create {name} (the {color} colour) first")
                continue
            lbs = [lb.get("targetGroupArn") for lb in service.get("loadBalancers") or []]
            for route in self.app.routes() if lbs else []:
                if route.target_groups[color] not in lbs:
                    option = "grpc.target_groups" if route.option else "target_groups"
                    errors.append(f"service {name} is attached to {lbs}, not to {option}.{color} {route.target_groups[color]}")
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
        for option, arn, _route in self._test_listeners():
            if elb.describe_listener(self.aws.elbv2, arn) is None:
                errors.append(f"{option} {arn} does not exist")
        return errors

    def _test_listeners(self) -> list[tuple[str, str, application.Route]]:
        """(option, listener ARN, the route whose target groups it forwards to) of each test listener given."""
        grpc = self.p.get("grpc") or {}
        given = [("test_listener_arn", self.p.get("test_listener_arn"), self.app.http)]
        if self.app.grpc is not None:
            given.append(("grpc.test_listener_arn", grpc.get("test_listener_arn"), self.app.grpc))
        return [(option, arn, route) for option, arn, route in given if arn]

    def observe(self, services: dict[str, dict[str, Any]] | None = None) -> None:
        """The weights of every route and each colour's state (`services` when just described). The HTTP weights lead;
        a gRPC route left behind (a run stopped between the two writes) follows at the next write."""
        application.observe(self.aws.ecs, self.aws.elbv2, self.app, services)

    def refresh_colors(self) -> None:
        application.read_colors(self.aws.ecs, self.aws.elbv2, self.app)

    def read_record(self) -> None:
        """A capacity-paced run reads the cutover record (its full count, and the old colour's to restore)."""
        if self.paced and self.guard is not None:
            application.read_record(self.aws.elbv2, self.app)

    # ------------------------------------------------------------ writes

    def set_weights(self, weights: dict[str, int]) -> None:
        """Production weights, then the gRPC route's at the same weights right after (one check before both)."""
        checked = weights != self.app.weights
        if checked:
            self._check_before_write()
            application.write_weights(self.aws.elbv2, self.app.http, weights)
            self.writes.append(f"set production weights blue={weights['blue']} green={weights['green']}")
        grpc = self.app.grpc
        if grpc is not None and weights != grpc.weights:
            if not checked:
                self.guard_write()
            application.write_weights(self.aws.elbv2, grpc, weights)
            self.writes.append(f"set gRPC weights blue={weights['blue']} green={weights['green']}")

    def scale(self, color: str, desired: int, task_definition: str | None = None) -> None:
        state = self.colors[color]
        if state.desired == desired and (task_definition is None or state.task_definition == task_definition):
            return
        self._check_before_write(color, desired)
        fields: dict[str, Any] = {"desiredCount": desired}
        if task_definition:
            fields["taskDefinition"] = task_definition
        ecs_svc.update_service(self.aws.ecs, self.app.cluster, state.service, fields)
        state.desired = desired
        if task_definition:
            state.task_definition = task_definition
        self.writes.append(
            f"update service {state.service}: " + (f"task definition {task_definition}, " if task_definition else "") + f"{desired} tasks"
        )

    def point_test_listeners(self, color: str) -> None:
        """Each test listener (HTTP, and gRPC with a gRPC route) forwards to `color` only."""
        for option, arn, route in self._test_listeners():
            listener = elb.describe_listener(self.aws.elbv2, arn)
            target = route.target_groups[color]
            if listener and listener_actions.forwards_only_to(listener["DefaultActions"], target):
                continue
            actions = listener_actions.single_forward(listener["DefaultActions"] if listener else [], target)
            self._check_before_write()
            elb.modify_listener(self.aws.elbv2, arn, {"DefaultActions": actions})
            self.writes.append(f"point {'gRPC ' if option.startswith('grpc') else ''}test listener at {color}")

    def guard_write(self) -> None:
        """Before a write that AWS state does not describe (autoscaling): the controller runs and the lock is held."""
        if self.guard is not None:
            self.guard.before_write()

    def _check_before_write(self, color: str | None = None, desired: int | None = None) -> None:
        """Before each write: the controller still runs, the lock is still held, and AWS still shows what this run last
        saw or wrote (weights, each colour's task definition); a colour that has traffic is never scaled to 0."""
        self.guard_write()
        now = application.current(self.aws.ecs, self.aws.elbv2, self.app)
        problems = application.changes_since(self.app.view(), now)
        if color is not None and desired == 0 and now["weights"][color] > 0:
            problems.append(f"{self.app.service_names[color]} has production traffic: it is not scaled to 0")
        if problems:
            raise StateChanged("AWS changed under this cutover, which stops without writing: " + "; ".join(problems))
        self.app.http.actions = now["actions"]

    # ------------------------------------------------------------ counts

    def desired_count(self) -> int:
        """Tasks the new colour runs: desired_count, or with autoscaling the live colour's current count when larger
        (a cutover during a peak does not shrink the fleet, and a re-run never resets what autoscaling set).

        A capacity-paced cutover shrinks the live colour as it goes, so its count is read from the cutover record
        (`count`, written before the first write) once the cutover of this task definition has begun."""
        configured = self.p["desired_count"] or 0
        if not self.p.get("autoscaling") or not self.weights:
            return configured
        live = self.colors[self.app.live]
        done = live.task_definition == self.td_arn and self.weights[self.app.live] == 100
        if self.paced and not done:  # once done, the live colour's count is autoscaling's again
            recorded = self.record.get("count", "")
            if recorded.isdigit() and self.record.get("task_definition") == self.td_arn.rsplit("/", 1)[-1]:
                return max(int(recorded), configured)
        return scaling.standby_desired(live.desired, configured)

    def rollback_full_count(self, plan: Plan) -> int:
        """The count the old colour grows back to in a capacity-paced rollback: the recorded full count, else
        desired_count, else what both colours want together (at most one batch more than the full count)."""
        recorded = self.record.get("count", "")
        if recorded.isdigit() and self.record.get("to") == plan.new:
            return int(recorded)
        return self.p.get("desired_count") or self.colors[plan.old].desired + self.colors[plan.new].desired
