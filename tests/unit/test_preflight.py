"""The preflight's pure logic (plugins/module_utils/_fleet/preflight.py): placeholders, settings, account, permissions.

Stand-ins: parsed YAML documents and dicts shaped like STS and IAM answers; moto does not implement IAM's
SimulatePrincipalPolicy, so its evaluation results are given here as AWS documents them.
"""

from __future__ import annotations

from pathlib import Path

from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet import preflight as _preflight

REPO_ROOT = Path(__file__).resolve().parents[2]
MARKERS = _preflight.DEFAULT_MARKERS

DOCUMENTS = [
    (
        "inv/group_vars/all/aws.yml",
        {"aws_account_id": "111111111111", "aws_region": "eu-west-1"},
    ),
    (
        "inv/group_vars/all/fleet.yml",
        {
            "fleet_load_balancing_production": {"rule": {"conditions": [{"Values": ["triton.internal.example.com"]}]}, "port": 443},
            "triton_image_base_digest": "sha256:REPLACE_WITH_THE_NGC_DIGEST",
            "triton_private_subnets": ["subnet-0a1b2c3d4e5f6a7b8", "subnet-0123456789abcdef1"],
            "fleet_iam_ecr_repository_arns": ["arn:aws:ecr:{{ aws_region }}:{{ aws_account_id }}:repository/triton"],
            "fleet_cluster_name": "inference",
        },
    ),
]


def test_every_marked_value_is_found_with_its_variable_and_file():
    found = _preflight.find_placeholders(DOCUMENTS, MARKERS)
    assert [(p["variable"], p["file"]) for p in found] == [
        ("aws_account_id", "inv/group_vars/all/aws.yml"),
        ("fleet_load_balancing_production.rule.conditions[0].Values[0]", "inv/group_vars/all/fleet.yml"),
        ("triton_image_base_digest", "inv/group_vars/all/fleet.yml"),
        ("triton_private_subnets[1]", "inv/group_vars/all/fleet.yml"),
    ]
    assert found[0]["marker"] == "the example account id"
    # a value derived from a placeholder (a template) is not reported again
    assert not any(p["variable"].startswith("fleet_iam_ecr_repository_arns") for p in found)


def test_a_value_overridden_elsewhere_is_not_reported():
    effective = {
        "aws_account_id": "210987654321",
        "triton_private_subnets": ["subnet-0a1b2c3d4e5f6a7b8", "subnet-0123456789abcdef1"],
        "fleet_load_balancing_production": {"port": 443},
    }
    found = {p["variable"] for p in _preflight.find_placeholders(DOCUMENTS, MARKERS, effective)}
    assert found == {"triton_image_base_digest", "triton_private_subnets[1]"}


def test_settings_report_missing_and_malformed_together_with_their_fix():
    problems = _preflight.check_settings(
        [
            {"name": "aws_region", "value": None, "fix": "the region"},
            {
                "name": "fleet_services_subnets",
                "value": ["subnet-0a1b2c3d", "sub-1"],
                "pattern": "^subnet-[0-9a-f]{8,17}$",
                "fix": "subnet ids",
            },
            {"name": "fleet_cluster_name", "value": "inference", "pattern": "^[A-Za-z0-9_-]+$", "fix": "a name"},
            {"name": "fleet_load_balancing_vpc_id", "value": "", "fix": "vpc-...", "applies": False},
            {"name": "task_definition_memory", "value": "lots", "pattern": "^[1-9][0-9]*$", "fix": "MiB"},
        ]
    )
    assert problems == [
        "aws_region is missing: the region",
        "fleet_services_subnets is ['sub-1']: subnet ids",
        "task_definition_memory is 'lots': MiB",
    ]


def test_another_account_is_named_with_both_ids_the_region_and_the_way_out():
    caller = {"Account": "123456789012", "Arn": "arn:aws:sts::123456789012:assumed-role/dev/me", "UserId": "x"}
    assert _preflight.account_problem("123456789012", caller, None, "eu-west-1") is None
    problem = _preflight.account_problem("210987654321", caller, "prod", "eu-west-1")
    assert "account 123456789012" in problem and "aws_account_id is 210987654321" in problem
    assert "region eu-west-1" in problem and "AWS_PROFILE" in problem and "'prod'" in problem


