# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""S3 → local model repository sync, on the container instance: staging, verification, atomic swap, pruning.

The local layout is Triton's: ``<host_path>/<model>/config.pbtxt`` and ``<host_path>/<model>/<version>/``.
Next to each version directory the sync keeps the verified manifest, ``<model>/<version>.manifest.json``
(Triton reads only sub-directories of a model directory, so files there are invisible to it).

What is atomic: a version directory appears under its final name by one rename(2) of a fully downloaded
and verified staging directory in the same model directory (same filesystem), after the model's config.pbtxt
and the version's manifest are in place. A staging directory is named ``.staging-*``; Triton ignores version
directories that are not integers, so a partial download is never visible as a version. A repair swaps the new
copy with the old one in one renameat2(RENAME_EXCHANGE), so a serving version never lacks its directory; the old
copy then goes to ``.trash-*`` and is deleted. Removal is the same: rename to ``.trash-*``, then delete. Staging and
trash left by a killed run (directories or files) are removed by the next run.

What counts as a (complete) local version is `local_repository`'s rule. Prune counts only complete versions;
anything else in the model directory is left alone and reported.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import s3 as _s3
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.local_repository import (
    STAGING_PREFIX,
    complete_versions,
    exchange,
    fsync_dir,
    is_real_dir,
    local_versions,
    model_lock,
    read_local_manifest,
    read_raw,
    remove_dir,
    sha256_file,
    size_is,
    stale_entries,
    unexpected_entries,
    write_atomic,
)
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.manifest import (
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
    unexpected_keys,
    verify_file,
    versions_from_keys,
)
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.transfer import (
    Downloads,
    DownloadSettings,
    downloads_for,
)


def _in_place(
    version_dir: str, files: dict[str, tuple[int, str]], recorded: dict[str, tuple[int, str]] | None, verify_local: bool
) -> dict[str, tuple[int, str]]:
    """What the version directory verifiably holds: the recorded manifest when sizes agree, else hashed."""
    if not is_real_dir(version_dir):
        return {}
    if recorded is not None and not verify_local:
        return {p: v for p, v in recorded.items() if p in files and size_is(os.path.join(version_dir, p), v[0])}
    found = {}
    for path, (size, _sha) in files.items():
        full = os.path.join(version_dir, path)
        if size_is(full, size):
            found[path] = sha256_file(full)
    return found


def _elsewhere(model_dir: str, model: str, skip: int) -> dict[tuple[str, str], str]:
    """(path, sha256) → a file of another local version with that content, from the recorded manifests."""
    found: dict[tuple[str, str], str] = {}
    for version in local_versions(model_dir):
        recorded = read_local_manifest(model_dir, model, version) if version != skip else None
        if not recorded:
            continue
        for path, (size, sha) in manifest_files(recorded).items():
            full = os.path.join(model_dir, str(version), path)
            if size_is(full, size):
                found.setdefault((path, sha), full)
    return found


def resolve_manifest(s3: Any, bucket: str, prefix: str, model: str, version: str | int) -> tuple[int, dict[str, Any], list[str]]:
    """Published versions → the wanted one → its validated manifest, and the keys of the listing that are no manifest."""
    check_model_name(model)
    keys = _s3.list_keys(s3, bucket, model_prefix(prefix, model))
    available = versions_from_keys(keys, prefix, model)
    number = pick_version(available, version)
    key = manifest_key(prefix, model, number)
    raw = _s3.get_bytes(s3, bucket, key)
    if raw is None:
        raise ManifestError(f"manifest s3://{bucket}/{key} disappeared while syncing; retry once publishing has finished")
    return number, parse_manifest(raw, model, number), unexpected_keys(keys, prefix, model)


