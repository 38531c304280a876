"""No GPU instance idles outside ECS: a boot hydration that fails after its last attempt marks the instance Unhealthy
in its Auto Scaling group, and says so in its status object.

Stand-ins: a private moto server for S3, EC2 and Auto Scaling (a launch template and a group whose instance the
simulated instance is; moto keeps SetInstanceHealth's status but replaces no instance); the stand-in IMDSv2 of
tests/harness/model_agent.py answers that instance's id; the agent runs `--boot` as a subprocess, as on an instance.
"""

from __future__ import annotations

import pytest

from tests.harness.model_agent import SimulatedInstance, write_release
from tests.harness.moto import REGION

BUCKET = "unhealthy-models"
PREFIX = "models"
APP = "triton"
GROUP = "triton-gpu"


def group_instance(moto) -> str:
    """A one-instance Auto Scaling group in moto; the id of its instance."""
    ec2, autoscaling = moto.client("ec2"), moto.client("autoscaling")
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    ec2.create_launch_template(LaunchTemplateName=GROUP, LaunchTemplateData={"ImageId": image, "InstanceType": "g5.xlarge"})
    autoscaling.create_auto_scaling_group(
        AutoScalingGroupName=GROUP,
        LaunchTemplate={"LaunchTemplateName": GROUP, "Version": "$Latest"},
        MinSize=1,
        MaxSize=1,
        DesiredCapacity=1,
        AvailabilityZones=[f"{REGION}a"],
    )
    (instance,) = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[GROUP])["AutoScalingGroups"][0]["Instances"]
    return instance["InstanceId"]


def health(moto, instance_id: str) -> str:
    (found,) = moto.client("autoscaling").describe_auto_scaling_instances(InstanceIds=[instance_id])["AutoScalingInstances"]
    return found["HealthStatus"].upper()


@pytest.fixture
def bucket(moto_server):
    moto_server.client("s3").create_bucket(Bucket=BUCKET)
    return moto_server


@pytest.mark.parametrize("switch", [True, False], ids=["marks", "switched-off"])
def test_a_failed_boot_marks_the_instance_unhealthy_in_its_group(bucket, tmp_path, switch):
    moto = bucket
    instance_id = group_instance(moto)
    assert health(moto, instance_id) == "HEALTHY"
    # The release names a version nobody published: every attempt fails.
    write_release(moto, BUCKET, PREFIX, APP, "r-bad", {"m": 7})
    instance = SimulatedInstance(tmp_path, moto, BUCKET, PREFIX, APP, instance_id, mark_unhealthy_on_failed_boot=switch)
    try:
        boot = instance.run("--boot")
        status = instance.status()
    finally:
        instance.stop()
    assert boot.returncode == 1, boot.stderr  # ECS stays stopped
    assert "boot hydration attempt 2/2 failed" in status["last_error"] and "version=7 has no manifest" in status["last_error"]
    assert status["state"] == "failed"
    if switch:
        assert health(moto, instance_id) == "UNHEALTHY"
        assert f"marked {instance_id} Unhealthy in Auto Scaling group {GROUP}" in status["last_error"]
        assert f"marked {instance_id} Unhealthy" in boot.stderr
    else:
        assert health(moto, instance_id) == "HEALTHY"
        assert "mark_unhealthy_on_failed_boot is false" in status["last_error"]


def test_an_instance_outside_any_group_keeps_ecs_stopped_and_says_so(bucket, tmp_path):
    moto = bucket
    write_release(moto, BUCKET, PREFIX, APP, "r-bad", {"m": 7})
    instance = SimulatedInstance(tmp_path, moto, BUCKET, PREFIX, APP, "i-0000000000000abc")
    try:
        boot = instance.run("--boot")
        status = instance.status()
    finally:
        instance.stop()
    assert boot.returncode == 1
    assert "i-0000000000000abc is in no Auto Scaling group: not marked Unhealthy, ECS stays stopped" in status["last_error"]
