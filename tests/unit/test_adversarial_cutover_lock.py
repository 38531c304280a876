"""Adversarial cases for the cutover lock and the controller watch (issue 12, class 1: cutovers).

Stand-ins: an in-memory ELBv2 tag store that answers DescribeTags/AddTags/RemoveTags as AWS does (last write of a
key wins, keys are independent), with two or three runs interleaved step by step through the lock's settle sleep;
a fake /proc tree (stat and cmdline files) for the controller watch.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import lock as bl
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.controller_watch import ControllerWatch

ARN = "arn:aws:elasticloadbalancing:us-east-1:123456789012:listener/app/triton/1/2"


class TagStore:
    """ELBv2 tags of one resource; `hooks` run after a call, to interleave another run exactly there."""

    def __init__(self) -> None:
        self.tags: dict[str, str] = {}
        self.writes = 0

    def describe_tags(self, aws_retry: bool, ResourceArns: list[str]) -> dict:
        return {
            "TagDescriptions": [{"ResourceArn": a, "Tags": [{"Key": k, "Value": v} for k, v in self.tags.items()]} for a in ResourceArns]
        }

    def add_tags(self, aws_retry: bool, ResourceArns: list[str], Tags: list[dict]) -> None:
        self.writes += 1
        self.tags.update({t["Key"]: t["Value"] for t in Tags})

    def remove_tags(self, aws_retry: bool, ResourceArns: list[str], TagKeys: list[str]) -> None:
        self.writes += 1
        for key in TagKeys:
            self.tags.pop(key, None)


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def make_lock(store: TagStore, owner: str, clock: Clock, during_settle: Callable[[], None] | None = None, ttl: int = 600) -> bl.CutoverLock:
    def sleep(seconds: float) -> None:
        clock.now += seconds
        if during_settle is not None:
            during_settle()

    return bl.CutoverLock(store, ARN, "triton", owner, ttl, now=clock, sleep=sleep)


def outcome(fn: Callable[[], None]) -> str:
    try:
        fn()
    except bl.LockHeld:
        return "held"
    except bl.LockLost:
        return "lost"
    return "ok"


class StaleFirstRead:
    """A run whose first read of the tags happened before the other runs wrote (all started together)."""

    def __init__(self, store: TagStore) -> None:
        self.store = store
        self.reads = 0

    def describe_tags(self, aws_retry: bool, ResourceArns: list[str]) -> dict:
        self.reads += 1
        if self.reads == 1:
            return {"TagDescriptions": [{"ResourceArn": a, "Tags": []} for a in ResourceArns]}
        return self.store.describe_tags(aws_retry, ResourceArns)

    def add_tags(self, aws_retry: bool, ResourceArns: list[str], Tags: list[dict]) -> None:
        self.store.add_tags(aws_retry, ResourceArns, Tags)

    def remove_tags(self, aws_retry: bool, ResourceArns: list[str], TagKeys: list[str]) -> None:
        self.store.remove_tags(aws_retry, ResourceArns, TagKeys)


def _simultaneous(store: TagStore, clock: Clock) -> list[str]:
    """Both read the lock free, both write, both read back: the older entry wins, the other steps back."""
    results: list[str] = []
    b = make_lock(StaleFirstRead(store), "bbbb", clock)  # type: ignore[arg-type]
    a = make_lock(store, "aaaa", clock, during_settle=lambda: results.append(outcome(b.acquire)))
    results.insert(0, outcome(a.acquire))
    return results


def _late_writer(store: TagStore, clock: Clock) -> list[str]:
    """B read the lock free before A wrote, but writes only after A has checked and holds it: B must lose."""
    a = make_lock(store, "aaaa", clock)
    b = make_lock(StaleFirstRead(store), "bbbb", clock)  # type: ignore[arg-type]
    first = outcome(a.acquire)
    clock.now += 5
    return [first, outcome(b.acquire), outcome(a.verify)]


def _second_while_held(store: TagStore, clock: Clock) -> list[str]:
    a, b = make_lock(store, "aaaa", clock), make_lock(store, "bbbb", clock)
    return [outcome(a.acquire), outcome(b.acquire), outcome(a.verify)]


def _expired_holder(store: TagStore, clock: Clock) -> list[str]:
    """A crashed run's lock expires: the next run takes it, the crashed entry is cleaned."""
    a, b = make_lock(store, "aaaa", clock), make_lock(store, "bbbb", clock)
    first = outcome(a.acquire)
    clock.now += 601
    return [first, outcome(b.acquire), str(bl.LOCK_PREFIX + "aaaa" in store.tags)]


