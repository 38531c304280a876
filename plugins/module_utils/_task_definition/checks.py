# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The rules every container definition of a task obeys, however it is described (options, overrides, sidecars).

Pure functions returning error (and warning) lines; `_task_definition.validate` applies them to the rendered
Triton container and to each of `extra_containers`, so `container_overrides` cannot slip past them.
Every pattern is matched whole (`fullmatch`): a `$` would let a trailing newline through, which AWS rejects.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from typing import Any

DIGEST = re.compile(r"[^@\s]+@sha256:[0-9a-f]{64}")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
CONTAINER_NAME = re.compile(r"[A-Za-z0-9_-]{1,255}")
SECRET_ARN = re.compile(r"arn:aws[a-z-]*:(ssm:[a-z0-9-]+:\d{12}:parameter/|secretsmanager:[a-z0-9-]+:\d{12}:secret:)[\w+=,.@/:-]+")
ROLE_ARN = re.compile(r"arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]{1,512}")
# Environment variable names that say they hold a secret; their values belong in `secrets`.
SECRET_LOOKING_NAME = re.compile(r"(?i).*(PASSW(OR)?D|SECRET|TOKEN|CREDENTIAL|PRIVATE|API_?KEY|ACCESS_?KEY|(^|_)KEY(_|$)).*")

# Values that are credentials whatever the variable is called: AWS access key ids, AWS secret access keys (40
# characters of base64 mixing cases and digits), private keys, URLs carrying a password, well-known token formats.
CREDENTIAL_VALUES = (
    ("an AWS access key id", re.compile(r"(AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}")),
    ("an AWS secret access key", re.compile(r"(?=[A-Za-z0-9/+]*[a-z])(?=[A-Za-z0-9/+]*[A-Z])(?=[A-Za-z0-9/+]*[0-9])[A-Za-z0-9/+]{40}")),
    ("a private key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*", re.S)),
    ("a URL with a password", re.compile(r"[a-z][a-z0-9+.-]*://[^/\s:@]+:[^/\s@]+@\S+")),
    (
        "an access token",
        re.compile(r"(hf_[A-Za-z0-9]{30,}|gh[pousr]_[A-Za-z0-9]{36,}|github_pat_\w{40,}|xox[abpr]-[\w-]{10,}|sk-[A-Za-z0-9_-]{32,})"),
    ),
)
# tritonserver flags the image's entrypoint renders from the task definition (roles/triton_image
# triton_entrypoint.py server_command): given again they would override the release's settings.
RENDERED_TRITON_FLAGS = {
    "--model-repository": "triton.model_repository (the release's model view)",
    "--model-store": "triton.model_repository (the release's model view)",
    "--model-control-mode": "triton.model_control_mode; explicit is what a staged release loads through",
    "--repository-poll-secs": "nothing: polling loads whatever lands in the repository, around the staged release",
    "--load-model": "triton.models (or the release's model view)",
    "--http-port": "triton.http_port",
    "--grpc-port": "triton.grpc_port",
    "--metrics-port": "triton.metrics_port",
    "--exit-timeout-secs": "triton.exit_timeout_s (the stop budget)",
}
# Host paths no task may mount: the host's kernel interfaces, devices, configuration, binaries, the Docker socket
# and the ECS agent's state. "/" itself is refused; a path below it that is none of these is fine.
SYSTEM_HOST_PATHS = ("/proc", "/sys", "/dev", "/etc", "/boot", "/root", "/run", "/var/run", "/var/lib/docker", "/var/lib/ecs",
                     "/usr", "/bin", "/sbin", "/lib", "/lib64")  # fmt: skip
ROOT_USER = re.compile(r"(root|0+)(:.*)?")

# Ranges of the numbers AWS or Docker would reject (or that no GPU instance can honour).
MAX_GPUS = 16
MAX_CPU_UNITS = 196608  # 192 vCPU, the largest ECS task
MAX_MEMORY_MIB = 4194304  # 4 TiB
MIN_STOP_TIMEOUT_S = 2
MAX_TAGS = 50


def text_problem(value: Any) -> str | None:
    """Why a name, path or ARN is not a one-line string, or None."""
    if not isinstance(value, str):
        return f"is a {type(value).__name__}, not a string"
    if any(ch in value for ch in "\r\n\t\x00"):
        return "holds a newline, tab or NUL, which AWS rejects"
    if value != value.strip():
        return "has leading or trailing spaces"
    return None


def check_text(field: str, value: Any, fix: str) -> list[str]:
    problem = text_problem(value)
    return [f"{field}: {value!r} {problem}; {fix}"] if problem else []


