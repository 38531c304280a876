"""Free loopback ports, readiness polling and stopping of the servers the tests start."""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(check: Callable[[], bool], timeout_s: float, what: str, interval_s: float = 0.1) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except OSError:
            pass
        time.sleep(interval_s)
    raise TimeoutError(f"{what} not ready after {timeout_s} s")


def stop_detached(state_file: Path, grace_s: float) -> None:
    """`down` of a server that `up` started detached for molecule's steps: SIGTERM to the pid its state file records
    (gone already is fine), `grace_s` for it to close, then the state file removed."""
    state = json.loads(state_file.read_text()) if state_file.exists() else {}
    if state.get("pid"):
        try:
            os.kill(state["pid"], signal.SIGTERM)
            time.sleep(grace_s)
        except ProcessLookupError:
            pass
    state_file.unlink(missing_ok=True)
