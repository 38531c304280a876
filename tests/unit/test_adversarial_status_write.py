"""The instance role's status write (issue 28, class "a permission that may never match on AWS").

Stand-ins: the instance policy rendered from roles/fleet_iam/templates/instance_policy.json.j2 the way Ansible renders
it (tests/harness/iam_policies.py), and a minimal policy evaluator for IAM's simulator: Allow statements, action and
resource wildcards, ArnLike/StringLike/StringEquals conditions, a condition whose key is absent from the request context
does not match (AWS's rule). moto evaluates no IAM and implements no SimulatePrincipalPolicy, so this evaluator is what
stands between the template and the preflight's question; the real simulator answers it on AWS
(`playbooks/preflight.yml -e preflight_simulate_iam=true`).
"""

from __future__ import annotations

import fnmatch
import json

import pytest

from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet import preflight
from tests.harness.iam_policies import render_template
from tests.unit.one_page_listings import OnePageListings

CALLER = "arn:aws:sts::111111111111:assumed-role/deployer/session"
SPEC = {
    "role_name": "triton-ecs-instance",
    "role_path": "/",
    "bucket": "example-triton-models",
    "prefix": "models/",
    "application": "triton",
}


def allowed(document: dict, action: str, resource: str, context: dict[str, str]) -> bool:
    """Whether an Allow statement grants the request (no Deny in these documents)."""
    for statement in document["Statement"]:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        if not any(fnmatch.fnmatchcase(action, a) for a in actions) or not any(fnmatch.fnmatchcase(resource, r) for r in resources):
            continue
        conditions = statement.get("Condition", {})
        if all(
            key in context and any(_matches(operator, context[key], v) for v in (values if isinstance(values, list) else [values]))
            for operator, pairs in conditions.items()
            for key, values in pairs.items()
        ):
            return True
    return False


def _matches(operator: str, value: str, pattern: str) -> bool:
    if operator in ("ArnLike", "StringLike"):
        return fnmatch.fnmatchcase(value, pattern)
    if operator == "StringEquals":
        return value == pattern
    raise AssertionError(f"operator {operator} not modelled by this stand-in")


class Simulator(OnePageListings):
    """SimulatePrincipalPolicy over the rendered instance policy; records what it was asked."""

    def __init__(self, document: dict) -> None:
        self.document = document
        self.asked: list[dict] = []

    def simulate_principal_policy(self, aws_retry=False, **request):
        self.asked.append(request)
        context = {e["ContextKeyName"]: e["ContextKeyValues"][0] for e in request.get("ContextEntries", [])}
        decision = allowed(self.document, request["ActionNames"][0], request["ResourceArns"][0], context)
        return {
            "EvaluationResults": [{"EvalActionName": request["ActionNames"][0], "EvalDecision": "allowed" if decision else "implicitDeny"}]
        }


@pytest.mark.parametrize("prefix", ["models/", "", "a/b/"])
def test_adversarial_status_write_the_rendered_policy_allows_it_with_the_instance_credentials_key_only(prefix):
    """Stand-in: the evaluator above. The status write of any instance is allowed with ec2:SourceInstanceARN (what AWS
    sets for instance credentials) and denied without it (the role's credentials used off an instance); a release
    record and another application's status object are denied either way."""
    document = json.loads(render_template("instance_policy.json.j2", {"fleet_iam_model_prefix": prefix, "fleet_iam_application": "triton"}))
    request = preflight.status_write_request(CALLER, "eu-west-1", dict(SPEC, prefix=prefix))
    assert request["context"] == {"ec2:SourceInstanceARN": "arn:aws:ec2:eu-west-1:111111111111:instance/i-0123456789abcdef0"}
    assert allowed(document, "s3:PutObject", request["resource"], request["context"])
    assert not allowed(document, "s3:PutObject", request["resource"], {})
    base = f"arn:aws:s3:::example-triton-models/{prefix}"
    for other in (f"{base}releases/triton/current.json", f"{base}status/other-app/i-0123456789abcdef0.json", f"{base}m/1/model.py"):
        assert not allowed(document, "s3:PutObject", other, request["context"]), other


def test_adversarial_status_write_preflight_asks_the_simulator_with_the_context_key_and_names_a_denial(monkeypatch):
    """Stand-ins: the evaluator as IAM's simulator, STS mocked at the client boundary. The preflight passes on the
    rendered policy, asking with ec2:SourceInstanceARN; on the previous policy (${ec2:InstanceID} in the resource, a
    variable this request context does not carry) it fails naming the role, the object and the fix."""

    class Sts:
        def get_caller_identity(self, aws_retry=False):
            return {"Account": "111111111111", "Arn": CALLER, "UserId": "x"}

    params = {
        "markers": {},
        "values": {},
        "settings": [],
        "agreements": [],
        "region": "eu-west-1",
        "account_id": "111111111111",
        "simulate_iam": True,
        "iam_actions": [],
        "status_write": SPEC,
    }
    monkeypatch.setattr(preflight._iam, "simulate_principal_policy", lambda *_a, **_kw: [])
    good = Simulator(json.loads(render_template("instance_policy.json.j2", {"fleet_iam_application": "triton"})))
    result = preflight.run(params, [], Sts(), good)
    assert result["problems"] == [] and result["status_write_allowed"] is True
    asked = good.asked[0]
    assert asked["PolicySourceArn"] == "arn:aws:iam::111111111111:role/triton-ecs-instance"
    assert asked["ContextEntries"][0]["ContextKeyName"] == "ec2:SourceInstanceARN"

    old = json.loads(render_template("instance_policy.json.j2", {"fleet_iam_application": "triton"}))
    for statement in old["Statement"]:
        if statement["Sid"] == "ModelAgentOwnStatus":
            statement["Resource"] = statement["Resource"].replace("i-*.json", "${ec2:InstanceID}.json")
            statement.pop("Condition")
    result = preflight.run(params, [], Sts(), Simulator(old))
    assert result["status_write_allowed"] is False
    assert any("triton-ecs-instance may not write its status object" in p and "ModelAgentOwnStatus" in p for p in result["problems"])
