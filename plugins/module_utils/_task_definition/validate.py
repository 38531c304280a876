# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""Validation of the task_definition module's parameters: every problem, with its fix, found before any AWS call."""

from __future__ import annotations

import re
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import InputError
from ansible_collections.inferops.triton_ecs.plugins.module_utils._task_definition import checks
from ansible_collections.inferops.triton_ecs.plugins.module_utils._task_definition.render import (
    EXIT_MARGIN_S,
    KEYED_LISTS,
    TRITON_CONTAINER,
    UNLOAD_BUDGET_S,
    ecr_repository,
    render,
    split_image,
    stop_budget,
    triton_args,
)

# ECS rejects a container stopTimeout above this on EC2 (ECS_CONTAINER_STOP_TIMEOUT caps it too).
EC2_MAX_STOP_TIMEOUT_S = 120
NETWORK_MODES = ("awsvpc", "bridge", "host", "none")
MODEL_CONTROL_MODES = ("explicit", "poll", "none")

_FAMILY = re.compile(r"[A-Za-z0-9_-]{1,255}")


class TaskDefinitionError(InputError):
    """Bad input: every message names the field, the value and the fix."""


def validate(params: dict[str, Any]) -> list[str]:
    """Raise TaskDefinitionError listing every problem with the module's parameters; no AWS call needed.

    Returns warnings (plain environment variables whose names say secret). The rendered containers are checked
    too, so what `container_overrides` and `extra_containers` bring obeys the same rules as the options.
    """
    errors: list[str] = []
    warnings: list[str] = []
    family = params.get("family") or ""
    if not isinstance(family, str) or not _FAMILY.fullmatch(family):
        errors.append(f"family: {family!r} is not a valid family name; use 1-255 letters, digits, '-' or '_'")
    keep = params.get("keep_revisions")
    if isinstance(keep, int) and keep < 1:
        errors.append(f"keep_revisions: {keep} keeps nothing; give 1 or more, or leave it unset to keep every revision")
    else:
        errors += checks.check_range("keep_revisions", keep, 1, 10000)
    if params["state"] == "present":
        errors += _validate_image(params)
        errors += _validate_resources(params)
        errors += _validate_triton(params)
        errors += _validate_health_check(params["health_check"])
        errors += _validate_environment(params)
        errors += _validate_containers(params)
        if not errors:
            container_errors, warnings = _validate_rendered(params)
            errors += container_errors
    if errors:
        raise TaskDefinitionError(errors)
    return warnings


def _validate_image(params: dict[str, Any]) -> list[str]:
    image = params.get("image")
    if not image:
        return ["image: required with state=present; give a digest reference such as repo@sha256:<64 hex>"]
    allowed = list(params.get("allowed_image_tags") or [])
    parts = split_image(image) if isinstance(image, str) else {"tag": None, "digest": None}
    tag = parts["tag"]
    resolvable = params.get("resolve_image_digest") and not parts["digest"] and tag not in (None, "latest")
    if not resolvable or checks.text_problem(image):
        errors = checks.check_image("image", image, allowed)
        if errors and tag and not parts["digest"] and tag != "latest" and not params.get("resolve_image_digest"):
            errors = [errors[0] + ", or set resolve_image_digest=true to resolve the tag through ECR"]
        if errors and tag == "latest":
            errors = [errors[0] + ", or a release tag with resolve_image_digest=true"]
        return errors
    if ecr_repository(image) is None:
        return [f"image: {image!r} is not an ECR repository, so resolve_image_digest cannot resolve it; give repo@sha256:<digest> instead"]
    return []


def _validate_resources(params: dict[str, Any]) -> list[str]:
    errors = []
    gpu = params["gpu_count"]
    if isinstance(gpu, int) and gpu < 0:
        errors.append(f"gpu_count: {gpu} is negative; give 0 for a CPU-only task or the number of GPUs per task")
    else:
        errors += checks.check_range("gpu_count", gpu, 0, checks.MAX_GPUS)
    cpu = params.get("cpu")
    if isinstance(cpu, int) and cpu < 0:
        errors.append(f"cpu: {cpu} is negative; give CPU units (1024 = one vCPU) or leave it unset")
    else:
        errors += checks.check_range("cpu", cpu, 0, checks.MAX_CPU_UNITS, " units")
    memory, reservation = params.get("memory"), params.get("memory_reservation")
    if memory is None and reservation is None:
        errors.append("memory: neither memory nor memory_reservation is set; ECS needs one of them (MiB) for the container")
    for name, value in (("memory", memory), ("memory_reservation", reservation)):
        if isinstance(value, int) and value < 6:
            errors.append(f"{name}: {value} MiB is below the 6 MiB Docker minimum; give the container's memory in MiB")
        else:
            errors += checks.check_range(name, value, 6, checks.MAX_MEMORY_MIB, " MiB")
    if isinstance(memory, int) and isinstance(reservation, int) and reservation > memory:
        errors.append(
            f"memory_reservation: {reservation} MiB is above memory {memory} MiB (the hard limit);"
            f" lower memory_reservation to at most {memory} or raise memory"
        )
    mode = params["network_mode"]
    if mode not in NETWORK_MODES:
        errors.append(f"network_mode: {mode!r} is not an ECS network mode on Linux; use one of {', '.join(NETWORK_MODES)}")
    for i, constraint in enumerate(params.get("placement_constraints") or []):
        if constraint.get("type") not in ("memberOf", "distinctInstance"):
            errors.append(f"placement_constraints[{i}].type: {constraint.get('type')!r} is not valid; use memberOf or distinctInstance")
        if constraint.get("expression") is not None:
            errors += checks.check_text(f"placement_constraints[{i}].expression", constraint["expression"], "write it on one line")
    errors += _validate_tags(params.get("tags") or {})
    errors += checks.check_role_arn("execution_role_arn", params.get("execution_role_arn"))
    errors += checks.check_role_arn("task_role_arn", params.get("task_role_arn"))
    return errors


