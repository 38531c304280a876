# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""What the model agent reads from its instance (identity, Triton tasks, metrics) and the status object it writes.

Runs on the instance without Ansible, like the agent.
"""

from __future__ import annotations

import datetime
import json
import logging
import urllib.request
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.release import STATUS_SCHEMA, release_models, view_name
from ansible_collections.inferops.triton_ecs.plugins.module_utils._triton_client import (
    FAILURE,
    TritonClient,
    TritonError,
    open_direct,
    sum_by_label,
    zero_inputs,
)

HTTP_TIMEOUT_S = 2.0
SMOKE_TIMEOUT_S = 30.0

log = logging.getLogger("inferops-model-agent")


def utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------- the instance: identity and tasks


def http_request(url: str, method: str = "GET", headers: dict[str, str] | None = None, timeout_s: float = HTTP_TIMEOUT_S) -> bytes:
    request = urllib.request.Request(url, method=method, headers=headers or {})
    with open_direct(request, timeout_s) as resp:
        return resp.read()


def imds_instance_id(imds_url: str) -> str:
    """The instance id through IMDSv2: a session token first (PUT), then the metadata read with it."""
    token = http_request(f"{imds_url}/latest/api/token", "PUT", {"X-aws-ec2-metadata-token-ttl-seconds": "300"}).decode()
    return http_request(f"{imds_url}/latest/meta-data/instance-id", headers={"X-aws-ec2-metadata-token": token}).decode().strip()


def agent_metadata(introspection_url: str) -> dict[str, Any]:
    """The ECS agent's view of this instance ({} while the agent is not running, e.g. during boot hydration)."""
    try:
        return json.loads(http_request(f"{introspection_url}/v1/metadata"))
    except (OSError, ValueError):
        return {}


def instance_metadata(config: dict[str, Any]) -> dict[str, Any]:
    """Container instance ARN and cluster from the ECS agent, once it runs (the config's cluster until then)."""
    metadata = agent_metadata(config["introspection_url"])
    return {"container_instance_arn": metadata.get("ContainerInstanceArn"), "cluster": metadata.get("Cluster") or config["cluster"]}


def triton_tasks(listing: dict[str, Any], container_name: str, http_port: int, metrics_port: int) -> list[dict[str, Any]]:
    """The running Triton tasks in the introspection answer (`GET /v1/tasks`) and how to reach each.

    An awsvpc task has its own ENI address (the container's Networks[].IPv4Addresses) and listens on the container
    ports; a bridge or host task is reached on the instance at the host ports its port bindings (Ports) give.
    """
    found = []
    for task in listing.get("Tasks") or []:
        if task.get("KnownStatus") != "RUNNING" or task.get("DesiredStatus") not in (None, "RUNNING"):
            continue
        for container in task.get("Containers") or []:
            if container.get("Name") != container_name:
                continue
            addresses = [a for network in container.get("Networks") or [] for a in network.get("IPv4Addresses") or []]
            modes = {network.get("NetworkMode") for network in container.get("Networks") or []}
            if "awsvpc" in modes and addresses:
                host, ports = addresses[0], {http_port: http_port, metrics_port: metrics_port}
            else:
                host = "127.0.0.1"
                ports = {p.get("ContainerPort"): p.get("HostPort") for p in container.get("Ports") or [] if p.get("HostPort")}
            if http_port not in ports:
                log.warning("task %s: container %s publishes no port for %s; skipped", task.get("Arn"), container_name, http_port)
                continue
            found.append(
                {
                    "arn": task.get("Arn"),
                    "url": f"http://{host}:{ports[http_port]}",
                    "metrics_url": f"http://{host}:{ports[metrics_port]}/metrics" if metrics_port in ports else None,
                    "view": task_view(task),
                }
            )
    return sorted(found, key=lambda t: t["arn"] or "")


def task_view(task: dict[str, Any]) -> str | None:
    """The model view of a task's definition revision (introspection's Family and Version), None when it lacks them."""
    family, revision = task.get("Family"), str(task.get("Version") or "")
    return view_name(family, revision) if family and revision.isdigit() else None


def views_in_use(listing: dict[str, Any], container_name: str) -> set[str]:
    """The views of every Triton task the ECS agent has not stopped (starting ones too: their entrypoint waits for it)."""
    return {
        view
        for task in listing.get("Tasks") or []
        if task.get("KnownStatus") != "STOPPED"
        and task.get("DesiredStatus") != "STOPPED"
        and any(c.get("Name") == container_name for c in task.get("Containers") or [])
        and (view := task_view(task))
    }


def smoke_test(client: TritonClient, model: str, version: int) -> None:
    """One inference of zeros on the version just loaded; TritonError (naming the smoke test) when it does not answer."""
    try:
        client.infer(model, zero_inputs(client.model_metadata(model, str(version))), version=str(version), timeout_s=SMOKE_TIMEOUT_S)
    except TritonError as err:
        raise TritonError(f"smoke inference on {model} version {version} (zeros, variable dimensions as 1) failed: {err}") from err


