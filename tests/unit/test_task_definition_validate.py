"""validate: every bad input fails with the field, the value and the fix; good input passes."""

from __future__ import annotations

import pytest

from ansible_collections.inferops.triton_ecs.plugins.module_utils._task_definition.validate import TaskDefinitionError, validate

from .task_definition_params import ROLE, SSM_ARN, module_params

ECR = "123456789012.dkr.ecr.us-east-1.amazonaws.com/triton"


def errors_for(**overrides) -> list[str]:
    with pytest.raises(TaskDefinitionError) as raised:
        validate(module_params(**overrides))
    return raised.value.errors


def test_defaults_are_valid():
    validate(module_params())
    validate(module_params(secrets={"HF_TOKEN": SSM_ARN}, execution_role_arn=ROLE, gpu_count=0, network_mode="bridge"))


def test_tag_with_resolution_through_ecr_is_valid():
    validate(module_params(image=f"{ECR}:24.08-py3", resolve_image_digest=True))


@pytest.mark.parametrize(
    ("overrides", "field", "fix"),
    [
        ({"image": f"{ECR}:24.08-py3"}, "image:", "resolve_image_digest=true"),
        ({"image": f"{ECR}:latest", "resolve_image_digest": True}, "image:", "pin a digest"),
        ({"image": ECR}, "image:", "@sha256:"),
        ({"image": "127.0.0.1:5000/triton"}, "image:", "@sha256:"),
        ({"image": "127.0.0.1:5000/triton:1.0", "resolve_image_digest": True}, "image:", "not an ECR repository"),
        ({"image": "repo@sha256:abc"}, "image:", "64 lowercase hex"),
        ({"gpu_count": -1}, "gpu_count:", "give 0"),
        ({"memory": 1000, "memory_reservation": 2000}, "memory_reservation:", "at most 1000"),
        ({"memory": None, "memory_reservation": None}, "memory:", "needs one of them"),
        ({"stop_timeout_s": 60, "triton": {"exit_timeout_s": 30}}, "stop_timeout_s:", "at least 80"),
        ({"stop_timeout_s": 59, "triton": {"exit_timeout_s": 30, "drain_timeout_s": 10}}, "stop_timeout_s:", "at least 60"),
        ({"stop_timeout_s": 150, "triton": {"exit_timeout_s": 30}}, "stop_timeout_s:", "120 or less"),
        ({"triton": {"drain_timeout_s": -1}}, "triton.drain_timeout_s:", ">= 0"),
        ({"secrets": {"HF_TOKEN": "hf_plaintextvalue"}, "execution_role_arn": ROLE}, "secrets.HF_TOKEN:", "give its ARN"),
        ({"secrets": {"HF_TOKEN": SSM_ARN}}, "execution_role_arn:", "give execution_role_arn"),
        ({"network_mode": "overlay"}, "network_mode:", "awsvpc, bridge, host, none"),
        ({"triton": {"model_control_mode": "poll", "models": ["a"]}}, "triton.models:", "model_control_mode=explicit"),
        ({"triton": {"model_control_mode": "lazy"}}, "triton.model_control_mode:", "explicit"),
        ({"triton": {"http_port": 8001}}, "triton ports:", "distinct"),
        ({"triton": {"model_repository_host_path": "models"}}, "triton.model_repository_host_path:", "absolute path"),
        ({"triton": {"release_id": "r 1; rm"}}, "triton.release_id:", "model_release state=resolved"),
        ({"health_check": {"start_period_s": 600}}, "health_check.start_period_s:", "0-300"),
        ({"health_check": {"command": ["curl", "x"]}}, "health_check.command:", "CMD"),
        ({"keep_revisions": 0}, "keep_revisions:", "1 or more"),
        ({"family": "bad family!"}, "family:", "letters, digits"),
        ({"extra_containers": [{"name": "triton", "image": "x@sha256:" + "a" * 64}]}, "extra_containers[0].name:", "distinct"),
        ({"extra_containers": [{"name": "sidecar"}]}, "extra_containers[0]:", "name and image"),
        ({"container_overrides": {"name": "other"}}, "container_overrides.name:", "remove the key"),
        ({"tags": {"aws:owner": "x"}}, "tags:", "rename"),
    ],
)
def test_bad_input_names_field_and_fix(overrides, field, fix):
    errors = errors_for(**overrides)
    assert any(e.startswith(field) and fix in e for e in errors), errors


def test_plain_secret_value_is_never_echoed():
    errors = errors_for(secrets={"HF_TOKEN": "hf_supersecretvalue"}, execution_role_arn=ROLE)
    assert not any("hf_supersecretvalue" in e for e in errors)


def test_every_problem_is_reported_at_once():
    errors = errors_for(gpu_count=-2, network_mode="overlay", memory=100, memory_reservation=200)
    assert len(errors) == 3


def test_absent_needs_no_image():
    validate(module_params(state="absent", image=None))


@pytest.mark.parametrize("target_dir", ["metrics", "/", "/models"])
def test_a_metrics_target_dir_must_be_a_directory_of_its_own(target_dir):
    found = errors_for(triton={"metrics_target_dir": target_dir})
    assert any(e.startswith(f"triton.metrics_target_dir: {target_dir!r} is not a directory of its own") for e in found), found