def _validate_tags(tags: dict[str, Any]) -> list[str]:
    errors = []
    if len(tags) > checks.MAX_TAGS:
        errors.append(f"tags: {len(tags)} tags, AWS allows {checks.MAX_TAGS} per resource; drop some")
    for key, value in tags.items():
        if str(key).lower().startswith("aws:"):
            errors.append(f"tags: key {key!r} uses the reserved 'aws:' prefix; rename the tag")
        errors += checks.check_text(f"tags.{key}", str(key), "give a one-line key of at most 128 characters")
        errors += checks.check_text(f"tags.{key}", str(value), "give a one-line value of at most 256 characters")
        if len(str(key)) > 128 or len(str(value)) > 256:
            errors.append(f"tags.{key}: key or value too long (128/256 characters at most); shorten it")
    return errors


def _validate_triton(params: dict[str, Any]) -> list[str]:
    errors = []
    triton = params["triton"]
    exit_timeout = triton["exit_timeout_s"]
    drain_timeout = triton["drain_timeout_s"]
    stop_timeout = params["stop_timeout_s"]
    for name, value in (("exit_timeout_s", exit_timeout), ("drain_timeout_s", drain_timeout)):
        if isinstance(value, int) and value < 0:
            errors.append(f"triton.{name}: {value} is negative; give seconds >= 0")
        else:
            errors += checks.check_range(f"triton.{name}", value, 0, EC2_MAX_STOP_TIMEOUT_S, " s")
    errors += checks.check_range("stop_timeout_s", stop_timeout, checks.MIN_STOP_TIMEOUT_S, 10000, " s")
    if errors:
        return errors
    errors += stop_budget_errors("stop_timeout_s", stop_timeout, drain_timeout, exit_timeout)
    mode = triton["model_control_mode"]
    if mode not in MODEL_CONTROL_MODES:
        errors.append(f"triton.model_control_mode: {mode!r} is unknown; use explicit (recommended), poll or none")
    elif mode != "explicit" and (triton.get("release_id") or (triton.get("model_repository_host_path") and triton["model_view"])):
        errors.append(
            f"triton.model_control_mode: {mode!r} with a release (triton.release_id or the model view of "
            "triton.model_repository_host_path): Triton would load whatever lands in the repository, around the staged "
            "release and its rollback; set triton.model_control_mode=explicit"
        )
    elif triton.get("models") and mode != "explicit":
        errors.append(
            f"triton.models: Triton loads named models only with model_control_mode=explicit, not {mode!r};"
            " set triton.model_control_mode=explicit or drop triton.models"
        )
    for i, model in enumerate(triton.get("models") or []):
        if checks.text_problem(model) or "," in model or not model:
            errors.append(
                f"triton.models[{i}]: {model!r} is not a model directory name; give one name per item, without commas or newlines"
            )
    ports = {name: triton.get(name, default) for name, default in (("http_port", 8000), ("grpc_port", 8001), ("metrics_port", 8002))}
    for name, port in ports.items():
        if isinstance(port, int) and not 1 <= port <= 65535:
            errors.append(f"triton.{name}: {port} is not a TCP port; give 1-65535")
        else:
            errors += checks.check_range(f"triton.{name}", port, 1, 65535)
    if len(set(ports.values())) != len(ports):
        errors.append(f"triton ports: {ports} repeat a port; give http_port, grpc_port and metrics_port distinct values")
    errors += checks.check_text("triton.model_repository", triton["model_repository"], "give an absolute path on one line")
    host_path = triton.get("model_repository_host_path")
    if host_path is not None and not str(host_path).startswith("/"):
        errors.append(f"triton.model_repository_host_path: {host_path!r} is relative; give an absolute path on the container instance")
    elif host_path is not None:
        errors += checks.check_text("triton.model_repository_host_path", host_path, "give an absolute path on one line")
        problem = checks.host_path_problem(host_path)
        if problem:
            errors.append(
                f"triton.model_repository_host_path: {host_path!r} {problem}, which the task would see; give the model "
                "directory on the instance store, e.g. /mnt/models (fleet_capacity_model_host_path)"
            )
    target_dir = triton.get("metrics_target_dir")
    if target_dir is not None and (
        not str(target_dir).startswith("/") or str(target_dir).rstrip("/") in ("", str(triton["model_repository"]).rstrip("/"))
    ):
        errors.append(
            f"triton.metrics_target_dir: {target_dir!r} is not a directory of its own; give an absolute path such as /inferops/metrics"
        )
    release_id = triton.get("release_id")
    if release_id is not None and not re.fullmatch(r"[A-Za-z0-9._-]{1,128}", str(release_id)):
        errors.append(f"triton.release_id: {release_id!r} is not a release id; give the id model_release state=resolved returned")
    shm = triton["shared_memory_size_mib"]
    if isinstance(shm, int) and shm <= 0:
        errors.append(f"triton.shared_memory_size_mib: {shm} is not positive; the python backend needs /dev/shm, give MiB > 0")
    else:
        errors += checks.check_range("triton.shared_memory_size_mib", shm, 1, checks.MAX_MEMORY_MIB, " MiB")
    for name in ("pinned_memory_pool_bytes", "cuda_memory_pool_bytes"):
        value = triton.get(name)
        if isinstance(value, int) and value < 0:
            errors.append(f"triton.{name}: {value} is negative; give bytes >= 0 or leave it unset for Triton's default")
        else:
            errors += checks.check_range(f"triton.{name}", value, 0, 2**63 - 1, " bytes")
    return errors


