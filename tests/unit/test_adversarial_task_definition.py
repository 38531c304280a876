"""Adversarial inputs to the task_definition module's validation (issue 12, class "task definitions").

Stand-in: none needed. validate() and render() are pure functions, and validate() runs before the module's first
AWS call; tests/integration/test_adversarial_task_definition.py proves against a moto server that nothing is written.
"""

from __future__ import annotations

import pytest

from ansible_collections.inferops.triton_ecs.plugins.module_utils._task_definition.render import render
from ansible_collections.inferops.triton_ecs.plugins.module_utils._task_definition.validate import TaskDefinitionError, validate

from .task_definition_params import DIGEST, ROLE, SSM_ARN, module_params

SIDECAR = {"name": "metrics", "image": f"public.ecr.aws/cloudwatch-agent/cloudwatch-agent@{DIGEST}", "memoryReservation": 64}
PLAIN_SECRET = "hunter2-plain-value"


def sidecar(**changes) -> list[dict]:
    return [dict(SIDECAR, **changes)]


# (case id, module parameter overrides, the field the error must start with, a fix the message must name)
REFUSED = [
    # images: digest, or a tag listed in allowed_image_tags, in every container
    ("override-image-tag", {"container_overrides": {"image": "repo/triton:24.08"}}, "container_overrides.image:", "allowed_image_tags"),
    ("override-image-latest", {"container_overrides": {"image": "repo/triton:latest"}}, "container_overrides.image:", "pin a digest"),
    ("override-image-untagged", {"container_overrides": {"image": "repo/triton"}}, "container_overrides.image:", "@sha256:"),
    ("sidecar-image-tag", {"extra_containers": sidecar(image="otel/collector:0.98")}, "extra_containers[0].image:", "allowed_image_tags"),
    (
        "sidecar-image-latest",
        {"extra_containers": sidecar(image="otel:latest"), "allowed_image_tags": ["latest"]},
        "extra_containers[0].image:",
        "pin a digest",
    ),
    ("sidecar-bad-digest", {"extra_containers": sidecar(image="otel@sha256:XYZ")}, "extra_containers[0].image:", "64 lowercase hex"),
    ("image-newline", {"image": f"repo/triton@{DIGEST}\n"}, "image:", "repo@sha256"),
    ("image-tag-not-allowed", {"image": "repo/triton:v1", "allowed_image_tags": ["v2"]}, "image:", "allowed_image_tags"),
    # secrets: valueFrom ARNs only, wherever a container is described
    (
        "override-secret-plain-value",
        {"container_overrides": {"secrets": [{"name": "HF_TOKEN", "value": PLAIN_SECRET}]}, "execution_role_arn": ROLE},
        "container_overrides.secrets[0]:",
        "valueFrom",
    ),
    (
        "override-secret-not-arn",
        {"container_overrides": {"secrets": [{"name": "HF_TOKEN", "valueFrom": PLAIN_SECRET}]}, "execution_role_arn": ROLE},
        "container_overrides.secrets[0].valueFrom:",
        "give its ARN",
    ),
    (
        "sidecar-secret-plain-value",
        {"extra_containers": sidecar(secrets=[{"name": "DB_PASSWORD", "value": PLAIN_SECRET}]), "execution_role_arn": ROLE},
        "extra_containers[0].secrets[0]:",
        "valueFrom",
    ),
    (
        "sidecar-secret-no-role",
        {"extra_containers": sidecar(secrets=[{"name": "A", "valueFrom": SSM_ARN}])},
        "extra_containers[0].secrets:",
        "execution_role_arn",
    ),
    ("secret-arn-newline", {"secrets": {"HF_TOKEN": SSM_ARN + "\nx"}, "execution_role_arn": ROLE}, "secrets.HF_TOKEN:", "give its ARN"),
    (
        "secret-arn-wrong-service",
        {"secrets": {"HF_TOKEN": "arn:aws:s3:::bucket/token"}, "execution_role_arn": ROLE},
        "secrets.HF_TOKEN:",
        "give its ARN",
    ),
    (
        "secret-arn-short-account",
        {"secrets": {"HF_TOKEN": "arn:aws:ssm:us-east-1:1234:parameter/x"}, "execution_role_arn": ROLE},
        "secrets.HF_TOKEN:",
        "give its ARN",
    ),
    # the Triton settings survive an override, or the override is refused
    (
        "override-command-drops-flags",
        {"container_overrides": {"command": ["--foo"]}, "triton": {"extra_args": ["--log-verbose=1"]}},
        "container_overrides.command:",
        "triton.extra_args",
    ),
    (
        "override-env-breaks-stop-budget",
        {"container_overrides": {"environment": [{"name": "TRITON_EXIT_TIMEOUT_S", "value": "100"}]}},
        "container_overrides / environment:",
        "stop_timeout_s",
    ),
    (
        "override-env-not-a-number",
        {"container_overrides": {"environment": [{"name": "TRITON_DRAIN_TIMEOUT_S", "value": "soon"}]}},
        "container_overrides / environment:",
        "whole seconds",
    ),
    (
        "environment-option-breaks-budget",
        {"environment": {"TRITON_DRAIN_TIMEOUT_S": "90"}},
        "container_overrides / environment:",
        "stop_timeout_s",
    ),
    ("override-stop-timeout-too-short", {"container_overrides": {"stopTimeout": 10}}, "container_overrides / environment:", "at least 80"),
    ("override-env-is-dict", {"container_overrides": {"environment": {"A": "1"}}}, "container_overrides.environment:", "give a list"),
    (
        "override-env-bad-entry",
        {"container_overrides": {"environment": [{"name": "A", "value": "1", "valueFrom": SSM_ARN}]}},
        "container_overrides.environment[",
        "name and value",
    ),
    # newlines and other characters AWS rejects, in names and ARNs
    ("family-trailing-newline", {"family": "triton\n"}, "family:", "letters, digits"),
    ("env-name-trailing-newline", {"environment": {"MODEL\n": "x"}}, "environment:", "valid variable name"),
    ("secret-name-newline", {"secrets": {"HF\nTOKEN": SSM_ARN}, "execution_role_arn": ROLE}, "secrets:", "valid variable name"),
    ("sidecar-name-newline", {"extra_containers": sidecar(name="metrics\n")}, "extra_containers[0].name:", "letters, digits"),
    ("sidecar-name-space", {"extra_containers": sidecar(name="my metrics")}, "extra_containers[0].name:", "letters, digits"),
    (
        "sidecar-env-name-newline",
        {"extra_containers": sidecar(environment=[{"name": "A\n", "value": "1"}])},
        "extra_containers[0].environment:",
        "valid variable name",
    ),
    ("host-path-newline", {"triton": {"model_repository_host_path": "/mnt/models\n"}}, "triton.model_repository_host_path:", "one line"),
    ("model-name-comma", {"triton": {"models": ["a,b"]}}, "triton.models[0]:", "without commas"),
    ("tag-value-newline", {"tags": {"team": "ml\nops"}}, "tags.team:", "one-line value"),
    ("tag-key-too-long", {"tags": {"k" * 129: "v"}}, "tags.", "128/256"),
    ("too-many-tags", {"tags": {f"t{i}": "v" for i in range(51)}}, "tags:", "drop some"),
    (
        "placement-expression-newline",
        {"placement_constraints": [{"type": "memberOf", "expression": "attribute:x == y\n"}]},
        "placement_constraints[0].expression:",
        "one line",
    ),
    # malformed ARNs
    ("execution-role-not-arn", {"execution_role_arn": "ecsTaskExecutionRole"}, "execution_role_arn:", "arn:aws:iam::"),
    ("task-role-newline", {"task_role_arn": ROLE + "\n"}, "task_role_arn:", "arn:aws:iam::"),
    ("task-role-is-policy", {"task_role_arn": "arn:aws:iam::123456789012:policy/x"}, "task_role_arn:", "role/<name>"),
    ("task-role-short-account", {"task_role_arn": "arn:aws:iam::12345:role/x"}, "task_role_arn:", "12-digit"),
    # numbers out of range
    ("gpu-count-huge", {"gpu_count": 1000}, "gpu_count:", "0-16"),
    ("cpu-huge", {"cpu": 10**7}, "cpu:", "0-196608"),
    ("memory-huge", {"memory": 10**9, "memory_reservation": None}, "memory:", "6-4194304"),
    ("memory-zero", {"memory": 0, "memory_reservation": None}, "memory:", "6 MiB"),
    ("exit-timeout-huge", {"triton": {"exit_timeout_s": 500}, "stop_timeout_s": 120}, "triton.exit_timeout_s:", "0-120"),
    ("stop-timeout-zero", {"stop_timeout_s": 0}, "stop_timeout_s:", "2-10000"),
    ("port-zero", {"triton": {"http_port": 0}}, "triton.http_port:", "1-65535"),
    ("port-huge", {"triton": {"metrics_port": 70000}}, "triton.metrics_port:", "1-65535"),
    ("shm-negative", {"triton": {"shared_memory_size_mib": -5}}, "triton.shared_memory_size_mib:", "MiB > 0"),
    ("shm-huge", {"triton": {"shared_memory_size_mib": 10**9}}, "triton.shared_memory_size_mib:", "1-4194304"),
    ("keep-revisions-huge", {"keep_revisions": 10**6}, "keep_revisions:", "1-10000"),
    ("sidecar-memory-zero", {"extra_containers": sidecar(memoryReservation=0)}, "extra_containers[0].memoryReservation:", "6-4194304"),
    (
        "sidecar-port-huge",
        {"extra_containers": sidecar(portMappings=[{"containerPort": 99999}])},
        "extra_containers[0].portMappings[0].containerPort:",
        "1-65535",
    ),
    ("sidecar-stop-timeout-huge", {"extra_containers": sidecar(stopTimeout=600)}, "extra_containers[0].stopTimeout:", "2-120"),
    ("override-cpu-string", {"container_overrides": {"cpu": "lots"}}, "container_overrides.cpu:", "whole number"),
]


