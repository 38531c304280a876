# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""What AWS shows of one blue/green application, read in one place.

An application is two ECS services, `<name>-blue` and `<name>-green`, each behind its colour's target group, and a
production listener (or listener rule) whose forward splits traffic between the two; with a gRPC route, a second
pair of target groups and a second forward. `observe` reads all of it: the weights of each route, each colour's
service (task definition, desired and running counts, deployments) and the health of its targets in every target
group it is in, and the record of the last cutover kept in the production resource's tags.

Every consumer reads the application through here: the cutover (`cutover_state.py`), the emergency rollback
(`rollback.py`), the AMI rollout, and the autoscaling module. Two ways in:
- `from_options`: the target groups and the production listener named by the options (bluegreen, bluegreen_autoscaling);
- `discover`: found from the services alone (bluegreen_rollback, ami_rollout): the services give the target groups,
  the target groups give the load balancers, and the production resource is the one that forwards to both colours.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import ecs as ecs_svc
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import elbv2 as elb
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import InputError
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import gates, listener_actions
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.colors import COLORS, live_color, service_names
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.lock import RECORD_KEY, parse_record


@dataclass
class Route:
    """One production forward: the listener or rule that splits traffic between the colours' target groups, with its
    actions and weights as last read. `option` is how the module's options name it ("", "grpc." or "grpc_")."""

    target_groups: dict[str, str]
    arn: str = ""
    is_rule: bool = False
    option: str = ""
    actions: list[dict[str, Any]] = field(default_factory=list)
    weights: dict[str, int] = field(default_factory=dict)

    @property
    def field(self) -> str:
        return f"{self.option}{'listener_rule_arn' if self.is_rule else 'listener_arn'}"


@dataclass
class Application:
    """One application as AWS shows it: the production route (and the gRPC one), each colour's service and state,
    and the record of the last cutover (read by `observe` when asked)."""

    cluster: str
    name: str
    http: Route
    grpc: Route | None = None
    services: dict[str, dict[str, Any]] = field(default_factory=dict)  # by service name, as ECS describes them
    colors: dict[str, gates.ColorState] = field(default_factory=dict)
    record: dict[str, str] = field(default_factory=dict)

    @property
    def service_names(self) -> dict[str, str]:
        return service_names(self.name)

    @property
    def weights(self) -> dict[str, int]:
        return self.http.weights

    @property
    def live(self) -> str:
        return live_color(self.http.weights)

    def routes(self) -> list[Route]:
        return [self.http] + ([self.grpc] if self.grpc is not None else [])

    def groups(self, color: str) -> list[str]:
        """The target groups a task of `color` is registered in (HTTP, and gRPC with a gRPC route)."""
        return [route.target_groups[color] for route in self.routes()]

    def view(self) -> dict[str, Any]:
        """What a diff shows: the weights, each colour's task definition and desired count."""
        return {
            "weights": dict(self.weights),
            "task_definitions": {c: s.task_definition for c, s in self.colors.items()},
            "desired_counts": {c: s.desired for c, s in self.colors.items()},
        }


# ---------------------------------------------------------------- the two ways in


def from_options(params: dict[str, Any]) -> Application:
    """The application as the options name it: `target_groups` with `listener_arn` or `listener_rule_arn`, and the
    gRPC route's under `grpc` when given."""
    http = Route(dict(params["target_groups"]), params.get("listener_rule_arn") or params.get("listener_arn") or "")
    http.is_rule = bool(params.get("listener_rule_arn"))
    app = Application(params["cluster"], params["name"], http)
    grpc = params.get("grpc") or {}
    if grpc.get("target_groups"):
        app.grpc = Route(dict(grpc["target_groups"]), grpc.get("listener_rule_arn") or grpc.get("listener_arn") or "", option="grpc.")
        app.grpc.is_rule = bool(grpc.get("listener_rule_arn"))
    return app