def _broken_by_emergency(store: TagStore, clock: Clock) -> list[str]:
    """break_lock takes a live lock; the old holder stops at its next write."""
    a, b = make_lock(store, "aaaa", clock), make_lock(store, "bbbb", clock)
    first = outcome(a.acquire)
    return [first, outcome(lambda: b.acquire(break_lock=True)), outcome(a.verify)]


def _same_owner_again(store: TagStore, clock: Clock) -> list[str]:
    """The role's next phase (same owner) re-acquires its own lock without waiting and without losing it."""
    a = make_lock(store, "aaaa", clock)
    again = make_lock(store, "aaaa", clock)
    return [outcome(a.acquire), outcome(again.acquire), outcome(a.verify)]


def _malformed_tag(store: TagStore, clock: Clock) -> list[str]:
    """A hand-edited, unparsable lock tag counts as expired: it never blocks forever."""
    store.tags[bl.LOCK_PREFIX + "zzzz"] = "garbage"
    a = make_lock(store, "aaaa", clock)
    return [outcome(a.acquire), str(bl.LOCK_PREFIX + "zzzz" in store.tags)]


def _three_at_once(store: TagStore, clock: Clock) -> list[str]:
    results: list[str] = []
    c = make_lock(StaleFirstRead(store), "cccc", clock)  # type: ignore[arg-type]
    b = make_lock(StaleFirstRead(store), "bbbb", clock, during_settle=lambda: results.append(outcome(c.acquire)))  # type: ignore[arg-type]
    a = make_lock(store, "aaaa", clock, during_settle=lambda: results.append(outcome(b.acquire)))
    results.insert(0, outcome(a.acquire))
    return results


def _holder_refreshes_while_waiting(store: TagStore, clock: Clock) -> list[str]:
    """A long bake refreshes the lock, so a waiting run still finds it held after the first ttl."""
    a, b = make_lock(store, "aaaa", clock, ttl=60), make_lock(store, "bbbb", clock, ttl=60)
    first = outcome(a.acquire)
    for _minute in range(10):  # ten minutes of waits, refreshed when due as the guard does
        clock.now += 20
        if a.refresh_due():
            a.verify()
    return [first, outcome(b.acquire)]


def _role_releases_in_a_later_call(store: TagStore, clock: Clock) -> list[str]:
    """The role takes the lock in one module call (standby_up) and ends in another (finish): that one releases it."""
    standby_up = make_lock(store, "play-1", clock)
    first = outcome(standby_up.acquire)
    finish = make_lock(store, "play-1", clock)  # a new module process: it did not take the lock itself
    finish.release(taken_earlier=True)
    writes = store.writes
    make_lock(store, "play-2", clock).release(taken_earlier=True)  # a call that never held it writes nothing
    return [first, outcome(make_lock(store, "play-3", clock).acquire), str(store.writes - writes)]


def _check_mode_sees_holder(store: TagStore, clock: Clock) -> list[str]:
    a, b = make_lock(store, "aaaa", clock), make_lock(store, "bbbb", clock)
    first = outcome(a.acquire)
    writes = store.writes
    return [first, outcome(b.check_free), str(store.writes == writes)]


