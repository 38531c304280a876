"""inferops.triton_ecs.target_groups against a moto server (the stand-in for ELBv2; its request recorder lists the
calls): check mode on a new account reports both groups to create with no write and no ARN, a run creates both, a
second run changes and writes nothing, a changed slow start and health check path show in check mode's diff with no
write and are then applied, a field AWS cannot change fails before any write naming it, and bad input fails with no
AWS call at all."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.harness.ansible import run_playbook
from tests.harness.aws_calls import recorded_actions, start_recording, writes
from tests.harness.moto import MotoServer

PLAYBOOK = Path(__file__).parent / "playbooks" / "target_groups_module.yml"
TASK = "Target groups"
NAMES = {"blue": "tg-blue", "green": "tg-green"}
ATTRIBUTES = {"slow_start.duration_seconds": 60, "deregistration_delay.timeout_seconds": 45}


def run(moto: MotoServer, vpc: str, **options: Any) -> tuple[dict[str, Any], list[str]]:
    """One module run with NAMES, the VPC and ATTRIBUTES unless `options` say otherwise (check/diff passed on):
    its result and the write calls moto received during it."""
    modes = {key: options.pop(key) for key in ("check", "diff") if key in options}
    extra_vars = {"aws_endpoint_url": moto.endpoint, "tg_names": NAMES, "tg_vpc_id": vpc, "tg_attributes": ATTRIBUTES}
    extra_vars.update({f"tg_{key}": value for key, value in options.items()})
    start_recording(moto)
    result = run_playbook(PLAYBOOK, extra_vars=extra_vars, **modes)
    return result.result(TASK), writes(moto)


def vpc_of(moto: MotoServer) -> str:
    return moto.client("ec2").create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]


def groups(moto: MotoServer) -> dict[str, dict[str, Any]]:
    return {g["TargetGroupName"]: g for g in moto.client("elbv2").describe_target_groups()["TargetGroups"]}


def attributes_of(moto: MotoServer, arn: str) -> dict[str, str]:
    return {a["Key"]: a["Value"] for a in moto.client("elbv2").describe_target_group_attributes(TargetGroupArn=arn)["Attributes"]}


def tags_of(moto: MotoServer, arn: str) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in moto.client("elbv2").describe_tags(ResourceArns=[arn])["TagDescriptions"][0]["Tags"]}


def test_create_rerun_change_in_check_mode_then_applied(moto_server: MotoServer) -> None:
    vpc = vpc_of(moto_server)

    planned, written = run(moto_server, vpc, check=True, diff=True, tags={"team": "ml"})
    assert planned["changed"] is True and written == []
    assert planned["target_groups"] == {"blue": None, "green": None}
    assert planned["actions"] == [
        action
        for color, name in NAMES.items()
        for action in (
            f"create target group {name} ({color})",
            f"modify target group {name} ({color}) attributes: deregistration_delay.timeout_seconds=45, slow_start.duration_seconds=60",
        )
    ]
    assert planned["diff"]["before"] == {"blue": {}, "green": {}}
    assert planned["diff"]["after"]["green"]["attributes"] == {
        "deregistration_delay.timeout_seconds": "45",
        "slow_start.duration_seconds": "60",
    }
    assert groups(moto_server) == {}

    created, written = run(moto_server, vpc, tags={"team": "ml"})
    assert created["changed"] is True and created["actions"] == planned["actions"]
    assert sorted(written) == sorted(["CreateTargetGroup", "ModifyTargetGroupAttributes"] * 2)
    found = groups(moto_server)
    assert created["target_groups"] == {color: found[name]["TargetGroupArn"] for color, name in NAMES.items()}
    for color, name in NAMES.items():
        group, arn = found[name], found[name]["TargetGroupArn"]
        assert (group["Protocol"], group["Port"], group["VpcId"], group["TargetType"]) == ("HTTP", 8000, vpc, "ip")
        assert (group["HealthCheckPath"], group["HealthCheckPort"], group["HealthCheckIntervalSeconds"]) == (
            "/v2/health/ready",
            "traffic-port",
            10,
        )
        assert (group["HealthCheckTimeoutSeconds"], group["HealthyThresholdCount"], group["UnhealthyThresholdCount"]) == (5, 2, 3)
        assert group["Matcher"] == {"HttpCode": "200"}
        assert {k: attributes_of(moto_server, arn)[k] for k in ATTRIBUTES} == {k: str(v) for k, v in ATTRIBUTES.items()}
        assert tags_of(moto_server, arn) == {"team": "ml", "inferops:color": color}
    assert created["settings"]["blue"]["health_check"]["path"] == "/v2/health/ready"

    for check in (True, False):
        again, written = run(moto_server, vpc, check=check, tags={"team": "ml"})
        assert again["changed"] is False and again["actions"] == [] and written == []
        assert again["target_groups"] == created["target_groups"]
        assert again["settings"] == created["settings"]

    # Slow start and the health check path changed: check mode shows both colours' diff and writes nothing.
    changed = {"attributes": {**ATTRIBUTES, "slow_start.duration_seconds": 90}, "health_check": {"path": "/v2/health/live"}}
    planned, written = run(moto_server, vpc, check=True, diff=True, tags={"team": "ml"}, **changed)
    assert planned["changed"] is True and written == []
    assert planned["target_groups"] == created["target_groups"]
    for color, name in NAMES.items():
        before, after = planned["diff"]["before"][color], planned["diff"]["after"][color]
        assert (before["attributes"]["slow_start.duration_seconds"], after["attributes"]["slow_start.duration_seconds"]) == ("60", "90")
        assert (before["health_check"]["path"], after["health_check"]["path"]) == ("/v2/health/ready", "/v2/health/live")
        assert {k: v for k, v in before.items() if k not in ("attributes", "health_check")} == {
            k: v for k, v in after.items() if k not in ("attributes", "health_check")
        }
        assert f"modify target group {name} ({color}) attributes: slow_start.duration_seconds=90" in planned["actions"]
        assert f"modify target group {name} ({color}) health check: path=/v2/health/live" in planned["actions"]
    assert groups(moto_server)["tg-blue"]["HealthCheckPath"] == "/v2/health/ready"

    applied, written = run(moto_server, vpc, tags={"team": "ml"}, **changed)
    assert applied["changed"] is True and applied["actions"] == planned["actions"]
    assert sorted(written) == sorted(["ModifyTargetGroup", "ModifyTargetGroupAttributes"] * 2)
    for name in NAMES.values():
        group = groups(moto_server)[name]
        assert group["HealthCheckPath"] == "/v2/health/live"
        assert attributes_of(moto_server, group["TargetGroupArn"])["slow_start.duration_seconds"] == "90"
    again, written = run(moto_server, vpc, tags={"team": "ml"}, **changed)
    assert again["changed"] is False and written == []

    # Tags: a value changed and a key added by hand, purged (the colour tag stays).
    elbv2 = moto_server.client("elbv2")
    elbv2.add_tags(ResourceArns=[created["target_groups"]["green"]], Tags=[{"Key": "old", "Value": "1"}])
    retagged, written = run(moto_server, vpc, tags={"team": "ops"}, **changed)
    assert retagged["actions"] == [
        "tag target group tg-blue (blue): team=ops",
        "tag target group tg-green (green): team=ops",
        "untag target group tg-green (green): old",
    ]
    assert sorted(written) == ["AddTags", "AddTags", "RemoveTags"]
    assert tags_of(moto_server, created["target_groups"]["green"]) == {"team": "ops", "inferops:color": "green"}


def test_one_colour_missing_is_created_the_other_converged(moto_server: MotoServer) -> None:
    vpc = vpc_of(moto_server)
    elbv2 = moto_server.client("elbv2")
    blue = elbv2.create_target_group(Name="tg-blue", Protocol="HTTP", Port=8000, VpcId=vpc, TargetType="ip")["TargetGroups"][0]

    planned, written = run(moto_server, vpc, check=True)
    assert written == []
    assert planned["target_groups"] == {"blue": blue["TargetGroupArn"], "green": None}
    assert "create target group tg-green (green)" in planned["actions"]
    assert "tag target group tg-blue (blue): inferops:color=blue" in planned["actions"]

    created, written = run(moto_server, vpc)
    assert created["actions"] == planned["actions"]
    assert "CreateTargetGroup" in written and written.count("ModifyTargetGroupAttributes") == 2
    assert created["target_groups"]["blue"] == blue["TargetGroupArn"]
    again, written = run(moto_server, vpc)
    assert again["changed"] is False and written == []


def test_a_field_aws_cannot_change_fails_before_any_write(moto_server: MotoServer) -> None:
    vpc = vpc_of(moto_server)
    created, _written = run(moto_server, vpc)
    assert created["changed"] is True

    failed, written = run(moto_server, vpc, port=8001, attributes={"slow_start.duration_seconds": 120})
    assert failed["failed"] is True and written == []
    assert "port: target group tg-blue (blue) has 8000, asked for 8001" in failed["msg"]
    assert "port: target group tg-green (green) has 8000, asked for 8001" in failed["msg"]
    assert "give names a new name, or delete the group first" in failed["msg"]
    group = groups(moto_server)["tg-blue"]
    assert attributes_of(moto_server, group["TargetGroupArn"])["slow_start.duration_seconds"] == "60"

    failed, written = run(moto_server, vpc, attributes={"no_such.attribute": 1})
    assert failed["failed"] is True and written == []
    assert "no_such.attribute: not attributes of this target group" in failed["msg"]


def test_bad_input_fails_naming_the_option_before_any_call(moto_server: MotoServer) -> None:
    vpc = vpc_of(moto_server)
    failed, _written = run(moto_server, vpc, names={"blue": "tg-blue"})
    assert failed["failed"] is True and "green" in failed["msg"]
    assert recorded_actions(moto_server) == []

    failed, _written = run(
        moto_server,
        vpc,
        names={"blue": "-tg", "green": "-tg"},
        health_check={"interval_s": 5, "timeout_s": 5},
        attributes={"slow_start.duration_seconds": 10},
        port=70000,
    )
    assert failed["failed"] is True
    assert recorded_actions(moto_server) == []  # not even a read
    for fragment in (
        "names.blue is '-tg': a target group name is 1-32 letters",
        "names.blue and names.green are both '-tg'",
        "port is 70000: the port the targets listen on, 1-65535",
        "health_check.timeout_s is 5: it must be less than health_check.interval_s (5)",
        "attributes.slow_start.duration_seconds is 10: slow start is 0 (off) or 30-900 seconds",
    ):
        assert fragment in failed["msg"], failed["msg"]


def test_grpc_groups_are_created_with_grpc_codes_and_a_rerun_writes_nothing(moto_server: MotoServer) -> None:
    vpc = vpc_of(moto_server)
    grpc = {"path": "/inference.GRPCInferenceService/ServerReady", "matcher": "0"}
    names = {"blue": "tg-grpc-blue", "green": "tg-grpc-green"}
    created, written = run(moto_server, vpc, names=names, port=8001, protocol_version="GRPC", health_check=grpc)
    assert created["changed"] is True and "CreateTargetGroup" in written
    found = groups(moto_server)["tg-grpc-blue"]
    assert found["ProtocolVersion"] == "GRPC" and found["Matcher"] == {"GrpcCode": "0"} and found["Port"] == 8001
    assert created["settings"]["blue"]["protocol_version"] == "GRPC"

    again, written = run(moto_server, vpc, names=names, port=8001, protocol_version="GRPC", health_check=grpc, check=True, diff=True)
    assert again["changed"] is False and written == []
    again, written = run(moto_server, vpc, names=names, port=8001, protocol_version="GRPC", health_check=grpc)
    assert again["changed"] is False and written == []

    failed, written = run(moto_server, vpc, names=names, port=8001)
    assert failed["failed"] is True and written == []
    assert "protocol_version: target group tg-grpc-blue (blue) has 'GRPC', asked for 'HTTP1'" in failed["msg"]
