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

import uuid
from dataclasses import dataclass, field
from typing import Any

from .moto import ACCOUNT_ID, MotoServer

APP = "triton"
CLUSTER = "inference"
ALARM = "triton-target-5xx"
# One bluegreen task fed the module's arguments as `bg_args`: what the tests and bench/cutover.py run.
CUTOVER_PLAYBOOK = """---
- name: Blue/green cutover
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Cutover
      inferops.triton_ecs.bluegreen: "{{ bg_args }}"
"""


@dataclass
class BlueGreenApp:
    moto: MotoServer
    target_groups: dict[str, str] = field(default_factory=dict)
    listener_arn: str = ""
    test_listener_arn: str = ""
    task_definitions: list[str] = field(default_factory=list)  # ARNs, revision order

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

    def deregister_all(self, color: str) -> None:
        elbv2 = self.elbv2()
        health = elbv2.describe_target_health(TargetGroupArn=self.target_groups[color])["TargetHealthDescriptions"]
        if health:
            elbv2.deregister_targets(TargetGroupArn=self.target_groups[color], Targets=[h["Target"] for h in health])

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


def create_app(moto: MotoServer, live_tasks: int = 2, managed_scaling: bool = True) -> BlueGreenApp:
    """Blue live at 100% with 2 tasks of revision 1, green at 0 tasks; revisions 1-3 registered."""
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

    providers = []
    if managed_scaling:
        ecs.create_capacity_provider(
            name="gpu-fleet",
            autoScalingGroupProvider={
                "autoScalingGroupArn": f"arn:aws:autoscaling:us-east-1:{ACCOUNT_ID}:autoScalingGroup:{uuid.UUID(int=0)}:autoScalingGroupName/gpu",
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
            loadBalancers=[{"targetGroupArn": app.target_groups[color], "containerName": "triton", "containerPort": 8000}],
        )
    ecs.update_service(cluster=CLUSTER, service=f"{APP}-blue", desiredCount=live_tasks)
    app.register_targets("blue", live_tasks)
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
    return app


class _Endpoint:
    """A MotoServer stand-in for a server started by another process (the molecule scenario's create step)."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint

    def client(self, service: str) -> Any:
        return MotoServer.client(self, service)  # type: ignore[arg-type]


def main(argv: list[str] | None = None) -> int:
    """`up` starts a detached moto server, `app` creates the application in it, `down` stops the server.

    State (endpoint, pid, ARNs) lives in one JSON file, so molecule's create/prepare/converge/verify/destroy share it.
    """
    import argparse
    import json
    import os
    import signal
    import subprocess
    import sys
    import time
    import urllib.request
    from pathlib import Path

    from .ports import free_port, wait_until

    parser = argparse.ArgumentParser(prog="python -m tests.harness.bluegreen")
    parser.add_argument("command", choices=["up", "app", "down"])
    parser.add_argument("--state-file", required=True, type=Path)
    args = parser.parse_args(argv)
    state = json.loads(args.state_file.read_text()) if args.state_file.exists() else {}
    if args.command == "up":
        if state.get("pid"):
            return 0
        port = free_port()
        log = (args.state_file.parent / "moto.log").open("w")
        moto = Path(sys.executable).with_name("moto_server")
        proc = subprocess.Popen(
            [str(moto), "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        endpoint = f"http://127.0.0.1:{port}"
        wait_until(lambda: urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1).status == 200, 30, "moto server")
        state = {"pid": proc.pid, "port": port, "endpoint": endpoint}
    elif args.command == "app":
        if state.get("target_groups"):
            return 0
        app = create_app(_Endpoint(state["endpoint"]))  # type: ignore[arg-type]
        app.register_targets("green", 2)  # stands in for ECS registering the green tasks once they run
        state.update(
            target_groups=app.target_groups,
            listener_arn=app.listener_arn,
            test_listener_arn=app.test_listener_arn,
            task_definitions=app.task_definitions,
        )
    else:
        if state.get("pid"):
            try:
                os.kill(state["pid"], signal.SIGTERM)
                time.sleep(0.5)
            except ProcessLookupError:
                pass
        args.state_file.unlink(missing_ok=True)
        return 0
    args.state_file.write_text(json.dumps(state, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
