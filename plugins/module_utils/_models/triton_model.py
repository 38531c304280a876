# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""Which version of a model a Triton serves, and changing it: load, unload, roll back, and wait for the outcome.

A specific version is loaded through a config override whose version_policy names that version only
(`{"specific": {"versions": [N]}}`): Triton loads it while the version it replaces keeps serving, then
unloads the old one, so requests never see a model without a READY version.
"""

from __future__ import annotations

import time
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.manifest import rollback_target
from ansible_collections.inferops.triton_ecs.plugins.module_utils._triton_client import (
    READY,
    TritonClient,
    TritonError,
    describe_versions,
    model_versions,
    ready_versions,
)

POLL_S = 0.02
_BUSY = ("LOADING", "UNLOADING")


class ModelStateError(Exception):
    """The model cannot reach the wanted state; the message names the model, the version and Triton's reason."""


def serving(index: list[dict], model: str) -> list[int]:
    return [int(v) for v in ready_versions(index, model) if v.isdigit()]


def known_versions(index: list[dict], model: str) -> list[int]:
    return sorted(int(v) for v in model_versions(index, model) if v.isdigit())


def in_repository(index: list[dict], model: str) -> bool:
    return bool(model_versions(index, model))


def version_reason(index: list[dict], model: str, version: int | None) -> str:
    """Triton's state and reason for a version (or for every version), for error messages."""
    entries = model_versions(index, model)
    picked = {str(version): entries[str(version)]} if version is not None and str(version) in entries else entries
    return describe_versions(picked) or "no state"


def pinned_config(base: dict[str, Any], versions: list[int]) -> dict[str, Any]:
    config = dict(base)
    config["version_policy"] = {"specific": {"versions": sorted(versions)}}
    return config


def wanted_versions(ready: list[int], version: int, standby: bool) -> list[int]:
    """`version`, plus with `standby` the newest READY version below it, kept loaded for an instant rollback.

    Triton answers requests that name no version with the highest READY version, so `version` is what serves.
    """
    below = [v for v in ready if v < version]
    return sorted({version, max(below)}) if standby and below else [version]


def wait_until(client: TritonClient, check: Any, timeout_s: float, what: str) -> list[dict]:
    """Polls the repository index until check(index) holds; raises ModelStateError naming `what` on timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        index = client.repository_index()
        if check(index):
            return index
        if time.monotonic() >= deadline:
            raise ModelStateError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(POLL_S)


def _base_config(client: TritonClient, model: str, index: list[dict], timeout_s: float) -> dict[str, Any]:
    """The model's config as Triton holds it. A model Triton never loaded is first loaded from its on-disk config."""
    if not serving(index, model):
        _load(client, model, None, None, timeout_s)
    return client.model_config(model)


def _load(client: TritonClient, model: str, version: int | None, config: dict | None, timeout_s: float) -> None:
    try:
        client.load(model, config=config, timeout_s=timeout_s)
    except TritonError as err:
        what = f"version {version}" if version is not None else "its configured versions"
        if err.status is None and "timed out" in str(err).lower():
            raise ModelStateError(f"timed out after {timeout_s:g} s loading model {model} ({what})") from err
        reason = err.reason or str(err)
        raise ModelStateError(f"Triton failed to load model {model} ({what}): {reason}") from err


def ensure_loaded(
    client: TritonClient,
    model: str,
    version: int | None = None,
    wait: bool = True,
    timeout_s: float = 300,
    check_mode: bool = False,
    standby: bool = False,
    index: list[dict] | None = None,
) -> dict[str, Any]:
    """Serve `version` (alone, or with the previous one kept loaded as a standby), or any configured version when None.

    No change when the READY versions are already what is asked. `index`: a repository index just read, to save a
    request (Triton answers control requests on the threads that serve inference).
    """
    index = client.repository_index() if index is None else index
    if not in_repository(index, model):
        raise ModelStateError(f"model {model} is not in Triton's model repository; sync it to the host path first (or check the name)")
    before = serving(index, model)
    result: dict[str, Any] = {"model": model, "before": before, "actions": []}
    target = wanted_versions(before, version, standby) if version is not None else []

    def wanted_ok(idx: list[dict]) -> bool:
        return serving(idx, model) == target if version is not None else bool(serving(idx, model))

    if wanted_ok(index):
        return dict(result, changed=False, after=before)
    result["actions"].append(f"load {model}" + (f" versions {target}" if version is not None else ""))
    if check_mode:
        return dict(result, changed=True, after=target if version is not None else before)
    start = time.monotonic()
    if version is None:
        _load(client, model, None, None, timeout_s)
    else:
        base = _base_config(client, model, index, timeout_s)
        _load(client, model, version, pinned_config(base, target), max(1.0, timeout_s - (time.monotonic() - start)))

    def settled(idx: list[dict]) -> bool:
        entry = model_versions(idx, model).get(str(version)) if version is not None else None
        if entry is not None and entry.get("state") not in (READY, *_BUSY):
            raise ModelStateError(f"Triton did not load model {model} version {version}: {version_reason(idx, model, version)}")
        return wanted_ok(idx) or not wait

    what = f"model {model} versions {target} to be the READY ones" if version is not None else f"model {model} to be READY"
    index = wait_until(client, settled, max(0.0, timeout_s - (time.monotonic() - start)), what)
    return dict(result, changed=True, after=serving(index, model))


def ensure_unloaded(
    client: TritonClient, model: str, wait: bool = True, timeout_s: float = 300, check_mode: bool = False
) -> dict[str, Any]:
    """No version READY, LOADING or UNLOADING; unload returns before Triton finishes, so wait for the index."""
    index = client.repository_index()
    if not in_repository(index, model):
        raise ModelStateError(f"model {model} is not in Triton's model repository (check the name)")

    def done(idx: list[dict]) -> bool:
        return not any(e.get("state") in (READY, *_BUSY) for e in model_versions(idx, model).values())

    before = serving(index, model)
    result: dict[str, Any] = {"model": model, "before": before, "after": [], "actions": []}
    if done(index):
        return dict(result, changed=False)
    result["actions"].append(f"unload {model}")
    if check_mode:
        return dict(result, changed=True)
    try:
        client.unload(model)
    except TritonError as err:
        raise ModelStateError(f"Triton failed to unload model {model}: {err.reason or err}") from err
    if wait:
        wait_until(client, done, timeout_s, f"model {model} to finish unloading")
    return dict(result, changed=True)


def ensure_rolled_back(
    client: TritonClient,
    model: str,
    repository_versions: list[int] | None = None,
    wait: bool = True,
    timeout_s: float = 300,
    check_mode: bool = False,
) -> dict[str, Any]:
    """Serve the previous version: see `rollback_target` (versions from `repository_versions`, else those Triton has seen).

    Once an older version than the newest serves, nothing changes: a second rollback is not a second step back.
    """
    index = client.repository_index()
    if not in_repository(index, model):
        raise ModelStateError(f"model {model} is not in Triton's model repository (check the name)")
    known = list(repository_versions) if repository_versions else known_versions(index, model)
    target = rollback_target(known, serving(index, model))
    if target is None:
        raise ModelStateError(
            f"model {model} has no version to roll back to (versions: {sorted(set(known)) or 'none'}); "
            "keep at least 2 versions on the host (model_repository_keep_versions) to roll back"
        )
    result = ensure_loaded(client, model, target, wait=wait, timeout_s=timeout_s, check_mode=check_mode, index=index)
    result["version"] = target
    return result
