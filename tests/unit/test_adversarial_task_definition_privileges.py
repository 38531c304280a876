"""Unsafe task definitions (issue 28, classes "unsafe input" and "secrets in plain variables"): privileged mode, added
capabilities, root, unconfined profiles, tritonserver flags that override the rendered ones, system host paths, and
credentials given as plain environment values whatever the variable is called.

Stand-in: none - validate() is pure and runs before the module's first AWS call; tests/integration/
test_adversarial_task_definition.py proves a few of these against a moto server (nothing registered). Host paths and
credential values are generated (property-style, a fixed seed).
"""

from __future__ import annotations

import posixpath
import random
import string

import pytest

from ansible_collections.inferops.triton_ecs.plugins.module_utils._task_definition import checks
from ansible_collections.inferops.triton_ecs.plugins.module_utils._task_definition.secrets import values_to_hide
from ansible_collections.inferops.triton_ecs.plugins.module_utils._task_definition.validate import TaskDefinitionError, validate

from .task_definition_params import DIGEST, module_params

SIDECAR = {"name": "metrics", "image": f"public.ecr.aws/cloudwatch-agent/cloudwatch-agent@{DIGEST}", "memoryReservation": 64}


def refused(**overrides) -> list[str]:
    with pytest.raises(TaskDefinitionError) as raised:
        validate(module_params(**overrides))
    return raised.value.errors


PRIVILEGES = [
    ("override-privileged", {"container_overrides": {"privileged": True}}, "container_overrides.privileged:"),
    ("sidecar-privileged", {"extra_containers": [dict(SIDECAR, privileged=True)]}, "extra_containers[0].privileged:"),
    (
        "override-cap-add",
        {"container_overrides": {"linuxParameters": {"capabilities": {"add": ["SYS_ADMIN"]}}}},
        "container_overrides.linuxParameters.capabilities.add:",
    ),
    (
        "sidecar-cap-add",
        {"extra_containers": [dict(SIDECAR, linuxParameters={"capabilities": {"add": ["NET_ADMIN"]}})]},
        "extra_containers[0].linuxParameters.capabilities.add:",
    ),
    ("override-user-root", {"container_overrides": {"user": "root"}}, "container_overrides.user:"),
    ("override-user-0", {"container_overrides": {"user": "0"}}, "container_overrides.user:"),
    ("override-user-0-0", {"container_overrides": {"user": "0:0"}}, "container_overrides.user:"),
    ("override-user-000", {"container_overrides": {"user": "000:1000"}}, "container_overrides.user:"),
    ("sidecar-user-root-group", {"extra_containers": [dict(SIDECAR, user="root:wheel")]}, "extra_containers[0].user:"),
    (
        "override-seccomp-unconfined",
        {"container_overrides": {"dockerSecurityOptions": ["seccomp=unconfined"]}},
        "container_overrides.dockerSecurityOptions:",
    ),
]


@pytest.mark.parametrize(("overrides", "field"), [c[1:] for c in PRIVILEGES], ids=[c[0] for c in PRIVILEGES])
def test_adversarial_task_definition_privileges_are_refused(overrides, field):
    errors = refused(**overrides)
    assert any(e.startswith(field) and "remove" in e for e in errors), errors


@pytest.mark.parametrize("user", ["1000", "1000:1000", "triton-server", "10", "0100"])
def test_adversarial_task_definition_a_non_root_user_passes(user):
    validate(module_params(container_overrides={"user": user}))


FLAGS = [
    ("--model-control-mode=poll", "triton.model_control_mode"),
    ("--repository-poll-secs=5", "polling loads whatever lands"),
    ("--model-repository=/tmp", "triton.model_repository"),
    ("--model-store=/tmp", "triton.model_repository"),
    ("--load-model=other", "triton.models"),
    ("--http-port=9000", "triton.http_port"),
    ("--exit-timeout-secs=600", "triton.exit_timeout_s"),
]


@pytest.mark.parametrize(("flag", "option"), FLAGS, ids=[f[0].split("=")[0] for f in FLAGS])
@pytest.mark.parametrize("route", ["extra_args", "extra_args_split", "override_command", "env_extra_args"])
def test_adversarial_task_definition_flags_overriding_the_rendered_ones_are_refused(flag, option, route):
    """Whichever way the flag reaches tritonserver: triton.extra_args (as --f=v or as --f v), the container's command
    when no triton option renders one, or TRITON_EXTRA_ARGS in environment."""
    name, _sep, value = flag.partition("=")
    if route == "extra_args":
        errors = refused(triton={"extra_args": ["--allow-gpu-metrics=false", flag]})
    elif route == "extra_args_split":
        errors = refused(triton={"extra_args": [name, value]})
    elif route == "override_command":
        errors = refused(container_overrides={"command": [flag]})
    else:
        errors = refused(environment={"TRITON_EXTRA_ARGS": f"--log-verbose=1 {flag}"})
    assert any(name in e and option in e for e in errors), errors


def test_adversarial_task_definition_harmless_flags_pass():
    validate(module_params(triton={"extra_args": ["--allow-gpu-metrics=false", "--log-verbose=1", "--strict-model-config=false"]}))
    validate(module_params(environment={"TRITON_EXTRA_ARGS": "--allow-gpu-metrics=false --disable-auto-complete-config"}))


def test_adversarial_task_definition_poll_mode_never_runs_a_release():
    errors = refused(triton={"model_control_mode": "poll", "model_repository_host_path": "/mnt/models"})
    assert any(e.startswith("triton.model_control_mode:") and "explicit" in e for e in errors), errors
    errors = refused(triton={"model_control_mode": "none", "release_id": "r-1"})
    assert any(e.startswith("triton.model_control_mode:") for e in errors), errors
    errors = refused(environment={"TRITON_MODEL_CONTROL_MODE": "poll"})
    assert any(e.startswith("environment.TRITON_MODEL_CONTROL_MODE:") for e in errors), errors
    # Without a release, poll stays the operator's choice (docs/task_definition.md).
    validate(module_params(triton={"model_control_mode": "poll"}))


