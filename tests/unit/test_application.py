"""The one observation of a blue/green application (`_bluegreen/application.py`) and the colours' words (`colors.py`).

Stand-in: the in-memory ECS and ELBv2 of tests/unit/test_bluegreen_runner.py (`FakeAws`), with a listener rule and a
gRPC route added here; the same payload shapes the thin client files read. The discovery from the services alone
runs against moto in tests/integration/test_bluegreen.py (the emergency rollback) and test_ami_rollout.py.
"""

from __future__ import annotations

import copy

import pytest
from botocore.exceptions import ClientError

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import InputError
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import application, listener_actions
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.colors import is_split, live_color, other, service_names
from tests.unit.test_bluegreen_runner import TD1, TGS, FakeAws, params

GRPC_TGS = {"blue": "arn:tg/grpc-blue", "green": "arn:tg/grpc-green"}
RULE = "arn:rule/prod"


class RuledAws(FakeAws):
    """FakeAws with the production forward on a listener rule, a gRPC route on its own listener, and per-group health."""

    def __init__(self) -> None:
        super().__init__()
        self.grpc_weights = {"blue": 100, "green": 0}
        self.unhealthy: set[str] = set()  # target groups whose targets are unhealthy
        self.tags = {RULE: {"inferops:cutover": "from=blue to=green task_definition=triton:2 count=4"}}

    def describe_rules(self, aws_retry: bool, RuleArns: list) -> dict:
        if RuleArns != [RULE]:
            raise ClientError({"Error": {"Code": "RuleNotFound", "Message": "no such rule"}}, "DescribeRules")
        groups = [{"TargetGroupArn": TGS[c], "Weight": w} for c, w in self.weights.items()]
        return {"Rules": [{"RuleArn": RULE, "Actions": [{"Type": "forward", "ForwardConfig": {"TargetGroups": groups}}]}]}

    def modify_rule(self, aws_retry: bool, RuleArn: str, Actions: list) -> dict:
        self.calls.append(("modify_rule", RuleArn))
        self.weights = listener_actions.read_percent_weights(Actions, TGS)
        return {"Rules": [{}]}

    def describe_listeners(self, aws_retry: bool, ListenerArns: list) -> dict:
        if ListenerArns == ["arn:listener/grpc"]:
            groups = [{"TargetGroupArn": GRPC_TGS[c], "Weight": w} for c, w in self.grpc_weights.items()]
            return {
                "Listeners": [
                    {"ListenerArn": "arn:listener/grpc", "DefaultActions": [{"Type": "forward", "ForwardConfig": {"TargetGroups": groups}}]}
                ]
            }
        if ListenerArns != ["arn:listener/prod"]:
            raise ClientError({"Error": {"Code": "ListenerNotFound", "Message": "no such listener"}}, "DescribeListeners")
        return super().describe_listeners(aws_retry, ListenerArns)

    def describe_target_health(self, aws_retry: bool, TargetGroupArn: str) -> dict:
        color = "blue" if TargetGroupArn in (TGS["blue"], GRPC_TGS["blue"]) else "green"
        n = self.services[f"triton-{color}"]["runningCount"]
        state = "unhealthy" if TargetGroupArn in self.unhealthy else "healthy"
        return {"TargetHealthDescriptions": [{"Target": {"Id": f"10.0.0.{i}"}, "TargetHealth": {"State": state}} for i in range(n)]}

    def describe_tags(self, aws_retry: bool, ResourceArns: list) -> dict:
        return {
            "TagDescriptions": [
                {"ResourceArn": a, "Tags": [{"Key": k, "Value": v} for k, v in self.tags.get(a, {}).items()]} for a in ResourceArns
            ]
        }


def grpc_options(grpc_listener: str = "arn:listener/grpc"):
    return params(listener_arn=None, listener_rule_arn=RULE, grpc={"target_groups": dict(GRPC_TGS), "listener_arn": grpc_listener})


# ---------------------------------------------------------------- the words


@pytest.mark.parametrize(
    ("weights", "live", "split"),
    [({"blue": 100, "green": 0}, "blue", False), ({"blue": 10, "green": 90}, "green", True), ({"blue": 50, "green": 50}, "blue", True)],
)
def test_the_live_colour_is_the_larger_weight_blue_on_a_tie(weights, live, split):
    assert live_color(weights) == live and other(live) != live and is_split(weights) is split


def test_each_colour_has_its_service():
    assert service_names("triton") == {"blue": "triton-blue", "green": "triton-green"}


# ---------------------------------------------------------------- from the options, observed


