# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""Time for a blue/green run: monotonic time, sleeps, and the waits the caller asked for (tests replace it)."""

from __future__ import annotations

import time
from datetime import datetime, timezone


class Clock:
    """Monotonic time and sleeps; `told_waits_s` adds up the waits the caller asked for (bake, termination, quiet)."""

    def __init__(self) -> None:
        self.told_waits_s = 0.0

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    def told_sleep(self, seconds: float) -> None:
        start = self.monotonic()
        self.sleep(seconds)
        self.told_waits_s += self.monotonic() - start

    @staticmethod
    def utcnow() -> datetime:
        """Wall time, for the windows CloudWatch is asked about."""
        return datetime.now(timezone.utc)

    @staticmethod
    def stamp() -> str:
        return datetime.now(timezone.utc).isoformat(timespec="milliseconds")
