# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The local model repository on the instance: what a model directory holds, and the filesystem steps the sync takes.

What counts as a local version: a real directory (not a symlink) named by a canonical positive integer. A complete
one also has its verified manifest next to it, and files of the listed sizes. Staging (``.staging-*``) and trash
(``.trash-*``) belong to a sync holding the model's lock; a killed run's are removed by the next one.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import hashlib
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import s3 as _s3
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.manifest import (
    CONFIG_FILE,
    MANIFEST_SUFFIX,
    ManifestError,
    manifest_files,
    parse_manifest,
)

LOCK_FILE = ".sync.lock"
STAGING_PREFIX = ".staging-"
TRASH_PREFIX = ".trash-"
_VERSION_NAME = re.compile(r"[1-9][0-9]{0,17}")  # canonical, and within Triton's int64 version numbers
_RENAME_EXCHANGE = 2  # linux/fs.h


def sha256_file(path: str) -> tuple[int, str]:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_s3.CHUNK_BYTES), b""):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def is_real_dir(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def local_versions(model_dir: str) -> list[int]:
    """Version directories in place (canonical integer names, real directories, never symlinks), ascending."""
    if not is_real_dir(model_dir):
        return []
    return sorted(int(n) for n in os.listdir(model_dir) if _VERSION_NAME.fullmatch(n) and is_real_dir(os.path.join(model_dir, n)))


def complete_versions(model_dir: str, model: str) -> list[int]:
    """Local versions with their verified manifest next to them and every listed file at its listed size."""
    complete = []
    for version in local_versions(model_dir):
        recorded = read_local_manifest(model_dir, model, version)
        if recorded and all(
            size_is(os.path.join(model_dir, str(version), path), size) for path, (size, _sha) in manifest_files(recorded).items()
        ):
            complete.append(version)
    return complete


def unexpected_entries(model_dir: str, model: str) -> list[str]:
    """Entries of a model directory that are neither a complete version, its manifest, config.pbtxt nor the sync's own."""
    if not is_real_dir(model_dir):
        return []
    complete = {str(v) for v in complete_versions(model_dir, model)}
    expected = complete | {f"{v}{MANIFEST_SUFFIX}" for v in complete} | {CONFIG_FILE, LOCK_FILE}
    return sorted(n for n in os.listdir(model_dir) if n not in expected and not n.startswith((STAGING_PREFIX, TRASH_PREFIX)))


def stale_entries(model_dir: str) -> list[str]:
    """Staging and trash left by a run that was killed (only a run holding the lock makes them)."""
    if not is_real_dir(model_dir):
        return []
    return sorted(n for n in os.listdir(model_dir) if n.startswith((STAGING_PREFIX, TRASH_PREFIX)))


def read_local_manifest(model_dir: str, model: str, version: int) -> dict[str, Any] | None:
    raw = read_raw(os.path.join(model_dir, f"{version}{MANIFEST_SUFFIX}"))
    try:
        return None if raw is None else parse_manifest(raw, model, version)
    except ManifestError:
        return None


def size_is(path: str, size: int) -> bool:
    """A regular file (not a symlink) of this size."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_size == size


def _remove_entry(path: str) -> None:
    """A directory tree or a file (or a symlink, never followed)."""
    if is_real_dir(path):
        shutil.rmtree(path)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


@contextlib.contextmanager
def model_lock(model_dir: str) -> Iterator[None]:
    """One sync per model directory at a time (a second waits); stale staging and trash from a killed run are removed."""
    os.makedirs(model_dir, mode=0o755, exist_ok=True)
    with open(os.path.join(model_dir, LOCK_FILE), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for name in stale_entries(model_dir):
            _remove_entry(os.path.join(model_dir, name))
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def write_atomic(path: str, data: bytes) -> None:
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


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_dir(model_dir: str, name: str) -> None:
    """Rename out of Triton's sight first, then delete: a half-deleted version is never visible."""
    trash = tempfile.mkdtemp(dir=model_dir, prefix=TRASH_PREFIX)
    os.rename(os.path.join(model_dir, name), os.path.join(trash, name))
    shutil.rmtree(trash)


def exchange(path_a: str, path_b: str) -> bool:
    """Swap two directories in one step (renameat2 RENAME_EXCHANGE); False when the kernel or filesystem cannot."""
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        return False
    at_fdcwd = -100
    if renameat2(at_fdcwd, os.fsencode(path_a), at_fdcwd, os.fsencode(path_b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), path_a)


def read_raw(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None
