"""The gRPC route's infrastructure and its emergency rollback, against a moto server (ELBv2 with target groups of
protocol version GRPC behind HTTPS listeners, ACM for the certificate, ECS): roles fleet_load_balancing and
fleet_services with fleet_load_balancing_grpc on - check mode, run, check mode again, run again - and
playbooks/rollback_traffic.yml putting the gRPC route back with the HTTP one. moto runs no task: targets are
registered as ECS would register each task, in both of its colour's target groups."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.harness.ansible import run_playbook
from tests.harness.bluegreen import CUTOVER_PLAYBOOK, EMERGENCY_PLAYBOOK, BlueGreenApp, create_app, rollback_traffic_vars
from tests.harness.moto import MotoServer

ROLES = Path(__file__).parent / "playbooks" / "grpc_route_roles.yml"
GRPC_ROUTE_TASK = "inferops.triton_ecs.fleet_load_balancing : The gRPC production route and test listener, created with the production route's live colour"
GRPC_PATHS = ["/inference.GRPCInferenceService/*"]


def network(moto: MotoServer) -> dict[str, Any]:
    ec2 = moto.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i}.0/24", AvailabilityZone=f"us-east-1{zone}")["Subnet"]["SubnetId"]
        for i, zone in ((1, "a"), (2, "b"))
    ]
    group = ec2.create_security_group(GroupName="triton", Description="tasks", VpcId=vpc)["GroupId"]
    certificate = moto.client("acm").request_certificate(DomainName="triton.example.com")["CertificateArn"]
    ecs = moto.client("ecs")
    ecs.create_cluster(clusterName="inference")
    container = {
        "name": "triton",
        "image": "registry.local/triton:r1",
        "memory": 4096,
        "essential": True,
        "portMappings": [{"containerPort": port, "protocol": "tcp"} for port in (8000, 8001, 8002)],
    }
    task_definition = ecs.register_task_definition(family="triton", networkMode="awsvpc", containerDefinitions=[container])[
        "taskDefinition"
    ]
    return {
        "grpc_vpc": vpc,
        "grpc_subnets": subnets,
        "grpc_security_group": group,
        "grpc_certificate": certificate,
        "grpc_task_definition": task_definition["taskDefinitionArn"],
    }


def forward_weights(actions: list[dict[str, Any]], tgs: dict[str, str]) -> dict[str, int]:
    by_arn = {arn: color for color, arn in tgs.items()}
    forward = next(a for a in actions if a["Type"] == "forward")
    groups = forward.get("ForwardConfig", {}).get("TargetGroups") or [{"TargetGroupArn": forward["TargetGroupArn"], "Weight": 1}]
    return {by_arn[g["TargetGroupArn"]]: g["Weight"] for g in groups}


def test_the_roles_make_the_grpc_route_and_a_rerun_changes_nothing(moto_server: MotoServer) -> None:
    variables = {"aws_endpoint_url": moto_server.endpoint, **network(moto_server)}
    planned = run_playbook(ROLES, variables, check=True, env=moto_server.env())
    assert planned.rc == 0, planned.stdout[-3000:]
    # The route's module reports what a real run does, naming the inputs a real run creates first (the target groups).
    route = planned.result(GRPC_ROUTE_TASK)
    assert route["changed"] and {"target_groups.blue", "target_groups.green"} <= set(route["known_after_apply"]), route
    assert moto_server.client("elbv2").describe_target_groups()["TargetGroups"] == []

    run = run_playbook(ROLES, variables, env=moto_server.env())
    assert run.rc == 0, run.stdout[-3000:]
    published = run.result("What the cutover needs")["msg"]
    elbv2 = moto_server.client("elbv2")
    grpc = published["grpc_target_groups"]
    for color in ("blue", "green"):
        group = elbv2.describe_target_groups(TargetGroupArns=[grpc[color]])["TargetGroups"][0]
        assert (group["ProtocolVersion"], group["Port"], group["Matcher"]) == ("GRPC", 8001, {"GrpcCode": "0"})
        assert group["HealthCheckPath"] == "/inference.GRPCInferenceService/ServerReady"
    # the gRPC production route: a rule of the HTTPS production listener for Triton's gRPC service, live colour 100
    assert published["grpc_listener_arn"] == "" and published["grpc_rule_arn"].startswith("arn:")
    rule = elbv2.describe_rules(RuleArns=[published["grpc_rule_arn"]])["Rules"][0]
    assert rule["Priority"] == "10" and rule["Conditions"][0]["Values"] == GRPC_PATHS
    assert forward_weights(rule["Actions"], grpc) == {"blue": 100, "green": 0}
    production = elbv2.describe_listeners(ListenerArns=[published["production_listener_arn"]])["Listeners"][0]
    assert forward_weights(production["DefaultActions"], published["target_groups"]) == {"blue": 100, "green": 0}
    test = elbv2.describe_listeners(ListenerArns=[published["grpc_test_listener_arn"]])["Listeners"][0]
    assert (test["Port"], test["Protocol"]) == (8444, "HTTPS") and forward_weights(test["DefaultActions"], grpc)["green"] == 100
    # each colour's service is in its HTTP and its gRPC target group, on Triton's two ports
    services = moto_server.client("ecs").describe_services(cluster="inference", services=["triton-blue", "triton-green"])["services"]
    for service in services:
        color = service["serviceName"].rsplit("-", 1)[-1]
        assert sorted((lb["targetGroupArn"], lb["containerPort"]) for lb in service["loadBalancers"]) == sorted(
            [(published["target_groups"][color], 8000), (grpc[color], 8001)]
        )

    for check in (True, False):
        again = run_playbook(ROLES, variables, check=check, env=moto_server.env())
        assert again.rc == 0 and again.changed_tasks == [], again.changed_tasks


def register_both(app: BlueGreenApp, color: str, count: int) -> None:
    """Stand-in for ECS registering `count` healthy tasks of a colour in its HTTP and its gRPC target group."""
    app.register_targets(color, count)
    octet = 1 if color == "blue" else 2
    targets = [{"Id": f"10.0.{octet}.{10 + i}", "Port": 8001} for i in range(count)]
    app.elbv2().register_targets(TargetGroupArn=app.grpc_target_groups[color], Targets=targets)


def grpc_weights(app: BlueGreenApp) -> dict[str, int]:
    actions = app.elbv2().describe_listeners(ListenerArns=[app.grpc_listener_arn])["Listeners"][0]["DefaultActions"]
    return forward_weights(actions, app.grpc_target_groups)


def test_the_emergency_rollback_moves_the_grpc_route_back_with_the_http_one(moto_server: MotoServer) -> None:
    app = create_app(moto_server, grpc=True)
    register_both(app, "blue", 2)
    register_both(app, "green", 2)
    grpc = {"target_groups": app.grpc_target_groups, "listener_arn": app.grpc_listener_arn, "test_listener_arn": app.grpc_test_listener_arn}
    cutover = run_playbook(CUTOVER_PLAYBOOK, {"bg_args": app.module_args("triton:2", old_color="keep", grpc=grpc)}, env=moto_server.env())
    assert cutover.rc == 0, cutover.stdout[-3000:]
    assert app.weights() == grpc_weights(app) == {"blue": 0, "green": 100}

    extra = rollback_traffic_vars(app)
    planned = run_playbook(EMERGENCY_PLAYBOOK, extra, check=True, env=moto_server.env())
    result = planned.result("Put production traffic back on the previous colour")
    assert result["actions"][:2] == ["set production weights blue=100 green=0", "set gRPC weights blue=100 green=0"]
    assert grpc_weights(app) == {"blue": 0, "green": 100}

    run = run_playbook(EMERGENCY_PLAYBOOK, extra, env=moto_server.env())
    result = run.result("Put production traffic back on the previous colour")
    assert run.rc == 0, result.get("msg")
    assert result["actions"] == [
        "set production weights blue=100 green=0",
        "set gRPC weights blue=100 green=0",
        "update service triton-green: 0 tasks",
    ]
    assert result["grpc"]["production_arn"] == app.grpc_listener_arn and result["grpc"]["weights"] == {"blue": 100, "green": 0}
    assert app.weights() == grpc_weights(app) == {"blue": 100, "green": 0}

    again = run_playbook(EMERGENCY_PLAYBOOK, extra, env=moto_server.env()).result("Put production traffic back on the previous colour")
    assert again["decision"] == "noop" and not again["changed"]
