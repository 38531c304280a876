"""What an AWS account has before playbooks/infrastructure.yml runs, in a moto server: a VPC with two private
subnets and a task security group, the initial Triton task definition (awsvpc, revisions 1 and 2), and a stand-in
Packer manifest whose last build names the AMI; for the modules' tests also an ALB, target groups and a GPU Auto
Scaling group (`module_resources`). Used by tests/integration/test_infrastructure.py, test_tags.py and by the
molecule scenario fleet_infrastructure (`python -m tests.harness.infrastructure prepare --state-file ...`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .moto import REGION, MotoServer

APP = "triton"
CLUSTER = "inference"
AMI = "ami-0123456789abcdef0"  # example id; moto does not need the image to exist for a launch template


def network(moto: MotoServer) -> dict[str, Any]:
    ec2, ecs = moto.client("ec2"), moto.client("ecs")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i}.0/24", AvailabilityZone=f"{REGION}{zone}")["Subnet"]["SubnetId"]
        for i, zone in ((1, "a"), (2, "b"))
    ]
    sg = ec2.create_security_group(GroupName="triton-tasks", Description="ALB to Triton", VpcId=vpc)["GroupId"]
    container = {
        "name": "triton",
        "image": "registry.local/triton:r1",
        "memory": 4096,
        "portMappings": [{"containerPort": 8000, "protocol": "tcp"}],
        "resourceRequirements": [{"type": "GPU", "value": "1"}],
    }
    task_definitions = [
        ecs.register_task_definition(family=APP, networkMode="awsvpc", requiresCompatibilities=["EC2"], containerDefinitions=[container])[
            "taskDefinition"
        ]["taskDefinitionArn"]
        for _revision in range(2)
    ]
    return {"vpc": vpc, "subnets": subnets, "security_group": sg, "task_definitions": task_definitions}


def module_resources(moto: MotoServer, name: str) -> dict[str, Any]:
    """`network()` and what the infrastructure modules' tests converge on besides: an ALB, each colour's target group
    (target type ip, as awsvpc tasks register) and a GPU Auto Scaling group over both subnets, named after `name`.
    Returns the extra vars their playbooks read: aws_endpoint_url, subnets, security_group, alb_arn, tgs ({blue,
    green}), task_definition, asg_arn."""
    net = network(moto)
    ec2, elbv2, autoscaling = moto.client("ec2"), moto.client("elbv2"), moto.client("autoscaling")
    alb = elbv2.create_load_balancer(Name=name, Subnets=net["subnets"])["LoadBalancers"][0]["LoadBalancerArn"]
    tgs = {
        color: elbv2.create_target_group(Name=f"{name}-{color}", Protocol="HTTP", Port=8000, VpcId=net["vpc"], TargetType="ip")[
            "TargetGroups"
        ][0]["TargetGroupArn"]
        for color in ("blue", "green")
    }
    ec2.create_launch_template(LaunchTemplateName=name, LaunchTemplateData={"ImageId": AMI, "InstanceType": "g5.xlarge"})
    autoscaling.create_auto_scaling_group(
        AutoScalingGroupName=name,
        LaunchTemplate={"LaunchTemplateName": name},
        MinSize=0,
        MaxSize=2,
        VPCZoneIdentifier=",".join(net["subnets"]),
    )
    asg_arn = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[name])["AutoScalingGroups"][0]["AutoScalingGroupARN"]
    return {
        "aws_endpoint_url": moto.endpoint,
        "subnets": net["subnets"],
        "security_group": net["security_group"],
        "alb_arn": alb,
        "tgs": tgs,
        "task_definition": net["task_definitions"][0],
        "asg_arn": asg_arn,
    }


# The model host path the harness's AMI was baked with: not packer's default, so a value taken from elsewhere shows.
MODEL_HOST_PATH = "/mnt/nvme/models"


def packer_manifest(directory: Path) -> Path:
    """A manifest.json as Packer's manifest post-processor writes it; the last build is the one to use."""
    path = directory / "manifest.json"
    builds = [
        {"name": "old", "artifact_id": f"{REGION}:ami-0fffffffffffffff0"},
        {
            "name": "triton-gpu",
            "artifact_id": f"us-west-2:ami-0aaaaaaaaaaaaaaa0,{REGION}:{AMI}",
            # packer/gpu_ami.pkr.hcl's custom_data (local.ami_facts): the pins and the model host path.
            "custom_data": {"nvidia_driver_version": "580.95.05", "model_host_path": MODEL_HOST_PATH},
        },
    ]
    path.write_text(json.dumps({"builds": builds, "last_run_uuid": "00000000-0000-0000-0000-000000000000"}))
    return path


def main(argv: list[str] | None = None) -> int:
    """`prepare` writes the network, task definitions and manifest into the state file's moto server."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tests.harness.infrastructure")
    parser.add_argument("command", choices=["prepare"])
    parser.add_argument("--state-file", required=True, type=Path)
    args = parser.parse_args(argv)
    state = json.loads(args.state_file.read_text())
    if not state.get("vpc"):
        state.update(network(MotoServer.attached(state["endpoint"])))
        state["packer_manifest"] = str(packer_manifest(args.state_file.parent))
        args.state_file.write_text(json.dumps(state, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
