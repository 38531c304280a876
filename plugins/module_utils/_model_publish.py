# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""Publishing a model version to S3: the files first, the manifest last, so a half-published version is ignored."""

from __future__ import annotations

import os
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils import _s3
from ansible_collections.inferops.triton_ecs.plugins.module_utils._model_manifest import (
    ManifestError,
    build_manifest,
    check_version,
    file_key,
    manifest_files,
    manifest_key,
    render_manifest,
    sha256_bytes,
)
from ansible_collections.inferops.triton_ecs.plugins.module_utils._model_sync import sha256_file


def scan_source(source: str) -> dict[str, tuple[int, str]]:
    """{relative path: (size, sha256)} of every file under a version directory (hidden files skipped)."""
    if not os.path.isdir(source):
        raise ManifestError(f"source={source!r} is not a directory; point it at the version directory (the one holding model files)")
    found = {}
    for root, dirs, names in os.walk(source):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
        for name in sorted(names):
            if not name.startswith("."):
                full = os.path.join(root, name)
                found[os.path.relpath(full, source).replace(os.sep, "/")] = sha256_file(full)
    return found


def publish_version(
    s3: Any, bucket: str, prefix: str, model: str, version: int, source: str, config_path: str, check_mode: bool = False
) -> dict[str, Any]:
    """Uploads the files S3 does not already hold with the same SHA-256, then the manifest; versions are immutable."""
    version = check_version(version)
    try:
        with open(config_path, encoding="utf-8") as f:
            config_text = f.read()
    except OSError as err:
        raise ManifestError(f"config={config_path!r} cannot be read ({err}); point it at the model's config.pbtxt") from err
    manifest = build_manifest(model, version, scan_source(source), config_text)
    files = manifest_files(manifest)
    rendered = render_manifest(manifest)
    key = manifest_key(prefix, model, version)
    result: dict[str, Any] = {"model": model, "version": version, "manifest_key": key, "manifest": manifest, "uploaded": [], "skipped": []}
    existing = _s3.get_bytes(s3, bucket, key)
    if existing == rendered:
        result["changed"] = False
        result["skipped"] = sorted(files)
        return result
    if existing is not None:
        raise ManifestError(
            f"model {model} version {version} is already published at s3://{bucket}/{key} with other content; "
            f"versions are immutable (a serving Triton may hold them): publish it as version {version + 1} or higher"
        )
    for path, (size, sha) in sorted(files.items()):
        found = _s3.head(s3, bucket, file_key(prefix, model, version, path))
        if found and found.get("ContentLength") == size and found.get("Metadata", {}).get("sha256") == sha:
            result["skipped"].append(path)
        else:
            result["uploaded"].append(path)
    result["changed"] = True
    if check_mode:
        return result
    for path in result["uploaded"]:
        _s3.upload_file(s3, bucket, file_key(prefix, model, version, path), os.path.join(source, path), files[path][1])
    # The manifest last: until it exists, readers treat the version as not published.
    _s3.put_object(s3, bucket, key, rendered, sha256_bytes(rendered), ContentType="application/json")
    return result
