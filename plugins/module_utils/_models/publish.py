# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""Publishing a model version to S3: the files first, each verified, the manifest last, so a half-published version is ignored.

What is uploaded is exactly what the manifest lists. The source tree is read strictly: a symlink is followed only
when it resolves inside the source tree (its content is published under the link's path), a symlink leading
outside, a special file (FIFO, socket, device), a hidden entry or an empty directory is refused with its path named,
and Python's ``__pycache__`` directories are left out and reported. Every upload carries a SHA-256 checksum that S3
checks on receipt and keeps; the publisher reads it back (HeadObject, ChecksumMode=ENABLED) and compares it with the
manifest before it writes the manifest. A publish cut off half-way leaves no manifest; the next run skips the files
S3 already holds verified and uploads the rest.

Files above the multipart threshold go up as multipart uploads (`transfer.upload_multipart`): one PutObject carries
at most 5 GB. The one local read of such a file computes its SHA-256 for the manifest and the SHA-256 of each part;
each part is sent with its own, S3 refuses a part that does not match, and the object's stored checksum (the
composite of the part digests, ``<base64>-<parts>``) is compared with the composite of the local part digests before
the manifest is written: as strict as the whole-object checksum of a single upload.
"""

from __future__ import annotations

import os
import stat
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import s3 as _s3
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.manifest import (
    ManifestError,
    build_manifest,
    check_version,
    file_key,
    manifest_files,
    manifest_key,
    render_manifest,
)
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.transfer import (
    UploadSettings,
    composite_matches,
    composite_sha256,
    file_digests,
    upload_multipart,
    upload_part_bytes,
)

# Left out of a publish (and reported): Python writes it next to model.py when the directory is writable.
IGNORED_DIRS = ("__pycache__",)


class SourceTree:
    """The regular files of a version directory: {relative path: real file}, plus what was left out and what is wrong."""

    def __init__(self, source: str) -> None:
        if not os.path.isdir(source):
            raise ManifestError(f"source={source!r} is not a directory; point it at the version directory (the one holding model files)")
        self.root = os.path.realpath(source)
        self.files: dict[str, str] = {}
        self.ignored: list[str] = []
        self.problems: list[str] = []
        self._walk(self.root, "", {self.root})
        if self.problems:
            raise ManifestError(f"source={source!r} cannot be published as it is: " + "; ".join(self.problems))

    def _inside(self, path: str) -> bool:
        return path == self.root or path.startswith(self.root + os.sep)

    def _walk(self, directory: str, rel: str, visiting: set[str]) -> None:
        found_before = len(self.files) + len(self.problems)
        for name in sorted(os.listdir(directory)):
            path = f"{rel}{name}"
            full = os.path.join(directory, name)
            if name.startswith("."):
                self.problems.append(
                    f"{path} is hidden; a version directory holds no hidden entries (the manifest cannot list them), remove it"
                )
                continue
            real = full
            if os.path.islink(full):
                real = os.path.realpath(full)
                if not self._inside(real):
                    self.problems.append(f"{path} is a symlink to {real}, outside the source tree; copy the file into the tree instead")
                    continue
                if not os.path.exists(real):
                    self.problems.append(f"{path} is a dangling symlink; remove it or fix its target")
                    continue
            mode = os.stat(real).st_mode
            if stat.S_ISDIR(mode):
                if name in IGNORED_DIRS:
                    self.ignored.append(f"{path}/")
                elif real in visiting:
                    self.problems.append(f"{path} is a symlink loop (it leads back to {real}); remove it")
                else:
                    self._walk(real, f"{path}/", visiting | {real})
            elif stat.S_ISREG(mode):
                self.files[path] = real
            else:
                self.problems.append(f"{path} is a special file (FIFO, socket or device), not a regular file; remove it")
        if rel and len(self.files) + len(self.problems) == found_before and not self.ignored_below(rel):
            self.problems.append(f"{rel} is an empty directory; S3 keeps no empty directories, so remove it or put its files in")

    def ignored_below(self, rel: str) -> bool:
        return any(entry.startswith(rel) for entry in self.ignored)


def scan_source(source: str) -> dict[str, tuple[int, str]]:
    """{relative path: (size, sha256)} of every file of a version directory (see SourceTree for what is refused)."""
    tree = SourceTree(source)
    return {path: file_digests(real, None)[:2] for path, real in tree.files.items()}


def local_pass(tree: SourceTree, settings: UploadSettings) -> tuple[dict[str, tuple[int, str]], dict[str, dict[str, Any]]]:
    """One read of every file: ({path: (size, sha256)}, {path of a multipart file: {part_bytes, digests, composite}})."""
    hashed: dict[str, tuple[int, str]] = {}
    parts: dict[str, dict[str, Any]] = {}
    for path, real in tree.files.items():
        size = os.path.getsize(real)
        part_bytes = upload_part_bytes(size, settings.part_bytes) if settings.multipart(size) else None
        size, sha, digests = file_digests(real, part_bytes)
        hashed[path] = (size, sha)
        if part_bytes is not None and settings.multipart(size):
            parts[path] = {"part_bytes": part_bytes, "digests": digests, "composite": composite_sha256(digests)}
    return hashed, parts


def _read_config(config_path: str) -> str:
    try:
        if not stat.S_ISREG(os.stat(config_path).st_mode):
            raise ManifestError(f"config={config_path!r} is not a regular file; point it at the model's config.pbtxt")
        with open(config_path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as err:
        raise ManifestError(f"config={config_path!r} cannot be read ({err}); point it at the model's config.pbtxt") from err


def _held_by_s3(found: dict[str, Any] | None, size: int, sha: str, parts: dict[str, Any] | None = None) -> bool:
    """S3 holds this exact content: same size, and the SHA-256 S3 computed on receipt matches (for a multipart
    object, the composite of the part digests S3 verified matches the composite of the local parts)."""
    if not found or found.get("ContentLength") != size:
        return False
    if parts is not None:
        return composite_matches(found.get("ChecksumSHA256"), parts["composite"])
    return _s3.stored_sha256(found) == sha


def _stored(found: dict[str, Any] | None) -> str | None:
    return _s3.stored_sha256(found) or (found or {}).get("ChecksumSHA256")


def publish_version(
    s3: Any,
    bucket: str,
    prefix: str,
    model: str,
    version: int,
    source: str,
    config_path: str,
    check_mode: bool = False,
    upload: UploadSettings | None = None,
) -> dict[str, Any]:
    """Uploads the files S3 does not already hold verified, checks each upload, then writes the manifest; versions are immutable.

    Files above `upload`'s multipart threshold go up as multipart uploads, parts in parallel (see module docstring).
    """
    upload = upload or UploadSettings()
    version = check_version(version)
    config_text = _read_config(config_path)
    tree = SourceTree(source)
    hashed, parts = local_pass(tree, upload)
    manifest = build_manifest(model, version, hashed, config_text)
    files = manifest_files(manifest)
    rendered = render_manifest(manifest)
    key = manifest_key(prefix, model, version)
    result: dict[str, Any] = {
        "model": model,
        "version": version,
        "manifest_key": key,
        "manifest": manifest,
        "uploaded": [],
        "already_in_s3": [],
        "ignored": tree.ignored,
        "manifest_written": False,
        "multipart": {},
    }
    existing = _s3.get_bytes(s3, bucket, key)
    if existing == rendered:
        result["changed"] = False
        result["already_in_s3"] = sorted(files)
        return result
    if existing is not None:
        raise ManifestError(
            f"model {model} version {version} is already published at s3://{bucket}/{key} with other content; "
            f"versions are immutable (a serving Triton may hold them): publish it as version {version + 1} or higher"
        )
    for path, (size, sha) in sorted(files.items()):
        held = _held_by_s3(_s3.head(s3, bucket, file_key(prefix, model, version, path)), size, sha, parts.get(path))
        result["already_in_s3" if held else "uploaded"].append(path)
        if path in parts and not held:
            result["multipart"][path] = {"part_bytes": parts[path]["part_bytes"], "parts": len(parts[path]["digests"])}
    result["changed"] = True
    if check_mode:
        return result
    for path in result["uploaded"]:
        object_key = file_key(prefix, model, version, path)
        if path in parts:
            sent = upload_multipart(
                s3, bucket, object_key, tree.files[path], parts[path]["part_bytes"], parts[path]["digests"], upload.concurrency
            )
            result["multipart"][path]["resumed_parts"] = sent["resumed_parts"]
        else:
            _s3.upload_file(s3, bucket, object_key, tree.files[path])
        stored = _s3.head(s3, bucket, object_key)
        if not _held_by_s3(stored, *files[path], parts.get(path)):
            expected = parts[path]["composite"] + " (composite of the parts)" if path in parts else files[path][1]
            raise ManifestError(
                f"file {path} uploaded to s3://{bucket}/{object_key} does not match the manifest (S3 holds"
                f" {(stored or {}).get('ContentLength')} bytes, sha256 {_stored(stored)}; expected {files[path][0]} bytes,"
                f" sha256 {expected}): the file changed while publishing; no manifest was written, publish again"
            )
    # The manifest last: until it exists, readers treat the version as not published.
    _s3.put_object(s3, bucket, key, rendered, ContentType="application/json")
    result["manifest_written"] = True
    return result
