# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""S3 → local model repository sync, on the container instance: staging, verification, atomic swap, pruning.

The local layout is Triton's: ``<host_path>/<model>/config.pbtxt`` and ``<host_path>/<model>/<version>/``.
Next to each version directory the sync keeps the verified manifest, ``<model>/<version>.manifest.json``
(Triton reads only sub-directories of a model directory, so files there are invisible to it).

What is atomic: a version directory appears under its final name by one rename(2) of a fully downloaded
and verified staging directory in the same model directory (same filesystem). A staging directory is named
``.staging-*``; Triton ignores version directories that are not integers, so a partial download is never
visible as a version. Removal is the reverse: rename to ``.trash-*``, then delete.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils import _s3
from ansible_collections.inferops.triton_ecs.plugins.module_utils._model_manifest import (
    CONFIG_FILE,
    MANIFEST_SUFFIX,
    ManifestError,
    check_model_name,
    file_key,
    manifest_files,
    manifest_key,
    model_prefix,
    parse_manifest,
    pick_version,
    plan_files,
    prune_plan,
    render_manifest,
    verify_file,
    versions_from_keys,
)

LOCK_FILE = ".sync.lock"
STAGING_PREFIX = ".staging-"
TRASH_PREFIX = ".trash-"
DOWNLOAD_THREADS = 8


def sha256_file(path: str) -> tuple[int, str]:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_s3.CHUNK_BYTES), b""):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def local_versions(model_dir: str) -> list[int]:
    """Version directories in place (integer names), ascending."""
    if not os.path.isdir(model_dir):
        return []
    return sorted(int(n) for n in os.listdir(model_dir) if n.isdigit() and int(n) > 0 and os.path.isdir(os.path.join(model_dir, n)))


def _read_local_manifest(model_dir: str, model: str, version: int) -> dict[str, Any] | None:
    raw = _read_raw(os.path.join(model_dir, f"{version}{MANIFEST_SUFFIX}"))
    try:
        return None if raw is None else parse_manifest(raw, model, version)
    except ManifestError:
        return None


def _size_is(path: str, size: int) -> bool:
    try:
        return os.path.getsize(path) == size
    except OSError:
        return False


def _in_place(
    version_dir: str, files: dict[str, tuple[int, str]], recorded: dict[str, tuple[int, str]] | None, verify_local: bool
) -> dict[str, tuple[int, str]]:
    """What the version directory verifiably holds: the recorded manifest when sizes agree, else hashed."""
    if not os.path.isdir(version_dir):
        return {}
    if recorded is not None and not verify_local:
        return {p: v for p, v in recorded.items() if p in files and _size_is(os.path.join(version_dir, p), v[0])}
    found = {}
    for path in files:
        full = os.path.join(version_dir, path)
        if os.path.isfile(full):
            found[path] = sha256_file(full)
    return found


def _elsewhere(model_dir: str, model: str, skip: int) -> dict[tuple[str, str], str]:
    """(path, sha256) → a file of another local version with that content, from the recorded manifests."""
    found: dict[tuple[str, str], str] = {}
    for version in local_versions(model_dir):
        recorded = _read_local_manifest(model_dir, model, version) if version != skip else None
        if not recorded:
            continue
        for path, (size, sha) in manifest_files(recorded).items():
            full = os.path.join(model_dir, str(version), path)
            if _size_is(full, size):
                found.setdefault((path, sha), full)
    return found


