"""A blue/green application in a moto server: VPC, ALB, two target groups, a production and a test listener,
an ECS cluster with a managed-scaling capacity provider, GPU task definitions, and the two colour services.

Where moto does not behave like AWS, this module stands in for the part AWS would play:
- moto's ECS runs no containers and registers no targets: `register_targets()` puts one healthy IP target per task
  in a colour's target group, as ECS would once the tasks pass their health checks (moto reports every registered
  IP target `healthy`). A colour whose targets are never registered is a standby that never becomes healthy.
- moto freezes a service's deployment list at creation; services are created at 0 tasks (rollout COMPLETED) and
  scaled afterwards, which moto applies at once (runningCount = desiredCount).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from .ansible import REPO_ROOT
from .moto import MotoServer

APP = "triton"
CLUSTER = "inference"
ALARM = "triton-target-5xx"
GPU_INSTANCE_TYPE = "g5.xlarge"  # 1 GPU each
ASG_MAX_SIZE = 4
# One bluegreen task fed the module's arguments as `bg_args`: what the tests and bench/cutover.py run.
CUTOVER_PLAYBOOK = REPO_ROOT / "tests" / "integration" / "playbooks" / "bluegreen_cutover.yml"
EMERGENCY_PLAYBOOK = REPO_ROOT / "playbooks" / "rollback_traffic.yml"
LEDGER_BUCKET = "triton-models"  # where the emergency rollback's release ledger goes (fleet_iam's model bucket)


@dataclass
class BlueGreenApp:
    moto: MotoServer
    target_groups: dict[str, str] = field(default_factory=dict)
    listener_arn: str = ""
    test_listener_arn: str = ""
    task_definitions: list[str] = field(default_factory=list)  # ARNs, revision order
    grpc_target_groups: dict[str, str] = field(default_factory=dict)  # create_app(grpc=True): Triton's gRPC port
    grpc_listener_arn: str = ""
    grpc_test_listener_arn: str = ""

    def ecs(self) -> Any:
        return self.moto.client("ecs")

    def elbv2(self) -> Any:
        return self.moto.client("elbv2")

    def module_args(self, task_definition: str, **overrides: Any) -> dict[str, Any]:
        args: dict[str, Any] = {
            "cluster": CLUSTER,
            "name": APP,
            "task_definition": task_definition,
            "desired_count": 2,
            "target_groups": dict(self.target_groups),
            "listener_arn": self.listener_arn,
            "test_listener_arn": self.test_listener_arn,
            "traffic_steps": [10, 50, 100],
            "bake_time_s": 0,
            "watch_interval_s": 1,
            "alarm_names": [ALARM],
            "drain": {"quiet_period_s": 0, "timeout_s": 10},
            "gates": {"timeout_s": 0, "interval_s": 1},
            "timeouts": {"standby_up_s": 5, "poll_interval_s": 1},
        }
        args.update(overrides)
        return args

    def weights(self) -> dict[str, int]:
        action = self.elbv2().describe_listeners(ListenerArns=[self.listener_arn])["Listeners"][0]["DefaultActions"][0]
        by_arn = {arn: color for color, arn in self.target_groups.items()}
        return {by_arn[e["TargetGroupArn"]]: e["Weight"] for e in action["ForwardConfig"]["TargetGroups"]}

    def set_weights(self, weights: dict[str, int]) -> None:
        groups = [{"TargetGroupArn": self.target_groups[c], "Weight": w} for c, w in weights.items()]
        self.elbv2().modify_listener(
            ListenerArn=self.listener_arn, DefaultActions=[{"Type": "forward", "ForwardConfig": {"TargetGroups": groups}}]
        )

    def services(self) -> dict[str, dict[str, Any]]:
        found = self.ecs().describe_services(cluster=CLUSTER, services=[f"{APP}-blue", f"{APP}-green"])["services"]
        return {s["serviceName"].rsplit("-", 1)[-1]: s for s in found}

    def register_targets(self, color: str, count: int) -> None:
        """Stand-in for ECS registering `count` healthy tasks in the colour's target group."""
        octet = 1 if color == "blue" else 2
        targets = [{"Id": f"10.0.{octet}.{10 + i}", "Port": 8000} for i in range(count)]
        self.elbv2().register_targets(TargetGroupArn=self.target_groups[color], Targets=targets)

    def serve_only(self, color: str, http_port: int, grpc_port: int | None = None) -> None:
        """The colour's target groups hold the local server on these ports only, as ECS registers a colour's one task
        (its HTTP group; with `grpc_port` also its gRPC group, create_app(grpc=True))."""
        elbv2 = self.elbv2()
        groups = [(self.target_groups[color], http_port)] + ([(self.grpc_target_groups[color], grpc_port)] if grpc_port else [])
        for group, port in groups:
            stale = [t["Target"] for t in elbv2.describe_target_health(TargetGroupArn=group)["TargetHealthDescriptions"]]
            if stale:
                elbv2.deregister_targets(TargetGroupArn=group, Targets=stale)
            elbv2.register_targets(TargetGroupArn=group, Targets=[{"Id": "127.0.0.1", "Port": port}])

    def alarm_once_it_has_traffic(self, color: str, reason: str, timeout_s: float = 120) -> bool:
        """Sets ALARM to ALARM once `color` has production traffic, as CloudWatch would on its 5xx (a cutover does not
        start while an alarm is in ALARM, so it is raised during one); False when `color` got none within `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.weights()[color] > 0:
                self.moto.client("cloudwatch").set_alarm_state(AlarmName=ALARM, StateValue="ALARM", StateReason=reason)
                return True
            time.sleep(0.05)
        return False

    def snapshot(self) -> dict[str, Any]:
        """Everything a cutover can write: weights, each service's task definition and desired count, the test listener."""
        services = self.services()
        test = self.elbv2().describe_listeners(ListenerArns=[self.test_listener_arn])["Listeners"][0]["DefaultActions"]
        return {
            "weights": self.weights(),
            "services": {c: (s["taskDefinition"], s["desiredCount"]) for c, s in services.items()},
            "test_listener": test,
        }


