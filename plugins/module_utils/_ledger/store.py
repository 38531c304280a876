# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The ledger's I/O: append one entry (an S3 conditional write, then optionally an EventBridge event) and read the
entries a query needs. S3 through `_aws/s3.py`, EventBridge through `_aws/events.py`; the rules are in `entry.py`
and `history.py`.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import events as _events
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import s3 as _s3
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import BotoCoreError, ClientError
from ansible_collections.inferops.triton_ecs.plugins.module_utils._ledger import history
from ansible_collections.inferops.triton_ecs.plugins.module_utils._ledger.entry import (
    LedgerError,
    entry_key,
    ledger_prefix,
    parse_entry,
    render,
    time_bound_key,
    time_start_key,
)


class EventNotSent(Exception):
    """The entry is in S3, but EventBridge did not take its event."""


# Where the ledger lives: the options of both ledger modules (doc fragment inferops.triton_ecs.release_ledger).
LEDGER_OPTIONS = dict(
    bucket=dict(type="str", required=True),
    prefix=dict(type="str", default=""),
    application=dict(type="str", required=True),
)
EVENT_SOURCE = "inferops.triton_ecs"
EVENT_DETAIL_TYPE = "Triton release ledger entry"


def append(s3: Any, events: Any, p: dict[str, Any], entry: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    """Writes `entry` under its own key, never over another object. The same entry appended again (a retried run)
    finds its key holding the same bytes: no change, no event. Another entry under that key fails the module."""
    key = entry_key(p["prefix"], p["application"], entry)
    body = render(entry)
    result = {"key": key, "url": f"s3://{p['bucket']}/{key}", "entry": entry, "event_id": None}
    existing = _s3.get_bytes(s3, p["bucket"], key)
    if existing is not None:
        return {**result, "changed": False, **_same_or_refused(existing, body, result["url"])}
    if check_mode:
        return {**result, "changed": True}
    if not _s3.put_new_object(s3, p["bucket"], key, body):
        # Written between the read above and the write (a concurrent or retried append): S3 refused to replace it.
        existing = _s3.get_bytes(s3, p["bucket"], key) or b""
        return {**result, "changed": False, **_same_or_refused(existing, body, result["url"])}
    if p.get("event_bus_name"):
        detail = {"bucket": p["bucket"], "key": key, "entry": entry}
        try:
            result["event_id"] = _events.put_event(events, p["event_bus_name"], EVENT_SOURCE, EVENT_DETAIL_TYPE, detail)
        except (_events.EventRejected, BotoCoreError, ClientError) as err:
            raise EventNotSent(
                f"{result['url']} was written (the ledger has the entry), but sending it to EventBridge bus "
                f"{p['event_bus_name']} failed: {err}. A re-run finds the entry written and sends nothing: "
                "tell the bus's consumers by hand, or fix the bus and append the next entry"
            ) from err
    return {**result, "changed": True}


def _same_or_refused(existing: bytes, body: bytes, url: str) -> dict[str, Any]:
    if existing != body:
        raise LedgerError(f"{url} already holds another entry; ledger entries are never rewritten: append again (a new ended time)")
    return {"already_written": True}


def _read(s3: Any, bucket: str, application: str, key: str) -> dict[str, Any]:
    raw = _s3.get_bytes(s3, bucket, key)
    if raw is None:
        raise LedgerError(
            f"s3://{bucket}/{key} was listed but is gone: ledger entries are never deleted; look at the bucket's lifecycle rules"
        )
    return parse_entry(raw, application, f"s3://{bucket}/{key}")


def _keys_until(s3: Any, p: dict[str, Any], at: datetime) -> list[str]:
    bound = time_bound_key(p["prefix"], p["application"], at)
    keys = []
    for key in _s3.keys_after(s3, p["bucket"], ledger_prefix(p["prefix"], p["application"])):
        if key > bound:
            break
        if key.endswith(".json"):
            keys.append(key)
    return keys


def _newest_first(s3: Any, p: dict[str, Any], keys: list[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    for key in reversed(keys):
        yield key, _read(s3, p["bucket"], p["application"], key)


def query(s3: Any, p: dict[str, Any], at: datetime, since: datetime | None) -> dict[str, Any]:
    """The answer at `at` (reading entries newest first, only as far back as needed) and, with `since`, the
    entries that ended in [since, at]."""
    keys = _keys_until(s3, p, at)
    resolved = history.resolve(_newest_first(s3, p, keys), at)
    result = {"resolved": resolved, "entries_listed": len(keys)}
    if since is not None:
        start = time_start_key(p["prefix"], p["application"], since)
        in_window = [key for key in keys if key > start]
        result["entries"] = history.window(((key, _read(s3, p["bucket"], p["application"], key)) for key in in_window), since, at)
    return result
