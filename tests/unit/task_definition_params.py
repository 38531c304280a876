"""Module parameters as Ansible hands them to the task_definition module: every option, defaults filled from DOCUMENTATION."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from ansible_collections.inferops.triton_ecs.plugins.modules import task_definition

DIGEST = "sha256:" + "ab" * 32
IMAGE = f"123456789012.dkr.ecr.us-east-1.amazonaws.com/triton@{DIGEST}"
ROLE = "arn:aws:iam::123456789012:role/ecsTaskExecutionRole"
SSM_ARN = "arn:aws:ssm:us-east-1:123456789012:parameter/triton/hf_token"


def _defaults(options: dict[str, Any]) -> dict[str, Any]:
    params = {}
    for name, spec in options.items():
        value = copy.deepcopy(spec.get("default"))
        if spec.get("suboptions") and spec.get("type") == "dict" and value is not None:
            value = {**_defaults(spec["suboptions"]), **value}
        params[name] = value
    return params


OPTIONS = yaml.safe_load(task_definition.DOCUMENTATION)["options"]


def module_params(**overrides: Any) -> dict[str, Any]:
    """Parameters for a valid GPU Triton task definition; `triton` and `health_check` overrides merge into their defaults."""
    params = _defaults(OPTIONS)
    params.update(family="triton", image=IMAGE, memory=16000, memory_reservation=15000)
    for key, value in overrides.items():
        if key in ("triton", "health_check") and isinstance(value, dict):
            params[key] = {**params[key], **value}
        else:
            params[key] = value
    return params
