"""Every IAM policy the collection writes or documents, linted (issue 12, class "IAM").

Stand-in: parliament (PyPI), the offline IAM policy linter, plus the collection's own rules in
tests/harness/iam_policies.py (resources of the action's own service, confused-deputy conditions on task roles).
The role templates are rendered with Jinja2 the way Ansible renders them, in the variable combinations that change
their shape; docs/iam.md is read block by block, so a policy added to it later is linted too.
"""

from __future__ import annotations

import json

import pytest

from tests.harness.iam_policies import (
    DOCS,
    INHERENT,
    PolicyDocument,
    documented_documents,
    lint,
    render_template,
    written_documents,
)

POLICIES = written_documents() + documented_documents()


@pytest.mark.parametrize("policy", POLICIES, ids=[f"{i}-{p.name}" for i, p in enumerate(POLICIES)])
def test_adversarial_iam_every_policy_passes_the_linter(policy):
    """Stand-in: parliament. No finding but the documented inherent ones."""
    assert lint(policy) == []


def test_adversarial_iam_the_linter_covers_every_document():
    """Stand-in: parliament. Each template and each documented policy is in the list (none skipped silently)."""
    names = {p.name.split("#")[0] for p in POLICIES}
    assert {"execution_policy.json.j2", "task_policy.json.j2", "instance_policy.json.j2", "trust.json.j2"} <= names
    assert len(documented_documents()) == DOCS.read_text().count('"Statement"')


def test_adversarial_iam_inherent_findings_are_documented():
    """Stand-in: parliament. What the lint lets through is written down in docs/iam.md, with its reason."""
    text = DOCS.read_text()
    for issue, detail, why in INHERENT:
        assert issue in text and detail in text and why in text


BAD = [
    ("resource-star", {"Effect": "Allow", "Action": "ecs:UpdateService", "Resource": "*"}, "RESOURCE_STAR"),
    (
        "other-service-arn",
        {"Effect": "Allow", "Action": "ssm:GetParameters", "Resource": "arn:aws:secretsmanager:eu-west-1:111111111111:secret:x"},
        "another service",
    ),
    (
        "s3-action-on-logs",
        {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:logs:eu-west-1:111111111111:log-group:x:*"},
        "another service",
    ),
    ("unknown-action", {"Effect": "Allow", "Action": "s3:GetObjekt", "Resource": "arn:aws:s3:::b/*"}, "UNKNOWN_ACTION"),
    ("unknown-prefix", {"Effect": "Allow", "Action": "tritonx:Get", "Resource": "*"}, "UNKNOWN_PREFIX"),
    (
        "trust-without-source-account",
        {"Effect": "Allow", "Principal": {"Service": "ecs-tasks.amazonaws.com"}, "Action": "sts:AssumeRole"},
        "aws:SourceAccount",
    ),
    (
        "trust-with-source-arn-only",
        {
            "Effect": "Allow",
            "Principal": {"Service": "ecs-tasks.amazonaws.com"},
            "Action": "sts:AssumeRole",
            "Condition": {"ArnLike": {"aws:SourceArn": "arn:aws:ecs:*:111111111111:*"}},
        },
        "aws:SourceAccount",
    ),
    ("identity-policy-without-resource", {"Effect": "Allow", "Action": "s3:GetObject"}, "MALFORMED"),
]


@pytest.mark.parametrize(("statement", "expected"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_adversarial_iam_the_linter_catches_what_it_must(statement, expected):
    """Stand-in: parliament. A bad statement fails the lint (so a passing lint means something)."""
    policy = PolicyDocument("planted", json.dumps({"Version": "2012-10-17", "Statement": [statement]}))
    problems = lint(policy)
    assert any(expected in p for p in problems), problems


@pytest.mark.parametrize(
    "arns",
    [
        ["arn:aws:secretsmanager:eu-west-1:111111111111:secret:a-AbCdEf"],
        ["arn:aws:ssm:eu-west-1:111111111111:parameter/a"],
        ["arn:aws:ssm:eu-west-1:111111111111:parameter/a", "arn:aws:secretsmanager:eu-west-1:111111111111:secret:b-AbCdEf"],
    ],
    ids=["secrets-manager", "ssm", "both"],
)
def test_adversarial_iam_secret_arns_go_to_their_own_service(arns):
    """Stand-in: parliament. The execution role puts each secret ARN in the statement of its own service, none lost."""
    document = json.loads(render_template("execution_policy.json.j2", {"fleet_iam_secret_arns": arns}))
    granted = {
        r: s["Action"] for s in document["Statement"] for r in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])
    }
    for arn in arns:
        assert granted[arn] == ("ssm:GetParameters" if ":ssm:" in arn else "secretsmanager:GetSecretValue")
