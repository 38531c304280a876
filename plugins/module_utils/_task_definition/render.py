# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The task_definition module's (validated) parameters rendered as register_task_definition arguments.

Pure functions, with the image-reference helpers the rendering and the digest resolution share.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._task_definition.canonical import strip_empty

TRITON_CONTAINER = "triton"
MODEL_VOLUME = "model-repository"
# A task volume (no host path: ECS makes it per task) shared with the metrics sidecar: the entrypoint writes its
# scrape target there, labelled with the task's service and colour.
METRICS_TARGETS_VOLUME = "metrics-targets"
METRICS_TARGET_FILE = "triton.json"
# The image's entrypoint (roles/triton_image) on SIGTERM: drains up to drain_timeout_s, waits up to this long for the
# models to unload, then forwards SIGTERM to tritonserver, which exits within --exit-timeout-secs.
UNLOAD_BUDGET_S = 15
# Seconds for the processes to exit after that, before ECS would SIGKILL.
EXIT_MARGIN_S = 5
DEFAULT_HEALTH_COMMAND = ["CMD", "/opt/inferops/bin/triton_healthcheck.py"]
_ECR_REPO = re.compile(r"^(?P<registry>\d{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/(?P<name>.+)$")
# List fields of a container whose entries have a key: an override merges into them entry by entry.
KEYED_LISTS = {
    "environment": "name",
    "secrets": "name",
    "portMappings": "containerPort",
    "mountPoints": "containerPath",
    "ulimits": "name",
    "resourceRequirements": "type",
}


# ---------------------------------------------------------------- image references


def split_image(image: str) -> dict[str, str | None]:
    """`repo[:tag][@sha256:...]` into repository, tag and digest (the registry port is not a tag)."""
    digest = None
    if "@" in image:
        image, digest = image.split("@", 1)
    tag = None
    last = image.rsplit("/", 1)[-1]
    if ":" in last:
        image, tag = image.rsplit(":", 1)
    return {"repository": image, "tag": tag, "digest": digest}


def ecr_repository(image: str) -> dict[str, str] | None:
    """registryId and repositoryName of an ECR image reference, or None for any other registry."""
    match = _ECR_REPO.match(split_image(image)["repository"] or "")
    if not match:
        return None
    return {"registryId": match.group("registry"), "repositoryName": match.group("name"), "region": match.group("region")}


def pin_image(image: str, digest: str) -> str:
    return f"{split_image(image)['repository']}@{digest}"


