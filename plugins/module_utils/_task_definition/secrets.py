# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The values of a task_definition run that must never be printed, so the module can hide them (`no_log_values`).

`secrets` are logged on purpose: they are ARNs, never secret values - but a plain value given where an ARN belongs
(refused by the validation) may be the secret itself, and so may the value of an environment variable whose name
says secret (accepted with a warning), or that looks like a credential whatever its name (refused). Ansible masks
every string registered here wherever it appears in the result, `invocation.module_args` included, at any verbosity
and with any callback.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._task_definition.checks import (
    SECRET_ARN,
    SECRET_LOOKING_NAME,
    credential_in,
)

# An accepted value shorter than this is not masked: Ansible masks every occurrence of the string in the whole result,
# so a short value would garble ARNs and numbers in it. Such a variable is still named in the module's warning.
MIN_MASKED_ENV_VALUE = 6


def _is_secret_arn(value: Any) -> bool:
    return isinstance(value, str) and SECRET_ARN.fullmatch(value) is not None


def _secret_entries(entries: Any) -> list[str]:
    """Values of a container's `secrets` list that are not ARNs (a plain `value`, or a valueFrom that is no ARN)."""
    hidden = []
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict):
            continue
        for key, value in entry.items():
            if key != "name" and isinstance(value, str) and value and not _is_secret_arn(value):
                hidden.append(value)
    return hidden


def _secret_looking_env(entries: Any) -> list[str]:
    """Values of environment variables whose names say secret, or that look like a credential (refused), from a dict
    or an ECS {name, value} list."""
    pairs = (
        entries.items() if isinstance(entries, dict) else [(e.get("name"), e.get("value")) for e in entries or [] if isinstance(e, dict)]
    )
    return [
        str(value)
        for name, value in pairs
        if value is not None
        and len(str(value)) >= MIN_MASKED_ENV_VALUE
        and ((isinstance(name, str) and SECRET_LOOKING_NAME.fullmatch(name)) or credential_in(value))
    ]


def values_to_hide(params: dict[str, Any]) -> set[str]:
    hidden = [str(v) for v in (params.get("secrets") or {}).values() if v not in (None, "") and not _is_secret_arn(v)]
    hidden += _secret_looking_env(params.get("environment") or {})
    containers = [c for c in params.get("extra_containers") or [] if isinstance(c, dict)]
    overrides = params.get("container_overrides")
    if isinstance(overrides, dict):
        containers.append(overrides)
    for container in containers:
        hidden += _secret_entries(container.get("secrets"))
        hidden += _secret_looking_env(container.get("environment"))
    return set(hidden)
