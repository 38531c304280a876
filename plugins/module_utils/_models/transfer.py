# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""Moving model files between S3 and disk at the bandwidth of the machine: parallel ranged GETs, multipart uploads.

S3 serves roughly 85-90 MB/s per connection; a GPU instance's network takes 25-400 Gbit/s. One stream per file
leaves most of it idle, so (AWS's performance guidelines) large objects are fetched as byte ranges on many
connections at once, and uploaded as multipart uploads (one PutObject carries at most 5 GB).

Downloads (`Downloads`): one pool of ``concurrency`` connections shared by every file, and in the model agent by
every model, of a sync. A file of at most ``part_bytes`` is one GET (several files at once). A larger file is fetched
as ranged GETs of ``part_bytes`` into a preallocated staging file: each worker writes its part at its offset, and the
thread that drives the file hashes the parts in file order as they land, from the memory the parts arrived in. The
SHA-256 checked against the manifest therefore costs no second read of the file, and nothing unverified is renamed
into place (the caller checks size and SHA-256 before its rename). Parts held in memory until hashed count against
``buffer_bytes`` across all files, so memory stays bounded whatever the file size; a part that lands while that buffer
is full goes to the file chunk by chunk and is hashed from the page cache it was just written to, so a slow part
never idles the other connections. Every part of one file is read with If-Match on the ETag its HEAD returned, so a
file is never stitched from two versions of an object.

Uploads: files above ``multipart_threshold_bytes`` go up as multipart uploads, their parts sent in parallel, each with
the SHA-256 computed in the one local pass that also computes the file's SHA-256 for the manifest; S3 refuses a part
whose bytes do not match it (BadDigest). The object's stored checksum is then the composite of the part digests
(``<base64>-<parts>``), which the publisher compares with the composite of its own part digests.

Pure helpers (part sizes, composite checksums, settings checks) are separate from the I/O; the S3 calls are
`_aws.s3`'s. Runs on the instance without Ansible, like the agent.
"""

from __future__ import annotations

import base64
import collections
import contextlib
import ctypes
import errno
import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import s3 as _s3
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import BotoCoreError, ClientError, error_code
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.local_repository import read_raw, write_atomic
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.manifest import ManifestError

MIB = 1024 * 1024
# S3's multipart limits (AWS documentation): parts of 5 MiB to 5 GiB (the last one smaller), at most 10,000 parts.
S3_MIN_PART_BYTES = 5 * MIB
S3_MAX_PART_BYTES = 5 * 1024 * MIB
S3_MAX_PARTS = 10_000
S3_MAX_OBJECT_BYTES = 5 * 1024**4
# A ranged GET cut mid-body (a reset connection, a read timeout) is fetched again, this many times in all.
PART_ATTEMPTS = 3


class TransferError(ManifestError):
    """A transfer setting or a transfer that cannot go on; the message names the field, the value and the fix."""


# ---------------------------------------------------------------- settings (pure)


@dataclass(frozen=True)
class DownloadSettings:
    """How a sync fetches files. Defaults sized for GPU instances (g5/g6: 10-100 Gbit/s, p4d/p5: 400 Gbit/s and more):
    64 connections at S3's ~90 MB/s each ask for ~5.8 GB/s: a 40-50 Gbit/s network (g5.12xlarge, g6.12xlarge), or
    about what an instance-store NVMe RAID writes."""

    concurrency: int = 64
    part_bytes: int = 8 * MIB
    buffer_bytes: int = 256 * MIB

    @classmethod
    def from_mib(cls, concurrency: int, part_mib: int, buffer_mib: int, where: str) -> DownloadSettings:
        """Settings from the options or configuration keys a user sets, each checked (`where` names them)."""
        for name, value, low in (("concurrency", concurrency, 1), ("part_mib", part_mib, 1), ("buffer_mib", buffer_mib, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise TransferError(f"{where}: download {name}={value!r}; expected an integer >= {low}")
        if buffer_mib < part_mib:
            raise TransferError(
                f"{where}: download buffer_mib={buffer_mib} is smaller than part_mib={part_mib}; "
                "the buffer holds the parts waiting to be hashed: give it at least one part (a few per connection is better)"
            )
        return cls(concurrency, part_mib * MIB, buffer_mib * MIB)

    @property
    def buffered_parts(self) -> int:
        return max(1, self.buffer_bytes // self.part_bytes)

    @property
    def window_parts(self) -> int:
        """How far ahead of the hash parts are requested: every connection busy, and the buffer's worth beyond."""
        return max(2 * self.concurrency, self.buffered_parts)


@dataclass(frozen=True)
class UploadSettings:
    """How a publish sends files: one PutObject up to the threshold, a multipart upload above it."""

    multipart_threshold_bytes: int = 64 * MIB
    part_bytes: int = 16 * MIB
    concurrency: int = 16

    @classmethod
    def from_mib(cls, threshold_mib: int, part_mib: int, concurrency: int) -> UploadSettings:
        for name, value, low in (
            ("multipart_threshold_mib", threshold_mib, 5),
            ("part_size_mib", part_mib, 5),
            ("upload_concurrency", concurrency, 1),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise TransferError(
                    f"{name}={value!r}; expected an integer >= {low}" + (" (S3 refuses multipart parts under 5 MiB)" if low == 5 else "")
                )
        if part_mib * MIB > S3_MAX_PART_BYTES:
            raise TransferError(f"part_size_mib={part_mib}; S3 refuses parts over 5 GiB (5120 MiB): set at most 5120")
        if threshold_mib * MIB > 5 * 1000**3:
            raise TransferError(f"multipart_threshold_mib={threshold_mib}; one PutObject carries at most 5 GB: set at most 4768")
        return cls(threshold_mib * MIB, part_mib * MIB, concurrency)

    def multipart(self, size: int) -> bool:
        return size > self.multipart_threshold_bytes


def upload_part_bytes(size: int, part_bytes: int) -> int:
    """The part size for a file: the configured one, grown in whole MiB when the file would need over 10,000 parts."""
    if size > S3_MAX_OBJECT_BYTES:
        raise TransferError(f"a file of {size} bytes is larger than S3's largest object (5 TiB); split it")
    needed = -(-size // S3_MAX_PARTS)
    if needed <= part_bytes:
        return part_bytes
    return -(-needed // MIB) * MIB


def part_ranges(size: int, part_bytes: int) -> list[tuple[int, int]]:
    """[(first byte, last byte)] covering a file of `size` bytes in parts of `part_bytes` (the last one shorter)."""
    return [(start, min(start + part_bytes, size) - 1) for start in range(0, size, part_bytes)]


def composite_sha256(part_digests: list[bytes]) -> str:
    """The ChecksumSHA256 S3 keeps for a multipart object: base64(SHA-256 of the concatenated part digests)-<parts>."""
    return base64.b64encode(hashlib.sha256(b"".join(part_digests)).digest()).decode() + f"-{len(part_digests)}"


def composite_matches(stored: str | None, composite: str) -> bool:
    """Whether an object's stored ChecksumSHA256 is this composite. S3 answers ``<base64>-<parts>``; moto leaves out
    ``-<parts>`` on HeadObject, so the part count is compared only when it is there."""
    if not stored:
        return False
    digest, _sep, count = stored.partition("-")
    want_digest, _sep, want_count = composite.partition("-")
    return digest == want_digest and count in ("", want_count)


def b64(digest: bytes) -> str:
    return base64.b64encode(digest).decode()


# ---------------------------------------------------------------- the local pass (publish)


def file_digests(path: str, part_bytes: int | None, chunk_bytes: int = _s3.CHUNK_BYTES) -> tuple[int, str, list[bytes]]:
    """(size, hex SHA-256, [SHA-256 of each part]) in one read of the file; no parts when `part_bytes` is None."""
    whole = hashlib.sha256()
    parts: list[bytes] = []
    part = hashlib.sha256()
    in_part = 0
    size = 0
    with open(path, "rb") as f:
        while True:
            want = chunk_bytes if part_bytes is None else min(chunk_bytes, part_bytes - in_part)
            chunk = f.read(want)
            if not chunk:
                break
            whole.update(chunk)
            size += len(chunk)
            if part_bytes is not None:
                part.update(chunk)
                in_part += len(chunk)
                if in_part == part_bytes:
                    parts.append(part.digest())
                    part, in_part = hashlib.sha256(), 0
    if part_bytes is not None and (in_part or not parts):
        parts.append(part.digest())
    return size, whole.hexdigest(), parts


# ---------------------------------------------------------------- multipart upload (publish)


def resumable_parts(listed: list[dict[str, Any]], ranges: list[tuple[int, int]], part_digests: list[bytes]) -> dict[int, dict[str, Any]]:
    """Parts an unfinished upload already holds with exactly this content (size and the SHA-256 S3 verified):
    {part number: {PartNumber, ETag, ChecksumSHA256}}. A part without a stored checksum is sent again."""
    kept = {}
    for part in listed:
        number = part.get("PartNumber", 0)
        if not 1 <= number <= len(ranges):
            continue
        start, end = ranges[number - 1]
        checksum = b64(part_digests[number - 1])
        if part.get("Size") == end - start + 1 and part.get("ChecksumSHA256") == checksum:
            kept[number] = {"PartNumber": number, "ETag": part["ETag"], "ChecksumSHA256": checksum}
    return kept


def upload_multipart(
    s3: Any, bucket: str, key: str, path: str, part_bytes: int, part_digests: list[bytes], concurrency: int
) -> dict[str, Any]:
    """Uploads a file as a multipart upload, resuming this key's unfinished upload (ListParts) when there is one.

    Parts S3 already holds with the same size and SHA-256 are kept; the others are sent, `concurrency` at once, each
    with its SHA-256. Other unfinished uploads of the key are aborted (S3 bills their parts). A failure aborts the
    upload, so nothing billed is left behind; only a publish killed outright leaves one, which the next publish
    resumes (or the bucket's AbortIncompleteMultipartUpload rule deletes). Returns {upload_id, parts, resumed_parts}.
    """
    size = os.path.getsize(path)
    ranges = part_ranges(size, part_bytes)
    if len(ranges) != len(part_digests):
        raise TransferError(f"{path} changed size while publishing ({size} bytes now); publish again")
    unfinished = _s3.list_multipart_uploads(s3, bucket, key)
    # Only an upload whose parts carry SHA-256 checksums can be resumed (and completed with them).
    resumable = [u for u in unfinished if u.get("ChecksumAlgorithm") == "SHA256"]
    upload_id = resumable[-1]["UploadId"] if resumable else None
    for stale in unfinished:
        if stale["UploadId"] != upload_id:
            _s3.abort_multipart_upload(s3, bucket, key, stale["UploadId"])
    done = resumable_parts(_s3.list_parts(s3, bucket, key, upload_id), ranges, part_digests) if upload_id else {}
    resumed = sorted(done)
    if upload_id is None:
        upload_id = _s3.create_multipart_upload(s3, bucket, key)
    try:
        fd = os.open(path, os.O_RDONLY)
        try:

            def send(number: int) -> dict[str, Any]:
                start, end = ranges[number - 1]
                body = os.pread(fd, end - start + 1, start)
                checksum = b64(part_digests[number - 1])
                try:
                    etag = _s3.upload_part(s3, bucket, key, upload_id, number, body, checksum)
                except ClientError as err:
                    if error_code(err) in ("BadDigest", "InvalidDigest"):
                        raise TransferError(
                            f"{path}: part {number} (bytes {start}-{end}) no longer has the SHA-256 it had when the file was"
                            " read (S3 refused it): the file changed while publishing; the upload was aborted, no manifest"
                            " was written: publish again"
                        ) from err
                    raise
                return {"PartNumber": number, "ETag": etag, "ChecksumSHA256": checksum}

            todo = [n for n in range(1, len(ranges) + 1) if n not in done]
            with ThreadPoolExecutor(max_workers=max(1, min(concurrency, len(todo)))) as pool:
                for part in pool.map(send, todo):
                    done[part["PartNumber"]] = part
        finally:
            os.close(fd)
        _s3.complete_multipart_upload(s3, bucket, key, upload_id, [done[n] for n in sorted(done)])
    except BaseException as err:
        if isinstance(err, Exception):  # killed (KeyboardInterrupt, SystemExit): leave it for the next publish to resume
            _s3.abort_multipart_upload(s3, bucket, key, upload_id)
        raise
    return {"upload_id": upload_id, "parts": len(ranges), "resumed_parts": resumed}


# ---------------------------------------------------------------- downloads (sync)


def preallocate(fd: int, size: int) -> None:
    """Reserves the file's blocks (a full disk fails at once, not mid-file) with fallocate(2), which never touches
    bytes already written, so parts may land meanwhile; a filesystem without it keeps the file sparse."""
    os.ftruncate(fd, size)
    if not size:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    fallocate = getattr(libc, "fallocate64", None) or getattr(libc, "fallocate", None)
    if fallocate is None:
        return
    fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    if fallocate(fd, 0, 0, size) != 0:
        code = ctypes.get_errno()
        if code not in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):  # a filesystem without fallocate
            raise OSError(code, os.strerror(code))


def _pwrite_all(fd: int, data: memoryview, offset: int) -> None:
    while data:
        written = os.pwrite(fd, data, offset)
        data, offset = data[written:], offset + written


def _hash_from_file(digest: Any, fd: int, offset: int, length: int) -> None:
    """Hashes bytes the sync has just written (in the page cache), a chunk at a time (a chunk's memory is reused;
    a fresh buffer per part costs its page faults again)."""
    while length:
        chunk = os.pread(fd, min(_s3.CHUNK_BYTES, length), offset)
        if not chunk:
            raise TransferError(f"the staging file ended at byte {offset}, before the part written there")
        digest.update(chunk)
        offset, length = offset + len(chunk), length - len(chunk)


class PartSlots:
    """At most `count` parts held in memory at once (each up to the part size); never blocks."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.peak_in_use = 0
        self._in_use = 0
        self._lock = threading.Lock()

    def take(self) -> bool:
        """A slot for one part, or False when all are in use."""
        with self._lock:
            if self._in_use == self.count:
                return False
            self._in_use += 1
            self.peak_in_use = max(self.peak_in_use, self._in_use)
            return True

    def release(self) -> None:
        with self._lock:
            self._in_use -= 1

    def available(self) -> int:
        with self._lock:
            return self.count - self._in_use


class Downloads:
    """A pool of connections shared by every file of a sync (and, in the agent, of every model), with its figures.

    Use as a context manager, or call close(). `fetch_files` fetches a list of objects, small ones several at once,
    large ones as parallel ranged GETs hashed in order.
    """

    def __init__(self, s3: Any, settings: DownloadSettings | None = None) -> None:
        self.s3 = s3
        self.settings = settings or DownloadSettings()
        self._pool = ThreadPoolExecutor(max_workers=self.settings.concurrency, thread_name_prefix="s3-get")
        self._buffers = PartSlots(self.settings.buffered_parts)
        self._lock = threading.Lock()
        self.bytes = 0
        self.files = 0
        self.ranged_files = 0

    def __enter__(self) -> Downloads:
        return self

    def __exit__(self, *_exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def counters(self) -> tuple[int, int]:
        """(bytes, files) fetched so far: figures() of a hydration subtracts the counters taken before it."""
        with self._lock:
            return self.bytes, self.files

    def _count(self, size: int, ranged: bool) -> None:
        with self._lock:
            self.bytes += size
            self.files += 1
            self.ranged_files += int(ranged)

    # -- one file

    def fetch_small(self, bucket: str, key: str, dest: str) -> tuple[int, str]:
        """One GET streamed into `dest` (hashed as it goes, fsynced); returns (size, sha256)."""
        try:
            size, sha = _s3.download(self.s3, bucket, key, dest)
        except ClientError as err:
            raise _named(err, bucket, key) from err
        self._count(size, ranged=False)
        return size, sha

    def _part(self, bucket: str, key: str, etag: str | None, fd: int, start: int, end: int) -> bytes | None:
        """One ranged GET written at its offset. Returns its bytes, for the file's thread to hash, or None when every
        memory slot was in use: the part then went to the file a chunk at a time, to be hashed from there."""
        want = end - start + 1
        held = self._buffers.take()
        for attempt in range(1, PART_ATTEMPTS + 1):
            got = 0
            chunks: list[bytes] = []
            try:
                body = _s3.get_range(self.s3, bucket, key, start, end, etag)
                # With a slot, the whole part in one read (one copy, from the socket); without, a chunk at a time.
                while got < want and (chunk := body.read(want - got if held else min(_s3.CHUNK_BYTES, want - got))):
                    if held:
                        chunks.append(chunk)
                    else:
                        _pwrite_all(fd, memoryview(chunk), start + got)
                    got += len(chunk)
                body.close()
            except (BotoCoreError, ConnectionError, TimeoutError):  # a body cut mid-read: fetch the part again
                if attempt < PART_ATTEMPTS:
                    continue
                if held:
                    self._buffers.release()
                raise
            if got != want:
                if attempt < PART_ATTEMPTS:
                    continue
                if held:
                    self._buffers.release()
                raise TransferError(f"s3://{bucket}/{key}: bytes {start}-{end} came back short ({got} of {want}); the download was cut")
            if not held:
                return None
            data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
            _pwrite_all(fd, memoryview(data), start)
            return data
        raise AssertionError("unreachable")  # pragma: no cover

    def fetch_ranged(self, bucket: str, key: str, dest: str, size: int) -> tuple[int, str]:
        """Parallel ranged GETs into a preallocated `dest`, hashed in file order as they land; returns (size, sha256).

        Parts are requested up to `window` parts ahead of the hash, so every connection stays busy while the hash
        catches up; a part hashed from the file (the buffer was full when it landed) was written a moment before and
        is read back from the page cache. Call it from a thread outside the pool (the sync's own).
        """
        head = _s3.head(self.s3, bucket, key)
        if head is None:
            raise TransferError(f"s3://{bucket}/{key} is missing; the version's files were deleted after publishing: republish it")
        try:
            return self._fetch_ranged(bucket, key, dest, size, head)
        except ClientError as err:
            raise _named(err, bucket, key) from err

    def _fetch_ranged(self, bucket: str, key: str, dest: str, size: int, head: dict[str, Any]) -> tuple[int, str]:
        if head.get("ContentLength") != size:
            # The size the manifest gives: what verify_file compares; no range of a wrong-size object is fetched.
            return head.get("ContentLength", -1), ""
        etag = head.get("ETag")
        ranges = part_ranges(size, self.settings.part_bytes)
        window = self.settings.window_parts
        digest = hashlib.sha256()
        pending: collections.deque[Future] = collections.deque()
        fd = os.open(dest, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.ftruncate(fd, size)
            submitted = 0
            try:
                for index, (start, end) in enumerate(ranges):
                    while submitted < len(ranges) and submitted < index + window:
                        pending.append(self._pool.submit(self._part, bucket, key, etag, fd, *ranges[submitted]))
                        submitted += 1
                    if index == 0:  # while the first parts are on their way
                        preallocate(fd, size)
                    data = pending.popleft().result()
                    if data is None:
                        _hash_from_file(digest, fd, start, end - start + 1)
                    else:
                        digest.update(data)
                        self._buffers.release()
                        del data
            finally:
                for future in pending:  # after a failure: let the parts in flight finish before the file is closed
                    future.cancel()
                for future in pending:
                    if not future.cancelled():
                        with contextlib.suppress(BaseException):
                            if future.result() is not None:
                                self._buffers.release()
            os.fsync(fd)
        finally:
            os.close(fd)
        self._count(size, ranged=True)
        return size, digest.hexdigest()

    # -- a list of files

    def fetch_files(self, bucket: str, wanted: list[tuple[str, str, str, int]], check: Callable[[str, int, str], None]) -> None:
        """Fetches [(name, key, dest, expected size)] and calls check(name, size, sha256) on each as it lands.

        Files of up to part_bytes go to the pool at once; larger ones are fetched one after another by this thread,
        each with ranged GETs on the same pool. The first failure is raised once everything started has stopped.
        """
        small = [w for w in wanted if w[3] <= self.settings.part_bytes]
        large = [w for w in wanted if w[3] > self.settings.part_bytes]
        failed = threading.Event()  # after the first failure (a 404, a wrong digest) no further file is started

        def one(name: str, key: str, dest: str) -> None:
            if failed.is_set():
                return
            try:
                size, sha = self.fetch_small(bucket, key, dest)
                check(name, size, sha)
            except BaseException:
                failed.set()
                raise

        futures = [self._pool.submit(one, name, key, dest) for name, key, dest, _size in small]
        try:
            for name, key, dest, size in large:
                if failed.is_set():
                    break
                got, sha = self.fetch_ranged(bucket, key, dest, size)
                check(name, got, sha)
            wait(futures, return_when=FIRST_EXCEPTION)
            for future in futures:
                if future.done():
                    future.result()
        finally:
            for future in futures:  # the files not started stay so; those started finish before the caller cleans up
                future.cancel()
            wait(futures)
        for future in futures:
            future.result()


def _named(err: ClientError, bucket: str, key: str) -> TransferError:
    """A failed GET as an error that names the object and the fix (botocore's own message names neither)."""
    code = error_code(err)
    if code in ("NoSuchKey", "404", "NotFound"):
        return TransferError(f"s3://{bucket}/{key} is missing (404); the version's files were deleted after publishing: republish it")
    if code in ("PreconditionFailed", "412"):
        return TransferError(f"s3://{bucket}/{key} was replaced while it was downloaded; a published version is immutable: republish it")
    return TransferError(f"s3://{bucket}/{key}: GET failed ({code or err}); check the instance's s3:GetObject permission on it")


@contextlib.contextmanager
def downloads_for(s3: Any, downloads: Downloads | None, settings: DownloadSettings | None = None) -> Iterator[Downloads]:
    """The caller's shared Downloads, or one for this call (closed after it)."""
    if downloads is not None:
        yield downloads
        return
    with Downloads(s3, settings) as own:
        yield own


# ---------------------------------------------------------------- figures (the agent's boot hydration)

# Next to the models, on the instance store: wiped with it on a stop/start, when the next boot hydrates again.
HYDRATION_FILE = ".hydration.json"


def transfer_figures(bytes_moved: int, files: int, started: float, ended: float) -> dict[str, Any]:
    """The figures of one transfer (a boot hydration): bytes, files, seconds, throughput, and when (UTC, ISO 8601)."""
    seconds = max(ended - started, 0.0)
    return {
        "bytes": bytes_moved,
        "files": files,
        "seconds": round(seconds, 3),
        "throughput_bytes_per_s": round(bytes_moved / seconds) if seconds > 0 else None,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "ended": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ended)),
    }


class HydrationMeter:
    """Measures one hydration on a shared Downloads: what it fetched, from when to when."""

    def __init__(self, downloads: Downloads) -> None:
        self.downloads = downloads
        self.started = time.time()
        self.before = downloads.counters()

    def figures(self) -> dict[str, Any]:
        moved, files = self.downloads.counters()
        return transfer_figures(moved - self.before[0], files - self.before[1], self.started, time.time())


def agent_download_settings(config: dict[str, Any]) -> DownloadSettings:
    """The model agent's download settings from its configuration file's keys."""
    return DownloadSettings.from_mib(
        config["download_concurrency"], config["download_part_mib"], config["download_buffer_mib"], "model agent configuration"
    )


def save_hydration(host_path: str, figures: dict[str, Any]) -> None:
    """Keeps the boot hydration's figures for the serving agent (another process) to report."""
    os.makedirs(host_path, exist_ok=True)
    write_atomic(os.path.join(host_path, HYDRATION_FILE), (json.dumps(figures, sort_keys=True) + "\n").encode())


def load_hydration(host_path: str) -> dict[str, Any] | None:
    """The figures of this instance store's boot hydration, None when there are none (or they are unreadable)."""
    raw = read_raw(os.path.join(host_path, HYDRATION_FILE))
    try:
        figures = json.loads(raw) if raw else None
    except ValueError:
        return None
    return figures if isinstance(figures, dict) else None
