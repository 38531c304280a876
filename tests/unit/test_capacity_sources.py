"""Where the fleet's instances come from (plugins/module_utils/_fleet/capacity_sources.py, launch_template.py and the
preflight's capacity read): pure checks and renderings, and the module's and the preflight's calls through botocore's
Stubber, which validates every request against the EC2 API model and asserts its parameters.

Instance types are EC2's own descriptions, from the DescribeInstanceTypes snapshot moto ships (recorded from AWS).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import boto3
import moto
import pytest
from botocore.stub import Stubber

from ansible_collections.amazon.aws.plugins.module_utils.retries import AWSRetry, RetryingBotoClientWrapper
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import InputError
from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet import capacity_sources as cs
from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet import launch_template as lt
from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet import preflight_resources as pr

TYPES = json.loads(gzip.decompress((Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz").read_bytes()))
RESERVATION = "cr-0123456789abcdef0"
GROUP = "arn:aws:resource-groups:us-east-1:123456789012:group/p5-reservations"


def described(name: str) -> dict[str, Any]:
    """The fields of an instance type the collection reads (the snapshot has more than this botocore knows)."""
    full = TYPES[name]
    return {k: full[k] for k in ("InstanceType", "VCpuInfo", "MemoryInfo", "GpuInfo", "ProcessorInfo") if k in full}


def sources(**kwargs: Any) -> cs.Sources:
    return cs.Sources(**{"instance_types": ["g5.xlarge"], **kwargs})


# ---------------------------------------------------------------- the settings alone


def test_one_on_demand_type_is_fine_and_needs_no_policy():
    s = sources()
    assert cs.setting_problems(s) == []
    assert (s.kind, s.mixed) == ("on-demand", False)
    assert cs.launch_template_capacity(s) == {"InstanceType": "g5.xlarge"}
    assert cs.mixed_instances_policy(s, {"LaunchTemplateName": "t", "Version": "3"}) is None
    assert cs.autoscaling_group_option(s) is None and cs.ecs_config(s) == {}


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"spot": True, "capacity_reservation_id": RESERVATION}, "fleet_capacity_spot is true with fleet_capacity_capacity_reservation_id"),
        (
            {"spot": True, "capacity_reservation_group_arn": GROUP},
            "fleet_capacity_spot is true with fleet_capacity_capacity_reservation_group_arn",
        ),
        ({"spot": True, "capacity_block_id": RESERVATION}, "fleet_capacity_spot is true with fleet_capacity_capacity_block_id"),
        (
            {"instance_types": ["p5.48xlarge", "p5en.48xlarge"], "capacity_block_id": RESERVATION},
            "a Capacity Block holds one instance type",
        ),
        (
            {"instance_types": ["p5.48xlarge", "p5en.48xlarge"], "capacity_reservation_id": RESERVATION},
            "set fleet_capacity_capacity_reservation_group_arn instead",
        ),
        ({"capacity_reservation_id": RESERVATION, "capacity_reservation_group_arn": GROUP}, "are both set: a launch template targets one"),
        ({"capacity_block_id": RESERVATION, "capacity_reservation_id": RESERVATION}, "a Capacity Block is itself the reservation"),
        (
            {"capacity_reservation_id": "cr-nothex"},
            "fleet_capacity_capacity_reservation_id is 'cr-nothex': an On-Demand Capacity Reservation id",
        ),
        ({"capacity_reservation_group_arn": "p5-group"}, "the ARN of a resource group of capacity reservations"),
        ({"instance_types": ["g6f.xlarge"]}, "a fractional NVIDIA GPU"),
        ({"instance_types": ["g5.xlarge", "g5.xlarge"]}, "names ['g5.xlarge'] more than once"),
        ({"spot": True, "spot_allocation_strategy": "cheapest"}, "fleet_capacity_spot_allocation_strategy is 'cheapest'"),
    ],
)
def test_what_cannot_work_is_named_with_its_variables_and_fix(kwargs, fragment):
    problems = cs.setting_problems(sources(**kwargs))
    assert any(fragment in p for p in problems), problems


def test_spot_goes_through_the_mixed_policy_even_for_one_type_with_ecs_spot_draining():
    s = sources(spot=True, on_demand_base_capacity=1)
    assert s.mixed and cs.setting_problems(s) == []
    assert "InstanceMarketOptions" not in cs.launch_template_capacity(s)  # a mixed group refuses a template that requests Spot
    policy = cs.mixed_instances_policy(s, {"LaunchTemplateName": "triton-gpu", "Version": "4"})
    assert policy == {
        "LaunchTemplate": {
            "LaunchTemplateSpecification": {"LaunchTemplateName": "triton-gpu", "Version": "4"},
            "Overrides": [{"InstanceType": "g5.xlarge"}],
        },
        "InstancesDistribution": {
            "OnDemandBaseCapacity": 1,
            "OnDemandPercentageAboveBaseCapacity": 0,
            "SpotAllocationStrategy": "price-capacity-optimized",
        },
    }
    assert cs.autoscaling_group_option(s)["instances_distribution"]["on_demand_percentage_above_base_capacity"] == 0
    assert cs.ecs_config(s) == {"ECS_ENABLE_SPOT_INSTANCE_DRAINING": "true"}


def test_reservations_and_blocks_render_one_target_each():
    assert cs.launch_template_capacity(sources(instance_types=["p5.48xlarge"], capacity_reservation_id=RESERVATION)) == {
        "InstanceType": "p5.48xlarge",
        "CapacityReservationSpecification": {"CapacityReservationTarget": {"CapacityReservationId": RESERVATION}},
    }
    assert cs.launch_template_capacity(sources(capacity_reservation_group_arn=GROUP))["CapacityReservationSpecification"] == {
        "CapacityReservationTarget": {"CapacityReservationResourceGroupArn": GROUP}
    }
    block = cs.launch_template_capacity(sources(instance_types=["p5.48xlarge"], capacity_block_id=RESERVATION))
    assert block["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    assert block["CapacityReservationSpecification"] == {"CapacityReservationTarget": {"CapacityReservationId": RESERVATION}}


# ---------------------------------------------------------------- instance types and reservations


def test_one_gpu_shape_across_sizes_and_the_smallest_decides():
    found = {n: described(n) for n in ("g5.2xlarge", "g5.4xlarge", "g5.xlarge")}
    assert cs.shape_problems(list(found), found, "us-east-1") == []
    assert cs.gpu_shape(found["g5.2xlarge"]) == {"gpus": 1, "gpu": "NVIDIA A10G", "gpu_memory_mib": 22888, "architecture": "x86_64"}
    assert cs.smallest_type(list(found.values()))["InstanceType"] == "g5.xlarge"


@pytest.mark.parametrize(
    ("names", "differs"),
    [
        (["g5.xlarge", "g6.xlarge"], "NVIDIA L4"),  # the GPU model
        (["p5.48xlarge", "p5e.48xlarge"], "144384 MiB"),  # the GPU memory (H100 and H200)
        (["g5.xlarge", "g5.12xlarge"], "4 x NVIDIA A10G"),  # the GPU count
        (["g5.xlarge", "g5g.xlarge"], "arm64"),  # the architecture (and the model)
    ],
)
def test_unequal_gpu_shapes_are_refused(names, differs):
    problems = cs.shape_problems(names, {n: described(n) for n in names}, "us-east-1")
    assert len(problems) == 1 and problems[0].startswith("fleet_capacity_instance_types mixes GPU shapes") and differs in problems[0]


def test_a_reservation_bounds_the_group_and_must_hold_its_type():
    s = sources(instance_types=["p5.48xlarge"], capacity_reservation_id=RESERVATION)
    reservation = {
        "CapacityReservationId": RESERVATION,
        "InstanceType": "p5.48xlarge",
        "AvailabilityZone": "us-east-1a",
        "State": "active",
        "TotalInstanceCount": 2,
        "AvailableInstanceCount": 1,
    }
    assert cs.reservation_problems(s, reservation, max_size=2) == []
    assert cs.reservation_problems(s, reservation, max_size=4) == [
        f"fleet_capacity_max_size is 4 but fleet_capacity_capacity_reservation_id = {RESERVATION} holds 2 instance(s), and "
        "instances that target it launch nowhere else: lower fleet_capacity_max_size to 2, or grow the reservation"
    ]
    assert (
        "reserves p5.48xlarge but fleet_capacity_instance_types is ['p4d.24xlarge']"
        in cs.reservation_problems(sources(instance_types=["p4d.24xlarge"], capacity_reservation_id=RESERVATION), reservation, 2)[0]
    )
    assert "is expired" in cs.reservation_problems(s, {**reservation, "State": "expired"}, 2)[0]
    assert (
        "set it as fleet_capacity_capacity_block_id"
        in cs.reservation_problems(s, {**reservation, "ReservationType": "capacity-block"}, 2)[0]
    )
    assert "is no capacity reservation" in cs.reservation_problems(s, None, 2)[0]
    assert "add a subnet of us-east-1a" in cs.reservation_problems(s, reservation, 2, subnet_zones=["us-east-1b"])[0]
    # What the group can still add: its max size, and no more than the reservation has free.
    assert cs.reserved_headroom(4, 1, reservation) == 1 and cs.reserved_headroom(4, 1, None) == 3


# ---------------------------------------------------------------- the module and the preflight, through Stubber


def stubbed_ec2() -> tuple[Any, Stubber]:
    client = boto3.client("ec2", region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing")
    return RetryingBotoClientWrapper(client, AWSRetry.jittered_backoff()), Stubber(client)


PARAMS = {
    "name": "triton-gpu",
    "image_id": "ami-0123456789abcdef0",
    "instance_types": ["p5.48xlarge"],
    "iam_instance_profile": "triton-ecs-instance",
    "security_group_ids": ["sg-0b", "sg-0a"],
    "user_data": "IyEvYmluL2Jhc2gK",
    "metadata_hop_limit": 1,
    "root_volume": {"device_name": "/dev/xvda", "size_gb": 200, "type": "gp3"},
    "capacity_reservation_id": RESERVATION,
    "capacity_reservation_group_arn": "",
    "capacity_block_id": "",
    "spot": False,
    "tags": {"team": "ml"},
    "region": "us-east-1",
}
TEMPLATE_ID = "lt-0123456789abcdef0"
WANTED = {
    "ImageId": "ami-0123456789abcdef0",
    "InstanceType": "p5.48xlarge",
    "CapacityReservationSpecification": {"CapacityReservationTarget": {"CapacityReservationId": RESERVATION}},
    "MetadataOptions": {"HttpEndpoint": "enabled", "HttpTokens": "required", "HttpPutResponseHopLimit": 1},
    "BlockDeviceMappings": [
        {"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 200, "VolumeType": "gp3", "Encrypted": True, "DeleteOnTermination": True}}
    ],
    "IamInstanceProfile": {"Name": "triton-ecs-instance"},
    "SecurityGroupIds": ["sg-0a", "sg-0b"],
    "UserData": "IyEvYmluL2Jhc2gK",
}


def expect_existing_template_reads(stub: Stubber, data: dict[str, Any], latest_version: int = 3, tags: list | None = None) -> None:
    """The reads of a run on the existing template triton-gpu: the instance type, the template (default version 3,
    tagged team=ml unless `tags`) and its default version's `data`."""
    template = {
        "LaunchTemplateId": TEMPLATE_ID,
        "DefaultVersionNumber": 3,
        "LatestVersionNumber": latest_version,
        "Tags": tags or [{"Key": "team", "Value": "ml"}],
    }
    stub.add_response("describe_instance_types", {"InstanceTypes": [described("p5.48xlarge")]}, {"InstanceTypes": ["p5.48xlarge"]})
    stub.add_response("describe_launch_templates", {"LaunchTemplates": [template]}, {"LaunchTemplateNames": ["triton-gpu"]})
    stub.add_response(
        "describe_launch_template_versions",
        {"LaunchTemplateVersions": [{"VersionNumber": 3, "LaunchTemplateData": data}]},
        {"LaunchTemplateId": TEMPLATE_ID, "Versions": ["3"]},
    )