@contextlib.contextmanager
def model_lock(model_dir: str) -> Iterator[None]:
    """One sync per model directory at a time (a second waits); stale staging from a killed sync is removed."""
    os.makedirs(model_dir, mode=0o755, exist_ok=True)
    with open(os.path.join(model_dir, LOCK_FILE), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for name in os.listdir(model_dir):
            if name.startswith((STAGING_PREFIX, TRASH_PREFIX)):
                shutil.rmtree(os.path.join(model_dir, name), ignore_errors=True)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _write_atomic(path: str, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=STAGING_PREFIX)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_dir(model_dir: str, name: str) -> None:
    """Rename out of Triton's sight first, then delete: a half-deleted version is never visible."""
    trash = tempfile.mkdtemp(dir=model_dir, prefix=TRASH_PREFIX)
    os.rename(os.path.join(model_dir, name), os.path.join(trash, name))
    shutil.rmtree(trash, ignore_errors=True)


def resolve_manifest(s3: Any, bucket: str, prefix: str, model: str, version: str | int) -> tuple[int, dict[str, Any]]:
    """Published versions → the wanted one → its validated manifest."""
    check_model_name(model)
    available = versions_from_keys(_s3.list_keys(s3, bucket, model_prefix(prefix, model)), prefix, model)
    number = pick_version(available, version)
    key = manifest_key(prefix, model, number)
    raw = _s3.get_bytes(s3, bucket, key)
    if raw is None:
        raise ManifestError(f"manifest s3://{bucket}/{key} disappeared while syncing; retry once publishing has finished")
    return number, parse_manifest(raw, model, number)


def sync_version(
    s3: Any,
    bucket: str,
    prefix: str,
    model: str,
    version: str | int,
    host_path: str,
    check_mode: bool = False,
    verify_local: bool = False,
) -> dict[str, Any]:
    """Makes ``<host_path>/<model>/<version>`` match the published manifest; returns what it did.

    Only files found nowhere locally are downloaded; files another local version holds with the same SHA-256
    are hard-linked. Everything lands in a staging directory, is verified, and is renamed into place at once.
    """
    number, manifest = resolve_manifest(s3, bucket, prefix, model, version)
    model_dir = os.path.join(host_path, model)
    version_dir = os.path.join(model_dir, str(number))
    files = manifest_files(manifest)
    config_bytes = manifest["config"]["text"].encode()
    config_path = os.path.join(model_dir, CONFIG_FILE)
    result: dict[str, Any] = {
        "model": model,
        "version": number,
        "version_dir": version_dir,
        "manifest_key": manifest_key(prefix, model, number),
    }

    def plan() -> tuple[dict[str, list[str]], dict[tuple[str, str], str]]:
        """(what to keep, link and download; where other local versions hold each file)."""
        recorded = _read_local_manifest(model_dir, model, number)
        in_place = _in_place(version_dir, files, manifest_files(recorded) if recorded else None, verify_local)
        elsewhere = _elsewhere(model_dir, model, number)
        return plan_files(files, in_place, elsewhere), elsewhere

    manifest_bytes = render_manifest(manifest)
    manifest_path = os.path.join(model_dir, f"{number}{MANIFEST_SUFFIX}")

    def needs_swap(steps: dict[str, list[str]]) -> bool:
        return bool(steps["link"] or steps["download"] or _extra_files(version_dir, files) or _read_raw(manifest_path) != manifest_bytes)

    steps = plan()[0]
    complete = not needs_swap(steps)
    config_changed = _read_raw(config_path) != config_bytes
    result.update(downloaded=steps["download"], linked=steps["link"], kept=steps["keep"], config_changed=config_changed)
    result["changed"] = not complete or config_changed
    if not result["changed"] or check_mode:
        return result

    with model_lock(model_dir):
        steps, elsewhere = plan()  # again under the lock: another sync may have finished meanwhile
        result.update(downloaded=steps["download"], linked=steps["link"], kept=steps["keep"])
        if needs_swap(steps):
            _stage_and_swap(s3, bucket, prefix, model, number, model_dir, files, steps, elsewhere, manifest_bytes)
        if _read_raw(config_path) != config_bytes:
            _write_atomic(config_path, config_bytes)
        _fsync_dir(model_dir)
    return result


def _read_raw(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def _extra_files(version_dir: str, files: dict[str, tuple[int, str]]) -> list[str]:
    """Files in the version directory that the manifest does not list (a stale or tampered directory)."""
    if not os.path.isdir(version_dir):
        return []
    extra = []
    for root, dirs, names in os.walk(version_dir):
        dirs[:] = [d for d in dirs if d != "__pycache__"]  # Python's bytecode cache, written when the mount is writable
        for name in names:
            rel = os.path.relpath(os.path.join(root, name), version_dir).replace(os.sep, "/")
            if rel not in files:
                extra.append(rel)
    return sorted(extra)


def _stage_and_swap(
    s3: Any,
    bucket: str,
    prefix: str,
    model: str,
    number: int,
    model_dir: str,
    files: dict[str, tuple[int, str]],
    steps: dict[str, list[str]],
    elsewhere: dict[tuple[str, str], str],
    manifest_bytes: bytes,
) -> None:
    version_dir = os.path.join(model_dir, str(number))
    staging = tempfile.mkdtemp(dir=model_dir, prefix=f"{STAGING_PREFIX}{number}-")
    try:
        for path in steps["keep"] + steps["link"]:
            source = os.path.join(version_dir, path) if path in steps["keep"] else elsewhere[(path, files[path][1])]
            dest = os.path.join(staging, path)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            try:
                os.link(source, dest)  # files are never modified in place, so sharing an inode is safe
            except OSError:
                shutil.copy2(source, dest)
            if path in steps["link"]:
                verify_file(path, files[path], *sha256_file(dest), source=source)

        def fetch(path: str) -> None:
            dest = os.path.join(staging, path)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            key = file_key(prefix, model, number, path)
            size, sha = _s3.download(s3, bucket, key, dest)
            verify_file(path, files[path], size, sha, source=f"s3://{bucket}/{key}")
            os.chmod(dest, 0o644)

        if steps["download"]:
            with ThreadPoolExecutor(max_workers=min(DOWNLOAD_THREADS, len(steps["download"]))) as pool:
                for future in [pool.submit(fetch, p) for p in steps["download"]]:
                    future.result()
        for root, dirs, _names in os.walk(staging):
            for d in dirs:
                os.chmod(os.path.join(root, d), 0o755)
        os.chmod(staging, 0o755)
        _fsync_dir(staging)
        if os.path.isdir(version_dir):
            _remove_dir(model_dir, str(number))  # a repair: the old copy goes out of sight just before the swap
        os.rename(staging, version_dir)
        staging = ""
        _write_atomic(os.path.join(model_dir, f"{number}{MANIFEST_SUFFIX}"), manifest_bytes)
    finally:
        if staging:
            shutil.rmtree(staging, ignore_errors=True)


def prune_versions(host_path: str, model: str, keep: int, protect: list[int], check_mode: bool = False) -> dict[str, Any]:
    """Removes all but the newest `keep` local versions, never a protected (serving) one."""
    check_model_name(model)
    model_dir = os.path.join(host_path, model)
    present = local_versions(model_dir)
    remove = prune_plan(present, keep, protect)
    result = {"model": model, "removed": remove, "kept": [v for v in present if v not in remove], "changed": bool(remove)}
    if remove and not check_mode:
        with model_lock(model_dir):
            for version in remove:
                if os.path.isdir(os.path.join(model_dir, str(version))):
                    _remove_dir(model_dir, str(version))
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(model_dir, f"{version}{MANIFEST_SUFFIX}"))
            _fsync_dir(model_dir)
    return result