def check_range(field: str, value: Any, low: int, high: int, unit: str = "") -> list[str]:
    if value is None:
        return []
    if isinstance(value, bool) or not isinstance(value, int):
        return [f"{field}: {value!r} is not a whole number; give {low}-{high}{unit}"]
    if not low <= value <= high:
        return [f"{field}: {value}{unit} is outside {low}-{high}{unit}; give a value in that range"]
    return []


def check_role_arn(field: str, value: Any) -> list[str]:
    if value in (None, ""):
        return []
    if text_problem(value) or not ROLE_ARN.fullmatch(value):
        return [f"{field}: {value!r} is not an IAM role ARN; give arn:aws:iam::<12-digit account>:role/<name>"]
    return []


def check_image(field: str, image: Any, allowed_tags: list[str]) -> list[str]:
    """A digest reference, or a tag listed in allowed_image_tags (never `latest`, never untagged)."""
    problem = text_problem(image)
    if problem or not image:
        return [f"{field}: {image!r} {problem or 'is empty'}; give repo@sha256:<64 hex digits>"]
    if "@" in image:
        if not DIGEST.fullmatch(image):
            return [f"{field}: {image!r} has a malformed digest; use repo@sha256:<64 lowercase hex digits>"]
        return []
    last = image.rsplit("/", 1)[-1]
    tag = last.rsplit(":", 1)[1] if ":" in last else None
    if tag is None:
        return [f"{field}: {image!r} has neither tag nor digest; pin it as {image}@sha256:<digest>"]
    if tag == "latest":
        return [f"{field}: {image!r} uses the moving tag 'latest'; pin a digest (repo@sha256:...)"]
    if tag in allowed_tags:
        return []
    return [
        f"{field}: {image!r} is a tag, which can move under a running service; give repo@sha256:<digest>,"
        f" or list {tag!r} in allowed_image_tags if that tag never moves"
    ]


def check_environment_list(field: str, entries: Any) -> tuple[list[str], list[str]]:
    """(errors, warnings) for a container's `environment` list."""
    if entries is None:
        return [], []
    if not isinstance(entries, list):
        return [f"{field}: {entries!r} is not a list; give [{{name: ..., value: ...}}]"], []
    errors: list[str] = []
    names = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or set(entry) - {"name", "value"} or "name" not in entry:
            errors.append(f"{field}[{i}]: needs exactly the keys name and value; give {{name: VAR, value: text}}")
            continue
        names.append(entry["name"])
        kind = credential_in(entry.get("value"))
        if kind:
            errors.append(
                f"{field}: {entry['name']} holds what looks like {kind} (value not shown), which a plain variable stores in "
                "clear in the task definition; store it in SSM Parameter Store or Secrets Manager and give its ARN under "
                "secrets (AWS credentials: drop them, the task role gives the task its own)"
            )
    errors += check_env_names(field, names)
    return errors, secret_looking(field, names)


def credential_in(value: Any) -> str | None:
    """What kind of credential a plain value looks like (CREDENTIAL_VALUES), or None."""
    if not isinstance(value, str):
        return None
    for kind, pattern in CREDENTIAL_VALUES:
        if pattern.fullmatch(value.strip()):
            return kind
    return None


def triton_flag_errors(field: str, args: list[Any]) -> list[str]:
    """tritonserver flags that override the ones rendered from the task definition's options."""
    errors = []
    for arg in args:
        flag = str(arg).split("=", 1)[0]
        if flag in RENDERED_TRITON_FLAGS:
            errors.append(
                f"{field}: {arg!r} overrides a flag rendered from the options (a staged release depends on it); "
                f"remove it and set {RENDERED_TRITON_FLAGS[flag]}"
            )
    return errors


def extra_args_of(value: Any) -> list[str]:
    """TRITON_EXTRA_ARGS as the entrypoint splits it; a value it cannot split is one argument."""
    try:
        return shlex.split(str(value))
    except ValueError:
        return [str(value)]


def host_path_problem(path: Any) -> str | None:
    """Why a host path must not be mounted into a task (SYSTEM_HOST_PATHS), or None."""
    if not isinstance(path, str) or not path.startswith("/"):
        return None
    normal = posixpath.normpath("/" + path.lstrip("/"))
    if normal == "/":
        return "is the host's root"
    for system in SYSTEM_HOST_PATHS:
        if normal == system or normal.startswith(system + "/"):
            return f"is {system}, a system path of the host"
    return None


