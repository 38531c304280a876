# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""Model version manifests and the plans built from them: pure functions, no I/O.

Layout in S3, for model M and integer version N under a prefix P:

- ``P/M/N/<path>``: the files of the version, as they sit in Triton's ``M/N/`` directory;
- ``P/M/N.manifest.json``: the manifest, written last by the publisher. A version without a manifest
  is incomplete and ignored by every reader.

A manifest lists every file with its size and SHA-256, and carries the model's ``config.pbtxt`` text
(Triton keeps the config per model, not per version; the sync writes the config of the version it syncs).
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from typing import Any

MANIFEST_FORMAT = 1
MANIFEST_SUFFIX = ".manifest.json"
CONFIG_FILE = "config.pbtxt"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_MODEL_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
# A version as Triton names its directory: a canonical positive integer within int64 ("007", "٣" or 1e30 are not).
_VERSION = re.compile(r"[1-9][0-9]{0,17}")


class ManifestError(ValueError):
    """A manifest, a file or a requested version does not match what the publisher recorded."""


# ---------------------------------------------------------------- names and keys


def check_model_name(model: str) -> str:
    if not isinstance(model, str) or not _MODEL_NAME.fullmatch(model) or model in (".", ".."):
        raise ManifestError(
            f"model={model!r} is not a usable model directory name: use letters, digits, '_', '-' and '.', not starting with '.' or '-'"
        )
    return model


def check_version(version: Any) -> int:
    """A Triton version: a positive integer (Triton ignores version directories that are not integers)."""
    try:
        number = int(str(version))
    except ValueError:
        number = 0
    if number < 1 or str(number) != str(version).strip() or not _VERSION.fullmatch(str(number)):
        raise ManifestError(f"version={version!r} is not a positive integer; Triton versions are directories named 1, 2, 3, ...")
    return number


def repository_base(prefix: str) -> str:
    """The model repository's key prefix as it starts a key: without its outer slashes, then one slash (none for the
    bucket's root). Every key under the repository starts with it: versions, release records, status objects."""
    cleaned = (prefix or "").strip("/")
    return f"{cleaned}/" if cleaned else ""


def model_prefix(prefix: str, model: str) -> str:
    return f"{repository_base(prefix)}{model}/"


def version_prefix(prefix: str, model: str, version: int) -> str:
    return f"{model_prefix(prefix, model)}{version}/"


def manifest_key(prefix: str, model: str, version: int) -> str:
    return f"{model_prefix(prefix, model)}{version}{MANIFEST_SUFFIX}"


def file_key(prefix: str, model: str, version: int, path: str) -> str:
    return version_prefix(prefix, model, version) + path


def versions_from_keys(keys: list[str], prefix: str, model: str) -> list[int]:
    """The published (manifest-bearing) versions among object keys directly under the model prefix, ascending.

    Any other key (a non-canonical number, a backup, a folder marker) is ignored; unexpected_keys names them.
    """
    base = model_prefix(prefix, model)
    found = set()
    for key in keys:
        if key.startswith(base) and key.endswith(MANIFEST_SUFFIX):
            name = key[len(base) : -len(MANIFEST_SUFFIX)]
            if _VERSION.fullmatch(name):
                found.add(int(name))
    return sorted(found)


def unexpected_keys(keys: list[str], prefix: str, model: str) -> list[str]:
    """Keys directly under the model prefix that are not the manifest of a version."""
    base = model_prefix(prefix, model)
    wanted = {manifest_key(prefix, model, v) for v in versions_from_keys(keys, prefix, model)}
    return sorted(k for k in keys if k.startswith(base) and k not in wanted)


def pick_version(available: list[int], wanted: str | int) -> int:
    """`latest` → the highest published version; a number → that version, which must be published."""
    if str(wanted) == "latest":
        if not available:
            raise ManifestError("no published version (no *.manifest.json under the model prefix); publish one first")
        return max(available)
    version = check_version(wanted)
    if version not in available:
        raise ManifestError(
            f"version={version} has no manifest in S3 (published: {available or 'none'}); "
            "a version without a manifest is incomplete: publish it, or pick a published version"
        )
    return version


# ---------------------------------------------------------------- manifests


def safe_path(path: str) -> str:
    """A relative POSIX path that stays inside the version directory."""
    norm = posixpath.normpath(path or "")
    if (
        not path
        or path.startswith("/")
        or "\\" in path
        or norm != path
        or norm.startswith("../")
        or norm in (".", "..")
        or any(part.startswith(".") for part in norm.split("/"))
    ):
        raise ManifestError(f"file path {path!r} in the manifest is not a plain relative path inside the version directory")
    return norm


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def build_manifest(model: str, version: int, files: dict[str, tuple[int, str]], config_text: str) -> dict[str, Any]:
    """The manifest of a version from {relative path: (size, sha256)} and the model's config.pbtxt text."""
    check_model_name(model)
    if not files:
        raise ManifestError(f"model {model} version {version} has no files; a Triton version directory needs its model files")
    return {
        "format": MANIFEST_FORMAT,
        "model": model,
        "version": check_version(version),
        "config": {"text": config_text, "sha256": sha256_bytes(config_text.encode())},
        "files": [{"path": safe_path(p), "size": int(s), "sha256": h} for p, (s, h) in sorted(files.items())],
    }