def test_the_module_creates_a_reserved_p5_template_as_ec2_takes_it():
    ec2, stub = stubbed_ec2()
    stub.add_response("describe_instance_types", {"InstanceTypes": [described("p5.48xlarge")]}, {"InstanceTypes": ["p5.48xlarge"]})
    stub.add_client_error(
        "describe_launch_templates", "InvalidLaunchTemplateName.NotFoundException", expected_params={"LaunchTemplateNames": ["triton-gpu"]}
    )
    stub.add_response(
        "create_launch_template",
        {"LaunchTemplate": {"LaunchTemplateId": TEMPLATE_ID, "DefaultVersionNumber": 1, "LatestVersionNumber": 1}},
        {
            "LaunchTemplateName": "triton-gpu",
            "LaunchTemplateData": WANTED,
            "VersionDescription": "fleet_capacity: capacity-reservation, p5.48xlarge",
            "TagSpecifications": [{"ResourceType": "launch-template", "Tags": [{"Key": "team", "Value": "ml"}]}],
        },
    )
    with stub:
        result = lt.ensure(ec2, PARAMS, False)
    stub.assert_no_pending_responses()
    assert result["changed"] and result["default_version"] == 1 and result["template_id"] == TEMPLATE_ID
    assert result["mixed_instances_policy"] is None
    assert result["capacity"]["kind"] == "capacity-reservation" and result["capacity"]["per_instance"]["gpus"] == 8


