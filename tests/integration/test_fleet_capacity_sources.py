"""Role fleet_capacity's capacity sources against a private moto server: several instance types of one GPU shape, an
On-Demand Capacity Reservation, a Capacity Block and Spot render into the launch template and the Auto Scaling group
as the EC2 and Auto Scaling APIs take them (botocore validates every request the modules send; moto stores it and
the test reads it back), each in four steps (check, real, check again, real again: the last two change nothing);
combinations that cannot work fail before any write.

moto 5 stores a launch template's CapacityReservationSpecification and InstanceMarketOptions and a group's
MixedInstancesPolicy as sent; it models no reservation (nothing is launched here, so nothing needs one). Its
UpdateAutoScalingGroup drops a mixed instances policy the request does not name (AWS keeps it): the capacity provider's
managed termination protection sends such an update (NewInstancesProtectedFromScaleIn alone), so these runs turn it
off; tests/integration/test_infrastructure.py covers it on a group of one type. For the same reason, and because moto
neither stores nor shows a group's CapacityRebalance, the Spot run turns Capacity Rebalancing off: module
autoscaling_group_settings is covered against botocore's request validation in tests/unit/test_group_settings.py.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from tests.harness.ansible import run_playbook
from tests.harness.infrastructure import AMI, CLUSTER, network
from tests.harness.moto import MotoServer

PLAYBOOK = Path(__file__).parent / "playbooks" / "fleet_capacity_sources.yml"
TEMPLATE_TASK = "inferops.triton_ecs.fleet_capacity : Launch template (IMDSv2 required, user data joins the cluster)"
RESERVATION = "cr-0123456789abcdef0"


def variables(moto: MotoServer, net: dict[str, Any], **capacity: Any) -> dict[str, Any]:
    return {
        "aws_endpoint_url": moto.endpoint,
        "fleet_capacity_cluster_name": CLUSTER,
        "fleet_capacity_ami_id": AMI,
        "fleet_capacity_subnets": net["subnets"],
        "fleet_capacity_security_groups": [net["security_group"]],
        "fleet_capacity_model_agent_bucket": "example-models",
        "fleet_capacity_managed_termination_protection": False,  # see the module docstring
        **capacity,
    }


def four_steps(moto: MotoServer, extra: dict[str, Any]) -> None:
    """Check, real, check again, real again: the first two change, the last two do not."""
    for check, changes in ((True, True), (False, True), (True, False), (False, False)):
        run = run_playbook(PLAYBOOK, extra_vars=extra, check=check, env=moto.env())
        assert run.rc == 0, run.stdout[-3000:] + run.stderr[-2000:]
        assert bool(run.changed_tasks) == changes, (check, run.changed_tasks)


def fleet(moto: MotoServer) -> tuple[dict[str, Any], dict[str, Any]]:
    """The template's default version's data and the group, as moto holds them."""
    ec2 = moto.client("ec2")
    version = ec2.describe_launch_template_versions(LaunchTemplateName="triton-gpu", Versions=["$Default"])["LaunchTemplateVersions"][0]
    group = moto.client("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=["triton-gpu"])["AutoScalingGroups"][0]
    return {**version["LaunchTemplateData"], "_version": str(version["VersionNumber"])}, group


@pytest.fixture
def account(moto_server: MotoServer) -> dict[str, Any]:
    moto_server.client("ecs").create_cluster(clusterName=CLUSTER)
    return network(moto_server)


def test_mixed_types_of_one_gpu_shape_render_a_mixed_instances_policy(moto_server: MotoServer, account: dict[str, Any]) -> None:
    four_steps(moto_server, variables(moto_server, account, fleet_capacity_instance_types=["g5.2xlarge", "g5.4xlarge"]))
    data, group = fleet(moto_server)
    assert data["InstanceType"] == "g5.2xlarge"  # the first type; the overrides decide
    assert "CapacityReservationSpecification" not in data and "InstanceMarketOptions" not in data
    assert "LaunchTemplate" not in group
    policy = group["MixedInstancesPolicy"]
    assert policy["LaunchTemplate"]["LaunchTemplateSpecification"]["LaunchTemplateName"] == "triton-gpu"
    assert policy["LaunchTemplate"]["LaunchTemplateSpecification"]["Version"] == data["_version"]
    assert [o["InstanceType"] for o in policy["LaunchTemplate"]["Overrides"]] == ["g5.2xlarge", "g5.4xlarge"]
    assert policy["InstancesDistribution"]["OnDemandPercentageAboveBaseCapacity"] == 100
    assert "ECS_ENABLE_SPOT_INSTANCE_DRAINING" not in base64.b64decode(data["UserData"]).decode()


def test_a_reserved_p5_fleet_targets_its_reservation_then_spot_replaces_it(moto_server: MotoServer, account: dict[str, Any]) -> None:
    reserved = variables(
        moto_server, account, fleet_capacity_instance_type="p5.48xlarge", fleet_capacity_capacity_reservation_id=RESERVATION
    )
    four_steps(moto_server, reserved)
    data, group = fleet(moto_server)
    assert data["InstanceType"] == "p5.48xlarge"
    assert data["CapacityReservationSpecification"] == {"CapacityReservationTarget": {"CapacityReservationId": RESERVATION}}
    assert group["LaunchTemplate"]["LaunchTemplateName"] == "triton-gpu" and group["LaunchTemplate"]["Version"] == data["_version"]
    assert "MixedInstancesPolicy" not in group

    # The same fleet moved to Spot on two g5 sizes: a new default version without the reservation, a mixed policy.
    spot = variables(
        moto_server,
        account,
        fleet_capacity_instance_types=["g5.2xlarge", "g5.4xlarge"],
        fleet_capacity_spot=True,
        fleet_capacity_capacity_rebalance=False,  # see the module docstring
    )
    run = run_playbook(PLAYBOOK, extra_vars=spot, env=moto_server.env())
    assert run.rc == 0, run.stdout[-3000:]
    assert run.result(TEMPLATE_TASK)["actions"][0].startswith("create version 2 (CapacityReservationSpecification, InstanceType, UserData)")
    data, group = fleet(moto_server)
    assert data["_version"] == "2" and "CapacityReservationSpecification" not in data
    assert "ECS_ENABLE_SPOT_INSTANCE_DRAINING=true" in base64.b64decode(data["UserData"]).decode().splitlines()
    distribution = group["MixedInstancesPolicy"]["InstancesDistribution"]
    assert distribution["OnDemandPercentageAboveBaseCapacity"] == 0
    assert distribution["SpotAllocationStrategy"] == "price-capacity-optimized"
    assert group["MixedInstancesPolicy"]["LaunchTemplate"]["LaunchTemplateSpecification"]["Version"] == "2"
    again = run_playbook(PLAYBOOK, extra_vars=spot, env=moto_server.env())
    assert again.rc == 0 and again.changed_tasks == [], again.changed_tasks


def test_a_capacity_block_requests_its_market_type(moto_server: MotoServer, account: dict[str, Any]) -> None:
    four_steps(
        moto_server,
        variables(moto_server, account, fleet_capacity_instance_type="p5.48xlarge", fleet_capacity_capacity_block_id=RESERVATION),
    )
    data, group = fleet(moto_server)
    assert data["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    assert data["CapacityReservationSpecification"] == {"CapacityReservationTarget": {"CapacityReservationId": RESERVATION}}
    assert "MixedInstancesPolicy" not in group


@pytest.mark.parametrize(
    ("capacity", "expected"),
    [
        (
            {"fleet_capacity_instance_types": ["g5.xlarge", "g6.xlarge"]},
            "fleet_capacity_instance_types mixes GPU shapes (g5.xlarge: 1 x NVIDIA A10G 22888 MiB, x86_64; g6.xlarge: 1 x NVIDIA L4",
        ),
        (
            {"fleet_capacity_spot": True, "fleet_capacity_capacity_reservation_id": RESERVATION},
            "fleet_capacity_spot is true with fleet_capacity_capacity_reservation_id: Spot instances never launch into a reservation",
        ),
        (
            {"fleet_capacity_instance_types": ["p5.48xlarge", "p5e.48xlarge"], "fleet_capacity_capacity_block_id": RESERVATION},
            "a Capacity Block holds one instance type and the Auto Scaling group cannot launch it through a mixed instances policy",
        ),
    ],
    ids=["unequal-gpu-shapes", "spot-with-reservation", "mixed-types-with-block"],
)
def test_what_cannot_work_is_refused_before_any_write(
    moto_server: MotoServer, account: dict[str, Any], capacity: dict[str, Any], expected: str
) -> None:
    run = run_playbook(PLAYBOOK, extra_vars=variables(moto_server, account, **capacity), env=moto_server.env())
    assert run.rc != 0
    refused = run.result(TEMPLATE_TASK)
    assert refused["failed"] and expected in refused["msg"], refused["msg"]
    assert moto_server.client("ec2").describe_launch_templates()["LaunchTemplates"] == []
    assert moto_server.client("autoscaling").describe_auto_scaling_groups()["AutoScalingGroups"] == []
