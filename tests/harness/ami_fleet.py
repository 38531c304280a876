"""An ECS GPU fleet in a moto server, behind the instance refresh stand-in (`instance_refresh.py`), for AMI rollouts.

The application is a blue/green pair as `bluegreen.py` builds it (ALB, a target group per colour, a production
listener with blue live and a test listener), here with awsvpc services. The fleet is a launch template (version 1:
AMI_OLD, g5.xlarge, whose GpuInfo moto gives as 1 GPU) and an Auto Scaling group on version 1 with two instances,
each booted through the stand-in (registered as a container instance with 1 GPU), a capacity provider with managed
draining, and the cut-over gate alarm.

moto ignores placement constraints: it places a RunTask on the first container instance with room. Each old
instance therefore runs a 4096 MiB bridge task standing for the live colour's GPU task (moto registers 7482 MiB per
instance), so the canary, empty, is the one place moto can put the canary's task; the rollout still checks that
the task landed on the canary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .bluegreen import ALARM, put_target_5xx_alarm
from .instance_refresh import Boot, RefreshProxy
from .moto import MotoServer

APP = "triton"
CLUSTER = "inference"
GROUP = "triton-gpu"
AMI_OLD = "ami-0a1b2c3d4e5f60718"
AMI_NEW = "ami-0f1e2d3c4b5a69788"


@dataclass
class AmiFleet:
    moto: MotoServer
    proxy: RefreshProxy
    target_groups: dict[str, str] = field(default_factory=dict)
    listener_arn: str = ""
    test_listener_arn: str = ""
    template_id: str = ""

    def module_params(self, test_route_url: str | None, **overrides: Any) -> dict[str, Any]:
        """The ami_rollout module's parameters with its defaults filled in (as Ansible's argument spec would)."""
        params: dict[str, Any] = {
            "cluster": CLUSTER,
            "name": APP,
            "ami_id": AMI_NEW,
            "auto_scaling_group": GROUP,
            "listener_arn": None,
            "listener_rule_arn": None,
            "test_listener_arn": self.test_listener_arn,
            "test_route_url": test_route_url,
            "alarm_names": [ALARM],
            "canary": {"join_timeout_s": 10, "task_timeout_s": 10, "bake_s": 1, "poll_interval_s": 0.2},
            "gates": {
                "expected_models": ["simple"],
                "expected_versions": {},
                "smoke": None,
                "timeout_s": 5,
                "interval_s": 0.5,
                "request_timeout_s": 5,
            },
            "refresh": {
                "checkpoints": [50, 100],
                "checkpoint_delay_s": 1,
                "min_healthy_percentage": 90,
                "max_healthy_percentage": 100,
                "instance_warmup_s": 0,
                "poll_interval_s": 0.2,
                "timeout_s": 60,
                "revert_timeout_s": 60,
            },
            "break_lock": False,
            "lock_ttl_s": 900,
        }
        for key, value in overrides.items():
            params[key] = {**params[key], **value} if isinstance(params.get(key), dict) and isinstance(value, dict) else value
        return params

    def group(self) -> dict[str, Any]:
        """The group as the controller sees it (through the stand-in: each instance's own version)."""
        return self.proxy.client("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=[GROUP])["AutoScalingGroups"][0]

    def versions(self) -> dict[str, tuple[str, bool]]:
        """Version number -> (image, is default)."""
        found = self.proxy.client("ec2").describe_launch_template_versions(LaunchTemplateId=self.template_id)["LaunchTemplateVersions"]
        return {str(v["VersionNumber"]): (v["LaunchTemplateData"]["ImageId"], v["DefaultVersion"]) for v in found}

    def running_instances(self) -> dict[str, str]:
        """Instance id -> image, for every instance not terminated (the group's and any canary)."""
        found = self.moto.client("ec2").describe_instances(Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}])
        return {i["InstanceId"]: i["ImageId"] for r in found["Reservations"] for i in r["Instances"]}