@pytest.mark.parametrize(("overrides", "field", "fix"), [case[1:] for case in REFUSED], ids=[case[0] for case in REFUSED])
def test_adversarial_task_definition_input_is_refused_before_any_call(overrides, field, fix):
    """Every container description obeys the rules; the error names the field and the fix and never echoes a secret."""
    with pytest.raises(TaskDefinitionError) as raised:
        validate(module_params(**overrides))
    errors = raised.value.errors
    assert any(e.startswith(field) and fix in e for e in errors), errors
    assert not any(PLAIN_SECRET in e for e in errors), errors


WARNED = [
    ("option-password", {"environment": {"DB_PASSWORD": "x"}}, "DB_PASSWORD"),
    ("option-token", {"environment": {"HF_TOKEN": "x"}}, "HF_TOKEN"),
    ("option-api-key", {"environment": {"OPENAI_APIKEY": "x"}}, "OPENAI_APIKEY"),
    ("override-secret", {"container_overrides": {"environment": [{"name": "CLIENT_SECRET", "value": "x"}]}}, "CLIENT_SECRET"),
    (
        "sidecar-access-key",
        {"extra_containers": sidecar(environment=[{"name": "AWS_SECRET_ACCESS_KEY", "value": "x"}])},
        "AWS_SECRET_ACCESS_KEY",
    ),
    ("sidecar-key", {"extra_containers": sidecar(environment=[{"name": "SSH_KEY", "value": "x"}])}, "SSH_KEY"),
    ("lowercase-passwd", {"environment": {"mysql_passwd": "x"}}, "mysql_passwd"),
]