# ---------------------------------------------------------------- rendering


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """`override` merged into a copy of `base`: dicts merge key by key, anything else replaces."""
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def merge_overrides(container: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """`container_overrides` merged into the rendered Triton container.

    Dicts merge key by key; lists of keyed entries (environment, secrets, ports, mounts, ulimits, resource
    requirements) merge entry by entry, so an override adds or replaces entries and never drops the Triton
    settings; anything else replaces.
    """
    merged = deep_merge(container, {k: v for k, v in overrides.items() if k not in KEYED_LISTS})
    for field, key in KEYED_LISTS.items():
        if isinstance(overrides.get(field), list):
            entries = {entry.get(key): copy.deepcopy(entry) for entry in merged.get(field) or [] if isinstance(entry, dict)}
            for entry in overrides[field]:
                if isinstance(entry, dict):
                    entries[entry.get(key)] = copy.deepcopy(entry)
            merged[field] = list(entries.values())
    return merged


def stop_budget(drain_timeout_s: int, exit_timeout_s: int) -> int:
    """Seconds the container needs between SIGTERM and a clean exit."""
    return drain_timeout_s + UNLOAD_BUDGET_S + exit_timeout_s + EXIT_MARGIN_S


def triton_environment(triton: dict[str, Any], gpu_count: int, stop_timeout_s: int) -> dict[str, str]:
    """The TRITON_* variables the image's entrypoint (roles/triton_image) builds the tritonserver command from, and the
    INFEROPS_* ones that bind the task to its release (the model agent's view of it; docs/models.md)."""
    release = {}
    if triton.get("model_repository_host_path") and triton["model_view"]:
        release["INFEROPS_MODEL_VIEW"] = "task-definition"
    if triton.get("release_id"):
        release["INFEROPS_RELEASE_ID"] = str(triton["release_id"])
    if triton.get("metrics_target_dir"):
        release["INFEROPS_METRICS_TARGET_FILE"] = f"{triton['metrics_target_dir'].rstrip('/')}/{METRICS_TARGET_FILE}"
    return {
        **release,
        # The entrypoint ends the container before ECS's SIGKILL would, whatever Triton is doing (a model load).
        "TRITON_STOP_TIMEOUT_S": str(stop_timeout_s),
        "TRITON_MODEL_REPOSITORY": str(triton["model_repository"]),
        "TRITON_MODEL_CONTROL_MODE": str(triton["model_control_mode"]),
        "TRITON_LOAD_MODELS": ",".join(triton.get("models") or []),
        "TRITON_EXIT_TIMEOUT_S": str(triton["exit_timeout_s"]),
        "TRITON_DRAIN_TIMEOUT_S": str(triton["drain_timeout_s"]),
        "TRITON_HTTP_PORT": str(triton["http_port"]),
        "TRITON_GRPC_PORT": str(triton["grpc_port"]),
        "TRITON_METRICS_PORT": str(triton["metrics_port"]),
        # The entrypoint's pre-start check: fail fast when the GPUs ECS assigned are not visible.
        "TRITON_REQUIRE_GPU": "true" if gpu_count else "false",
        "TRITON_GPU_COUNT": str(gpu_count),
    }


def triton_args(triton: dict[str, Any], gpu_count: int) -> list[str]:
    """tritonserver flags beyond those the entrypoint derives from TRITON_*; it appends the container command."""
    args = []
    if triton.get("pinned_memory_pool_bytes") is not None:
        args.append(f"--pinned-memory-pool-byte-size={triton['pinned_memory_pool_bytes']}")
    if triton.get("cuda_memory_pool_bytes") is not None:
        args += [f"--cuda-memory-pool-byte-size={gpu}:{triton['cuda_memory_pool_bytes']}" for gpu in range(gpu_count)]
    return args + list(triton.get("extra_args") or [])


def render(params: dict[str, Any], region: str | None = None) -> dict[str, Any]:
    """register_task_definition arguments for the module's (validated) parameters."""
    triton = params["triton"]
    gpu_count = params["gpu_count"]
    health = params["health_check"]
    container: dict[str, Any] = {
        "name": TRITON_CONTAINER,
        "image": params["image"],
        "essential": True,
        "command": triton_args(triton, gpu_count),
        "portMappings": [
            {"name": name, "containerPort": triton.get(f"{name}_port", default), "protocol": "tcp"}
            for name, default in (("http", 8000), ("grpc", 8001), ("metrics", 8002))
        ],
        # Triton's own guidance: unlimited locked memory (pinned buffers) and a 64 MiB stack.
        "ulimits": [
            {"name": "memlock", "softLimit": -1, "hardLimit": -1},
            {"name": "stack", "softLimit": 67108864, "hardLimit": 67108864},
        ],
        # An init process reaps the python-backend stubs and forwards SIGTERM to tritonserver.
        "linuxParameters": {"initProcessEnabled": True, "sharedMemorySize": triton["shared_memory_size_mib"]},
        "stopTimeout": params["stop_timeout_s"],
        # environment wins over the rendered TRITON_* variables, on purpose.
        "environment": [
            {"name": k, "value": str(v)}
            for k, v in sorted(
                {**triton_environment(triton, gpu_count, params["stop_timeout_s"]), **(params.get("environment") or {})}.items()
            )
        ],
        "secrets": [{"name": k, "valueFrom": v} for k, v in sorted((params.get("secrets") or {}).items())],
    }
    if gpu_count:
        container["resourceRequirements"] = [{"type": "GPU", "value": str(gpu_count)}]
    for option, field in (("cpu", "cpu"), ("memory", "memory"), ("memory_reservation", "memoryReservation")):
        if params.get(option) is not None:
            container[field] = params[option]
    if health["enabled"]:
        container["healthCheck"] = {
            "command": list(health.get("command") or DEFAULT_HEALTH_COMMAND),
            "interval": health["interval_s"],
            "timeout": health["timeout_s"],
            "retries": health["retries"],
            # Model loading can take minutes; failures inside the start period do not count.
            "startPeriod": health["start_period_s"],
        }
    log = params.get("log_configuration")
    if log is None:
        log = {
            "logDriver": "awslogs",
            "options": {"awslogs-group": f"/ecs/{params['family']}", "awslogs-stream-prefix": TRITON_CONTAINER},
        }
        if region:
            log["options"]["awslogs-region"] = region
    if log:
        container["logConfiguration"] = log
    volumes = []
    if triton.get("model_repository_host_path"):
        volumes.append({"name": MODEL_VOLUME, "host": {"sourcePath": triton["model_repository_host_path"]}})
        container["mountPoints"] = [{"sourceVolume": MODEL_VOLUME, "containerPath": triton["model_repository"], "readOnly": True}]
    if triton.get("metrics_target_dir"):
        volumes.append({"name": METRICS_TARGETS_VOLUME})
        container.setdefault("mountPoints", []).append(
            {"sourceVolume": METRICS_TARGETS_VOLUME, "containerPath": triton["metrics_target_dir"].rstrip("/"), "readOnly": False}
        )
    container = merge_overrides(container, params.get("container_overrides") or {})

    definition: dict[str, Any] = {
        "family": params["family"],
        "containerDefinitions": [container, *copy.deepcopy(params.get("extra_containers") or [])],
        "networkMode": params["network_mode"],
        "requiresCompatibilities": ["EC2"],
        "volumes": volumes,
        "placementConstraints": [dict(c) for c in params.get("placement_constraints") or []],
        "tags": [{"key": k, "value": str(v)} for k, v in sorted((params.get("tags") or {}).items())],
    }
    for option, field in (("execution_role_arn", "executionRoleArn"), ("task_role_arn", "taskRoleArn")):
        if params.get(option):
            definition[field] = params[option]
    if params.get("cpu_architecture"):
        # ECS places the task only on container instances of this architecture (an arm64 g5g fleet, or x86_64).
        definition["runtimePlatform"] = {"cpuArchitecture": params["cpu_architecture"], "operatingSystemFamily": "LINUX"}
    return strip_empty(definition)