def discover(ecs: Any, elbv2: Any, params: dict[str, Any], record: bool = True) -> Application:
    """The application found from its services (read-only): `cluster` and `name`, with `listener_arn` /
    `listener_rule_arn` (and `grpc_listener_arn` / `grpc_listener_rule_arn`) only where several resources could
    be the production one. Observed before it is returned."""
    cluster, name = params["cluster"], params["name"]
    services = describe_services(ecs, cluster, name)
    arns = target_groups_of(services, cluster, name)
    described = elb.describe_target_groups(elbv2, sorted({a for found in arns.values() for a in found}))
    http, grpc = split_by_protocol(arns, described)
    app = Application(cluster, name, Route(http))
    resources: list[dict[str, Any]] | None = None
    given = params.get("listener_rule_arn") or params.get("listener_arn")
    if given:
        app.http.arn, app.http.is_rule = given, bool(params.get("listener_rule_arn"))
    else:
        resources = _forwarding_resources(elbv2, described)
        candidates = production_candidates(resources, http)
        tags = elb.describe_tags(elbv2, [c["arn"] for c in candidates]) if candidates else {}
        chosen = pick_production(candidates, tags, name)
        app.http.arn, app.http.is_rule = chosen["arn"], chosen["is_rule"]
    if grpc:
        app.grpc = Route(grpc, option="grpc_")
        given = params.get("grpc_listener_rule_arn") or params.get("grpc_listener_arn")
        if given:
            app.grpc.arn, app.grpc.is_rule = given, bool(params.get("grpc_listener_rule_arn"))
        else:
            candidates = production_candidates(resources if resources is not None else _forwarding_resources(elbv2, described), grpc)
            if len(candidates) > 1:
                # A gRPC test listener not yet pointed at one colour forwards to both: the production route is the
                # one at the HTTP production's weights (the cutover moves both together).
                read_route(elbv2, app.http)
                candidates = [
                    c for c in candidates if listener_actions.read_percent_weights(c["actions"], grpc) == app.http.weights
                ] or candidates
            if len(candidates) != 1:
                listed = ", ".join(f"{c['arn']} (port {c['port']})" for c in candidates) or "none"
                raise InputError(
                    f"{len(candidates)} listeners or rules forward to both gRPC target groups of {name} ({listed}): "
                    "give grpc_listener_arn or grpc_listener_rule_arn"
                )
            app.grpc.arn, app.grpc.is_rule = candidates[0]["arn"], candidates[0]["is_rule"]
    return observe(ecs, elbv2, app, services, record=record)


# ---------------------------------------------------------------- reading


def observe(ecs: Any, elbv2: Any, app: Application, services: dict[str, dict[str, Any]] | None = None, record: bool = False) -> Application:
    """Fresh weights of every route, colour states (from `services` when just described) and, when asked, the record
    of the last cutover."""
    for route in app.routes():
        read_route(elbv2, route)
    read_colors(ecs, elbv2, app, services)
    if record:
        read_record(elbv2, app)
    return app


def describe_services(ecs: Any, cluster: str, name: str) -> dict[str, dict[str, Any]]:
    """Both colours' services as ECS describes them, by service name (a missing one is left out)."""
    described = ecs_svc.describe_services(ecs, cluster, list(service_names(name).values()))
    return {s["serviceName"]: s for s in described if s.get("serviceName")}


def read_route(elbv2: Any, route: Route) -> None:
    """The route's forward and its weights in percent; InputError naming the option when the resource is gone."""
    listener_arn, rule_arn = (None, route.arn) if route.is_rule else (route.arn, None)
    actions = elb.production_actions(elbv2, listener_arn, rule_arn)
    if actions is None:
        raise InputError(
            f"{route.field} {route.arn} does not exist: create the listeners first (role fleet_load_balancing) or give its ARN"
        )
    route.actions = actions
    route.weights = listener_actions.read_percent_weights(actions, route.target_groups)


def read_colors(ecs: Any, elbv2: Any, app: Application, services: dict[str, dict[str, Any]] | None = None) -> None:
    """Each colour's state: its service, and its targets in every target group it is in (a task serves when it is
    healthy in each: the healthy count is the smallest, the not-serving and draining counts add up)."""
    app.services = services if services is not None else describe_services(ecs, app.cluster, app.name)
    states = {}
    for color, service_name in app.service_names.items():
        service = app.services.get(service_name) or {"serviceName": service_name, "desiredCount": 0}
        each = [gates.color_state(service, elb.describe_target_health(elbv2, arn)) for arn in app.groups(color)]
        state = each[0]
        state.healthy = min(s.healthy for s in each)
        state.not_serving = sum(s.not_serving for s in each)
        state.draining = sum(s.draining for s in each)
        states[color] = state
    app.colors = states