def gpu_task_definition(ecs: Any, image: str) -> str:
    container = {
        "name": "triton",
        "image": image,
        "memory": 4096,
        "essential": True,
        "portMappings": [{"containerPort": 8000, "protocol": "tcp"}],
        "resourceRequirements": [{"type": "GPU", "value": "1"}],
    }
    return ecs.register_task_definition(family=APP, containerDefinitions=[container], requiresCompatibilities=["EC2"])["taskDefinition"][
        "taskDefinitionArn"
    ]


def _grpc_route(app: BlueGreenApp, elbv2: Any, lb: str, vpc: str) -> None:
    """gRPC target groups (protocol version GRPC, health check on Triton's gRPC readiness), an HTTPS production
    listener at 100/0 and an HTTPS test listener, as role fleet_load_balancing makes them with grpc on."""
    certificate = app.moto.client("acm").request_certificate(DomainName="triton.example.com")["CertificateArn"]
    for color in ("blue", "green"):
        app.grpc_target_groups[color] = elbv2.create_target_group(
            Name=f"{APP}-{color}-grpc",
            Protocol="HTTP",
            ProtocolVersion="GRPC",
            Port=8001,
            VpcId=vpc,
            TargetType="ip",
            HealthCheckPath="/inference.GRPCInferenceService/ServerReady",
            Matcher={"GrpcCode": "0"},
        )["TargetGroups"][0]["TargetGroupArn"]
    groups = [{"TargetGroupArn": app.grpc_target_groups[c], "Weight": w} for c, w in (("blue", 100), ("green", 0))]
    https = {"Protocol": "HTTPS", "Certificates": [{"CertificateArn": certificate}]}
    app.grpc_listener_arn = elbv2.create_listener(
        LoadBalancerArn=lb, Port=443, DefaultActions=[{"Type": "forward", "ForwardConfig": {"TargetGroups": groups}}], **https
    )["Listeners"][0]["ListenerArn"]
    app.grpc_test_listener_arn = elbv2.create_listener(
        LoadBalancerArn=lb, Port=8443, DefaultActions=[{"Type": "forward", "TargetGroupArn": app.grpc_target_groups["blue"]}], **https
    )["Listeners"][0]["ListenerArn"]


