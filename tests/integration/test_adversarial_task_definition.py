"""Adversarial task definitions through ansible-playbook against a moto server (issue 12, class "task definitions").

Stand-in: a moto server for ECS. Each bad case must fail with a message naming the field, and moto must hold no
revision of the family afterwards: the refusal happens before the first write.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness.ansible import run_playbook

PLAYBOOK = Path(__file__).parent / "playbooks" / "adversarial_task_definition.yml"
DIGEST = "sha256:" + "0d" * 32
IMAGE = f"123456789012.dkr.ecr.us-east-1.amazonaws.com/triton@{DIGEST}"
ROLE = "arn:aws:iam::123456789012:role/ecsTaskExecutionRole"
PLANTED = "planted-secret-value-7c41"
FAMILY = "adv-td"
# Shaped like an AWS secret access key (AWS's documentation example), under a name that says nothing.
AWS_SECRET_SHAPED = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"

CASES = [
    ("sidecar-tag", {"extra_containers": [{"name": "m", "image": "otel:0.9", "memory": 64}]}, "extra_containers[0].image:"),
    (
        "override-plain-secret",
        {"container_overrides": {"secrets": [{"name": "T", "value": PLANTED}]}, "execution_role_arn": ROLE},
        "container_overrides.secrets[0]:",
    ),
    ("family-newline", {"family": FAMILY + "\n"}, "family:"),
    ("role-arn-malformed", {"task_role_arn": "triton-task"}, "task_role_arn:"),
    ("gpu-count-huge", {"gpu_count": 999}, "gpu_count:"),
    (
        "override-budget",
        {"container_overrides": {"environment": [{"name": "TRITON_EXIT_TIMEOUT_S", "value": "110"}]}},
        "container_overrides / environment:",
    ),
    # issue 28: privileges, flags that override the rendered ones, a system host path, a credential as a plain value
    ("override-privileged", {"container_overrides": {"privileged": True}}, "container_overrides.privileged:"),
    ("extra-args-poll", {"triton": {"extra_args": ["--model-control-mode=poll"]}}, "triton.extra_args:"),
    ("host-path-proc", {"triton": {"model_repository_host_path": "/proc"}}, "triton.model_repository_host_path:"),
    ("aws-key-as-plain-value", {"environment": {"S3_SETTINGS": AWS_SECRET_SHAPED}}, "environment (Triton container): S3_SETTINGS"),
    (
        "secret-arn-newline",
        {"secrets": {"T": "arn:aws:ssm:us-east-1:123456789012:parameter/t\n"}, "execution_role_arn": ROLE},
        "secrets.T:",
    ),
]


@pytest.fixture(scope="module")
def played(shared_moto_server):
    cases = [{"id": case_id, "params": params} for case_id, params, _expected in CASES]
    run = run_playbook(
        PLAYBOOK,
        {"aws_endpoint_url": shared_moto_server.endpoint, "td_family": FAMILY, "td_image": IMAGE, "td_cases": cases, "td_planted": PLANTED},
    )
    assert run.rc == 0, run.stdout[-4000:] + run.stderr[-2000:]
    return shared_moto_server, run


@pytest.mark.parametrize(("case_id", "field"), [(c[0], c[2]) for c in CASES], ids=[c[0] for c in CASES])
def test_adversarial_task_definition_refused_before_any_write(played, case_id, field):
    """Stand-in: moto server (ECS). The module fails naming the field, and no revision exists in moto."""
    moto_server, run = played
    result = next(r for r in run.result("Register a bad task definition")["results"] if r["item"]["id"] == case_id)
    assert result["failed"] is True
    assert field in result["msg"], result["msg"]
    ecs = moto_server.client("ecs")
    assert [a for a in ecs.list_task_definitions()["taskDefinitionArns"] if f"/{FAMILY}:" in a] == []
    assert PLANTED not in result["msg"]
    # The module's own output (the loop's `item` is the controller's echo of the input, not the module's).
    assert AWS_SECRET_SHAPED not in result["msg"] + str(result.get("invocation"))


def test_adversarial_task_definition_secret_looking_variable_warns(played):
    """Stand-in: moto server (ECS). A plain DB_PASSWORD registers, and the module warns naming it, not its value."""
    _moto, run = played
    result = run.result("Register a good one with a secret-looking plain variable")
    assert result["changed"] is True
    assert any("DB_PASSWORD" in w and "secrets" in w for w in result["warnings"]), result.get("warnings")
    assert not any(PLANTED in w for w in result["warnings"])
