"""Listings page through botocore's paginators: every listing operation the `_aws` files page through has one, and
`pages.full_result` merges every page. Stand-ins: botocore's own service models (offline), and moto in-process
(`mock_aws`), which pages Application Auto Scaling's answers when asked for small pages."""

from __future__ import annotations

import re
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from ansible_collections.amazon.aws.plugins.module_utils.retries import AWSRetry, RetryingBotoClientWrapper
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import application_autoscaling as _aas
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.pages import full_result

AWS_DIR = Path(__file__).resolve().parents[2] / "plugins" / "module_utils" / "_aws"
# The botocore service each `_aws` file calls.
SERVICE_OF_FILE = {
    "application_autoscaling.py": "application-autoscaling",
    "autoscaling.py": "autoscaling",
    "cloudwatch.py": "cloudwatch",
    "ec2.py": "ec2",
    "ecs.py": "ecs",
    "elbv2.py": "elbv2",
    "iam.py": "iam",
    "logs.py": "logs",
    "s3.py": "s3",
}
LISTING = re.compile(r'(?:full_result\(\s*\w+,\s*|get_paginator\()"(\w+)"')
HAND_PAGED = re.compile(r"\b(NextToken|nextToken|ContinuationToken|NextMarker)\b")


def listings() -> list[tuple[str, str]]:
    found = []
    for path in sorted(AWS_DIR.glob("*.py")):
        found += [(path.name, operation) for operation in LISTING.findall(path.read_text())]
    return found


def client(service: str):
    return boto3.client(service, region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing")


def test_the_aws_files_page_their_listings():
    files = {name for name, _operation in listings()}
    assert {"application_autoscaling.py", "cloudwatch.py", "ecs.py", "s3.py"} <= files


@pytest.mark.parametrize(("file_name", "operation"), listings())
def test_every_paged_listing_has_a_botocore_paginator(file_name, operation):
    assert client(SERVICE_OF_FILE[file_name]).can_paginate(operation), f"{file_name}: botocore has no paginator for {operation}"


def test_no_hand_written_pagination_loop_is_left_in_module_utils():
    module_utils = AWS_DIR.parent
    looped = [str(p.relative_to(module_utils)) for p in sorted(module_utils.rglob("*.py")) if HAND_PAGED.search(p.read_text())]
    assert looped == []


@mock_aws
def test_full_result_merges_every_page():
    aas = RetryingBotoClientWrapper(client("application-autoscaling"), AWSRetry.jittered_backoff())
    ecs = client("ecs")
    ecs.create_cluster(clusterName="inference")
    ecs.create_service(cluster="inference", serviceName="triton-blue", desiredCount=0)  # moto scales only services that exist
    rid = _aas.resource_id("inference", "triton-blue")
    _aas.register_target(aas, rid, 1, 8)
    step = {"AdjustmentType": "ChangeInCapacity", "StepAdjustments": [{"MetricIntervalLowerBound": 0.0, "ScalingAdjustment": 1}]}
    names = [f"triton-step-{n}" for n in range(5)]
    for name in names:
        _aas.put_policy(aas, rid, {"PolicyName": name, "PolicyType": "StepScaling", "StepScalingPolicyConfiguration": step})
    query = {"ServiceNamespace": _aas.NAMESPACE, "ResourceId": rid, "ScalableDimension": _aas.DIMENSION}
    assert "NextToken" in aas.describe_scaling_policies(aws_retry=True, MaxResults=2, **query)  # moto really pages
    merged = full_result(aas, "describe_scaling_policies", PaginationConfig={"PageSize": 2}, **query)
    assert [p["PolicyName"] for p in merged["ScalingPolicies"]] == names
    assert "NextToken" not in merged
    assert [p["PolicyName"] for p in _aas.describe_policies(aas, rid)] == names
