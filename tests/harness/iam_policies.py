"""Every IAM policy document the collection writes (roles/fleet_iam templates) or documents (docs/iam.md), and the lint.

The lint is parliament (PyPI, offline) plus two rules of our own: each action gets only resources of its own
service, and the trust policies of roles ECS tasks assume carry aws:SourceAccount (and aws:SourceArn where it fits).
Findings that are inherent to a kind of document are allowed only when listed in INHERENT and in docs/iam.md.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
from parliament import analyze_policy_string

REPO_ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = REPO_ROOT / "roles" / "fleet_iam" / "templates"
DOCS = REPO_ROOT / "docs" / "iam.md"

# (parliament issue, a text its detail contains, why it is inherent): the only findings a document may have.
INHERENT = [
    (
        "MALFORMED",
        "neither Resource nor NotResource",
        "a role trust policy has no Resource: the role it is attached to is its resource",
    ),
]

# Findings parliament makes on any document because its condition-key tables list only each service's own keys: the
# cross-service keys AWS documents as global (docs/iam.md, "The status write") are reported unknown for the action.
CROSS_SERVICE_KEYS = [
    (
        "UNKNOWN_CONDITION_FOR_ACTION",
        "Unknown condition ec2:SourceInstanceARN for action",
        "ec2:SourceInstanceARN is a cross-service global condition key, set on every request signed with an instance's role credentials",
    ),
]

# Role variables rendered in every combination that changes the shape of a document.
TEMPLATE_VARIABLES = [
    {},
    {
        "fleet_iam_ecr_repository_arns": ["arn:aws:ecr:eu-west-1:111111111111:repository/triton"],
        "fleet_iam_secret_arns": [
            "arn:aws:secretsmanager:eu-west-1:111111111111:secret:triton/hf-AbCdEf",
            "arn:aws:ssm:eu-west-1:111111111111:parameter/triton/token",
        ],
        "fleet_iam_metrics_log_group_name": "",
        "fleet_iam_model_prefix": "",
    },
    {"fleet_iam_secret_arns": ["arn:aws:ssm:eu-west-1:111111111111:parameter/triton/token"], "fleet_iam_model_prefix": "a/b/"},
]
TRUST_CASES = [
    ("ecs-tasks.amazonaws.com", {"StringEquals": {"aws:SourceAccount": "111111111111"}}),
    (
        "ecs-tasks.amazonaws.com",
        {"StringEquals": {"aws:SourceAccount": "111111111111"}, "ArnLike": {"aws:SourceArn": "arn:aws:ecs:*:111111111111:*"}},
    ),
    ("ec2.amazonaws.com", {}),
]
# Services whose resources carry another service name in their ARN.
ARN_SERVICE = {"elasticloadbalancing": "elasticloadbalancing", "autoscaling": "autoscaling", "sts": "iam"}


@dataclass
class PolicyDocument:
    name: str
    text: str

    @property
    def document(self) -> dict[str, Any]:
        return json.loads(self.text)

    @property
    def is_trust_policy(self) -> bool:
        return any("Principal" in s for s in statements(self.document))


def statements(document: dict[str, Any]) -> list[dict[str, Any]]:
    found = document.get("Statement", [])
    return found if isinstance(found, list) else [found]


def _defaults() -> dict[str, Any]:
    import yaml

    return yaml.safe_load((REPO_ROOT / "roles" / "fleet_iam" / "defaults" / "main.yml").read_text())


def render_template(name: str, variables: dict[str, Any]) -> str:
    """A role template rendered the way Ansible renders it (to_json, the `match` test)."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters["to_json"] = json.dumps
    env.tests["match"] = lambda value, pattern: re.match(pattern, value) is not None
    return env.get_template(name).render(**{**_defaults(), "fleet_iam_model_bucket": "example-triton-models", **variables})


def written_documents() -> list[PolicyDocument]:
    docs = []
    for path in sorted(TEMPLATES.glob("*_policy.json.j2")):
        for i, variables in enumerate(TEMPLATE_VARIABLES):
            docs.append(PolicyDocument(f"{path.name}#{i}", render_template(path.name, variables)))
    for i, (principal, conditions) in enumerate(TRUST_CASES):
        text = render_template("trust.json.j2", {"fleet_iam_principal": principal, "fleet_iam_trust_conditions": conditions})
        docs.append(PolicyDocument(f"trust.json.j2#{i}", text))
    return docs


def documented_documents() -> list[PolicyDocument]:
    """Every ```json block of docs/iam.md holding a policy, named after the heading above it."""
    docs = []
    heading = "docs/iam.md"
    for block in re.finditer(r"^(#+ [^\n]*)$|^```json\n(.*?)^```", DOCS.read_text(), re.S | re.M):
        if block.group(1):
            heading = block.group(1).lstrip("# ").strip()
        elif '"Statement"' in block.group(2):
            docs.append(PolicyDocument(f"docs/iam.md: {heading}", block.group(2)))
    return docs


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def foreign_resources(document: dict[str, Any]) -> list[str]:
    """`action -> resource` pairs where the resource's ARN belongs to another service than the action."""
    found = []
    for statement in statements(document):
        for action in _as_list(statement.get("Action", [])):
            service = action.split(":", 1)[0]
            for resource in _as_list(statement.get("Resource", [])):
                if resource == "*":
                    continue
                arn_service = resource.split(":")[2] if resource.count(":") >= 5 else ""
                if arn_service != ARN_SERVICE.get(service, service):
                    found.append(f"{action} -> {resource}")
    return found


def missing_confused_deputy_conditions(document: dict[str, Any]) -> list[str]:
    """Statements trusting ecs-tasks.amazonaws.com without aws:SourceAccount."""
    missing = []
    for statement in statements(document):
        services = _as_list((statement.get("Principal") or {}).get("Service", []))
        if "ecs-tasks.amazonaws.com" in services:
            keys = {key for operator in (statement.get("Condition") or {}).values() for key in operator}
            if "aws:SourceAccount" not in keys:
                missing.append(json.dumps(statement))
    return missing


# An IAM policy variable of another namespace than aws: (e.g. ${ec2:SourceInstanceARN}); parliament reads its ':' as an ARN
# separator, so the lint sees it as the ${aws:...} variable parliament knows, which stands for one path segment too.
_FOREIGN_POLICY_VARIABLE = re.compile(r"\$\{(?!aws:)[A-Za-z0-9]+:[A-Za-z0-9]+\}")


def lint(policy: PolicyDocument) -> list[str]:
    """Every finding that is not inherent, as readable lines (empty: the document passes)."""
    problems = []
    document_text = _FOREIGN_POLICY_VARIABLE.sub("${aws:userid}", json.dumps(policy.document))
    for finding in analyze_policy_string(document_text).findings:
        if any(finding.issue == issue and text in str(finding.detail) for issue, text, _reason in INHERENT) and policy.is_trust_policy:
            continue
        if any(finding.issue == issue and text in str(finding.detail) for issue, text, _reason in CROSS_SERVICE_KEYS):
            continue
        problems.append(f"parliament {finding.issue}: {finding.detail}")
    problems += [f"resource of another service: {pair}" for pair in foreign_resources(policy.document)]
    problems += [f"trust without aws:SourceAccount: {s}" for s in missing_confused_deputy_conditions(policy.document)]
    return problems
