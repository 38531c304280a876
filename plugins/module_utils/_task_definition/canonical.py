# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The canonical form of a task definition, and the diff of two.

Nothing here talks to AWS. The canonical form is what makes re-applies free of phantom revisions:
what we would register and what describe_task_definition returns for it compare equal, although
AWS fills defaults, drops empty fields and reorders lists on its side.
"""

from __future__ import annotations

import copy
from typing import Any

# Fields describe_task_definition returns that are not part of what is registered.
READ_ONLY_FIELDS = (
    "taskDefinitionArn",
    "revision",
    "status",
    "requiresAttributes",
    "compatibilities",
    "registeredAt",
    "registeredBy",
    "deregisteredAt",
    "deleteRequestedAt",
)


def strip_empty(value: Any) -> Any:
    """Drop None, empty lists and empty dicts at every depth: AWS treats them as absent, and omits or fills them."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            item = strip_empty(item)
            if item is None or item == [] or item == {}:
                continue
            out[key] = item
        return out
    if isinstance(value, list):
        return [strip_empty(item) for item in value]
    return value


def from_describe(response: dict[str, Any]) -> dict[str, Any]:
    """A describe_task_definition(include=['TAGS']) response as one registration-shaped dict (tags inside)."""
    definition = dict(response.get("taskDefinition") or {})
    definition["tags"] = response.get("tags") or []
    return definition


def _sorted(items: list[Any], *keys: str) -> list[Any]:
    return sorted(items, key=lambda item: tuple(str(item.get(k, "")) if isinstance(item, dict) else str(item) for k in keys))


def _canonical_port(port: dict[str, Any], network_mode: str) -> dict[str, Any]:
    port = dict(port)
    port.setdefault("protocol", "tcp")
    port["protocol"] = str(port["protocol"]).lower()
    if "containerPort" in port and "hostPort" not in port:
        # awsvpc and host mode map the same port; bridge without hostPort means a dynamic port (0).
        port["hostPort"] = port["containerPort"] if network_mode in ("awsvpc", "host") else 0
    return port


def _canonical_container(container: dict[str, Any], network_mode: str) -> dict[str, Any]:
    c = dict(container)
    c.setdefault("essential", True)
    c.setdefault("cpu", 0)
    if "versionConsistency" in c and c["versionConsistency"] == "enabled":
        # AWS reports the default on every container now; an explicit default is the same thing.
        del c["versionConsistency"]
    c["portMappings"] = _sorted(
        [_canonical_port(p, network_mode) for p in c.get("portMappings") or []], "containerPort", "protocol", "hostPort"
    )
    c["environment"] = _sorted([dict(e, value=str(e.get("value", ""))) for e in c.get("environment") or []], "name")
    c["secrets"] = _sorted(list(c.get("secrets") or []), "name")
    c["mountPoints"] = _sorted([dict({"readOnly": False}, **m) for m in c.get("mountPoints") or []], "sourceVolume", "containerPath")
    c["volumesFrom"] = _sorted([dict({"readOnly": False}, **v) for v in c.get("volumesFrom") or []], "sourceContainer")
    c["ulimits"] = _sorted(list(c.get("ulimits") or []), "name")
    c["systemControls"] = _sorted(list(c.get("systemControls") or []), "namespace")
    c["dependsOn"] = _sorted(list(c.get("dependsOn") or []), "containerName")
    c["resourceRequirements"] = _sorted([dict(r, value=str(r.get("value"))) for r in c.get("resourceRequirements") or []], "type")
    if c.get("healthCheck"):
        health = {"interval": 30, "timeout": 5, "retries": 3}
        health.update(c["healthCheck"])
        if not health.get("startPeriod"):
            health.pop("startPeriod", None)
        c["healthCheck"] = health
    if c.get("linuxParameters"):
        params = dict(c["linuxParameters"])
        capabilities = dict(params.get("capabilities") or {})
        for key in ("add", "drop"):
            if capabilities.get(key):
                capabilities[key] = sorted(capabilities[key])
        params["capabilities"] = capabilities
        c["linuxParameters"] = params
    return c


def _canonical_volume(volume: dict[str, Any]) -> dict[str, Any]:
    v = dict(volume)
    if v.get("efsVolumeConfiguration"):
        v["efsVolumeConfiguration"] = dict({"rootDirectory": "/"}, **v["efsVolumeConfiguration"])
    if v.get("dockerVolumeConfiguration"):
        v["dockerVolumeConfiguration"] = dict({"scope": "task"}, **v["dockerVolumeConfiguration"])
    return v


def canonicalise(definition: dict[str, Any]) -> dict[str, Any]:
    """A registration-shaped task definition in the form that compares equal with what AWS returns for it.

    Strips read-only fields, fills the defaults AWS fills, sorts lists whose order means nothing,
    drops empty values, and passes every other field through unchanged.
    """
    d = {k: copy.deepcopy(v) for k, v in definition.items() if k not in READ_ONLY_FIELDS}
    network_mode = d.get("networkMode") or "bridge"
    d["networkMode"] = network_mode
    d["containerDefinitions"] = _sorted([_canonical_container(c, network_mode) for c in d.get("containerDefinitions") or []], "name")
    d["volumes"] = _sorted([_canonical_volume(v) for v in d.get("volumes") or []], "name")
    d["placementConstraints"] = _sorted(list(d.get("placementConstraints") or []), "type", "expression")
    d["tags"] = _sorted(list(d.get("tags") or []), "key")
    d["requiresCompatibilities"] = sorted(d.get("requiresCompatibilities") or [])
    for field in ("cpu", "memory"):
        if d.get(field) is not None:
            d[field] = str(d[field])
    if d.get("enableFaultInjection") is False:
        del d["enableFaultInjection"]
    for field in ("taskRoleArn", "executionRoleArn"):
        if d.get(field) == "":
            del d[field]
    return strip_empty(d)


# ---------------------------------------------------------------- diff


def diff_paths(before: Any, after: Any, path: str = "") -> list[str]:
    """Dotted paths where two canonical forms differ, for a readable summary of a change."""
    if isinstance(before, dict) and isinstance(after, dict):
        paths = []
        for key in sorted(set(before) | set(after), key=str):
            child = f"{path}.{key}" if path else str(key)
            if key not in before or key not in after:
                paths.append(child)
            else:
                paths += diff_paths(before[key], after[key], child)
        return paths
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        paths = []
        for i, (b, a) in enumerate(zip(before, after)):
            name = a.get("name") if isinstance(a, dict) and isinstance(b, dict) and a.get("name") == b.get("name") else None
            paths += diff_paths(b, a, f"{path}[{name if name is not None else i}]")
        return paths
    return [] if before == after else [path or "."]


def diff(current: dict[str, Any] | None, desired: dict[str, Any] | None) -> dict[str, Any]:
    """Ansible diff (before/after canonical forms) plus the changed paths."""
    before = canonicalise(current) if current else {}
    after = canonicalise(desired) if desired else {}
    return {"before": before, "after": after, "paths": diff_paths(before, after)}