def render_manifest(manifest: dict[str, Any]) -> bytes:
    """Canonical bytes: two renders of the same manifest compare equal."""
    return (json.dumps(manifest, sort_keys=True, indent=1) + "\n").encode()


def parse_manifest(raw: bytes, model: str, version: int) -> dict[str, Any]:
    """Validates a manifest read back from S3 or disk; every problem names the field and the fix."""
    where = f"manifest of model {model} version {version}"
    try:
        manifest = json.loads(raw)
    except ValueError as err:
        raise ManifestError(f"{where} is not JSON ({err}); republish the version") from err
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        raise ManifestError(
            f"{where} has format={manifest.get('format') if isinstance(manifest, dict) else None!r}, expected {MANIFEST_FORMAT}"
        )
    if manifest.get("model") != model or manifest.get("version") != version or isinstance(manifest.get("version"), bool):
        raise ManifestError(
            f"{where} names model={manifest.get('model')!r} version={manifest.get('version')!r}; it was copied to the wrong key"
        )
    config = manifest.get("config")
    if (
        not isinstance(config, dict)
        or not isinstance(config.get("text"), str)
        or sha256_bytes(config["text"].encode()) != config.get("sha256")
    ):
        raise ManifestError(f"{where}: config.text does not match config.sha256; republish the version")
    files = manifest.get("files")
    if not isinstance(files, list) or not files:
        raise ManifestError(f"{where}: files must be a non-empty list")
    seen: set[str] = set()
    for entry in files:
        if not isinstance(entry, dict):
            raise ManifestError(f"{where}: files entries must be objects with path, size and sha256")
        path = safe_path(entry.get("path", ""))
        if path in seen:
            raise ManifestError(f"{where}: file {path} is listed twice")
        seen.add(path)
        if not isinstance(entry.get("size"), int) or entry["size"] < 0:
            raise ManifestError(f"{where}: file {path} has size={entry.get('size')!r}; expected a byte count")
        if not isinstance(entry.get("sha256"), str) or not _SHA256.fullmatch(entry["sha256"]):
            raise ManifestError(f"{where}: file {path} has sha256={entry.get('sha256')!r}; expected 64 lowercase hex digits")
    directories = {"/".join(path.split("/")[:i]) for path in seen for i in range(1, path.count("/") + 1)}
    if seen & directories:
        raise ManifestError(f"{where}: {sorted(seen & directories)[0]} is listed as a file and as a directory; republish the version")
    return manifest


def manifest_files(manifest: dict[str, Any]) -> dict[str, tuple[int, str]]:
    return {entry["path"]: (entry["size"], entry["sha256"]) for entry in manifest["files"]}


def verify_file(path: str, expected: tuple[int, str], size: int, sha256: str, source: str) -> None:
    """Raises when a fetched file differs from the manifest; nothing unverified ever moves into place."""
    want_size, want_sha = expected
    if size != want_size:
        raise ManifestError(
            f"file {path} from {source}: size {size} != manifest size {want_size}; the object changed after publishing or the download was cut"
        )
    if sha256 != want_sha:
        raise ManifestError(
            f"file {path} from {source}: sha256 {sha256} != manifest sha256 {want_sha}; the object is corrupt or was replaced, republish the version"
        )


# ---------------------------------------------------------------- plans


def plan_files(
    wanted: dict[str, tuple[int, str]],
    in_place: dict[str, tuple[int, str]],
    elsewhere: dict[tuple[str, str], str],
) -> dict[str, list[str]]:
    """Which files to keep, link from another local version, or download.

    in_place: what the version directory already holds (verified), by path.
    elsewhere: (path, sha256) → local file of another version holding the same content.
    Only files found nowhere locally are downloaded.
    """
    plan: dict[str, list[str]] = {"keep": [], "link": [], "download": []}
    for path, (size, sha) in sorted(wanted.items()):
        if in_place.get(path) == (size, sha):
            plan["keep"].append(path)
        elif (path, sha) in elsewhere:
            plan["link"].append(path)
        else:
            plan["download"].append(path)
    return plan


def prune_plan(local_versions: list[int], keep: int, protect: list[int]) -> list[int]:
    """Versions to remove: all but the newest `keep`, never one in `protect` (what a Triton serves)."""
    if keep < 1:
        raise ManifestError(f"keep_versions={keep} would remove every version; keep at least 1 (2 or more to roll back)")
    kept = set(sorted(local_versions)[-keep:]) | set(protect)
    return sorted(v for v in local_versions if v not in kept)


def rollback_target(known_versions: list[int], serving: list[int]) -> int | None:
    """The version a rollback serves (None when there is none to go back to).

    While the newest version serves: the standby (a READY version below it) when there is one, else the newest
    known version below it. Once something older than the newest serves, the rollback has happened: that version
    stays, so rolling back twice is a no-op, not two steps back.
    """
    versions = sorted(set(known_versions) | set(serving))
    if not versions:
        return None
    newest = versions[-1]
    if serving and max(serving) < newest:
        return max(serving)
    standby = [v for v in serving if v < newest]
    if standby:
        return max(standby)
    return versions[-2] if len(versions) >= 2 else None