def create_fleet(moto: MotoServer, proxy: RefreshProxy, triton_port: int) -> AmiFleet:
    proxy.boots[AMI_OLD] = Boot()
    proxy.boots.setdefault(AMI_NEW, Boot())
    fleet = AmiFleet(moto, proxy)
    ec2, elbv2, ecs, autoscaling = moto.client("ec2"), moto.client("elbv2"), proxy.client("ecs"), moto.client("autoscaling")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i}.0/24", AvailabilityZone=f"us-east-1{zone}")["Subnet"]["SubnetId"]
        for i, zone in ((1, "a"), (2, "b"))
    ]
    group_sg = ec2.create_security_group(GroupName="tasks", Description="triton tasks", VpcId=vpc)["GroupId"]
    lb = elbv2.create_load_balancer(Name=f"{APP}-alb", Subnets=subnets)["LoadBalancers"][0]["LoadBalancerArn"]
    for color in ("blue", "green"):
        fleet.target_groups[color] = elbv2.create_target_group(
            Name=f"{APP}-{color}", Protocol="HTTP", Port=8000, VpcId=vpc, TargetType="ip", HealthCheckPath="/v2/health/ready"
        )["TargetGroups"][0]["TargetGroupArn"]
    weights = [
        {"TargetGroupArn": fleet.target_groups["blue"], "Weight": 100},
        {"TargetGroupArn": fleet.target_groups["green"], "Weight": 0},
    ]
    fleet.listener_arn = elbv2.create_listener(
        LoadBalancerArn=lb, Protocol="HTTP", Port=80, DefaultActions=[{"Type": "forward", "ForwardConfig": {"TargetGroups": weights}}]
    )["Listeners"][0]["ListenerArn"]
    fleet.test_listener_arn = elbv2.create_listener(
        LoadBalancerArn=lb, Protocol="HTTP", Port=8080, DefaultActions=[{"Type": "forward", "TargetGroupArn": fleet.target_groups["blue"]}]
    )["Listeners"][0]["ListenerArn"]

    fleet.template_id = ec2.create_launch_template(
        LaunchTemplateName=GROUP, LaunchTemplateData={"ImageId": AMI_OLD, "InstanceType": "g5.xlarge"}
    )["LaunchTemplate"]["LaunchTemplateId"]
    ecs.create_cluster(clusterName=CLUSTER)
    autoscaling.create_auto_scaling_group(
        AutoScalingGroupName=GROUP,
        LaunchTemplate={"LaunchTemplateId": fleet.template_id, "Version": "1"},
        MinSize=0,
        MaxSize=4,
        DesiredCapacity=2,
        VPCZoneIdentifier=",".join(subnets),
    )
    group = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[GROUP])["AutoScalingGroups"][0]
    filler = ecs.register_task_definition(
        family="live-gpu-task",
        containerDefinitions=[{"name": "live", "image": "registry.local/triton:live", "memory": 4096, "essential": True}],
    )["taskDefinition"]["taskDefinitionArn"]
    for instance in group["Instances"]:
        proxy.boot(instance["InstanceId"], "1")
        ecs.start_task(cluster=CLUSTER, taskDefinition=filler, containerInstances=[proxy.container_instance(instance["InstanceId"])])
    ecs.create_capacity_provider(
        name=GROUP,
        autoScalingGroupProvider={
            "autoScalingGroupArn": group["AutoScalingGroupARN"],
            "managedScaling": {"status": "ENABLED", "targetCapacity": 100},
            "managedTerminationProtection": "DISABLED",
            "managedDraining": "ENABLED",
        },
    )
    ecs.put_cluster_capacity_providers(
        cluster=CLUSTER, capacityProviders=[GROUP], defaultCapacityProviderStrategy=[{"capacityProvider": GROUP, "weight": 1}]
    )

    container = {
        "name": "triton",
        "image": "registry.local/triton:r1",
        "memory": 4096,
        "essential": True,
        "portMappings": [{"containerPort": triton_port, "protocol": "tcp"}],
        "resourceRequirements": [{"type": "GPU", "value": "1"}],
    }
    task_definition = ecs.register_task_definition(
        family=APP, networkMode="awsvpc", containerDefinitions=[container], requiresCompatibilities=["EC2"]
    )["taskDefinition"]["taskDefinitionArn"]
    network = {"awsvpcConfiguration": {"subnets": subnets, "securityGroups": [group_sg]}}
    for color in ("blue", "green"):
        ecs.create_service(
            cluster=CLUSTER,
            serviceName=f"{APP}-{color}",
            taskDefinition=task_definition,
            desiredCount=0,
            launchType="EC2",
            networkConfiguration=network,
            loadBalancers=[{"targetGroupArn": fleet.target_groups[color], "containerName": "triton", "containerPort": triton_port}],
        )
    ecs.update_service(cluster=CLUSTER, service=f"{APP}-blue", desiredCount=2)
    elbv2.register_targets(
        TargetGroupArn=fleet.target_groups["blue"], Targets=[{"Id": f"10.0.1.{10 + i}", "Port": triton_port} for i in range(2)]
    )
    put_target_5xx_alarm(moto.client("cloudwatch"))
    return fleet