# ---------------------------------------------------------------- host paths: property-style

SYSTEM = ["/proc", "/sys", "/dev", "/etc", "/boot", "/root", "/run", "/var/run", "/var/lib/docker", "/var/lib/ecs", "/usr", "/lib"]
SAFE = ["/mnt/models", "/opt/models", "/data/triton", "/var/lib/models", "/srv/m", "/home/models", "/proceeds", "/devices/m"]


def _noisy(path: str, rng: random.Random) -> str:
    """The same path written another way: doubled slashes, `.` and `x/..` segments, a trailing slash."""
    parts = [p for p in path.split("/") if p]
    out = []
    for part in parts:
        if rng.random() < 0.3:
            out.append(".")
        if rng.random() < 0.2:
            out += ["detour", ".."]
        out.append(part)
    noisy = "/" + "/".join(out)
    if rng.random() < 0.3:
        noisy = noisy.replace("/", "//", 1)
    if rng.random() < 0.3:
        noisy += "/"
    return noisy


HOST_PATH_CASES = 300


def test_adversarial_task_definition_generated_host_paths_under_system_paths_are_refused():
    rng = random.Random(28)
    for case in range(HOST_PATH_CASES):
        system = rng.random() < 0.5
        base = rng.choice(SYSTEM) if system else rng.choice(SAFE)
        if system and rng.random() < 0.5:
            base += "/" + rng.choice(["self", "docker.sock", "1/root", "x"])
        path = _noisy(base, rng)
        assert posixpath.normpath(path.replace("//", "/")) == base, (case, path)  # the noise changes nothing
        problem = checks.host_path_problem(path)
        assert bool(problem) == system, (case, path, problem)
        params = module_params(triton={"model_repository_host_path": path})
        if system:
            with pytest.raises(TaskDefinitionError) as raised:
                validate(params)
            assert any(e.startswith("triton.model_repository_host_path:") and "/mnt/models" in e for e in raised.value.errors)
        else:
            validate(params)


def test_adversarial_task_definition_the_host_root_is_refused():
    for path in ("/", "//", "/./", "/models/..", "/../.."):
        assert checks.host_path_problem(path) == "is the host's root", path


# ---------------------------------------------------------------- credentials as plain values: property-style


def _aws_secret(rng: random.Random) -> str:
    alphabet = string.ascii_letters + string.digits + "/+"
    while True:
        value = "".join(rng.choice(alphabet) for _i in range(40))
        if any(c.islower() for c in value) and any(c.isupper() for c in value) and any(c.isdigit() for c in value):
            return value


CREDENTIALS = [
    lambda r: "AKIA" + "".join(r.choice(string.ascii_uppercase + string.digits) for _i in range(16)),
    lambda r: "ASIA" + "".join(r.choice(string.ascii_uppercase + string.digits) for _i in range(16)),
    _aws_secret,
    lambda r: (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIE"
        + "".join(r.choice(string.ascii_letters) for _i in range(60))
        + "\n-----END RSA PRIVATE KEY-----"
    ),
    lambda r: f"postgres://app:{''.join(r.choice(string.ascii_letters) for _i in range(12))}@db.internal:5432/models",
    lambda r: "hf_" + "".join(r.choice(string.ascii_letters) for _i in range(34)),
    lambda r: "ghp_" + "".join(r.choice(string.ascii_letters + string.digits) for _i in range(36)),
]
HARMLESS = [
    lambda r: "".join(r.choice("0123456789abcdef") for _i in range(40)),  # a git commit
    lambda r: "".join(r.choice("0123456789abcdef") for _i in range(64)),  # a SHA-256
    lambda r: "s3://models-bucket/triton/" + "".join(r.choice(string.ascii_lowercase) for _i in range(8)),
    lambda r: "https://example.internal:8443/v2/models",
    lambda r: str(r.randint(0, 10**9)),
    lambda r: "resnet50_" + "".join(r.choice(string.ascii_lowercase) for _i in range(6)),
    lambda r: "".join(r.choice(string.ascii_lowercase) for _i in range(40)),  # one case only: no key
]
NAMES = ["S3_SETTINGS", "MODEL_SOURCE", "CONFIG", "DATA_URL", "X", "OPTS"]
CREDENTIAL_CASES = 300


@pytest.mark.parametrize("where", ["environment", "override", "sidecar"])
def test_adversarial_task_definition_generated_credentials_are_refused_and_never_echoed(where):
    rng = random.Random(f"28-{where}")
    for case in range(CREDENTIAL_CASES // 3):
        is_credential = rng.random() < 0.5
        value = rng.choice(CREDENTIALS if is_credential else HARMLESS)(rng)
        name = rng.choice(NAMES)
        if where == "environment":
            params = module_params(environment={name: value})
        elif where == "override":
            params = module_params(container_overrides={"environment": [{"name": name, "value": value}]})
        else:
            params = module_params(extra_containers=[dict(SIDECAR, environment=[{"name": name, "value": value}])])
        if is_credential:
            with pytest.raises(TaskDefinitionError) as raised:
                validate(params)
            errors = raised.value.errors
            assert any(name in e and "secrets" in e and "value not shown" in e for e in errors), (case, errors)
            assert not any(value in e for e in errors), case
            assert value in values_to_hide(params), case  # masked in every output of the module
        else:
            assert validate(params) == [], (case, value)
