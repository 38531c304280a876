"""autoscaling_group_settings: Capacity Rebalancing written only when it differs (botocore's Stubber validates each
request against the Auto Scaling API model, and fails on any call not expected)."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from ansible_collections.amazon.aws.plugins.module_utils.retries import AWSRetry, RetryingBotoClientWrapper
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import InputError
from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet import group_settings as gs

NAME = "triton-gpu"


def stubbed() -> tuple[Any, Stubber]:
    client = boto3.client("autoscaling", region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing")
    return RetryingBotoClientWrapper(client, AWSRetry.jittered_backoff()), Stubber(client)


def group(**fields: Any) -> dict[str, Any]:
    return {
        "AutoScalingGroupName": NAME,
        "MinSize": 0,
        "MaxSize": 4,
        "DesiredCapacity": 2,
        "DefaultCooldown": 300,
        "AvailabilityZones": ["us-east-1a"],
        "HealthCheckType": "EC2",
        "CreatedTime": "2026-01-01T00:00:00Z",
        **fields,
    }


def described(stub: Stubber, **fields: Any) -> None:
    stub.add_response("describe_auto_scaling_groups", {"AutoScalingGroups": [group(**fields)]}, {"AutoScalingGroupNames": [NAME]})


def test_capacity_rebalance_is_written_once_then_left_alone() -> None:
    client, stub = stubbed()
    described(stub)  # AWS leaves the field out: false
    stub.add_response("update_auto_scaling_group", {}, {"AutoScalingGroupName": NAME, "CapacityRebalance": True})
    with stub:
        result = gs.ensure(client, {"name": NAME, "capacity_rebalance": True}, False)
    stub.assert_no_pending_responses()
    assert result["changed"] and result["actions"] == ["set CapacityRebalance=true"]
    assert result["diff"] == {"before": {"capacity_rebalance": False}, "after": {"capacity_rebalance": True}}

    client, stub = stubbed()
    described(stub, CapacityRebalance=True)
    with stub:  # a second run reads and writes nothing
        result = gs.ensure(client, {"name": NAME, "capacity_rebalance": True}, False)
    stub.assert_no_pending_responses()
    assert not result["changed"] and result["actions"] == []


def test_check_mode_reports_without_writing_and_an_omitted_setting_is_kept() -> None:
    client, stub = stubbed()
    described(stub, CapacityRebalance=True)
    with stub:
        result = gs.ensure(client, {"name": NAME, "capacity_rebalance": False}, True)
    assert result["changed"] and result["settings"] == {"capacity_rebalance": False}

    client, stub = stubbed()
    described(stub, CapacityRebalance=True)
    with stub:
        result = gs.ensure(client, {"name": NAME, "capacity_rebalance": None}, False)
    assert not result["changed"] and result["settings"] == {"capacity_rebalance": True}


def test_a_missing_group_fails_before_any_write() -> None:
    client, stub = stubbed()
    stub.add_response("describe_auto_scaling_groups", {"AutoScalingGroups": []}, {"AutoScalingGroupNames": [NAME]})
    with stub, pytest.raises(InputError) as refused:
        gs.ensure(client, {"name": NAME, "capacity_rebalance": True}, False)
    assert "no such Auto Scaling group" in str(refused.value) and "autoscaling_group" in str(refused.value)
