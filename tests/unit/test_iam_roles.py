"""The pure functions of the iam_roles module: validation (each error names the field, the value and the fix) and
the plan of one role (create, each kind of drift, no drift for the same policy written differently, managed policies
attached and detached, a path change refused), and ensure() with the IAM client replaced at the client-function
boundary (every role planned before the first write; bad input and refusals write nothing). No AWS stand-in needed."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import InputError
from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet import iam_roles

ACCOUNT = "123456789012"
ECS_AGENT = "arn:aws:iam::aws:policy/service-role/AmazonEC2ContainerServiceforEC2Role"
SSM_CORE = "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"
BOUNDARY = f"arn:aws:iam::{ACCOUNT}:policy/fleet-boundary"
OWNED = {"Key": iam_roles.OWNER_TAG, "Value": iam_roles.OWNER_VALUE}
TRUST = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}],
}
SYNC = {
    "Version": "2012-10-17",
    "Statement": [
        {"Sid": "SyncModels", "Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::models/triton/*"},
        {"Sid": "List", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": "arn:aws:s3:::models"},
    ],
}


def params(**overrides: Any) -> dict[str, Any]:
    role = {
        "name": "triton-ecs-instance",
        "trust_policy": TRUST,
        "description": "ECS container instances",
        "managed_policies": [ECS_AGENT],
        "inline_policies": {"triton-model-sync": SYNC},
        "instance_profile": True,
    }
    values: dict[str, Any] = {"roles": [role], "path": "/", "permissions_boundary": "", "tags": {"team": "ml"}, "purge_tags": True}
    values.update(overrides)
    return values


def wanted(**overrides: Any) -> dict[str, Any]:
    p = params(**overrides)
    return iam_roles.wanted_role(p, p["roles"][0])


def existing(**role_overrides: Any) -> dict[str, Any]:
    """What read_role finds for a role that matches params() exactly."""
    role = {
        "RoleName": "triton-ecs-instance",
        "Path": "/",
        "Arn": f"arn:aws:iam::{ACCOUNT}:role/triton-ecs-instance",
        "AssumeRolePolicyDocument": copy.deepcopy(TRUST),
        "Description": "ECS container instances",
        "Tags": [{"Key": "team", "Value": "ml"}, OWNED],
    }
    role.update(role_overrides)
    return {
        "role": role,
        "managed_policies": [ECS_AGENT],
        "inline_policies": {"triton-model-sync": copy.deepcopy(SYNC)},
        "instance_profile": {"InstanceProfileName": "triton-ecs-instance", "Path": "/", "Roles": [{"RoleName": "triton-ecs-instance"}]},
    }


def actions(current: dict[str, Any], want: dict[str, Any]) -> list[str]:
    return [str(w) for w in iam_roles.plan(current, want)]


# ---------------------------------------------------------------- validate


def test_good_input_has_no_error() -> None:
    assert iam_roles.validate(params()) == []
    assert iam_roles.validate(params(path="/triton/fleet/", permissions_boundary=BOUNDARY)) == []


@pytest.mark.parametrize(
    ("role_change", "expected"),
    [
        ({"name": "triton ecs"}, ["roles[0].name 'triton ecs'", "e.g. triton-task"]),
        ({"name": "x" * 65}, ["roles[0].name", "1-64 letters"]),
        ({"trust_policy": {"Version": "2012-10-17"}}, ["roles[0].trust_policy is", "a dict with a Statement"]),
        (
            {"managed_policies": ["AmazonS3ReadOnlyAccess"]},
            ["roles[0].managed_policies: 'AmazonS3ReadOnlyAccess'", "arn:aws:iam::aws:policy/<name>"],
        ),
        ({"inline_policies": {"triton-model-sync": "{}"}}, ["roles[0].inline_policies.triton-model-sync is '{}'", "| from_json"]),
        ({"inline_policies": {"bad name": SYNC}}, ["roles[0].inline_policies: name 'bad name'", "1-128 letters"]),
        ({"description": "d" * 1001}, ["roles[0].description", "at most 1000 characters"]),
    ],
)
def test_each_role_error_names_the_field_the_value_and_the_fix(role_change: dict[str, Any], expected: list[str]) -> None:
    p = params()
    p["roles"][0].update(role_change)
    errors = iam_roles.validate(p)
    assert len(errors) == 1, errors
    for text in expected:
        assert text in errors[0]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"path": "triton"}, ["path 'triton'", "starts and ends with /"]),
        ({"path": "/triton"}, ["path '/triton'", "e.g. / or /triton/"]),
        ({"permissions_boundary": "fleet-boundary"}, ["permissions_boundary 'fleet-boundary'", 'or "" to remove it']),
        ({"tags": {"cost": 3}}, ["tags.cost is 3", "quote it"]),
        ({"tags": {"aws:owner": "x"}}, ["tags.aws:owner", "rename the tag"]),
        ({"roles": []}, ["roles is empty", "at least one role"]),
    ],
)
def test_each_module_error_names_the_field_the_value_and_the_fix(change: dict[str, Any], expected: list[str]) -> None:
    errors = iam_roles.validate(params(**change))
    assert len(errors) == 1, errors
    for text in expected:
        assert text in errors[0]


def test_a_role_given_twice_is_an_error() -> None:
    p = params()
    p["roles"].append(copy.deepcopy(p["roles"][0]))
    assert iam_roles.validate(p) == ["roles: 'triton-ecs-instance' is given 2 times; give each role once"]


# ---------------------------------------------------------------- plan


def test_a_missing_role_is_created_with_its_policies_and_profile() -> None:
    missing = {"role": None, "managed_policies": [], "inline_policies": {}, "instance_profile": None}
    assert actions(missing, wanted()) == [
        "create_role",
        f"attach_policy {ECS_AGENT}",
        "put_inline_policy triton-model-sync",
        "create_instance_profile triton-ecs-instance",
        "add_role_to_instance_profile triton-ecs-instance",
    ]


def test_a_converged_role_plans_nothing() -> None:
    assert actions(existing(), wanted()) == []


def test_the_same_policies_written_differently_are_no_drift() -> None:
    current = existing()
    # AWS's answer: keys in another order, single values as strings, statements reordered, the trust principal a list.
    current["inline_policies"]["triton-model-sync"] = {
        "Statement": [
            {"Resource": ["arn:aws:s3:::models"], "Action": "s3:ListBucket", "Effect": "Allow", "Sid": "List"},
            {"Action": ["s3:GetObject"], "Resource": "arn:aws:s3:::models/triton/*", "Sid": "SyncModels", "Effect": "Allow"},
        ],
        "Version": "2012-10-17",
    }
    current["role"]["AssumeRolePolicyDocument"] = {
        "Statement": [{"Action": ["sts:AssumeRole"], "Principal": {"Service": ["ec2.amazonaws.com"]}, "Effect": "Allow"}],
        "Version": "2012-10-17",
    }
    assert actions(current, wanted()) == []


def test_each_kind_of_drift_plans_its_write() -> None:
    other_trust = copy.deepcopy(TRUST)
    other_trust["Statement"][0]["Principal"]["Service"] = "ecs-tasks.amazonaws.com"
    assert actions(existing(AssumeRolePolicyDocument=other_trust), wanted()) == ["update_trust_policy"]
    assert actions(existing(Description="by hand"), wanted()) == ["update_description"]
    assert actions(existing(Tags=[{"Key": "team", "Value": "ops"}, {"Key": "old", "Value": "1"}, OWNED]), wanted()) == [
        "tag_role team",
        "untag_role old",
    ]
    changed_policy = existing()
    changed_policy["inline_policies"]["triton-model-sync"]["Statement"][0]["Resource"] = "*"
    assert actions(changed_policy, wanted()) == ["put_inline_policy triton-model-sync"]
    missing_policy = existing()
    missing_policy["inline_policies"]["triton-model-sync"] = None
    assert actions(missing_policy, wanted()) == ["put_inline_policy triton-model-sync"]


def test_a_description_left_out_is_left_alone() -> None:
    p = params()
    del p["roles"][0]["description"]
    assert actions(existing(Description="by hand"), iam_roles.wanted_role(p, p["roles"][0])) == []


def test_the_boundary_is_put_changed_and_removed() -> None:
    assert actions(existing(), wanted(permissions_boundary=BOUNDARY)) == [f"put_permissions_boundary {BOUNDARY}"]
    bounded = existing(PermissionsBoundary={"PermissionsBoundaryType": "Policy", "PermissionsBoundaryArn": BOUNDARY})
    assert actions(bounded, wanted(permissions_boundary=BOUNDARY)) == []
    assert actions(bounded, wanted()) == [f"delete_permissions_boundary {BOUNDARY}"]
    # Unset (the module's default) leaves a boundary as it is: someone else's guard stays.
    assert actions(bounded, wanted(permissions_boundary=None)) == []
    assert iam_roles.summary_after(bounded, wanted(permissions_boundary=None))["permissions_boundary"] == BOUNDARY


def test_managed_policies_are_exactly_the_list() -> None:
    current = existing()
    current["managed_policies"] = [SSM_CORE]
    assert actions(current, wanted()) == [f"attach_policy {ECS_AGENT}", f"detach_policy {SSM_CORE}"]


def test_other_inline_policies_and_tags_without_purge_are_left_alone() -> None:
    current = existing(Tags=[{"Key": "team", "Value": "ml"}, {"Key": "owner", "Value": "ops"}, OWNED])
    current["inline_policies"]["added-by-hand"] = {"Statement": [{"Effect": "Deny", "Action": "*", "Resource": "*"}]}
    assert actions(current, wanted(purge_tags=False)) == []
    assert actions(current, wanted(tags=None)) == []


def test_a_path_change_is_refused_naming_the_role_and_the_fix() -> None:
    with pytest.raises(InputError) as raised:
        iam_roles.plan(existing(), wanted(path="/triton/"))
    (error,) = raised.value.errors
    assert "role triton-ecs-instance has path '/', not '/triton/'" in error
    assert "delete the role" in error and "set path to '/'" in error


def test_the_instance_profile_is_completed_never_taken_from_another_role() -> None:
    empty = existing()
    empty["instance_profile"]["Roles"] = []
    assert actions(empty, wanted()) == ["add_role_to_instance_profile triton-ecs-instance"]
    taken = existing()
    taken["instance_profile"]["Roles"] = [{"RoleName": "someone-else"}]
    with pytest.raises(InputError, match="holds role someone-else"):
        iam_roles.plan(taken, wanted())
    moved = existing()
    moved["instance_profile"]["Path"] = "/old/"
    with pytest.raises(InputError, match="instance profile triton-ecs-instance has path '/old/'"):
        iam_roles.plan(moved, wanted())


def test_the_diff_shows_before_and_after() -> None:
    current = existing(Description="by hand")
    assert iam_roles.summary(current)["description"] == "by hand"
    after = iam_roles.summary_after(current, wanted(tags={"team": "ml", "cost": "gpu"}))
    assert after["description"] == "ECS container instances"
    assert after["tags"] == {"team": "ml", "cost": "gpu", iam_roles.OWNER_TAG: iam_roles.OWNER_VALUE}
    assert after["inline_policies"] == {"triton-model-sync": SYNC}
    assert iam_roles.summary({"role": None}) == {}


# ---------------------------------------------------------------- ensure


class FakeIam:
    """Stands in for the `_aws/iam.py` functions (monkeypatched): answers reads from `roles`, records writes."""

    def __init__(self, roles: dict[str, dict[str, Any]]) -> None:
        self.roles = roles
        self.reads: list[str] = []
        self.writes: list[str] = []


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeIam:
    state = FakeIam({"triton-ecs-instance": existing()})

    def read_role(_iam: Any, want: dict[str, Any]) -> dict[str, Any]:
        state.reads.append(want["name"])
        return copy.deepcopy(state.roles.get(want["name"], {"role": None, "managed_policies": [], "inline_policies": {}}))

    def apply(_iam: Any, want: dict[str, Any], writes: list[iam_roles.Write]) -> str | None:
        state.writes += [f"{want['name']}: {w}" for w in writes]
        return f"arn:aws:iam::{ACCOUNT}:role/{want['name']}" if writes and writes[0].action == "create_role" else None

    monkeypatch.setattr(iam_roles, "read_role", read_role)
    monkeypatch.setattr(iam_roles, "apply", apply)
    return state


def second_role() -> dict[str, Any]:
    return {"name": "triton-task", "trust_policy": TRUST, "managed_policies": [], "inline_policies": {}, "instance_profile": False}


def test_ensure_creates_and_reports(fake: FakeIam) -> None:
    p = params()
    p["roles"].append(second_role())
    result = iam_roles.ensure(None, p, check_mode=False)
    assert result["changed"] is True
    assert fake.writes == result["actions"] == ["triton-task: create_role"]
    assert [r["arn"] for r in result["roles"]] == [
        f"arn:aws:iam::{ACCOUNT}:role/triton-ecs-instance",
        f"arn:aws:iam::{ACCOUNT}:role/triton-task",
    ]
    assert result["instance_profiles"] == ["triton-ecs-instance"]
    assert list(result["diff"]["before"]) == ["triton-ecs-instance"]


def test_ensure_in_check_mode_writes_nothing(fake: FakeIam) -> None:
    p = params()
    p["roles"].append(second_role())
    result = iam_roles.ensure(None, p, check_mode=True)
    assert fake.writes == [] and result["changed"] is True
    assert result["roles"][1] == {"name": "triton-task", "arn": None, "actions": ["create_role"]}


def test_bad_input_is_refused_before_any_call(fake: FakeIam) -> None:
    with pytest.raises(InputError, match="path 'triton'"):
        iam_roles.ensure(None, params(path="triton"), check_mode=False)
    assert fake.reads == [] and fake.writes == []


def test_a_refused_role_stops_every_write(fake: FakeIam) -> None:
    fake.roles["triton-task"] = existing(RoleName="triton-task", Path="/old/")
    p = params()
    p["roles"].insert(0, second_role())
    with pytest.raises(InputError, match="role triton-task has path '/old/'"):
        iam_roles.ensure(None, p, check_mode=False)
    assert fake.reads == ["triton-task", "triton-ecs-instance"] and fake.writes == []