@pytest.mark.parametrize(("overrides", "name"), [case[1:] for case in WARNED], ids=[case[0] for case in WARNED])
def test_adversarial_task_definition_secret_looking_plain_variables_warn(overrides, name):
    """A plain variable whose name says secret passes, with a warning that names it (and never its value)."""
    warnings = validate(module_params(**overrides))
    assert any(name in w and "secrets" in w for w in warnings), warnings
    assert not any("=x" in w or "'x'" in w for w in warnings)


def test_adversarial_task_definition_harmless_names_do_not_warn():
    """KEY inside a word (KEYBOARD) is not a secret-looking name; ordinary names draw no warning."""
    assert validate(module_params(environment={"MODEL_NAME": "x", "BATCH_SIZE": "8", "KEYBOARD_LAYOUT": "us"})) == []


@pytest.mark.parametrize(
    ("override", "kept"),
    [
        ({"environment": [{"name": "EXTRA", "value": "1"}]}, {"TRITON_LOAD_MODELS": "simple", "EXTRA": "1"}),
        ({"environment": [{"name": "TRITON_LOG_VERBOSE", "value": "1"}]}, {"TRITON_EXIT_TIMEOUT_S": "30", "TRITON_LOG_VERBOSE": "1"}),
        ({"environment": [{"name": "TRITON_LOAD_MODELS", "value": "other"}]}, {"TRITON_LOAD_MODELS": "other", "TRITON_HTTP_PORT": "8000"}),
    ],
    ids=["adds-a-variable", "adds-a-triton-variable", "replaces-one-by-name"],
)
def test_adversarial_task_definition_override_never_drops_triton_environment(override, kept):
    """A list in container_overrides merges entry by entry: the rendered TRITON_* settings stay."""
    params = module_params(triton={"models": ["simple"]}, container_overrides=override)
    validate(params)
    container = render(params)["containerDefinitions"][0]
    env = {e["name"]: e["value"] for e in container["environment"]}
    assert {k: env.get(k) for k in kept} == kept
    assert {"TRITON_MODEL_REPOSITORY", "TRITON_DRAIN_TIMEOUT_S", "TRITON_STOP_TIMEOUT_S", "TRITON_GPU_COUNT"} <= set(env)


def test_adversarial_task_definition_override_ports_and_mounts_merge():
    """Ports and mounts in an override add to the rendered ones instead of replacing them."""
    params = module_params(
        triton={"model_repository_host_path": "/mnt/models"},
        container_overrides={
            "portMappings": [{"containerPort": 9000, "protocol": "tcp"}],
            "mountPoints": [{"sourceVolume": "cache", "containerPath": "/cache"}],
        },
    )
    container = render(params)["containerDefinitions"][0]
    assert sorted(p["containerPort"] for p in container["portMappings"]) == [8000, 8001, 8002, 9000]
    assert sorted(m["containerPath"] for m in container["mountPoints"]) == ["/cache", "/models"]


def test_adversarial_task_definition_allowed_tags_and_digests_pass():
    """The same rules accept what they should: digests everywhere, a listed tag, an ECR tag to resolve."""
    validate(module_params(extra_containers=sidecar(image="127.0.0.1:5000/agent:rehearsal-only"), allowed_image_tags=["rehearsal-only"]))
    validate(module_params(container_overrides={"image": f"other/triton@{DIGEST}"}))
    validate(module_params(image="123456789012.dkr.ecr.us-east-1.amazonaws.com/triton:24.08", resolve_image_digest=True))
    validate(module_params(secrets={"T": "arn:aws:secretsmanager:us-east-1:123456789012:secret:triton/t-AbCdEf"}, execution_role_arn=ROLE))