def stop_budget_errors(field: str, stop_timeout: int, drain_timeout: int, exit_timeout: int) -> list[str]:
    errors = []
    needed = stop_budget(drain_timeout, exit_timeout)
    if stop_timeout < needed:
        errors.append(
            f"{field}: {stop_timeout} s is shorter than the stop sequence (triton.drain_timeout_s {drain_timeout} s"
            f" + {UNLOAD_BUDGET_S} s unload + triton.exit_timeout_s {exit_timeout} s + {EXIT_MARGIN_S} s margin),"
            f" so ECS would SIGKILL Triton mid-drain; set stop_timeout_s to at least {needed}"
            " or lower triton.drain_timeout_s / triton.exit_timeout_s"
        )
    if stop_timeout > EC2_MAX_STOP_TIMEOUT_S:
        errors.append(
            f"{field}: {stop_timeout} s is above the EC2 maximum of {EC2_MAX_STOP_TIMEOUT_S} s;"
            f" set it to {EC2_MAX_STOP_TIMEOUT_S} or less (and lower triton.drain_timeout_s / exit_timeout_s to fit)"
        )
    return errors


def _validate_health_check(health: dict[str, Any]) -> list[str]:
    errors = []
    limits = {"interval_s": (5, 300), "timeout_s": (2, 60), "retries": (1, 10), "start_period_s": (0, 300)}
    for name, (low, high) in limits.items():
        value = health.get(name)
        if value is not None and not low <= value <= high:
            errors.append(f"health_check.{name}: {value} is outside the ECS range {low}-{high}; give a value in it")
    command = health.get("command")
    if command is not None and (not command or command[0] not in ("CMD", "CMD-SHELL")):
        errors.append(f"health_check.command: {command!r} must start with CMD or CMD-SHELL, e.g. ['CMD', '/path/to/check']")
    return errors


def _validate_environment(params: dict[str, Any]) -> list[str]:
    errors = checks.check_env_names("environment", list(params.get("environment") or {}))
    for name, value in (params.get("secrets") or {}).items():
        errors += checks.check_env_names("secrets", [name])
        errors += checks.check_secret_value(f"secrets.{name}", value)
    if params.get("secrets") and not params.get("execution_role_arn"):
        errors.append("execution_role_arn: secrets are set but no execution role can read them; give execution_role_arn")
    return errors


