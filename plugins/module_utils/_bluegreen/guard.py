# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""What a cutover checks before each write and during each wait: its controller still runs, it still holds the lock.

A cutover whose controller is gone stops (`ControllerGone`) at its next write or within `SLICE_S` of a wait; a
cutover whose lock was broken stops (`LockLost`) at its next write. Neither writes anything on the way out, not
even a rollback: the run that took over decides.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import InputError
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.clock import Clock
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.controller_watch import ControllerWatch
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.lock import LOCK_TTL_S, CutoverLock, LockLost, new_owner

__all__ = ["ControllerGone", "CutoverGuard", "GuardedClock", "LockLost", "StateChanged", "WriteRefused"]


class ControllerGone(Exception):
    """The Ansible controller that started this module has exited."""


class StateChanged(Exception):
    """AWS no longer shows what this run last saw or wrote: another run or a person changed it."""


WriteRefused = (ControllerGone, LockLost, StateChanged)


class CutoverGuard:
    """`keep_lock`: the caller continues the cutover in a later module call (the role's phase tasks), so a run that
    stops after `stop_after` with phases left keeps the lock; any other end releases it."""

    def __init__(self, watch: ControllerWatch, lock: CutoverLock | None, break_lock: bool = False, keep_lock: bool = False) -> None:
        self.watch = watch
        self.lock = lock
        self.break_lock = break_lock
        self.keep_lock = keep_lock

    def check_free(self) -> None:
        """Read-only, at the start of every run (check mode included): another run holding the lock fails this one."""
        self.check_controller()
        if self.lock is not None and not self.break_lock:
            self.lock.check_free()

    def take_lock(self) -> None:
        self.check_controller()
        if self.lock is not None:
            self.lock.acquire(self.break_lock)

    def record(self, from_color: str, to_color: str, task_definition: str, full_count: int | None = None) -> None:
        self.before_write()
        if self.lock is not None:
            self.lock.record(from_color, to_color, task_definition, full_count)

    @staticmethod
    def refuses(error: BaseException) -> bool:
        """Whether this error means the run must not write any more (not even to clean up)."""
        return isinstance(error, WriteRefused)

    def end(self, complete: bool, error: BaseException | None = None) -> None:
        """Release the lock when the run ends, unless the caller continues it, or this run must not write any more."""
        if self.lock is None or (error is not None and self.refuses(error)) or (self.keep_lock and not complete):
            return
        self.lock.release(taken_earlier=self.keep_lock)

    def check_controller(self) -> None:
        reason = self.watch.gone()
        if reason:
            raise ControllerGone(f"{reason}; the cutover stops here without writing (re-run the play to continue or roll back)")

    def before_write(self) -> None:
        self.check_controller()
        if self.lock is not None:
            self.lock.verify()

    def while_waiting(self) -> None:
        self.check_controller()
        if self.lock is not None and self.lock.refresh_due():
            self.lock.verify()


class GuardedClock(Clock):
    """A clock whose waits are cut into slices, the guard checked after each one."""

    SLICE_S = 0.5

    def __init__(self, guard: CutoverGuard) -> None:
        super().__init__()
        self.guard = guard

    def sleep(self, seconds: float) -> None:
        end = self.monotonic() + seconds
        while True:
            self.guard.while_waiting()
            left = end - self.monotonic()
            if left <= 0:
                return
            super().sleep(min(self.SLICE_S, left))


def cutover_guard(params: dict[str, Any], elbv2: Any) -> CutoverGuard:
    """The guard of one bluegreen module run: its controller watched, the lock on the production listener or rule."""
    owner = params.get("lock_owner") or new_owner()
    arn = params.get("listener_rule_arn") or params["listener_arn"]
    lock = CutoverLock(elbv2, arn, params["name"], owner, params["lock_ttl_s"])
    return CutoverGuard(ControllerWatch(), lock, break_lock=params["break_lock"], keep_lock=bool(params.get("lock_owner")))


def discovering_guard(params: dict[str, Any], elbv2: Any) -> tuple[CutoverGuard, Callable[[str], CutoverLock]]:
    """The guard of a run that finds the application's production listener or rule itself (bluegreen_rollback,
    ami_rollout): it holds no lock until then, and `make_lock(arn)` makes the lock once the resource is known.
    InputError when lock_ttl_s is out of range (before any AWS call)."""
    low, high = LOCK_TTL_S
    if not low <= params["lock_ttl_s"] <= high:
        raise InputError(f"lock_ttl_s is {params['lock_ttl_s']}: give a value between {low} and {high}")
    owner = new_owner()
    guard = CutoverGuard(ControllerWatch(), None, break_lock=params["break_lock"])
    return guard, lambda arn: CutoverLock(elbv2, arn, params["name"], owner, params["lock_ttl_s"])