def sync_version(
    s3: Any,
    bucket: str,
    prefix: str,
    model: str,
    version: str | int,
    host_path: str,
    check_mode: bool = False,
    verify_local: bool = False,
    downloads: Downloads | None = None,
    download_settings: DownloadSettings | None = None,
) -> dict[str, Any]:
    """Makes ``<host_path>/<model>/<version>`` match the published manifest; returns what it did.

    Only files found nowhere locally are downloaded; files another local version holds with the same SHA-256
    are hard-linked. Everything lands in a staging directory, is verified, and is renamed into place at once.
    Downloads go through `downloads` (a pool shared with other syncs, the agent's) or, without one, a pool of this
    call's own made from `download_settings` (see `transfer`: large files as parallel ranged GETs).
    """
    number, manifest, ignored_keys = resolve_manifest(s3, bucket, prefix, model, version)
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
        "ignored_keys": ignored_keys,
    }

    def plan() -> tuple[dict[str, list[str]], dict[tuple[str, str], str]]:
        """(what to keep, link and download; where other local versions hold each file)."""
        recorded = read_local_manifest(model_dir, model, number)
        in_place = _in_place(version_dir, files, manifest_files(recorded) if recorded else None, verify_local)
        elsewhere = _elsewhere(model_dir, model, number)
        return plan_files(files, in_place, elsewhere), elsewhere

    manifest_bytes = render_manifest(manifest)
    manifest_path = os.path.join(model_dir, f"{number}{MANIFEST_SUFFIX}")

    def needs_swap(steps: dict[str, list[str]]) -> bool:
        return bool(steps["link"] or steps["download"] or _extra_files(version_dir, files) or read_raw(manifest_path) != manifest_bytes)

    if os.path.lexists(version_dir) and not is_real_dir(version_dir):
        raise ManifestError(
            f"{version_dir} is a symlink or a file, not a version directory; the sync never writes through it: remove it and sync again"
        )
    steps = plan()[0]
    complete = not needs_swap(steps)
    config_changed = read_raw(config_path) != config_bytes
    stale = stale_entries(model_dir)
    result.update(downloaded=steps["download"], linked=steps["link"], kept=steps["keep"], config_changed=config_changed)
    result["downloaded_bytes"] = sum(files[p][0] for p in steps["download"])
    result.update(cleaned=stale, redownloaded=[])
    result["changed"] = not complete or config_changed or bool(stale)
    if not result["changed"] or check_mode:
        result["unexpected"] = unexpected_entries(model_dir, model)
        return result

    with model_lock(model_dir):  # removes the stale staging and trash
        steps, elsewhere = plan()  # again under the lock: another sync may have finished meanwhile
        result.update(downloaded=steps["download"], linked=steps["link"], kept=steps["keep"])
        result["downloaded_bytes"] = sum(files[p][0] for p in steps["download"])
        if needs_swap(steps):
            # The model's config.pbtxt is what the serving version loads with (outside a view): it changes only once
            # this version's files are verified, together with the version (`_stage_and_swap`), or not at all.
            with downloads_for(s3, downloads, download_settings) as fetcher:
                result["redownloaded"] = _stage_and_swap(
                    bucket, prefix, model, number, model_dir, files, steps, elsewhere, manifest_bytes, fetcher, config_bytes
                )
        elif read_raw(config_path) != config_bytes:
            write_atomic(config_path, config_bytes)  # the version is complete: only its config was missing or other
        fsync_dir(model_dir)
    result["unexpected"] = unexpected_entries(model_dir, model)
    return result


def _extra_files(version_dir: str, files: dict[str, tuple[int, str]]) -> list[str]:
    """Entries in the version directory that the manifest does not list (a stale or tampered directory); symlinks count."""
    if not is_real_dir(version_dir):
        return []
    extra = []
    for root, dirs, names in os.walk(version_dir):
        linked_dirs = [d for d in dirs if os.path.islink(os.path.join(root, d))]
        dirs[:] = [d for d in dirs if d != "__pycache__" and d not in linked_dirs]  # __pycache__: Python's cache, when writable
        for name in names + linked_dirs:
            rel = os.path.relpath(os.path.join(root, name), version_dir).replace(os.sep, "/")
            if rel not in files or os.path.islink(os.path.join(root, name)):
                extra.append(rel)
    return sorted(extra)


