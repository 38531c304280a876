# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""One cutover per application at a time: a lock kept as tags on the production listener (or listener rule).

ELBv2 has no conditional tag write, so the lock is a verified write. Each run writes a tag of its own,
`inferops:cutover-lock:<owner>` = `since=<ms> expires=<s> by=<user@host pid>`, waits `SETTLE_S`, reads the tags
back and holds the lock only when its entry is the oldest live one; a run that loses removes its tag and fails
before any cutover write. A run whose read came before the holder's write, and whose own write lands after the
holder checked, still loses: its `since` is later. Every later write of the holder first checks that its tag is
still there and still the oldest, so a run whose lock was broken (or expired and taken) stops writing.

Entries expire (`expires`, refreshed while the run works) so a crashed run does not block forever; `break_lock`
removes every other entry. `since` comes from each controller's clock: controllers racing for one application
must keep their clocks in sync (NTP), as they would for any AWS request signature.

The same resource carries the record of the last cutover, `inferops:cutover` = `from=<colour> to=<colour>
task_definition=<family:revision>` (and `count=<D>` for a capacity-paced one), which the emergency rollback reads.
"""

from __future__ import annotations

import getpass
import os
import re
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import elbv2 as elb
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import InputError
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.colors import COLORS

LOCK_PREFIX = "inferops:cutover-lock:"
RECORD_KEY = "inferops:cutover"
LOCK_TTL_S = (60, 86400)  # lock_ttl_s: a minute to a day
SETTLE_S = 1.0  # longer than one AWS round trip: a racing run's write lands before the read-back
OWNER = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
_TAG_VALUE_UNSAFE = re.compile(r"[^A-Za-z0-9 _.:/=+@-]")  # what an ELBv2 tag value may not hold


class LockHeld(InputError):
    """Another run holds the lock; raised before any cutover write."""


class LockLost(Exception):
    """This run's lock was broken or taken over: it stops without writing."""


@dataclass
class LockEntry:
    owner: str
    since_ms: int
    expires: int
    by: str = ""

    def value(self) -> str:
        return f"since={self.since_ms} expires={self.expires} by={self.by}"[:256]

    def describe(self) -> str:
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.since_ms / 1000))
        expires = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.expires))
        return f"owner {self.owner} ({self.by or 'unknown'}), started {started}, lock expires {expires}"


def new_owner() -> str:
    return uuid.uuid4().hex[:12]


def holder_label() -> str:
    """Who runs this cutover, for the error another run prints: user@host and the module's pid."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return _TAG_VALUE_UNSAFE.sub("_", f"{user}@{socket.gethostname()} pid {os.getpid()}")[:180]


def parse_entries(tags: dict[str, str]) -> list[LockEntry]:
    """The lock entries among a resource's tags; a malformed one counts as expired."""
    entries = []
    for key, value in tags.items():
        if not key.startswith(LOCK_PREFIX):
            continue
        fields = dict(part.split("=", 1) for part in value.split(" ") if "=" in part)
        by = value.split(" by=", 1)[1] if " by=" in value else ""
        try:
            entries.append(LockEntry(key[len(LOCK_PREFIX) :], int(fields.get("since", "")), int(fields.get("expires", "")), by))
        except ValueError:
            entries.append(LockEntry(key[len(LOCK_PREFIX) :], 0, 0, value))
    return entries


def live(entries: list[LockEntry], now: float) -> list[LockEntry]:
    return [e for e in entries if e.expires > now]


def holder(entries: list[LockEntry], now: float) -> LockEntry | None:
    """The entry that holds the lock: the oldest live one (ties broken by owner)."""
    current = live(entries, now)
    return min(current, key=lambda e: (e.since_ms, e.owner)) if current else None


def held_message(name: str, entry: LockEntry) -> str:
    return (
        f"another cutover of {name} is running: {entry.describe()}. This run wrote nothing. If that run is dead (its "
        "controller was killed), wait until the lock expires or run again with break_lock: true "
        "(the role: -e bluegreen_cutover_break_lock=true; docs/cutover.md, 'The cutover lock')"
    )


def record_value(from_color: str, to_color: str, task_definition: str, full_count: int | None = None) -> str:
    """`count` (a capacity-paced cutover): the full count both colours change at; the old colour's count to restore."""
    family_revision = task_definition.rsplit("/", 1)[-1]
    count = f" count={full_count}" if full_count else ""
    return _TAG_VALUE_UNSAFE.sub("_", f"from={from_color} to={to_color} task_definition={family_revision}{count}")