@pytest.mark.parametrize(
    ("scenario", "expected"),
    [
        (_simultaneous, ["ok", "held"]),
        (_late_writer, ["ok", "held", "ok"]),
        (_second_while_held, ["ok", "held", "ok"]),
        (_expired_holder, ["ok", "ok", "False"]),
        (_broken_by_emergency, ["ok", "ok", "lost"]),
        (_same_owner_again, ["ok", "ok", "ok"]),
        (_malformed_tag, ["ok", "False"]),
        (_three_at_once, ["ok", "held", "held"]),
        (_holder_refreshes_while_waiting, ["ok", "held"]),
        (_check_mode_sees_holder, ["ok", "held", "True"]),
        (_role_releases_in_a_later_call, ["ok", "ok", "1"]),
    ],
    ids=lambda v: v.__name__.strip("_") if callable(v) else None,
)
def test_adversarial_one_cutover_holds_the_lock(scenario, expected):
    """Stand-in: in-memory ELBv2 tag store, runs interleaved at the lock's settle wait. At most one run holds the
    lock in every interleaving; the loser names the holder and leaves its own entry behind."""
    store, clock = TagStore(), Clock()
    assert scenario(store, clock) == expected
    live_entries = bl.live(bl.parse_entries(store.tags), clock())
    assert len(live_entries) <= 1


def test_adversarial_lock_message_names_the_holder_and_the_fix():
    """Stand-in: in-memory ELBv2 tag store."""
    store, clock = TagStore(), Clock()
    make_lock(store, "aaaa", clock).acquire()
    with pytest.raises(bl.LockHeld) as err:
        make_lock(store, "bbbb", clock).acquire()
    assert "owner aaaa" in str(err.value) and "break_lock" in str(err.value) and "wrote nothing" in str(err.value)


# ---------------------------------------------------------------- controller watch


def write_proc(root: Path, procs: dict[int, tuple[int, int, int, str, str]]) -> None:
    """pid -> (ppid, session, start, state, argv0 basename)."""
    for path in root.glob("*"):
        for f in path.glob("*"):
            f.unlink()
        path.rmdir()
    for pid, (ppid, session, start, state, argv0) in procs.items():
        d = root / str(pid)
        d.mkdir()
        fields = [state, str(ppid), str(pid), str(session)] + ["0"] * 15 + [str(start)] + ["0"] * 5
        (d / "stat").write_text(f"{pid} (py (x)) " + " ".join(fields) + "\n")
        (d / "cmdline").write_bytes(b"\0".join([b"/usr/bin/python3", f"/venv/bin/{argv0}".encode(), b"x"]))


# module 500 -> sh 400 -> worker 300 (own session) -> ansible-playbook 200 -> bash 100
ALIVE = {
    500: (400, 300, 50, "S", "AnsiballZ_bluegreen.py"),
    400: (300, 300, 40, "S", "sh"),
    300: (200, 300, 30, "S", "ansible-playbook"),
    200: (100, 100, 20, "S", "ansible-playbook"),
    100: (1, 100, 10, "S", "bash"),
}


@pytest.mark.parametrize(
    ("change", "gone"),
    [
        ({}, False),
        ({100: None, 200: (1, 100, 20, "S", "ansible-playbook")}, False),  # nohup: the shell that started the play exited
        ({200: None, 300: (1, 300, 30, "S", "ansible-playbook")}, True),  # SIGKILL to the play: the worker is re-parented
        ({200: None, 300: (77, 300, 30, "S", "ansible-playbook")}, True),  # re-parented to a subreaper
        ({300: None, 400: (1, 300, 40, "S", "sh")}, True),  # the worker itself was killed
        ({300: (200, 300, 30, "Z", "ansible-playbook")}, True),  # the worker is a zombie
        ({300: (200, 300, 999, "S", "ansible-playbook")}, True),  # pid reused by another process
        ({400: None, 500: (1, 300, 50, "S", "AnsiballZ_bluegreen.py")}, True),  # the shell between died
    ],
)
def test_adversarial_controller_watch(tmp_path, change, gone):
    """Stand-in: a fake /proc (stat, cmdline). The module notices the controller is gone - and only then - whether
    the play was killed, re-parented, or its pid reused; a play started with nohup whose shell exits keeps going."""
    procs = dict(ALIVE)
    write_proc(tmp_path, procs)
    watch = ControllerWatch(pid=500, proc=tmp_path)
    assert [entry[0] for entry in watch.chain] == [500, 400, 300]
    for pid, value in change.items():
        if value is None:
            procs.pop(pid)
        else:
            procs[pid] = value
    write_proc(tmp_path, procs)
    assert bool(watch.gone()) is gone