def test_the_module_makes_a_new_default_version_when_the_data_differs_and_nothing_when_it_does_not():
    ec2, stub = stubbed_ec2()
    old = {k: v for k, v in WANTED.items() if k != "CapacityReservationSpecification"}
    for data in (old, WANTED):
        expect_existing_template_reads(stub, data, latest_version=4)
        if data is old:
            stub.add_response(
                "create_launch_template_version",
                {"LaunchTemplateVersion": {"VersionNumber": 5}},
                {
                    "LaunchTemplateId": TEMPLATE_ID,
                    "LaunchTemplateData": WANTED,  # the whole data: no SourceVersion, so nothing of version 3 lingers
                    "VersionDescription": "fleet_capacity: capacity-reservation, p5.48xlarge",
                },
            )
            stub.add_response("modify_launch_template", {}, {"LaunchTemplateId": TEMPLATE_ID, "DefaultVersion": "5"})
    with stub:
        first = lt.ensure(ec2, PARAMS, False)
        second = lt.ensure(ec2, PARAMS, False)
    stub.assert_no_pending_responses()
    assert first["actions"] == ["create version 5 (CapacityReservationSpecification) and make it the default (was 3)"]
    assert first["default_version"] == 5
    assert second["changed"] is False and second["actions"] == []


def test_keep_image_leaves_the_live_ami_and_names_the_new_one():
    """An existing fleet asked for another AMI with keep_image: no version is written for the image (roll_ami.yml
    brings it), the other settings still converge, and a new template takes the AMI asked for."""
    ec2, stub = stubbed_ec2()
    for _run in ("another AMI", "the live AMI"):
        expect_existing_template_reads(stub, WANTED)
    with stub:
        kept = lt.ensure(ec2, {**PARAMS, "image_id": "ami-0fedcba9876543210", "keep_image": True}, False)
        same = lt.ensure(ec2, {**PARAMS, "keep_image": True}, False)
    stub.assert_no_pending_responses()
    assert kept["changed"] is False and kept["image_id"] == WANTED["ImageId"] and kept["pending_image_id"] == "ami-0fedcba9876543210"
    assert same["changed"] is False and same["pending_image_id"] == ""