def parse_record(tags: dict[str, str]) -> dict[str, str]:
    """{from, to, task_definition, and count for a capacity-paced one} of the last cutover recorded in the tags ({} when none)."""
    fields = dict(part.split("=", 1) for part in (tags.get(RECORD_KEY) or "").split(" ") if "=" in part)
    if fields.get("from") not in COLORS or fields.get("to") not in COLORS or fields["from"] == fields["to"]:
        return {}
    return fields


class CutoverLock:
    """The lock of one application, held by `owner`, on `arn` (the production listener or rule)."""

    def __init__(
        self,
        elbv2: Any,
        arn: str,
        name: str,
        owner: str,
        ttl_s: int,
        now: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.elbv2 = elbv2
        self.arn = arn
        self.name = name
        self.owner = owner
        self.key = LOCK_PREFIX + owner
        self.ttl_s = ttl_s
        self.now = now
        self.sleep = sleep
        self.entry: LockEntry | None = None  # ours, as last written

    def tags(self) -> dict[str, str]:
        return elb.describe_tags(self.elbv2, [self.arn]).get(self.arn, {})

    def check_free(self) -> None:
        """Read-only: raise LockHeld when another live entry holds the lock (what check mode does)."""
        others = [e for e in parse_entries(self.tags()) if e.owner != self.owner]
        found = holder(others, self.now())
        if found is not None:
            raise LockHeld(held_message(self.name, found))

    def acquire(self, break_lock: bool = False) -> None:
        """Hold the lock, or raise LockHeld naming the run that does. Re-acquiring our own live entry refreshes it."""
        now = self.now()
        entries = parse_entries(self.tags())
        mine = next((e for e in entries if e.owner == self.owner and e.expires > now), None)
        others = [e for e in entries if e.owner != self.owner]
        current = holder([*others, *([mine] if mine else [])], now)
        if mine is not None and current is mine:
            self.entry = mine
            self._write(mine.since_ms)
            return
        if current is not None and not break_lock:
            raise LockHeld(held_message(self.name, current))
        stale = [LOCK_PREFIX + e.owner for e in others if break_lock or e.expires <= now]
        if stale:
            elb.remove_tags(self.elbv2, self.arn, stale)
        self._write(int(now * 1000))
        self.sleep(SETTLE_S)
        entries = parse_entries(self.tags())
        if not any(e.owner == self.owner for e in entries):
            raise LockHeld(f"another cutover of {self.name} broke this run's lock while it was taken; this run wrote nothing")
        current = holder(entries, self.now())
        if current is None or current.owner != self.owner:
            elb.remove_tags(self.elbv2, self.arn, [self.key])
            self.entry = None
            raise LockHeld(held_message(self.name, current) if current else f"the cutover lock of {self.name} could not be held")

    def verify(self) -> None:
        """Before a write: our entry is still there and still the holder (refreshed when half its time is gone)."""
        entries = parse_entries(self.tags())
        mine = next((e for e in entries if e.owner == self.owner), None)
        if mine is None:
            raise LockLost(f"the cutover lock of {self.name} was broken by another run: this run stops without writing")
        now = self.now()
        others = [e for e in entries if e.owner != self.owner]
        current = holder([*others, LockEntry(mine.owner, mine.since_ms, max(mine.expires, int(now) + 1), mine.by)], now)
        if current is None or current.owner != self.owner:
            raise LockLost(f"the cutover lock of {self.name} is held by {current.describe() if current else 'nobody'}: this run stops")
        self.entry = mine
        if mine.expires - now < self.ttl_s / 2:
            self._write(mine.since_ms)

    def refresh_due(self) -> bool:
        return self.entry is not None and self.entry.expires - self.now() < self.ttl_s / 2

    def release(self, taken_earlier: bool = False) -> None:
        """Remove our entry. `taken_earlier`: the owner may hold it from an earlier module call (the role's phases),
        so look in AWS even when this call did not take it."""
        if self.entry is not None or (taken_earlier and self.key in self.tags()):
            elb.remove_tags(self.elbv2, self.arn, [self.key])
            self.entry = None

    def record(self, from_color: str, to_color: str, task_definition: str, full_count: int | None = None) -> None:
        """Write the record of this cutover (which colour traffic comes from) unless it already says so."""
        value = record_value(from_color, to_color, task_definition, full_count)
        if self.tags().get(RECORD_KEY) != value:
            elb.add_tags(self.elbv2, self.arn, {RECORD_KEY: value})

    def _write(self, since_ms: int) -> None:
        entry = LockEntry(self.owner, since_ms, int(self.now()) + self.ttl_s, holder_label())
        elb.add_tags(self.elbv2, self.arn, {self.key: entry.value()})
        self.entry = entry
