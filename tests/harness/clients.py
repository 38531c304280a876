"""Client threads that send requests while a `with` block runs: the start and stop every load of the tests and
benchmarks shares (canary.PacedClients, the model agent's and the release's clients, bench/hot_reload.py's load).

A subclass gives the arguments of each thread to `__init__` and sends in `_run(*args)` until `stop_event` is set;
it keeps its own answers (under its own lock where threads share a counter).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any, Self


class ClientThreads:
    """One daemon thread per entry of `thread_args`, each running `self._run(*args)`; started on entering the `with`
    block, told to stop on leaving it and joined for at most `join_timeout_s` each."""

    def __init__(self, thread_args: Iterable[tuple[Any, ...]], join_timeout_s: float = 30) -> None:
        self.stop_event = threading.Event()
        self.join_timeout_s = join_timeout_s
        self.threads = [threading.Thread(target=self._run, args=args, daemon=True) for args in thread_args]

    def _run(self, *args: Any) -> None:
        raise NotImplementedError("a ClientThreads subclass sends its requests in _run")

    def __enter__(self) -> Self:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_event.set()
        for thread in self.threads:
            thread.join(self.join_timeout_s)