def _validate_containers(params: dict[str, Any]) -> list[str]:
    errors = []
    names = {TRITON_CONTAINER}
    for i, container in enumerate(params.get("extra_containers") or []):
        name = container.get("name")
        if not name or not container.get("image"):
            errors.append(f"extra_containers[{i}]: {container.get('name')!r} needs both name and image; add the missing key")
        elif name in names:
            errors.append(f"extra_containers[{i}].name: {name!r} is used twice; give every container a distinct name")
        names.add(name)
        if container.get("secrets") and not params.get("execution_role_arn"):
            errors.append(f"extra_containers[{i}].secrets: no execution role can read them; give execution_role_arn")
    overrides = params.get("container_overrides") or {}
    if "name" in overrides:
        errors.append(f"container_overrides.name: {overrides['name']!r} cannot rename the Triton container; remove the key")
    if "command" in overrides and triton_args(params["triton"], params["gpu_count"]):
        errors.append(
            "container_overrides.command: would replace the tritonserver flags rendered from triton.* options"
            " (memory pools, extra_args); put further flags in triton.extra_args instead"
        )
    if overrides.get("secrets") and not params.get("execution_role_arn"):
        errors.append("container_overrides.secrets: no execution role can read them; give execution_role_arn")
    for key, value in overrides.items():
        if key in KEYED_LISTS and not isinstance(value, list):
            errors.append(f"container_overrides.{key}: is a {type(value).__name__}; give a list, as ECS takes it")
    return errors


def _validate_rendered(params: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Every rendered container against the shared rules: the Triton container after its overrides, then each sidecar."""
    allowed = list(params.get("allowed_image_tags") or [])
    containers = render(params)["containerDefinitions"]
    triton, extras = containers[0], containers[1:]
    # The Triton image was checked above (a tag may still be resolved through ECR); an overridden one is not.
    checked = dict(triton, image=triton["image"] if triton["image"] != params["image"] else None)
    errors, warnings = checks.check_container("container_overrides", {k: v for k, v in checked.items() if v is not None}, allowed)
    # The Triton container's variables come from `environment` and `container_overrides` alike.
    errors = [e.replace("container_overrides.environment:", "environment (Triton container):", 1) for e in errors]
    warnings = [w.replace("container_overrides.environment:", "environment (Triton container):", 1) for w in warnings]
    env = {e.get("name"): e.get("value") for e in triton.get("environment") or [] if isinstance(e, dict)}
    errors += _validate_final_stop_budget(params, env, triton.get("stopTimeout"))
    errors += _validate_triton_flags(params, triton, env)
    for i, container in enumerate(extras):
        extra_errors, extra_warnings = checks.check_container(f"extra_containers[{i}]", container, allowed)
        errors += extra_errors
        warnings += extra_warnings
    return errors, warnings


def _validate_triton_flags(params: dict[str, Any], container: dict[str, Any], env: dict[str, Any]) -> list[str]:
    """The rendered tritonserver settings stay as the options say: no flag in the command or TRITON_EXTRA_ARGS
    overrides them, and no TRITON_MODEL_CONTROL_MODE in `environment` or `container_overrides` changes the mode."""
    command = container.get("command") if isinstance(container.get("command"), list) else []
    source = "container_overrides.command" if "command" in (params.get("container_overrides") or {}) else "triton.extra_args"
    errors = checks.triton_flag_errors(source, command)
    if env.get("TRITON_EXTRA_ARGS"):
        errors += checks.triton_flag_errors("environment.TRITON_EXTRA_ARGS", checks.extra_args_of(env["TRITON_EXTRA_ARGS"]))
    mode = params["triton"]["model_control_mode"]
    if env.get("TRITON_MODEL_CONTROL_MODE", mode) != mode:
        errors.append(
            f"environment.TRITON_MODEL_CONTROL_MODE: {env['TRITON_MODEL_CONTROL_MODE']!r} overrides "
            f"triton.model_control_mode {mode!r}; remove the variable and set triton.model_control_mode"
        )
    return errors


def _validate_final_stop_budget(params: dict[str, Any], env: dict[str, Any], stop_timeout: Any) -> list[str]:
    """The stop budget again when `environment` or `container_overrides` changed what the options said."""
    triton = params["triton"]
    options = (triton["drain_timeout_s"], triton["exit_timeout_s"], params["stop_timeout_s"])
    try:
        final = (int(env["TRITON_DRAIN_TIMEOUT_S"]), int(env["TRITON_EXIT_TIMEOUT_S"]), int(stop_timeout))
    except (KeyError, TypeError, ValueError):
        return [
            "container_overrides / environment: TRITON_DRAIN_TIMEOUT_S, TRITON_EXIT_TIMEOUT_S and stopTimeout must stay"
            " whole seconds; set them through triton.drain_timeout_s, triton.exit_timeout_s and stop_timeout_s"
        ]
    if final == options:
        return []
    errors = [f"container_overrides / environment: {e}" for e in stop_budget_errors("stopTimeout", final[2], final[0], final[1])]
    for name, value in (("TRITON_DRAIN_TIMEOUT_S", final[0]), ("TRITON_EXIT_TIMEOUT_S", final[1])):
        errors += checks.check_range(f"environment.{name}", value, 0, EC2_MAX_STOP_TIMEOUT_S, " s")
    return errors
