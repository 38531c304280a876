"""inferops.triton_ecs.iam_roles against a moto server (the AWS stand-in; its request recorder lists the write
calls): check mode on an empty account writes nothing, a run creates two roles with their policies and the instance
profile, a second run changes and writes nothing, drift (trust policy, description, an inline policy, a detached
managed policy) is reported in check mode and converged, tags converge (a value set, a key purged), bad input fails
naming the field with no AWS call at all, and --diff shows each role before and after. A role of the same name made by
someone else (no ownership tag) is left exactly as it is - its trust policy, managed policies, boundary and tags - until
`adopt` is given; no boundary is removed by default."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.harness.ansible import run_playbook
from tests.harness.aws_calls import recorded_actions, start_recording, writes
from tests.harness.moto import ACCOUNT_ID, MotoServer

PLAYBOOK = Path(__file__).parent / "playbooks" / "iam_roles_module.yml"
# The tag the module puts on the roles it creates (plugins/module_utils/_fleet/iam_roles.py OWNER_TAG).
OWNED = {"Key": "inferops:managed-by", "Value": "inferops.triton_ecs.iam_roles"}
TASK = "IAM roles"
ECS_AGENT_POLICY = "arn:aws:iam::aws:policy/service-role/AmazonEC2ContainerServiceforEC2Role"
MODEL_READ = {
    "Version": "2012-10-17",
    "Statement": [{"Sid": "ReadModels", "Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::example-models/triton/*"}],
}


def trust(service: str, conditions: dict[str, Any] | None = None) -> dict[str, Any]:
    statement: dict[str, Any] = {"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}
    if conditions:
        statement["Condition"] = conditions
    return {"Version": "2012-10-17", "Statement": [statement]}


ROLES = [
    {
        "name": "triton-task",
        "description": "Reads the model repository",
        "trust_policy": trust("ecs-tasks.amazonaws.com", {"StringEquals": {"aws:SourceAccount": ACCOUNT_ID}}),
        "inline_policies": {"triton-model-read": MODEL_READ},
    },
    {
        "name": "triton-ecs-instance",
        "description": "ECS container instances of the GPU fleet",
        "trust_policy": trust("ec2.amazonaws.com"),
        "managed_policies": [ECS_AGENT_POLICY],
        "instance_profile": True,
    },
]


@pytest.fixture(autouse=True)
def aws_managed_policies(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto loads AWS managed policies (the instance role attaches the ECS agent's) only when asked; set before the
    moto_server fixture starts the server."""
    monkeypatch.setenv("MOTO_IAM_LOAD_MANAGED_POLICIES", "true")


def run(
    moto: MotoServer, roles: list[dict[str, Any]], tags: dict[str, str] | None = None, **kwargs: Any
) -> tuple[dict[str, Any], list[str]]:
    """One module run (tags purged, the module's default): its result and the write calls moto received during it."""
    start_recording(moto)
    result = run_playbook(
        PLAYBOOK, extra_vars={"aws_endpoint_url": moto.endpoint, "iam_roles": roles, "iam_tags": tags or {"team": "ml"}}, **kwargs
    )
    return result.result(TASK), writes(moto)


