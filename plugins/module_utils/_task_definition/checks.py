# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The rules every container definition of a task obeys, however it is described (options, overrides, sidecars).

Pure functions returning error (and warning) lines; `_task_definition.validate` applies them to the rendered
Triton container and to each of `extra_containers`, so `container_overrides` cannot slip past them.
Every pattern is matched whole (`fullmatch`): a `$` would let a trailing newline through, which AWS rejects.
"""

from __future__ import annotations

import re
from typing import Any

DIGEST = re.compile(r"[^@\s]+@sha256:[0-9a-f]{64}")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
CONTAINER_NAME = re.compile(r"[A-Za-z0-9_-]{1,255}")
SECRET_ARN = re.compile(r"arn:aws[a-z-]*:(ssm:[a-z0-9-]+:\d{12}:parameter/|secretsmanager:[a-z0-9-]+:\d{12}:secret:)[\w+=,.@/:-]+")
ROLE_ARN = re.compile(r"arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]{1,512}")
# Environment variable names that say they hold a secret; their values belong in `secrets`.
SECRET_LOOKING_NAME = re.compile(r"(?i).*(PASSW(OR)?D|SECRET|TOKEN|CREDENTIAL|PRIVATE|API_?KEY|ACCESS_?KEY|(^|_)KEY(_|$)).*")

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
    errors += check_env_names(field, names)
    return errors, secret_looking(field, names)


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