def failures_by_model(metrics_text: str) -> dict[str, int]:
    """nv_inference_request_failure per model (summed over versions) from Triton's Prometheus text."""
    return {model: int(value) for model, value in sum_by_label(metrics_text, FAILURE, "model").items()}


# ---------------------------------------------------------------- status


def serving_by_view(tasks: list[dict[str, Any]], indexes: dict[str, list[dict]]) -> dict[str, dict[str, set[int]]]:
    """{view: {model: versions READY on any of its reachable tasks}}."""
    found: dict[str, dict[str, set[int]]] = {}
    for task in tasks:
        for entry in indexes.get(task["arn"], []):
            if entry.get("state") == "READY" and str(entry.get("version", "")).isdigit():
                found.setdefault(task["view"], {}).setdefault(entry["name"], set()).add(int(entry["version"]))
    return found


def release_applied(
    wanted: dict[str, int], synced: dict[str, list[int]], loaded: dict[str, dict[str, list[int]]], tasks: list[dict]
) -> bool:
    """Every wanted version synced, and the only READY version on every one of `tasks` (the tasks of the release)."""
    if any(version not in synced.get(model, []) for model, version in wanted.items()):
        return False
    if not all(task.get("ready") for task in tasks):
        return False
    return all(loaded.get(task["arn"], {}).get(model) == [version] for model, version in wanted.items() for task in tasks)


def releases_held(
    views: dict[str, dict[str, Any]],
    target: dict[str, Any] | None,
    synced: dict[str, list[int]],
    loaded: dict[str, dict[str, list[int]]],
    tasks: list[dict[str, Any]],
    errors: dict[str, list[str]],
) -> dict[str, dict[str, Any]]:
    """One entry per release the instance holds (each view's, and its target): its views, tasks, and whether applied."""
    releases: dict[str, tuple[dict[str, Any], list[str]]] = {}
    for name, release in views.items():
        releases.setdefault(release["release_id"], (release, []))[1].append(name)
    if target is not None:
        releases.setdefault(target["release_id"], (target, []))
    held = {}
    for release_id, (release, names) in releases.items():
        wanted = release_models(release)
        mine = [t for t in tasks if t.get("view") in names]
        entry = {
            "task_definition": release.get("task_definition"),
            "views": sorted(names),
            "tasks": [t["arn"] for t in mine],
            "models": {
                model: {"wanted": version, "loaded": {t["arn"]: loaded.get(t["arn"], {}).get(model, []) for t in mine}}
                for model, version in wanted.items()
            },
            "errors": errors.get(release_id, []),
        }
        entry["applied"] = not entry["errors"] and release_applied(wanted, synced, loaded, mine)
        held[release_id] = entry
    return held


def build_status(
    config: dict[str, Any],
    identity: dict[str, Any],
    target: dict[str, Any] | None,
    state: str,
    views: dict[str, dict[str, Any]],
    synced: dict[str, list[int]],
    loaded: dict[str, dict[str, list[int]]],
    tasks: list[dict[str, Any]],
    failures: dict[str, dict[str, int]],
    errors: dict[str, list[str]],
    last_error: str | None,
    hydrated_at: str | None,
) -> dict[str, Any]:
    """The status object of the contract (P/status/APP/<instance-id>.json).

    The top level speaks of the instance's target (canary or current): `release_id`, `state`, `applied`, `models`.
    `releases` has one entry per release the instance holds (each colour's), with its views, tasks and `applied`.
    """
    held = releases_held(views, target, synced, loaded, tasks, errors)
    # Boot hydration loads nothing (no task runs before ECS starts): "applied" is for the serving agent to say.
    if state != "applying":
        for entry in held.values():
            entry["applied"] = False
    # No release yet: nothing to serve, once every task answers.
    applied = held[target["release_id"]]["applied"] if target else state == "applying" and all(t.get("ready") for t in tasks)
    return {
        "schema": STATUS_SCHEMA,
        "application": config["application"],
        "instance_id": identity["instance_id"],
        "container_instance_arn": identity.get("container_instance_arn"),
        "cluster": identity.get("cluster"),
        "release_id": target["release_id"] if target else None,
        "state": "applied" if applied else state,
        "applied": applied,
        "models": {
            model: {"wanted": version, "synced": synced.get(model, []), "loaded": held[target["release_id"]]["models"][model]["loaded"]}
            for model, version in release_models(target).items()
        },
        "releases": held,
        "tasks": [{"arn": t["arn"], "url": t["url"], "view": t.get("view"), "ready": t.get("ready", False)} for t in tasks],
        "inference_failures": failures,
        "last_error": last_error,
        "updated": utc_now(),
        "hydrated_at": hydrated_at,
    }