def test_an_assumed_role_session_is_simulated_as_its_role():
    assert _preflight.principal_arn("arn:aws:sts::123456789012:assumed-role/deployer/ci-42") == "arn:aws:iam::123456789012:role/deployer"
    assert _preflight.principal_arn("arn:aws:iam::123456789012:user/ops") == "arn:aws:iam::123456789012:user/ops"


def test_denied_actions_are_the_ones_not_allowed():
    results = [
        {"EvalActionName": "ecs:UpdateService", "EvalDecision": "allowed"},
        {"EvalActionName": "iam:PassRole", "EvalDecision": "implicitDeny"},
        {"EvalActionName": "ecs:RegisterTaskDefinition", "EvalDecision": "explicitDeny"},
    ]
    assert _preflight.denied_actions(results) == ["ecs:RegisterTaskDefinition", "iam:PassRole"]


def test_the_actions_of_deploy_yml_come_from_docs_iam_md():
    actions = _preflight.policy_actions((REPO_ROOT / "docs" / "iam.md").read_text(), "deploy.yml")
    assert {"ecs:RegisterTaskDefinition", "elasticloadbalancing:ModifyListener", "iam:PassRole", "ecs:CreateService"} <= set(actions)
    # condition keys and ARNs of the same documents are not actions
    assert not any(a.startswith(("arn:", "iam:PassedToService", "iam:AWSServiceName")) for a in actions)
    # the build_ami.yml section that follows is not part of it
    assert "ec2:CreateImage" not in actions


class _Sts:
    def __init__(self, account: str) -> None:
        self.account = account

    def get_caller_identity(self, aws_retry: bool) -> dict:
        return {"Account": self.account, "Arn": f"arn:aws:iam::{self.account}:user/ops", "UserId": "AIDA"}


def _params(**overrides) -> dict:
    params = {
        "markers": {},
        "values": None,
        "settings": [{"name": "aws_account_id", "value": "111111111111", "pattern": "^[0-9]{12}$", "fix": "the account id"}],
        "account_id": "111111111111",
        "region": "eu-west-1",
        "profile": None,
        "simulate_iam": False,
        "iam_actions": [],
        "principal_arn": None,
    }
    return {**params, **overrides}


def test_one_run_collects_every_problem_and_names_a_placeholder_once():
    result = _preflight.run(_params(), DOCUMENTS, _Sts("123456789012"), None)
    # four placeholders; the account setting is a placeholder, so neither a setting problem nor an account mismatch
    assert len(result["problems"]) == 4
    assert result["caller"]["Account"] == "123456789012"


def test_a_real_account_id_must_match_the_caller():
    result = _preflight.run(_params(account_id="210987654321"), [], _Sts("123456789012"), None)
    assert len(result["problems"]) == 1 and "belong to account 123456789012" in result["problems"][0]
    assert _preflight.run(_params(account_id="123456789012"), [], _Sts("123456789012"), None)["problems"] == []


HOST_PATH = {
    "what": "the model host path",
    "values": {
        "the AMI (custom_data.model_host_path of packer/manifest.json)": "/mnt/models",
        "fleet_capacity_model_agent_settings.host_path": None,
        "task_definition_triton.model_repository_host_path": "/opt/triton/models",
        "model_repository_host_path": "",
    },
    "fix": "use the AMI's",
}


def test_settings_that_must_agree_are_one_problem_naming_every_value_set():
    (problem,) = _preflight.check_agreements([HOST_PATH])
    assert problem == (
        "the model host path differs: the AMI (custom_data.model_host_path of packer/manifest.json) = '/mnt/models', "
        "task_definition_triton.model_repository_host_path = '/opt/triton/models': use the AMI's"
    )


def test_settings_that_agree_or_are_unset_are_no_problem():
    agreeing = {**HOST_PATH, "values": {**HOST_PATH["values"], "task_definition_triton.model_repository_host_path": "/mnt/models"}}
    assert _preflight.check_agreements([agreeing]) == []
    assert _preflight.check_agreements([{**HOST_PATH, "values": {"only": "/mnt/models", "unset": None}}]) == []


def test_one_run_reports_a_disagreement_with_the_other_problems():
    result = _preflight.run(_params(agreements=[HOST_PATH]), DOCUMENTS, _Sts("123456789012"), None)
    assert len(result["problems"]) == 5
    assert result["problems"][-1].startswith("the model host path differs:")
