"""The preflight's read of what the inventory names (plugins/module_utils/_fleet/preflight_resources.py): pure
messages and the instance-type fit; the reads go through fake clients answering as the AWS APIs do."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet import preflight_resources as pr

G5_XLARGE = {
    "InstanceType": "g5.xlarge",
    "GpuInfo": {"Gpus": [{"Count": 1, "MemoryInfo": {"SizeInMiB": 24576}}]},
    "VCpuInfo": {"DefaultVCpus": 4},
    "MemoryInfo": {"SizeInMiB": 16384},
}
FIT = {"instance_type": "g5.xlarge", "variable": "fleet_capacity_instance_type", "gpus": 1, "cpu": 0, "sidecar_memory": 128}


def test_the_example_s_old_memory_does_not_fit_g5_xlarge_and_memory_is_named():
    """30000/24000 MiB on g5.xlarge: the 24 GiB are the GPU's, the instance has 16 GiB of RAM."""
    problems = pr.fit_problems({**FIT, "memory": 24000, "memory_variable": "task_definition_memory_reservation"}, G5_XLARGE, "eu-west-1")
    assert len(problems) == 1
    assert problems[0].startswith("task_definition_memory_reservation = 24000 MiB with the sidecars' 128 MiB does not fit one g5.xlarge")
    assert "16384 MiB of RAM (GPU memory does not count)" in problems[0] and "GPU(s)" not in problems[0]


def test_a_task_that_fits_has_no_problem_and_gpus_and_cpu_are_checked():
    assert pr.fit_problems({**FIT, "memory": 12288}, G5_XLARGE, "eu-west-1") == []
    problems = pr.fit_problems({**FIT, "memory": 1024, "gpus": 2, "cpu": 8192}, G5_XLARGE, "eu-west-1")
    assert [p.split(" but ", maxsplit=1)[0] for p in problems] == ["one task needs 2 GPU(s)", "one task reserves 8192 CPU units"]
    assert pr.fit_problems({**FIT, "memory": 1}, None, "eu-west-1") == [
        "fleet_capacity_instance_type = 'g5.xlarge' is no instance type of region eu-west-1: give one the region offers "
        "(aws ec2 describe-instance-types)"
    ]


def test_lists_of_ids_are_named_by_index_and_empty_ids_left_out():
    expanded = pr.expand(
        [
            {"variable": "fleet_services_subnets", "kind": "subnet", "id": ["subnet-a", "", "subnet-c"]},
            {"variable": "fleet_capacity_ami_id", "kind": "image", "id": ""},
            {"variable": "fleet_load_balancing_vpc_id", "kind": "vpc", "id": "vpc-1"},
        ]
    )
    assert [(r["variable"], r["id"]) for r in expanded] == [
        ("fleet_services_subnets[0]", "subnet-a"),
        ("fleet_services_subnets[2]", "subnet-c"),
        ("fleet_load_balancing_vpc_id", "vpc-1"),
    ]


class FakeClients:
    """EC2 (filtered listings), ELBv2, ACM, SNS and S3 holding one of each; anything else is not found."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, service: str) -> FakeClients:
        return self

    def get_paginator(self, operation: str) -> Any:
        owner = self

        class Paginator:
            def paginate(self, **kwargs: Any) -> Any:
                owner.calls.append(operation)
                wanted = kwargs["Filters"][0]["Values"]
                found = {
                    "describe_vpcs": ("Vpcs", "VpcId", {"vpc-1"}),
                    "describe_subnets": ("Subnets", "SubnetId", {"subnet-a"}),
                    "describe_security_groups": ("SecurityGroups", "GroupId", {"sg-1"}),
                    "describe_images": ("Images", "ImageId", {"ami-1"}),
                }[operation]
                items = [{found[1]: i, "CidrBlock": "10.0.0.0/24"} for i in wanted if i in found[2]]

                class Result:
                    def build_full_result(self) -> dict[str, Any]:
                        return {found[0]: items}

                return Result()

        return Paginator()

    def _missing(self, code: str, operation: str) -> ClientError:
        return ClientError({"Error": {"Code": code, "Message": "not found"}}, operation)

    def describe_load_balancers(self, aws_retry: bool, LoadBalancerArns: list[str]) -> dict[str, Any]:
        if LoadBalancerArns != ["arn:lb"]:
            raise self._missing("LoadBalancerNotFound", "DescribeLoadBalancers")
        return {"LoadBalancers": [{"LoadBalancerArn": "arn:lb"}]}

    def describe_certificate(self, aws_retry: bool, CertificateArn: str) -> dict[str, Any]:
        if CertificateArn != "arn:cert":
            raise self._missing("ResourceNotFoundException", "DescribeCertificate")
        return {"Certificate": {"CertificateArn": CertificateArn}}

    def get_topic_attributes(self, aws_retry: bool, TopicArn: str) -> dict[str, Any]:
        if TopicArn != "arn:topic":
            raise self._missing("NotFound", "GetTopicAttributes")
        return {"Attributes": {}}

    def head_bucket(self, aws_retry: bool, Bucket: str) -> dict[str, Any]:
        if Bucket != "models":
            raise self._missing("404", "HeadBucket")
        return {}

    def describe_instance_types(self, aws_retry: bool, InstanceTypes: list[str]) -> dict[str, Any]:
        return {"InstanceTypes": [G5_XLARGE]}


def test_every_missing_id_is_named_with_its_variable_and_fix():
    resources = [
        {"variable": "fleet_load_balancing_vpc_id", "kind": "vpc", "id": "vpc-0nope"},
        {"variable": "fleet_services_subnets", "kind": "subnet", "id": ["subnet-a", "subnet-gone"]},
        {"variable": "fleet_services_security_groups", "kind": "security_group", "id": ["sg-1"]},
        {"variable": "fleet_load_balancing_alb_arn", "kind": "load_balancer", "id": "arn:lb-gone"},
        {"variable": "fleet_load_balancing_production.certificate_arn", "kind": "certificate", "id": "arn:cert"},
        {"variable": "fleet_capacity_ami_id", "kind": "image", "id": "ami-1"},
        {"variable": "fleet_alarms_actions", "kind": "topic", "id": ["arn:topic-gone"]},
        {"variable": "fleet_iam_model_bucket", "kind": "bucket", "id": "models"},
    ]
    clients = FakeClients()
    report = pr.preflight_report(clients, resources, {**FIT, "memory": 12288}, "123456789012", "eu-west-1")
    assert report["problems"] == [
        "fleet_load_balancing_vpc_id = 'vpc-0nope': no such VPC in account 123456789012, region eu-west-1: "
        "give the id of the VPC the fleet runs in (aws ec2 describe-vpcs)",
        "fleet_services_subnets[1] = 'subnet-gone': no such subnet in account 123456789012, region eu-west-1: "
        "give private subnets of that VPC (aws ec2 describe-subnets)",
        "fleet_load_balancing_alb_arn = 'arn:lb-gone': no such load balancer in account 123456789012, region eu-west-1: "
        "give the ARN of the existing ALB, or let role fleet_load_balancing create one",
        "fleet_alarms_actions[0] = 'arn:topic-gone': no such SNS topic in account 123456789012, region eu-west-1: "
        "create it, or give [] for no notification",
    ]
    # the listable kinds are read in one call each
    assert sorted(clients.calls) == ["describe_images", "describe_security_groups", "describe_subnets", "describe_vpcs"]
