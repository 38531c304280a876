# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""One writer of an application's release records at a time: a lock object next to the records, taken by an S3
conditional write.

``P/releases/APP/lock.json`` is created with If-None-Match: * (S3 refuses the write when the key exists, whoever
wrote it), so of two model_release runs racing for the records exactly one holds the lock; the other fails before
any record write, naming the holder. The holder deletes it with If-Match on the ETag it wrote, so it never deletes
a lock another run took over. A lock that expired (its run died) or cannot be read is taken over with If-Match on
the ETag read: of several runs taking it over, one wins. `break_lock` takes over a live one.

The lock serialises the runs that take it; the record writes themselves are conditional too (`rollout.apply_actions`:
If-Match on the ETag read, If-None-Match: * for a record that did not exist), so a writer outside the lock (a
broken lock, an older collection) makes this run fail loudly instead of overwriting it.

`expires` comes from each controller's clock: controllers racing for one application must keep their clocks in
sync (NTP), as for the cutover lock (`_bluegreen/lock.py`).
"""

from __future__ import annotations

import getpass
import json
import os
import socket
import time
import uuid
from collections.abc import Callable
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import s3 as _s3
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.release import ReleaseError, releases_prefix

LOCK_FILE = "lock.json"
TTL_S = 300  # a model_release run writes its records in seconds; a dead run's lock is taken over after this


class RecordsLockHeld(ReleaseError):
    """Another run holds the release records' lock; raised before any record write."""


def lock_key(prefix: str, application: str) -> str:
    return f"{releases_prefix(prefix, application)}{LOCK_FILE}"


def holder_label() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()} pid {os.getpid()}"


def render_lock(owner: str, by: str, state: str, now: float, ttl_s: int = TTL_S) -> bytes:
    return json.dumps({"owner": owner, "by": by, "state": state, "since": int(now), "expires": int(now) + ttl_s}, sort_keys=True).encode()


def parse_lock(raw: bytes) -> dict[str, Any] | None:
    """The lock's fields, or None when it cannot be read (it then counts as expired: no run can prove it holds it)."""
    try:
        lock = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(lock, dict) or any(isinstance(lock.get(f), bool) or not isinstance(lock.get(f), int) for f in ("since", "expires")):
        return None
    return lock


def held_message(application: str, lock: dict[str, Any], url: str) -> str:
    def when(epoch: int) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))

    return (
        f"another model release of {application} is writing its release records: state={lock.get('state')!r} by "
        f"{lock.get('by') or 'unknown'}, since {when(lock['since'])}, lock expires {when(lock['expires'])} ({url}). This run "
        "wrote nothing; run it again once that run has finished. If that run is dead, wait until the lock expires or run "
        "again with break_lock: true"
    )


class RecordsLock:
    """The release records' lock of one application; a context manager around the writes of one run."""

    def __init__(
        self,
        s3: Any,
        bucket: str,
        prefix: str,
        application: str,
        state: str,
        break_lock: bool = False,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.s3 = s3
        self.bucket = bucket
        self.key = lock_key(prefix, application)
        self.application = application
        self.state = state
        self.break_lock = break_lock
        self.now = now
        self.owner = uuid.uuid4().hex[:12]
        self.etag: str | None = None

    def url(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    def acquire(self) -> None:
        """Hold the lock, or raise RecordsLockHeld naming the run that does."""
        body = render_lock(self.owner, holder_label(), self.state, self.now())
        self.etag = _s3.put_object_if(self.s3, self.bucket, self.key, body, None, ContentType="application/json")
        if self.etag is not None:
            return
        found = _s3.get_with_etag(self.s3, self.bucket, self.key)
        if found is None:  # released between our write and our read: one more try, a conditional create again
            self.etag = _s3.put_object_if(self.s3, self.bucket, self.key, body, None, ContentType="application/json")
            if self.etag is None:
                raise RecordsLockHeld(
                    f"another model release of {self.application} took {self.url()} at the same moment; this run wrote nothing"
                )
            return
        raw, their_etag = found
        lock = parse_lock(raw)
        if lock is not None and lock.get("owner") == self.owner:
            # Our own create: its answer was lost and the retried PUT met the object it had written (412).
            self.etag = their_etag
            return
        if lock is not None and lock["expires"] > self.now() and not self.break_lock:
            raise RecordsLockHeld(held_message(self.application, lock, self.url()))
        self.etag = _s3.put_object_if(self.s3, self.bucket, self.key, body, their_etag, ContentType="application/json")
        if self.etag is None:
            raise RecordsLockHeld(
                f"another model release of {self.application} took over {self.url()} at the same moment; this run wrote nothing"
            )

    def release(self) -> None:
        """Delete our lock object, only if it is still ours (a run that broke it keeps it)."""
        if self.etag is not None:
            _s3.delete_object_if(self.s3, self.bucket, self.key, self.etag)
            self.etag = None

    def __enter__(self) -> RecordsLock:
        self.acquire()
        return self

    def __exit__(self, *_exc: Any) -> None:
        self.release()