def test_the_module_refuses_before_any_call():
    ec2, stub = stubbed_ec2()
    with stub, pytest.raises(InputError) as refused:
        lt.ensure(ec2, {**PARAMS, "spot": True}, False)
    assert "fleet_capacity_spot is true with fleet_capacity_capacity_reservation_id" in str(refused.value)
    stub.assert_no_pending_responses()


def test_the_preflight_reads_the_reservation_and_counts_every_type():
    ec2, stub = stubbed_ec2()
    fit = {
        "instance_type": "g5.xlarge",
        "variable": "fleet_capacity_instance_type",
        "instance_types": ["p5.48xlarge"],
        "capacity_reservation_id": RESERVATION,
        "gpus": 8,
        "cpu": 0,
        "memory": 65536,
        "max_size": 4,
    }
    stub.add_response("describe_instance_types", {"InstanceTypes": [described("p5.48xlarge")]}, {"InstanceTypes": ["p5.48xlarge"]})
    stub.add_response(
        "describe_capacity_reservations",
        {
            "CapacityReservations": [
                {
                    "CapacityReservationId": RESERVATION,
                    "InstanceType": "p5.48xlarge",
                    "State": "active",
                    "TotalInstanceCount": 2,
                    "AvailableInstanceCount": 2,
                }
            ]
        },
        {"CapacityReservationIds": [RESERVATION]},
    )
    with stub:
        problems = pr.capacity_problems(ec2, fit, "us-east-1")
    stub.assert_no_pending_responses()
    assert problems == [
        f"fleet_capacity_max_size is 4 but fleet_capacity_capacity_reservation_id = {RESERVATION} holds 2 instance(s), and instances "
        "that target it launch nowhere else: lower fleet_capacity_max_size to 2, or grow the reservation"
    ]

    # The reservation lives in one zone: the group's subnets are read, and none of them in its zone is refused.
    ec2, stub = stubbed_ec2()
    stub.add_response("describe_instance_types", {"InstanceTypes": [described("p5.48xlarge")]}, {"InstanceTypes": ["p5.48xlarge"]})
    zoned = {
        "CapacityReservationId": RESERVATION,
        "InstanceType": "p5.48xlarge",
        "AvailabilityZone": "us-east-1a",
        "State": "active",
        "TotalInstanceCount": 4,
        "AvailableInstanceCount": 4,
    }
    stub.add_response("describe_capacity_reservations", {"CapacityReservations": [zoned]}, {"CapacityReservationIds": [RESERVATION]})
    subnets = [{"SubnetId": "subnet-0b", "AvailabilityZone": "us-east-1b", "CidrBlock": "10.0.2.0/24"}]
    stub.add_response("describe_subnets", {"Subnets": subnets}, {"Filters": [{"Name": "subnet-id", "Values": ["subnet-0b"]}]})
    with stub:
        problems = pr.capacity_problems(ec2, {**fit, "subnets": ["subnet-0b"]}, "us-east-1")
    stub.assert_no_pending_responses()
    assert problems == [
        f"fleet_capacity_capacity_reservation_id = {RESERVATION} is in us-east-1a but fleet_capacity_subnets are in ['us-east-1b']: "
        "add a subnet of us-east-1a to fleet_capacity_subnets"
    ]

    # Mixed sizes: every type must hold one task, so a task too large for the smallest is named with that type.
    ec2, stub = stubbed_ec2()
    for name in ("g5.xlarge", "g5.4xlarge"):
        stub.add_response("describe_instance_types", {"InstanceTypes": [described(name)]}, {"InstanceTypes": [name]})
    with stub:
        problems = pr.capacity_problems(
            ec2,
            {**fit, "instance_types": ["g5.xlarge", "g5.4xlarge"], "capacity_reservation_id": "", "gpus": 1, "memory": 32768},
            "us-east-1",
        )
    assert len(problems) == 1 and "does not fit one g5.xlarge" in problems[0] and "(fleet_capacity_instance_types)" in problems[0]


def test_tags_converge_without_a_new_version():
    ec2, stub = stubbed_ec2()
    expect_existing_template_reads(stub, WANTED, tags=[{"Key": "team", "Value": "ml"}, {"Key": "by-hand", "Value": "x"}])
    stub.add_response("create_tags", {}, {"Resources": [TEMPLATE_ID], "Tags": [{"Key": "team", "Value": "inference"}]})
    stub.add_response("delete_tags", {}, {"Resources": [TEMPLATE_ID], "Tags": [{"Key": "by-hand"}]})
    with stub:
        result = lt.ensure(ec2, {**PARAMS, "tags": {"team": "inference"}, "purge_tags": True}, False)
    stub.assert_no_pending_responses()
    assert result["actions"] == ["update_tags"] and result["default_version"] == 3