def privilege_errors(field: str, container: dict[str, Any]) -> list[str]:
    """Privileges a Triton task never needs: privileged mode, added capabilities, root, unconfined profiles.

    GPUs come from resourceRequirements and pinned memory from the memlock ulimit; the image runs as triton-server."""
    errors = []
    if container.get("privileged"):
        errors.append(
            f"{field}.privileged: true gives the container the host's devices and kernel; remove it "
            "(GPUs come from gpu_count, pinned memory from the memlock ulimit)"
        )
    linux = container.get("linuxParameters") if isinstance(container.get("linuxParameters"), dict) else {}
    added = (linux.get("capabilities") or {}).get("add") if isinstance(linux.get("capabilities"), dict) else None
    if added:
        errors.append(f"{field}.linuxParameters.capabilities.add: {added!r} adds kernel capabilities Triton does not need; remove them")
    user = container.get("user")
    if user is not None and ROOT_USER.fullmatch(str(user).strip()):
        errors.append(
            f"{field}.user: {user!r} runs the container as root; remove it (the image runs as its own user) or give a uid above 0"
        )
    for option in container.get("dockerSecurityOptions") or []:
        if "unconfined" in str(option):
            errors.append(f"{field}.dockerSecurityOptions: {option!r} turns off a confinement profile; remove it")
    return errors


def check_env_names(field: str, names: list[Any]) -> list[str]:
    errors = []
    for name in names:
        if not isinstance(name, str) or not ENV_NAME.fullmatch(name):
            errors.append(f"{field}: {name!r} is not a valid variable name; use letters, digits and '_', not starting with a digit")
    return errors


def secret_looking(field: str, names: list[Any]) -> list[str]:
    return [
        f"{field}: {name} looks like a secret but is a plain environment variable, stored in clear in the task"
        " definition; move it to secrets (an SSM parameter or Secrets Manager ARN)"
        for name in names
        if isinstance(name, str) and SECRET_LOOKING_NAME.fullmatch(name)
    ]


def check_secret_value(field: str, value: Any) -> list[str]:
    if isinstance(value, str) and not text_problem(value) and SECRET_ARN.fullmatch(value):
        return []
    # The value may be the secret itself: never echo it.
    return [
        f"{field}: the value is not an SSM parameter or Secrets Manager ARN (value not shown);"
        " store the secret in SSM Parameter Store or Secrets Manager and give its ARN"
        " (arn:aws:ssm:<region>:<account>:parameter/... or arn:aws:secretsmanager:<region>:<account>:secret:...)"
    ]


def check_secrets_list(field: str, entries: Any) -> list[str]:
    """A container's `secrets` list: {name, valueFrom} only, valueFrom an ARN; a plain `value` is refused."""
    if entries is None:
        return []
    if not isinstance(entries, list):
        return [f"{field}: is not a list; give [{{name: VAR, valueFrom: <ARN>}}]"]
    errors = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or set(entry) != {"name", "valueFrom"}:
            keys = sorted(entry) if isinstance(entry, dict) else type(entry).__name__
            errors.append(
                f"{field}[{i}]: has keys {keys} (values not shown); a secret is exactly {{name: VAR, valueFrom: <ARN>}},"
                " never a plain value"
            )
            continue
        errors += check_env_names(f"{field}[{i}].name", [entry["name"]])
        errors += check_secret_value(f"{field}[{i}].valueFrom", entry["valueFrom"])
    return errors


def check_container(field: str, container: dict[str, Any], allowed_tags: list[str]) -> tuple[list[str], list[str]]:
    """(errors, warnings) for one container definition as ECS takes it."""
    errors = check_text(f"{field}.name", container.get("name"), "use 1-255 letters, digits, '-' or '_'")
    if not errors and not CONTAINER_NAME.fullmatch(container["name"]):
        errors.append(f"{field}.name: {container['name']!r} is not a valid container name; use 1-255 letters, digits, '-' or '_'")
    if "image" in container:
        errors += check_image(f"{field}.image", container["image"], allowed_tags)
    env_errors, warnings = check_environment_list(f"{field}.environment", container.get("environment"))
    errors += env_errors
    errors += privilege_errors(field, container)
    errors += check_secrets_list(f"{field}.secrets", container.get("secrets"))
    errors += check_range(f"{field}.cpu", container.get("cpu"), 0, MAX_CPU_UNITS, " units")
    for key in ("memory", "memoryReservation"):
        errors += check_range(f"{field}.{key}", container.get(key), 6, MAX_MEMORY_MIB, " MiB")
    errors += check_range(f"{field}.stopTimeout", container.get("stopTimeout"), MIN_STOP_TIMEOUT_S, 120, " s")
    for i, port in enumerate(container.get("portMappings") or []):
        port = port if isinstance(port, dict) else {}
        errors += check_range(f"{field}.portMappings[{i}].containerPort", port.get("containerPort"), 1, 65535)
        # hostPort 0 asks for a dynamic port (bridge mode)
        errors += check_range(f"{field}.portMappings[{i}].hostPort", port.get("hostPort"), 0, 65535)
    return errors, warnings
