"""The pure logic of the target_groups module (validation, the plan of each colour, immutable fields, the diff) and
its ensure() flow with the AWS calls replaced at the client-function boundary (`_aws/elbv2.py`): what each run would
write, that check mode writes nothing, and that bad input or an immutable field writes nothing."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from botocore.exceptions import ClientError

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import elbv2 as _elbv2
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import InputError
from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet import target_groups as tg

VPC = "vpc-0123456789abcdef0"
ARN = "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/{name}/0123456789abcdef"
PARAMS: dict[str, Any] = {
    "names": {"blue": "triton-blue", "green": "triton-green"},
    "vpc_id": VPC,
    "port": 8000,
    "protocol": "HTTP",
    "target_type": "ip",
    "health_check": {
        "path": "/v2/health/ready",
        "interval_s": 10,
        "timeout_s": 5,
        "healthy_threshold": 2,
        "unhealthy_threshold": 3,
        "matcher": "200",
    },
    "attributes": {"slow_start.duration_seconds": 60, "deregistration_delay.timeout_seconds": 60},
    "tags": {"team": "ml"},
    "purge_tags": False,
}
DEFAULT_ATTRIBUTES = {"slow_start.duration_seconds": "0", "deregistration_delay.timeout_seconds": "300", "stickiness.enabled": "false"}


def params(**changes: Any) -> dict[str, Any]:
    found = copy.deepcopy(PARAMS)
    found.update(changes)
    return found


def group(name: str, **changes: Any) -> dict[str, Any]:
    """A target group as describe_target_groups returns one, converged to PARAMS unless `changes` say otherwise."""
    found = {
        "TargetGroupArn": ARN.format(name=name),
        "TargetGroupName": name,
        "Protocol": "HTTP",
        "Port": 8000,
        "VpcId": VPC,
        "TargetType": "ip",
        "HealthCheckProtocol": "HTTP",
        "HealthCheckPort": "traffic-port",
        "HealthCheckPath": "/v2/health/ready",
        "HealthCheckIntervalSeconds": 10,
        "HealthCheckTimeoutSeconds": 5,
        "HealthyThresholdCount": 2,
        "UnhealthyThresholdCount": 3,
        "Matcher": {"HttpCode": "200"},
    }
    found.update(changes)
    return found


# ---------------------------------------------------------------- validation


def test_valid_params_pass() -> None:
    assert tg.validate(PARAMS) == []


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"names": {"blue": "triton-blue"}}, "names.green is None: a target group name is 1-32 letters"),
        ({"names": {"blue": "-blue", "green": "g"}}, "names.blue is '-blue'"),
        ({"names": {"blue": "b" * 33, "green": "g"}}, "names.blue is 'bbb"),
        ({"names": {"blue": "triton_blue", "green": "g"}}, "names.blue is 'triton_blue'"),
        ({"names": {"blue": "same", "green": "same"}}, "names.blue and names.green are both 'same': give each colour its own"),
        ({"vpc_id": "(known after apply)"}, "vpc_id is '(known after apply)': the VPC of the target groups, vpc-..."),
        ({"port": 0}, "port is 0: the port the targets listen on, 1-65535"),
        ({"port": 65536}, "port is 65536"),
        ({"health_check": {**PARAMS["health_check"], "path": "v2/health"}}, "health_check.path is 'v2/health': an absolute path"),
        ({"health_check": {**PARAMS["health_check"], "interval_s": 4}}, "health_check.interval_s is 4: it must be between 5 and 300"),
        ({"health_check": {**PARAMS["health_check"], "timeout_s": 1}}, "health_check.timeout_s is 1: it must be between 2 and 120"),
        (
            {"health_check": {**PARAMS["health_check"], "timeout_s": 10}},
            "health_check.timeout_s is 10: it must be less than health_check.interval_s (10)",
        ),
        (
            {"health_check": {**PARAMS["health_check"], "healthy_threshold": 11}},
            "health_check.healthy_threshold is 11: it must be between 2 and 10",
        ),
        ({"health_check": {**PARAMS["health_check"], "unhealthy_threshold": 1}}, "health_check.unhealthy_threshold is 1"),
        ({"health_check": {**PARAMS["health_check"], "matcher": "ok"}}, "health_check.matcher is 'ok': HTTP codes such as 200"),
        (
            {"attributes": {"slow_start.duration_seconds": 10}},
            "attributes.slow_start.duration_seconds is 10: slow start is 0 (off) or 30-900",
        ),
        ({"attributes": {"deregistration_delay.timeout_seconds": 3601}}, "it must be between 0 and 3600"),
        ({"tags": {"inferops:color": "red"}}, "tags.inferops:color: keys starting with 'inferops:color' are reserved"),
        ({"tags": {"aws:owner": "x"}}, "tags.aws:owner"),
    ],
)
def test_validation_names_the_option_and_the_fix(changes: dict[str, Any], fragment: str) -> None:
    errors = tg.validate(params(**changes))
    assert any(fragment in e for e in errors), errors


def test_good_names_pass() -> None:
    for name in ("a", "A1", "triton-blue", "x" * 32, "a-b-c"):
        assert tg.validate(params(names={"blue": name, "green": "other"})) == [], name


# ---------------------------------------------------------------- plan of one colour


def test_a_missing_group_is_created_with_everything() -> None:
    plan = tg.plan_color("blue", None, None, None, PARAMS)
    assert plan.create and plan.changed and plan.arn is None
    assert plan.actions == [
        "create target group triton-blue (blue)",
        "modify target group triton-blue (blue) attributes: deregistration_delay.timeout_seconds=60, slow_start.duration_seconds=60",
    ]
    assert plan.tags.to_set == {"inferops:color": "blue", "team": "ml"}
    assert plan.before == {}
    assert plan.after["attributes"] == {"deregistration_delay.timeout_seconds": "60", "slow_start.duration_seconds": "60"}
    assert plan.after["health_check"] == {
        "protocol": "HTTP", "port": "traffic-port", "path": "/v2/health/ready", "interval_s": 10, "timeout_s": 5,
        "healthy_threshold": 2, "unhealthy_threshold": 3, "matcher": "200",
    }  # fmt: skip
    fields = tg.create_fields(PARAMS, plan.name)
    assert fields["Name"] == "triton-blue" and fields["VpcId"] == VPC and fields["TargetType"] == "ip"
    assert fields["HealthCheckPort"] == "traffic-port" and fields["Matcher"] == {"HttpCode": "200"}


def test_a_converged_group_plans_nothing() -> None:
    current = {**DEFAULT_ATTRIBUTES, "slow_start.duration_seconds": "60", "deregistration_delay.timeout_seconds": "60"}
    plan = tg.plan_color("green", group("triton-green"), current, {"team": "ml", "inferops:color": "green", "other": "x"}, PARAMS)
    assert not plan.changed and plan.actions == []
    assert plan.before == plan.after
    assert plan.after["tags"] == {"inferops:color": "green", "other": "x", "team": "ml"}  # not purged


def test_only_what_differs_is_written() -> None:
    current = {**DEFAULT_ATTRIBUTES, "deregistration_delay.timeout_seconds": "60"}
    found = group("triton-blue", HealthCheckPath="/", HealthCheckIntervalSeconds=30, Matcher={"HttpCode": "200-299"})
    plan = tg.plan_color("blue", found, current, {"team": "old", "stale": "1", "inferops:color": "blue"}, params(purge_tags=True))
    assert plan.health_check == {"path": "/v2/health/ready", "interval_s": 10, "matcher": "200"}
    assert tg.health_check_fields(plan.health_check) == {
        "HealthCheckPath": "/v2/health/ready", "HealthCheckIntervalSeconds": 10, "Matcher": {"HttpCode": "200"},
    }  # fmt: skip
    assert plan.attributes == {"slow_start.duration_seconds": "60"}
    assert (plan.tags.to_set, plan.tags.to_remove) == ({"team": "ml"}, ["stale"])
    assert plan.actions == [
        "modify target group triton-blue (blue) health check: path=/v2/health/ready, interval_s=10, matcher=200",
        "modify target group triton-blue (blue) attributes: slow_start.duration_seconds=60",
        "tag target group triton-blue (blue): team=ml",
        "untag target group triton-blue (blue): stale",
    ]
    assert plan.before["health_check"]["path"] == "/" and plan.after["health_check"]["path"] == "/v2/health/ready"
    assert (plan.before["attributes"]["slow_start.duration_seconds"], plan.after["attributes"]["slow_start.duration_seconds"]) == (
        "0",
        "60",
    )


def test_without_tags_only_the_colour_tag_is_ensured() -> None:
    current = {**DEFAULT_ATTRIBUTES, "slow_start.duration_seconds": "60", "deregistration_delay.timeout_seconds": "60"}
    plan = tg.plan_color("blue", group("triton-blue"), current, {"team": "x"}, params(tags=None, purge_tags=True))
    assert (plan.tags.to_set, plan.tags.to_remove) == ({"inferops:color": "blue"}, [])


def test_an_unknown_attribute_of_an_existing_group_is_an_error() -> None:
    with pytest.raises(InputError, match=r"no_such\.key: not attributes of this target group"):
        tg.plan_color("blue", group("triton-blue"), DEFAULT_ATTRIBUTES, {}, params(attributes={"no_such.key": 1}))


def test_immutable_fields_name_the_field_both_values_and_the_fix() -> None:
    found = group("triton-blue", Port=9000, VpcId="vpc-0aaaaaaaaaaaaaaa0", TargetType="instance")
    errors = tg.immutable_errors("blue", found, PARAMS)
    assert [e.split(":")[0] for e in errors] == ["port", "vpc_id", "target_type"]
    assert errors[0] == (
        "port: target group triton-blue (blue) has 9000, asked for 8000; AWS cannot change it on an existing target group: "
        "give names a new name, or delete the group first"
    )
    assert tg.immutable_errors("blue", group("triton-blue"), PARAMS) == []


# ---------------------------------------------------------------- ensure() with the AWS calls replaced


class FakeElbv2:
    """The client functions of `_aws/elbv2.py` the module uses, over a dict of target groups by name."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, existing: dict[str, dict[str, Any]]) -> None:
        self.groups = existing
        self.attributes = {g["TargetGroupArn"]: dict(DEFAULT_ATTRIBUTES) for g in existing.values()}
        self.tags: dict[str, dict[str, str]] = {g["TargetGroupArn"]: {} for g in existing.values()}
        self.calls: list[str] = []
        self.writes: list[str] = []
        for name in ("describe_target_groups_by_name", "describe_tags", "describe_target_group_attributes"):
            monkeypatch.setattr(_elbv2, name, getattr(self, name))
        for name in ("create_target_group", "modify_target_group", "modify_target_group_attributes", "add_tags", "remove_tags"):
            monkeypatch.setattr(_elbv2, name, getattr(self, name))

    def describe_target_groups_by_name(self, _client: Any, names: list[str]) -> dict[str, Any]:
        self.calls.append("describe_target_groups")
        return {name: self.groups.get(name) for name in names}

    def describe_tags(self, _client: Any, arns: list[str]) -> dict[str, dict[str, str]]:
        self.calls.append("describe_tags")
        return {arn: dict(self.tags[arn]) for arn in arns}

    def describe_target_group_attributes(self, _client: Any, arn: str) -> dict[str, str]:
        self.calls.append("describe_target_group_attributes")
        return dict(self.attributes[arn])

    def create_target_group(self, _client: Any, fields: dict[str, Any], tags: dict[str, str]) -> dict[str, Any]:
        self.writes.append(f"create {fields['Name']}")
        created = group(fields["Name"])
        self.groups[fields["Name"]] = created
        self.attributes[created["TargetGroupArn"]] = dict(DEFAULT_ATTRIBUTES)
        self.tags[created["TargetGroupArn"]] = dict(tags)
        return created

    def modify_target_group(self, _client: Any, arn: str, fields: dict[str, Any]) -> dict[str, Any]:
        self.writes.append(f"modify {arn.split('/')[1]} {sorted(fields)}")
        return {}

    def modify_target_group_attributes(self, _client: Any, arn: str, attributes: dict[str, str]) -> dict[str, str]:
        self.writes.append(f"attributes {arn.split('/')[1]} {attributes}")
        self.attributes[arn].update(attributes)
        return self.attributes[arn]

    def add_tags(self, _client: Any, arn: str, tags: dict[str, str]) -> None:
        self.writes.append(f"add_tags {arn.split('/')[1]}")
        self.tags[arn].update(tags)

    def remove_tags(self, _client: Any, arn: str, keys: list[str]) -> None:
        self.writes.append(f"remove_tags {arn.split('/')[1]}")