def read_record(elbv2: Any, app: Application) -> None:
    """The record of the last cutover, from the production resource's tags ({} when none is kept)."""
    app.record = parse_record(elb.describe_tags(elbv2, [app.http.arn]).get(app.http.arn, {}))


def current(ecs: Any, elbv2: Any, app: Application) -> dict[str, Any]:
    """What AWS shows now of the production route and the services (two reads, no target health), `app` untouched:
    the weights, the forward's actions and each colour's task definition."""
    route = Route(app.http.target_groups, app.http.arn, app.http.is_rule, app.http.option)
    read_route(elbv2, route)
    services = describe_services(ecs, app.cluster, app.name)
    return {
        "weights": route.weights,
        "actions": route.actions,
        "task_definitions": {c: (services.get(n) or {}).get("taskDefinition") for c, n in app.service_names.items()},
    }


def changes_since(seen: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """What changed between two views (`Application.view()`, `current()`): the weights and each colour's task
    definition ([] when nothing did). Desired counts are left out: a scaling policy may change them."""
    problems = []
    if now["weights"] != seen["weights"]:
        problems.append(
            f"production weights are blue={now['weights']['blue']} green={now['weights']['green']}, this run last saw "
            f"blue={seen['weights'].get('blue')} green={seen['weights'].get('green')}"
        )
    for color in COLORS:
        if now["task_definitions"].get(color) != seen["task_definitions"].get(color):
            problems.append(
                f"the {color} service runs {now['task_definitions'].get(color)}, this run last saw {seen['task_definitions'].get(color)}"
            )
    return problems


# ---------------------------------------------------------------- finding the production resource (pure)


def target_groups_of(services: dict[str, dict[str, Any]], cluster: str, name: str) -> dict[str, list[str]]:
    """{blue, green}: each colour service's target group ARNs (HTTP, and gRPC when it has one); InputError naming what
    is missing."""
    errors, tgs = [], {}
    for color, service_name in service_names(name).items():
        service = services.get(service_name)
        if service is None or service.get("status") != "ACTIVE":
            errors.append(
                f"service {service_name} does not exist in cluster {cluster}: check cluster and name (the application's services)"
            )
            continue
        arns = [lb["targetGroupArn"] for lb in service.get("loadBalancers") or [] if lb.get("targetGroupArn")]
        if not arns:
            errors.append(f"service {service_name} is behind no target group: it is not a blue/green colour service")
            continue
        tgs[color] = arns
    if errors:
        raise InputError(errors)
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
    missing = [c for c in COLORS if c not in http]
    if missing:
        errors.append(f"the {', '.join(missing)} service is in no HTTP target group: it is not a blue/green colour service")
    if grpc and len(grpc) != len(COLORS):
        errors.append(f"only {', '.join(grpc)} is in a gRPC target group: attach both colours' services (role fleet_services)")
    if errors:
        raise InputError(errors)
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
    """The candidate carrying the cutover record; else the only candidate; else InputError listing them."""
    recorded = [c for c in candidates if RECORD_KEY in tags.get(c["arn"], {})]
    if len(recorded) == 1:
        return recorded[0]
    if not recorded and len(candidates) == 1:
        return candidates[0]
    pool = recorded or candidates
    if not pool:
        raise InputError(f"no listener or listener rule forwards to both target groups of {name}: give listener_arn or listener_rule_arn")
    listed = ", ".join(f"{c['arn']} (port {c['port']})" for c in pool)
    raise InputError(
        f"{len(pool)} listeners or rules could be the production one of {name} ({listed}): give listener_arn or listener_rule_arn"
    )


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


# ---------------------------------------------------------------- writing a route's weights


def write_weights(elbv2: Any, route: Route, weights: dict[str, int]) -> None:
    """Move the route's forward to `weights` in one ModifyListener / ModifyRule call; the route keeps what it wrote."""
    actions = listener_actions.actions_with_weights(route.actions, route.target_groups, weights)
    if route.is_rule:
        elb.modify_rule(elbv2, route.arn, {"Actions": actions})
    else:
        elb.modify_listener(elbv2, route.arn, {"DefaultActions": actions})
    route.actions, route.weights = actions, dict(weights)
