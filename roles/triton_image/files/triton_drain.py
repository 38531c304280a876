#!/usr/bin/env python3
"""Wait until Triton is quiet: no queued requests and no completions for a short quiet period.

Used by triton_entrypoint.py on SIGTERM (before it forwards the signal to tritonserver), and on its own as
`triton_drain.py [--timeout-s N] [--quiet-s N]` (exit 0 when quiet, 1 when the drain timeout passed first).

Quiet means: nv_inference_pending_request_count (a gauge of QUEUED requests) is zero in the latest sample, and
every sample for quiet_s was quiet by `_triton_client.is_quiet` (nothing queued, the finished-request counters
still), the definition the cutover's drain uses too.
Requests already executing are finished by tritonserver itself after SIGTERM (within --exit-timeout-secs); the
drain exists so that traffic still arriving (a load balancer that has not finished deregistering the target) is
served instead of refused. Python stdlib only: it runs inside the Triton image, with the collection's
plugins/module_utils/_triton_client.py copied beside it at build time.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass

from _triton_client import FAILURE, PENDING, SUCCESS, Sample, TritonClient, is_quiet, sample_from
from _triton_client import sum_metrics as parse_metrics

# Re-exported: the entrypoint and callers of this script's earlier versions read them from here.
__all__ = ["FAILURE", "PENDING", "SUCCESS", "QuietTracker", "Sample", "parse_metrics", "sample_from", "wait_until_quiet"]

HTTP_TIMEOUT_S = 2.0
DEFAULT_QUIET_S = "0.3"  # longer than the gap between answers while a client keeps sending


class QuietTracker:
    """Remembers the last scrape that was not quiet after the one before it; thread-safe (a watcher and the drain
    both feed it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: Sample | None = None
        self._last_change_at: float | None = None

    def observe(self, sample: Sample, now: float) -> None:
        with self._lock:
            if self._last is None or not is_quiet(self._last, sample):
                self._last_change_at = now
            self._last = sample

    def quiet_for(self, now: float) -> float:
        """Seconds the counters have certainly been stable (0 without a sample): measured from the sample that saw
        the last change, so it never overstates the quiet time."""
        with self._lock:
            return 0.0 if self._last_change_at is None else now - self._last_change_at

    def is_quiet(self, now: float, quiet_s: float) -> bool:
        with self._lock:
            last, changed_at = self._last, self._last_change_at
        return last is not None and changed_at is not None and last.pending == 0 and now - changed_at >= quiet_s


@dataclass(frozen=True)
class DrainResult:
    quiet: bool  # False: the drain timeout passed (or metrics stayed unreadable) first
    waited_s: float
    reason: str


def fetch_metrics(url: str, timeout_s: float = HTTP_TIMEOUT_S) -> dict[str, float]:
    return TritonClient(url, timeout_s).metrics(url)


def wait_until_quiet(
    fetch: Callable[[], dict[str, float]],
    tracker: QuietTracker,
    timeout_s: float,
    quiet_s: float,
    poll_s: float = 0.1,
    max_fetch_errors: int = 3,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> DrainResult:
    """Poll metrics until quiet (returns at once when the tracker already saw a long quiet stretch), bounded by
    timeout_s. After max_fetch_errors failed reads in a row it gives up: without metrics there is nothing to wait on."""
    start = clock()
    errors = 0
    while True:
        now = clock()
        try:
            tracker.observe(sample_from(fetch()), now)
            errors = 0
        except (OSError, ValueError) as exc:
            errors += 1
            if errors >= max_fetch_errors:
                return DrainResult(False, now - start, f"metrics unreadable ({exc}); not waiting")
        if tracker.is_quiet(now, quiet_s):
            return DrainResult(True, now - start, f"quiet for {tracker.quiet_for(now):.1f}s")
        if now - start >= timeout_s:
            return DrainResult(False, now - start, f"drain timeout {timeout_s:g}s passed with traffic still flowing")
        sleep(max(0.0, min(poll_s, start + timeout_s - now)))


def models_still_loaded(index: list[dict]) -> list[str]:
    """Names of models in a repository index (POST /v2/repository/index) that are READY or still UNLOADING."""
    return sorted({e["name"] for e in index if e.get("name") and e.get("state") in ("READY", "UNLOADING")})


def repository_index(http_url: str, timeout_s: float = HTTP_TIMEOUT_S) -> list[dict]:
    """Triton's repository index: every model version it knows, with its state."""
    index = TritonClient(http_url, timeout_s).repository_index()
    if not isinstance(index, list):
        raise ValueError(f"repository index is not a list: {index!r}")
    return index


def unload_models(
    http_url: str,
    timeout_s: float,
    poll_s: float = 0.05,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[bool, list[str]]:
    """Unload every loaded model and wait until none is left (Triton lets in-flight inferences finish first).

    Done before SIGTERM because tritonserver's own shutdown checks for live models once a second: a server with
    nothing loaded exits at once. Returns (all unloaded, models that were loaded)."""
    deadline = clock() + timeout_s
    loaded = models_still_loaded(repository_index(http_url))
    client = TritonClient(http_url, HTTP_TIMEOUT_S)
    for name in loaded:
        client.unload(urllib.parse.quote(name, safe=""))
    while clock() < deadline:
        if not models_still_loaded(repository_index(http_url)):
            return True, loaded
        sleep(poll_s)
    return False, loaded


def http_url(env: dict[str, str]) -> str:
    return env.get("TRITON_HEALTH_URL") or f"http://127.0.0.1:{env.get('TRITON_HTTP_PORT', '8000')}"


def metrics_url(env: dict[str, str]) -> str:
    return env.get("TRITON_METRICS_URL") or f"http://127.0.0.1:{env.get('TRITON_METRICS_PORT', '8002')}/metrics"


def main(argv: list[str] | None = None, env: dict[str, str] | None = None) -> int:
    env = dict(os.environ if env is None else env)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--metrics-url", default=metrics_url(env))
    parser.add_argument("--timeout-s", type=float, default=float(env.get("TRITON_DRAIN_TIMEOUT_S", "30")))
    parser.add_argument("--quiet-s", type=float, default=float(env.get("TRITON_DRAIN_QUIET_S", DEFAULT_QUIET_S)))
    args = parser.parse_args(argv)
    result = wait_until_quiet(lambda: fetch_metrics(args.metrics_url), QuietTracker(), args.timeout_s, args.quiet_s)
    print(f"triton-drain: {'quiet' if result.quiet else 'not quiet'} after {result.waited_s:.1f}s: {result.reason}")
    return 0 if result.quiet else 1


if __name__ == "__main__":
    sys.exit(main())