def test_observe_reads_every_route_each_colour_and_the_record():
    aws = RuledAws()
    app = application.observe(aws, aws, application.from_options(grpc_options()), record=True)
    assert (app.http.arn, app.http.is_rule, app.grpc.arn, app.grpc.is_rule) == (RULE, True, "arn:listener/grpc", False)
    assert app.weights == {"blue": 100, "green": 0} and app.grpc.weights == {"blue": 100, "green": 0} and app.live == "blue"
    assert app.colors["blue"].desired == 2 and app.colors["blue"].healthy == 2 and app.colors["blue"].task_definition == TD1
    assert app.groups("green") == [TGS["green"], GRPC_TGS["green"]]
    assert app.record == {"from": "blue", "to": "green", "task_definition": "triton:2", "count": "4"}


def test_a_task_serves_only_when_healthy_in_every_target_group_of_its_colour():
    aws = RuledAws()
    aws.unhealthy = {GRPC_TGS["blue"]}
    app = application.observe(aws, aws, application.from_options(grpc_options()))
    assert app.colors["blue"].healthy == 0 and app.colors["blue"].not_serving == 2


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (params(listener_arn="arn:listener/gone"), "listener_arn arn:listener/gone does not exist"),
        (params(listener_arn=None, listener_rule_arn="arn:rule/gone"), "listener_rule_arn arn:rule/gone does not exist"),
        (grpc_options("arn:listener/gone"), "grpc.listener_arn arn:listener/gone"),
    ],
)
def test_a_route_that_is_gone_is_named_by_its_option(options, named):
    aws = RuledAws()
    with pytest.raises(InputError, match=named):
        application.observe(aws, aws, application.from_options(options))


def test_write_weights_moves_a_rule_with_modify_rule_and_keeps_what_it_wrote():
    aws = RuledAws()
    app = application.observe(aws, aws, application.from_options(grpc_options()))
    application.write_weights(aws, app.http, {"blue": 90, "green": 10})
    assert aws.calls == [("modify_rule", RULE)] and aws.weights == {"blue": 90, "green": 10}
    assert app.weights == {"blue": 90, "green": 10}
    assert listener_actions.read_percent_weights(app.http.actions, TGS) == {"blue": 90, "green": 10}


# ---------------------------------------------------------------- what changed since a view


def test_changes_since_names_the_weights_and_task_definitions_but_not_the_counts():
    aws = RuledAws()
    app = application.observe(aws, aws, application.from_options(params()))
    seen = app.view()
    assert application.changes_since(seen, application.current(aws, aws, app)) == []
    aws.services["triton-blue"]["desiredCount"] = 5  # a scaling policy's change is not another run's
    assert application.changes_since(seen, application.current(aws, aws, app)) == []
    aws.weights = {"blue": 50, "green": 50}
    aws.services["triton-green"]["taskDefinition"] = "triton:9"
    changes = application.changes_since(seen, application.current(aws, aws, app))
    assert changes == [
        "production weights are blue=50 green=50, this run last saw blue=100 green=0",
        f"the green service runs triton:9, this run last saw {TD1}",
    ]
    assert app.weights == {"blue": 100, "green": 0}  # current() leaves the application as it was read


# ---------------------------------------------------------------- finding the production resource (pure)


def service(color, *arns, status="ACTIVE"):
    return {"serviceName": f"triton-{color}", "status": status, "loadBalancers": [{"targetGroupArn": a} for a in arns]}


def test_target_groups_come_from_the_services_and_split_by_protocol():
    services = {
        s["serviceName"]: s for s in (service("blue", TGS["blue"], GRPC_TGS["blue"]), service("green", TGS["green"], GRPC_TGS["green"]))
    }
    arns = application.target_groups_of(services, "inference", "triton")
    described = {a: {"ProtocolVersion": "GRPC"} for a in GRPC_TGS.values()} | {a: {"ProtocolVersion": "HTTP1"} for a in TGS.values()}
    assert application.split_by_protocol(arns, described) == (TGS, GRPC_TGS)


def test_a_missing_or_detached_service_is_named():
    services = {"triton-blue": service("blue")}
    with pytest.raises(InputError) as err:
        application.target_groups_of(services, "inference", "triton")
    assert err.value.errors == [
        "service triton-blue is behind no target group: it is not a blue/green colour service",
        "service triton-green does not exist in cluster inference: check cluster and name (the application's services)",
    ]


def test_the_production_resource_is_the_one_with_the_record_else_the_only_forward_to_both():
    forward = [{"Type": "forward", "ForwardConfig": {"TargetGroups": [{"TargetGroupArn": a, "Weight": 1} for a in TGS.values()]}}]
    test_listener = {"arn": "arn:listener/test", "actions": copy.deepcopy(forward), "port": 8443, "is_rule": False}
    production = {"arn": "arn:listener/prod", "actions": forward, "port": 443, "is_rule": False}
    candidates = application.production_candidates([production, test_listener], TGS)
    assert application.pick_production(candidates, {"arn:listener/prod": {"inferops:cutover": "x"}}, "triton") == production
    with pytest.raises(InputError, match="2 listeners or rules could be the production one"):
        application.pick_production(candidates, {}, "triton")
    with pytest.raises(InputError, match="no listener or listener rule forwards"):
        application.pick_production([], {}, "triton")
