"""Adversarial input to iam_roles (issue 28, class "IAM takeover and grants"): a role of the same name that is someone
else's, a boundary someone else set, trust policies anyone could assume, admin-like policies.

Stand-in: none - the pure plan and validation, and ensure() with the IAM client functions replaced at the
client-function boundary (as tests/unit/test_iam_roles.py does); tests/integration/test_iam_roles.py runs the takeover
against a moto server. The trust-policy and grant cases are also generated (property-style, a fixed seed): every
generated document is refused exactly when one of its Allow statements lets anyone or anything in.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import InputError
from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet import iam_roles

ACCOUNT = "123456789012"
BOUNDARY = f"arn:aws:iam::{ACCOUNT}:policy/their-boundary"
OWNED = {"Key": iam_roles.OWNER_TAG, "Value": iam_roles.OWNER_VALUE}
TRUST = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Principal": {"Service": "ecs-tasks.amazonaws.com"}, "Action": "sts:AssumeRole"}],
}


def params(role: dict[str, Any] | None = None, **module: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "roles": [{"name": "triton-task", "trust_policy": TRUST, "managed_policies": [], "inline_policies": {}, **(role or {})}],
        "path": "/",
        "permissions_boundary": None,
        "tags": {"team": "ml"},
        "purge_tags": True,
    }
    values.update(module)
    return values


def wanted(role: dict[str, Any] | None = None, **module: Any) -> dict[str, Any]:
    p = params(role, **module)
    return iam_roles.wanted_role(p, p["roles"][0])


def theirs(tags: list[dict[str, str]] | None = None, **role: Any) -> dict[str, Any]:
    """What read_role finds for a role another team made: its own trust, a managed policy, a boundary, its tags."""
    described = {
        "RoleName": "triton-task",
        "Path": "/",
        "Arn": f"arn:aws:iam::{ACCOUNT}:role/triton-task",
        "AssumeRolePolicyDocument": {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:root"}, "Action": "sts:AssumeRole"}],
        },
        "PermissionsBoundary": {"PermissionsBoundaryType": "Policy", "PermissionsBoundaryArn": BOUNDARY},
        "Tags": tags if tags is not None else [{"Key": "owner", "Value": "data-team"}],
        **role,
    }
    return {
        "role": described,
        "managed_policies": ["arn:aws:iam::aws:policy/AmazonS3ReadOnlyAccess"],
        "inline_policies": {},
        "instance_profile": None,
    }


# ---------------------------------------------------------------- someone else's role


def test_adversarial_iam_roles_someone_elses_role_is_refused_naming_what_adopting_would_do():
    with pytest.raises(InputError) as raised:
        iam_roles.plan(theirs(), wanted())
    (message,) = raised.value.errors
    assert "role triton-task exists and is not this collection's" in message
    for write in ("update_trust_policy", "detach_policy arn:aws:iam::aws:policy/AmazonS3ReadOnlyAccess", "untag_role owner"):
        assert write in message
    assert "roles[].adopt: true" in message and "fleet_iam_adopt_roles" in message


@pytest.mark.parametrize(
    "tags",
    [
        [],
        [{"Key": iam_roles.OWNER_TAG, "Value": "someone-else"}],
        [{"Key": iam_roles.OWNER_TAG.upper(), "Value": iam_roles.OWNER_VALUE}],
        [{"Key": "managed-by", "Value": iam_roles.OWNER_VALUE}],
    ],
    ids=["no-tags", "other-owner", "key-case", "other-key"],
)
def test_adversarial_iam_roles_only_the_exact_ownership_tag_counts(tags):
    with pytest.raises(InputError, match="is not this collection's"):
        iam_roles.plan(theirs(tags=tags), wanted())


def test_adversarial_iam_roles_a_refused_takeover_writes_nothing_for_any_role(monkeypatch):
    """Every role is planned before the first write: one foreign role stops the run, the others included."""
    writes: list[str] = []
    found = {"triton-task": theirs()}

    def read_role(_iam, want):
        return copy.deepcopy(found.get(want["name"], {"role": None, "managed_policies": [], "inline_policies": {}}))

    monkeypatch.setattr(iam_roles, "read_role", read_role)
    monkeypatch.setattr(iam_roles, "apply", lambda _iam, want, planned: writes.extend(str(w) for w in planned))
    p = params()
    p["roles"].insert(0, {"name": "triton-task-execution", "trust_policy": TRUST})
    with pytest.raises(InputError, match="triton-task exists"):
        iam_roles.ensure(None, p, check_mode=False)
    assert writes == []


def test_adversarial_iam_roles_adopt_takes_it_over_and_tags_it_but_keeps_the_boundary():
    actions = [str(w) for w in iam_roles.plan(theirs(), wanted({"adopt": True}))]
    assert "update_trust_policy" in actions
    assert any(a.startswith("tag_role") and iam_roles.OWNER_TAG in a for a in actions)
    assert not any("permissions_boundary" in a for a in actions)
    # Adopted, it is the collection's: the next run needs no adopt and plans nothing.
    adopted = theirs(tags=[{"Key": "team", "Value": "ml"}, OWNED])
    adopted["role"]["AssumeRolePolicyDocument"] = copy.deepcopy(TRUST)
    adopted["managed_policies"] = []
    assert iam_roles.plan(adopted, wanted()) == []


@pytest.mark.parametrize("current", [None, BOUNDARY, f"arn:aws:iam::{ACCOUNT}:policy/other"], ids=["none", "theirs", "other"])
@pytest.mark.parametrize("owned", [True, False], ids=["owned", "adopted"])
def test_adversarial_iam_roles_an_unset_boundary_never_removes_or_replaces_one(current, owned):
    found = theirs(tags=[OWNED] if owned else [])
    if current is None:
        del found["role"]["PermissionsBoundary"]
    else:
        found["role"]["PermissionsBoundary"]["PermissionsBoundaryArn"] = current
    actions = [str(w) for w in iam_roles.plan(found, wanted({"adopt": True}))]
    assert not any("permissions_boundary" in a for a in actions)
    assert iam_roles.summary_after(found, wanted({"adopt": True}))["permissions_boundary"] == (current or "")


def test_adversarial_iam_roles_the_ownership_tag_is_never_purged_or_given():
    found = theirs(tags=[OWNED, {"Key": "old", "Value": "1"}])
    actions = [str(w) for w in iam_roles.plan(found, wanted(tags={}))]
    assert not any(a.startswith("untag_role") and iam_roles.OWNER_TAG in a for a in actions)
    errors = iam_roles.validate(params(tags={iam_roles.OWNER_TAG: "x"}))
    assert any(f"tags.{iam_roles.OWNER_TAG}" in e and "drop it" in e for e in errors)


# ---------------------------------------------------------------- grants: property-style

SAFE_PRINCIPALS = [
    {"Service": "ecs-tasks.amazonaws.com"},
    {"Service": ["ec2.amazonaws.com", "ecs-tasks.amazonaws.com"]},
    {"AWS": f"arn:aws:iam::{ACCOUNT}:root"},
    {"AWS": [f"arn:aws:iam::{ACCOUNT}:role/ci", f"arn:aws:iam::{ACCOUNT}:root"]},
    {"Federated": "arn:aws:iam::123456789012:oidc-provider/token.actions.githubusercontent.com"},
]
OPEN_PRINCIPALS = ["*", {"AWS": "*"}, {"AWS": [f"arn:aws:iam::{ACCOUNT}:root", "*"]}, {"Service": "*"}]
SAFE_ACTIONS = ["sts:AssumeRole", ["sts:AssumeRole", "sts:TagSession"], ["sts:AssumeRoleWithWebIdentity"]]
OPEN_ACTIONS = ["*", "sts:*", ["sts:AssumeRole", "*"], "sts:Assume*", "STS:*"]


def _trust_statement(rng: random.Random) -> tuple[dict[str, Any], bool]:
    """One statement and whether it lets anyone or anything in."""
    effect = rng.choice(["Allow", "Allow", "Deny"])
    open_principal, open_action = rng.random() < 0.3, rng.random() < 0.3
    statement: dict[str, Any] = {"Effect": effect}
    if rng.random() < 0.1:
        statement["NotPrincipal"] = rng.choice(SAFE_PRINCIPALS)
        open_principal = True
    else:
        statement["Principal"] = rng.choice(OPEN_PRINCIPALS if open_principal else SAFE_PRINCIPALS)
    if rng.random() < 0.1:
        statement["NotAction"] = rng.choice(SAFE_ACTIONS)
        open_action = True
    else:
        statement["Action"] = rng.choice(OPEN_ACTIONS if open_action else SAFE_ACTIONS)
    if rng.random() < 0.3:
        statement["Condition"] = {"StringEquals": {"aws:SourceAccount": ACCOUNT}}
    return statement, effect == "Allow" and (open_principal or open_action)


TRUST_CASES = 400


def test_adversarial_iam_roles_generated_trust_policies_are_refused_exactly_when_open():
    rng = random.Random(28)
    refused = 0
    for case in range(TRUST_CASES):
        pairs = [_trust_statement(rng) for _i in range(rng.randint(1, 3))]
        document = {"Version": "2012-10-17", "Statement": [s for s, _flag in pairs]}
        if len(pairs) == 1 and rng.random() < 0.2:
            document["Statement"] = pairs[0][0]  # a single statement, not a list
        expected_open = any(is_open for _statement, is_open in pairs)
        errors = iam_roles.validate(params({"trust_policy": document}))
        assert bool(errors) == expected_open, (case, document, errors)
        for error in errors:
            assert "roles[0].trust_policy.Statement[" in error and (" e.g. " in error or "instead" in error), error
        refused += expected_open
    assert 0.3 * TRUST_CASES < refused < 0.9 * TRUST_CASES  # both kinds were generated


ADMIN_LIKE = [
    "arn:aws:iam::aws:policy/AdministratorAccess",
    "arn:aws:iam::aws:policy/AdministratorAccess-Amplify",
    "arn:aws:iam::aws:policy/PowerUserAccess",
    "arn:aws:iam::aws:policy/IAMFullAccess",
    "arn:aws:iam::aws:policy/job-function/SystemAdministrator",
    "arn:aws-us-gov:iam::aws:policy/AdministratorAccess",
]
NARROW = [
    "arn:aws:iam::aws:policy/service-role/AmazonEC2ContainerServiceforEC2Role",
    "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",
    "arn:aws:iam::aws:policy/CloudWatchAgentServerPolicy",
    f"arn:aws:iam::{ACCOUNT}:policy/AdministratorAccess",  # a customer policy of that name: its content is not read
]


@pytest.mark.parametrize("arn", ADMIN_LIKE + NARROW)
def test_adversarial_iam_roles_admin_like_managed_policies_are_refused(arn):
    errors = iam_roles.validate(params({"managed_policies": [arn]}))
    if arn in ADMIN_LIKE:
        assert len(errors) == 1 and arn in errors[0] and "attach the policies the role needs" in errors[0], errors
    else:
        assert errors == []


GRANT_CASES = 300


def _grant_statement(rng: random.Random) -> tuple[dict[str, Any], bool]:
    effect = rng.choice(["Allow", "Allow", "Deny"])
    resource_everywhere = rng.random() < 0.5
    statement: dict[str, Any] = {"Effect": effect, "Resource": "*" if resource_everywhere else "arn:aws:s3:::models/*"}
    kind = rng.choice(["admin", "iam", "not", "narrow", "narrow"])
    if kind == "admin":
        statement["Action"] = rng.choice(["*", ["s3:GetObject", "*"], "*:*"])
    elif kind == "iam":
        statement["Action"] = rng.choice(["iam:*", "IAM:*"])
    elif kind == "not":
        statement["NotAction"] = "iam:*"
    else:
        statement["Action"] = rng.choice(["s3:GetObject", ["s3:GetObject", "s3:ListBucket"], "logs:PutLogEvents"])
    return statement, effect == "Allow" and resource_everywhere and kind != "narrow"


def test_adversarial_iam_roles_generated_inline_policies_are_refused_exactly_when_admin_like():
    rng = random.Random(2028)
    refused = 0
    for case in range(GRANT_CASES):
        pairs = [_grant_statement(rng) for _i in range(rng.randint(1, 3))]
        document = {"Version": "2012-10-17", "Statement": [s for s, _flag in pairs]}
        expected = any(admin for _statement, admin in pairs)
        errors = iam_roles.validate(params({"inline_policies": {"grant": document}}))
        assert bool(errors) == expected, (case, document, errors)
        refused += expected
    assert 0.2 * GRANT_CASES < refused < 0.9 * GRANT_CASES