def create_app(moto: MotoServer, live_tasks: int = 2, managed_scaling: bool = True, grpc: bool = False) -> BlueGreenApp:
    """Blue live at 100% with 2 tasks of revision 1, green at 0 tasks; revisions 1-3 registered. With `grpc`, each
    colour also has a gRPC target group behind HTTPS listeners (production 443, test 8443)."""
    app = BlueGreenApp(moto)
    ec2, elbv2, ecs, cloudwatch = moto.client("ec2"), moto.client("elbv2"), moto.client("ecs"), moto.client("cloudwatch")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i}.0/24", AvailabilityZone=f"us-east-1{zone}")["Subnet"]["SubnetId"]
        for i, zone in ((1, "a"), (2, "b"))
    ]
    lb = elbv2.create_load_balancer(Name=f"{APP}-alb", Subnets=subnets)["LoadBalancers"][0]["LoadBalancerArn"]
    for color in ("blue", "green"):
        app.target_groups[color] = elbv2.create_target_group(
            Name=f"{APP}-{color}", Protocol="HTTP", Port=8000, VpcId=vpc, TargetType="ip", HealthCheckPath="/v2/health/ready"
        )["TargetGroups"][0]["TargetGroupArn"]
    forward = {
        "Type": "forward",
        "ForwardConfig": {
            "TargetGroups": [
                {"TargetGroupArn": app.target_groups["blue"], "Weight": 100},
                {"TargetGroupArn": app.target_groups["green"], "Weight": 0},
            ]
        },
    }
    app.listener_arn = elbv2.create_listener(LoadBalancerArn=lb, Protocol="HTTP", Port=80, DefaultActions=[forward])["Listeners"][0][
        "ListenerArn"
    ]
    app.test_listener_arn = elbv2.create_listener(
        LoadBalancerArn=lb, Protocol="HTTP", Port=8080, DefaultActions=[{"Type": "forward", "TargetGroupArn": app.target_groups["blue"]}]
    )["Listeners"][0]["ListenerArn"]

    if grpc:
        _grpc_route(app, elbv2, lb, vpc)
    providers = []
    if managed_scaling:
        # a GPU Auto Scaling group with room for 4 more 1-GPU instances: the capacity phase reads its headroom
        ec2.create_launch_template(
            LaunchTemplateName="gpu", LaunchTemplateData={"InstanceType": GPU_INSTANCE_TYPE, "ImageId": "ami-12c6146b"}
        )
        autoscaling = moto.client("autoscaling")
        autoscaling.create_auto_scaling_group(
            AutoScalingGroupName="gpu",
            LaunchTemplate={"LaunchTemplateName": "gpu", "Version": "$Default"},
            MinSize=0,
            MaxSize=ASG_MAX_SIZE,
            DesiredCapacity=0,
            VPCZoneIdentifier=",".join(subnets),
        )
        group = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["gpu"])["AutoScalingGroups"][0]
        ecs.create_capacity_provider(
            name="gpu-fleet",
            autoScalingGroupProvider={
                "autoScalingGroupArn": group["AutoScalingGroupARN"],
                "managedScaling": {"status": "ENABLED", "targetCapacity": 100},
            },
        )
        providers = ["gpu-fleet"]
    ecs.create_cluster(clusterName=CLUSTER, capacityProviders=providers)
    app.task_definitions = [gpu_task_definition(ecs, f"registry.local/triton:{tag}") for tag in ("r1", "r2", "r3")]
    for color in ("blue", "green"):
        ecs.create_service(
            cluster=CLUSTER,
            serviceName=f"{APP}-{color}",
            taskDefinition=app.task_definitions[0],
            desiredCount=0,
            launchType="EC2",
            loadBalancers=[{"targetGroupArn": app.target_groups[color], "containerName": "triton", "containerPort": 8000}]
            + ([{"targetGroupArn": app.grpc_target_groups[color], "containerName": "triton", "containerPort": 8001}] if grpc else []),
        )
    ecs.update_service(cluster=CLUSTER, service=f"{APP}-blue", desiredCount=live_tasks)
    app.register_targets("blue", live_tasks)
    put_target_5xx_alarm(cloudwatch)
    return app


def rollback_traffic_vars(app: BlueGreenApp) -> dict[str, Any]:
    """What playbooks/rollback_traffic.yml is given for the application, as an operator gives it (docs/runbook.md):
    its cluster and name, and fleet_iam's model bucket and prefix, where the release ledger goes (the bucket is
    created when missing)."""
    s3 = app.moto.client("s3")
    if LEDGER_BUCKET not in [b["Name"] for b in s3.list_buckets()["Buckets"]]:
        s3.create_bucket(Bucket=LEDGER_BUCKET)
    return {
        "aws_region": "us-east-1",
        "aws_endpoint_url": app.moto.endpoint,
        "rollback_cutover_cluster": CLUSTER,
        "rollback_cutover_name": APP,
        "fleet_iam_model_bucket": LEDGER_BUCKET,
        "fleet_iam_model_prefix": "models/",
    }


def put_target_5xx_alarm(cloudwatch: Any) -> None:
    """The alarm gate's alarm, ALARM: the targets' 5xx count of the ALB. moto evaluates no alarm; a test sets its
    state (`BlueGreenApp.alarm_once_it_has_traffic`), as CloudWatch would on 5xx."""
    cloudwatch.put_metric_alarm(
        AlarmName=ALARM,
        Namespace="AWS/ApplicationELB",
        MetricName="HTTPCode_Target_5XX_Count",
        Statistic="Sum",
        Period=60,
        EvaluationPeriods=1,
        Threshold=1,
        ComparisonOperator="GreaterThanOrEqualToThreshold",
    )


def main(argv: list[str] | None = None) -> int:
    """`app` creates the application in the moto server recorded in the state file (`python -m tests.harness.moto up`)
    and adds its ARNs to that file, for the molecule scenario's converge and verify."""
    import argparse
    import json
    from pathlib import Path

    parser = argparse.ArgumentParser(prog="python -m tests.harness.bluegreen")
    parser.add_argument("command", choices=["app"])
    parser.add_argument("--state-file", required=True, type=Path)
    args = parser.parse_args(argv)
    state = json.loads(args.state_file.read_text())
    if not state.get("target_groups"):
        app = create_app(MotoServer.attached(state["endpoint"]))
        app.register_targets("green", 2)  # stands in for ECS registering the green tasks once they run
        state.update(
            target_groups=app.target_groups,
            listener_arn=app.listener_arn,
            test_listener_arn=app.test_listener_arn,
            task_definitions=app.task_definitions,
        )
        args.state_file.write_text(json.dumps(state, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