def test_check_mode_on_a_new_account_writes_nothing_and_returns_no_arn(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeElbv2(monkeypatch, {})
    result = tg.ensure(None, PARAMS, check_mode=True)
    assert result["changed"] and fake.writes == []
    assert result["target_groups"] == {"blue": None, "green": None}
    assert result["diff"]["before"] == {"blue": {}, "green": {}}
    assert result["diff"]["after"]["blue"]["attributes"]["slow_start.duration_seconds"] == "60"


def test_create_then_rerun_writes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeElbv2(monkeypatch, {})
    created = tg.ensure(None, PARAMS, check_mode=False)
    assert created["changed"] and created["target_groups"]["green"] == ARN.format(name="triton-green")
    assert [w.split()[0] for w in fake.writes] == ["create", "attributes", "create", "attributes"]
    fake.writes.clear()
    fake.calls.clear()
    again = tg.ensure(None, PARAMS, check_mode=False)
    assert not again["changed"] and again["actions"] == [] and fake.writes == []
    assert again["diff"]["before"] == again["diff"]["after"] == created["settings"]
    # One read of both groups, one of their tags, one of each group's attributes.
    assert fake.calls == ["describe_target_groups", "describe_tags", "describe_target_group_attributes", "describe_target_group_attributes"]


def test_an_immutable_field_on_either_colour_fails_before_any_write(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeElbv2(monkeypatch, {"triton-blue": group("triton-blue"), "triton-green": group("triton-green", Protocol="HTTPS")})
    with pytest.raises(InputError) as failed:
        tg.ensure(None, params(attributes={"slow_start.duration_seconds": 90}), check_mode=False)
    assert failed.value.errors == [
        "protocol: target group triton-green (green) has 'HTTPS', asked for 'HTTP'; AWS cannot change it on an existing "
        "target group: give names a new name, or delete the group first"
    ]
    assert fake.writes == []


def test_bad_input_makes_no_call(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeElbv2(monkeypatch, {})
    with pytest.raises(InputError):
        tg.ensure(None, params(port=0), check_mode=False)
    assert fake.calls == [] and fake.writes == []


# ---------------------------------------------------------------- the read by names (_aws/elbv2.py)


class ByName:
    """describe_target_groups(Names=...) as AWS answers it: the whole call fails when one name is missing."""

    def __init__(self, existing: list[str]) -> None:
        self.existing = existing
        self.asked: list[list[str]] = []

    def describe_target_groups(self, aws_retry: bool, Names: list[str]) -> dict[str, Any]:
        self.asked.append(Names)
        if any(name not in self.existing for name in Names):
            raise ClientError({"Error": {"Code": "TargetGroupNotFound", "Message": "One or more target groups not found"}}, "Describe")
        return {"TargetGroups": [group(name) for name in Names]}


def test_describe_by_name_one_call_when_both_exist() -> None:
    client = ByName(["triton-blue", "triton-green"])
    found = _elbv2.describe_target_groups_by_name(client, ["triton-blue", "triton-green"])
    assert {name: g["TargetGroupName"] for name, g in found.items()} == {"triton-blue": "triton-blue", "triton-green": "triton-green"}
    assert client.asked == [["triton-blue", "triton-green"]]


def test_describe_by_name_asks_each_when_one_is_missing() -> None:
    client = ByName(["triton-blue"])
    found = _elbv2.describe_target_groups_by_name(client, ["triton-blue", "triton-green"])
    assert found["triton-green"] is None and found["triton-blue"]["TargetGroupName"] == "triton-blue"
    assert client.asked == [["triton-blue", "triton-green"], ["triton-blue"], ["triton-green"]]


# ---------------------------------------------------------------- gRPC target groups

GRPC = {
    "names": {"blue": "triton-grpc-blue", "green": "triton-grpc-green"},
    "port": 8001,
    "protocol_version": "GRPC",
    "health_check": {**PARAMS["health_check"], "path": "/inference.GRPCInferenceService/ServerReady", "matcher": "0"},
}


def test_a_grpc_group_is_created_with_its_protocol_version_and_grpc_codes() -> None:
    asked = params(**GRPC)
    assert tg.validate(asked) == []
    fields = tg.create_fields(asked, "triton-grpc-blue")
    assert fields["ProtocolVersion"] == "GRPC" and fields["Port"] == 8001
    assert fields["Matcher"] == {"GrpcCode": "0"} and fields["HealthCheckPath"] == "/inference.GRPCInferenceService/ServerReady"
    assert tg.plan_color("blue", None, None, None, asked).after["protocol_version"] == "GRPC"


def test_a_converged_grpc_group_plans_nothing_and_its_codes_are_read_back() -> None:
    asked = params(**GRPC)
    found = group(
        "triton-grpc-blue",
        Port=8001,
        ProtocolVersion="GRPC",
        HealthCheckPath="/inference.GRPCInferenceService/ServerReady",
        Matcher={"GrpcCode": "0"},
    )
    assert tg.immutable_errors("blue", found, asked) == []
    plan = tg.plan_color(
        "blue",
        found,
        DEFAULT_ATTRIBUTES | {k: str(v) for k, v in PARAMS["attributes"].items()},
        {"inferops:color": "blue", "team": "ml"},
        asked,
    )
    assert not plan.changed, plan.actions
    plan = tg.plan_color("blue", {**found, "Matcher": {"GrpcCode": "12"}}, None, None, params(**GRPC, attributes={}, tags=None))
    assert plan.health_check == {"matcher": "0"}
    assert tg.health_check_fields(plan.health_check, "GRPC") == {"Matcher": {"GrpcCode": "0"}}


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"protocol_version": "HTTP3"}, "protocol_version is 'HTTP3': one of HTTP1, HTTP2, GRPC"),
        ({**GRPC, "health_check": {**GRPC["health_check"], "matcher": "200"}}, "health_check.matcher is '200': with protocol_version GRPC"),
        ({**GRPC, "health_check": {**GRPC["health_check"], "path": "/v2/health/ready"}}, "an HTTP path: with protocol_version GRPC"),
    ],
)
def test_grpc_validation_names_the_option_and_the_fix(changes: dict[str, Any], fragment: str) -> None:
    errors = tg.validate(params(**changes))
    assert any(fragment in e for e in errors), errors


def test_an_http1_group_asked_as_grpc_names_the_protocol_version() -> None:
    found = group("triton-blue", ProtocolVersion="HTTP1")
    errors = tg.immutable_errors("blue", found, params(protocol_version="GRPC"))
    assert errors == [
        "protocol_version: target group triton-blue (blue) has 'HTTP1', asked for 'GRPC'; AWS cannot change it on an existing "
        "target group: give names a new name, or delete the group first"
    ]
    assert tg.immutable_errors("blue", group("triton-blue"), PARAMS) == []  # a group that does not report it is HTTP1