def _stage_and_swap(
    bucket: str,
    prefix: str,
    model: str,
    number: int,
    model_dir: str,
    files: dict[str, tuple[int, str]],
    steps: dict[str, list[str]],
    elsewhere: dict[tuple[str, str], str],
    manifest_bytes: bytes,
    downloads: Downloads,
    config_bytes: bytes,
) -> list[str]:
    """Stage, verify, then put the config, the manifest and the version in place; returns the files re-downloaded
    because a local copy was corrupt. A failure at any step leaves the config and the manifest as they were."""
    version_dir = os.path.join(model_dir, str(number))
    staging = tempfile.mkdtemp(dir=model_dir, prefix=f"{STAGING_PREFIX}{number}-")
    download = list(steps["download"])
    redownloaded = []
    try:
        for path in steps["keep"] + steps["link"]:
            source = os.path.join(version_dir, path) if path in steps["keep"] else elsewhere[(path, files[path][1])]
            dest = os.path.join(staging, path)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            try:
                os.link(source, dest)  # files are never modified in place, so sharing an inode is safe
            except OSError:
                shutil.copy2(source, dest)
            if path in steps["link"] and sha256_file(dest) != files[path]:
                # A local copy changed in place (the manifest next to it says otherwise): fetch it, do not blame S3.
                os.unlink(dest)
                download.append(path)
                redownloaded.append(path)

        def check(path: str, size: int, sha: str) -> None:
            verify_file(path, files[path], size, sha, source=f"s3://{bucket}/{file_key(prefix, model, number, path)}")
            os.chmod(os.path.join(staging, path), 0o644)

        wanted = []
        for path in download:
            dest = os.path.join(staging, path)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            wanted.append((path, file_key(prefix, model, number, path), dest, files[path][0]))
        if wanted:
            downloads.fetch_files(bucket, wanted, check)
        for root, dirs, _names in os.walk(staging):
            for d in dirs:
                os.chmod(os.path.join(root, d), 0o755)
        os.chmod(staging, 0o755)
        fsync_dir(staging)
        # Everything verified: the config and the manifest before the directory (a version in place always has its
        # record next to it), each put back as it was when a later step fails.
        with (
            _restored_on_failure(os.path.join(model_dir, CONFIG_FILE), config_bytes),
            _restored_on_failure(os.path.join(model_dir, f"{number}{MANIFEST_SUFFIX}"), manifest_bytes),
        ):
            if is_real_dir(version_dir) and exchange(staging, version_dir):
                pass  # a repair: the new copy took the old one's place in one step; the old one is now at `staging`
            else:
                if is_real_dir(version_dir):
                    # This filesystem cannot exchange: the old copy goes out of sight just before the new one comes in.
                    remove_dir(model_dir, str(number))
                os.rename(staging, version_dir)
                staging = ""
    finally:
        if staging:
            shutil.rmtree(staging, ignore_errors=True)
    return sorted(redownloaded)


@contextlib.contextmanager
def _restored_on_failure(path: str, data: bytes) -> Iterator[None]:
    """Writes `data` at `path` (atomically, when it differs), and puts back what was there if the block fails."""
    before = read_raw(path)
    if before != data:
        write_atomic(path, data)
    try:
        yield
    except BaseException:
        if before is None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        elif before != data:
            write_atomic(path, before)
        raise


def use_config(host_path: str, model: str, version: int) -> bool:
    """Makes ``<model>/config.pbtxt`` the config of `version` (from its verified local manifest); True when it changed.

    The model agent calls it for its target release: a task outside a view loads that version with this config, so
    after a rollback the config is the rolled-back-to version's again, whatever a newer sync wrote.
    """
    check_model_name(model)
    model_dir = os.path.join(host_path, model)
    manifest = read_local_manifest(model_dir, model, version)
    if manifest is None:
        raise ManifestError(f"{model} version {version} is not complete in {host_path}; sync it before its config is used")
    config_bytes = manifest["config"]["text"].encode()
    config_path = os.path.join(model_dir, CONFIG_FILE)
    if read_raw(config_path) == config_bytes:
        return False
    with model_lock(model_dir):
        write_atomic(config_path, config_bytes)
        fsync_dir(model_dir)
    return True


def prune_versions(host_path: str, model: str, keep: int, protect: list[int], check_mode: bool = False) -> dict[str, Any]:
    """Removes all but the newest `keep` complete local versions, never a protected (serving) one.

    Only complete versions count and are removed; anything else in the model directory is left alone and reported.
    """
    check_model_name(model)
    model_dir = os.path.join(host_path, model)
    complete = complete_versions(model_dir, model)
    remove = prune_plan(complete, keep, protect)
    stale = stale_entries(model_dir)
    result = {
        "model": model,
        "removed": remove,
        "kept": [v for v in local_versions(model_dir) if v not in remove],
        "incomplete": sorted(set(local_versions(model_dir)) - set(complete)),
        "cleaned": stale,
        "changed": bool(remove or stale),
    }
    if result["changed"] and not check_mode:
        with model_lock(model_dir):  # removes the stale staging and trash
            for version in remove:
                if is_real_dir(os.path.join(model_dir, str(version))):
                    remove_dir(model_dir, str(version))
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(model_dir, f"{version}{MANIFEST_SUFFIX}"))
            fsync_dir(model_dir)
    result["unexpected"] = unexpected_entries(model_dir, model)
    return result