def test_create_rerun_drift_and_diff(moto_server: MotoServer) -> None:
    iam = moto_server.client("iam")

    planned, written = run(moto_server, ROLES, check=True)
    assert planned["changed"] is True and written == []
    assert [r["arn"] for r in planned["roles"]] == [None, None]
    assert "triton-ecs-instance: create_instance_profile triton-ecs-instance" in planned["actions"]
    assert {r["RoleName"] for r in iam.list_roles()["Roles"]}.isdisjoint(["triton-task", "triton-ecs-instance"])

    created, written = run(moto_server, ROLES)
    assert created["changed"] is True
    assert created["roles"][0]["arn"] == f"arn:aws:iam::{ACCOUNT_ID}:role/triton-task"
    assert created["instance_profiles"] == ["triton-ecs-instance"]
    assert sorted(written) == sorted(
        ["CreateRole", "PutRolePolicy", "CreateRole", "AttachRolePolicy", "CreateInstanceProfile", "AddRoleToInstanceProfile"]
    )
    assert iam.get_role_policy(RoleName="triton-task", PolicyName="triton-model-read")["PolicyDocument"] == MODEL_READ
    assert sorted(iam.get_role(RoleName="triton-task")["Role"]["Tags"], key=str) == sorted([{"Key": "team", "Value": "ml"}, OWNED], key=str)
    profile = iam.get_instance_profile(InstanceProfileName="triton-ecs-instance")["InstanceProfile"]
    assert [r["RoleName"] for r in profile["Roles"]] == ["triton-ecs-instance"]

    # The same input with the policy JSON reordered and a single value as a list: no drift.
    reordered = copy.deepcopy(ROLES)
    reordered[0]["inline_policies"]["triton-model-read"] = json.loads(
        '{"Statement": [{"Resource": ["arn:aws:s3:::example-models/triton/*"], "Action": ["s3:GetObject"], '
        '"Effect": "Allow", "Sid": "ReadModels"}], "Version": "2012-10-17"}'
    )
    for roles in (ROLES, reordered):
        again, written = run(moto_server, roles)
        assert again["changed"] is False and again["actions"] == [] and written == []

    # Drift made behind the module's back.
    iam.update_assume_role_policy(RoleName="triton-task", PolicyDocument=json.dumps(trust("ecs-tasks.amazonaws.com")))
    iam.update_role(RoleName="triton-task", Description="changed by hand")
    iam.put_role_policy(RoleName="triton-task", PolicyName="triton-model-read", PolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}],
    }))  # fmt: skip
    iam.detach_role_policy(RoleName="triton-ecs-instance", PolicyArn=ECS_AGENT_POLICY)
    drift = [
        "triton-task: update_trust_policy",
        "triton-task: update_description",
        "triton-task: put_inline_policy triton-model-read",
        f"triton-ecs-instance: attach_policy {ECS_AGENT_POLICY}",
    ]

    planned, written = run(moto_server, ROLES, check=True, diff=True)
    assert planned["changed"] is True and planned["actions"] == drift and written == []
    before, after = planned["diff"]["before"], planned["diff"]["after"]
    assert before["triton-task"]["description"] == "changed by hand"
    assert after["triton-task"]["description"] == "Reads the model repository"
    assert after["triton-task"]["inline_policies"] == {"triton-model-read": MODEL_READ}
    assert (before["triton-ecs-instance"]["managed_policies"], after["triton-ecs-instance"]["managed_policies"]) == ([], [ECS_AGENT_POLICY])

    converged, written = run(moto_server, ROLES)
    assert converged["actions"] == drift
    assert sorted(written) == ["AttachRolePolicy", "PutRolePolicy", "UpdateAssumeRolePolicy", "UpdateRole"]
    role = iam.get_role(RoleName="triton-task")["Role"]
    assert role["AssumeRolePolicyDocument"]["Statement"][0]["Condition"] == {"StringEquals": {"aws:SourceAccount": ACCOUNT_ID}}
    again, written = run(moto_server, ROLES)
    assert again["changed"] is False and written == []

    # Tags converge on every run: a changed value is set, a key added by hand is purged.
    iam.tag_role(RoleName="triton-task", Tags=[{"Key": "old", "Value": "1"}])
    retagged, written = run(moto_server, ROLES, tags={"team": "ops"})
    assert [a for a in retagged["actions"] if a.startswith("triton-task")] == ["triton-task: tag_role team", "triton-task: untag_role old"]
    assert sorted(written) == ["TagRole", "TagRole", "UntagRole"]
    assert sorted(iam.get_role(RoleName="triton-task")["Role"]["Tags"], key=str) == sorted(
        [{"Key": "team", "Value": "ops"}, OWNED], key=str
    )


def test_bad_input_fails_naming_the_field_before_any_call(moto_server: MotoServer) -> None:
    bad = copy.deepcopy(ROLES)
    bad[0]["managed_policies"] = ["AmazonS3ReadOnlyAccess"]
    bad[1]["name"] = "triton ecs instance"
    result, _written = run(moto_server, bad)
    assert result["failed"] is True
    assert "roles[0].managed_policies: 'AmazonS3ReadOnlyAccess' is not a managed policy ARN" in result["msg"]
    assert "roles[1].name 'triton ecs instance'" in result["msg"]
    assert recorded_actions(moto_server) == []  # not even a read


def test_someone_elses_role_is_left_alone_until_adopted(moto_server: MotoServer) -> None:
    """Adversarial (issue 28, IAM takeover): a role of the fleet's name made by another team, with its own trust
    policy, managed policy, permissions boundary and tags. Stand-in: moto server (its recorder lists the writes)."""
    iam = moto_server.client("iam")
    boundary = iam.create_policy(
        PolicyName="team-boundary",
        PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}),
    )["Policy"]["Arn"]
    theirs = trust("ec2.amazonaws.com")
    iam.create_role(
        RoleName="triton-task",
        AssumeRolePolicyDocument=json.dumps(theirs),
        PermissionsBoundary=boundary,
        Tags=[{"Key": "owner", "Value": "data-team"}],
    )
    iam.attach_role_policy(RoleName="triton-task", PolicyArn=ECS_AGENT_POLICY)
    before = iam.get_role(RoleName="triton-task")["Role"]

    refused, written = run(moto_server, ROLES[:1])
    assert refused["failed"] is True and written == []
    assert "role triton-task exists and is not this collection's" in refused["msg"]
    for would in ("update_trust_policy", f"detach_policy {ECS_AGENT_POLICY}", "untag_role owner", "adopt: true"):
        assert would in refused["msg"]
    assert iam.get_role(RoleName="triton-task")["Role"] == before

    # Adopted: converged and tagged as the collection's; the boundary someone set stays (none was given).
    adopted, written = run(moto_server, [dict(ROLES[0], adopt=True)])
    assert adopted["changed"] is True and "DeleteRolePermissionsBoundary" not in written
    role = iam.get_role(RoleName="triton-task")["Role"]
    assert role["PermissionsBoundary"]["PermissionsBoundaryArn"] == boundary
    assert OWNED in role["Tags"]
    # Now the collection's: no adopt needed, nothing to change.
    again, written = run(moto_server, ROLES[:1])
    assert again["changed"] is False and written == []
