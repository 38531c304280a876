"""The image's stop budget against a stand-in tritonserver (issue 12, class "the image's stop budget").

Stand-in: a small Python program in place of tritonserver (TRITON_SERVER_BIN) that behaves as tritonserver does
while a model loads: it ignores SIGTERM, and so may the "backend stub" it starts. The real entrypoint runs as a
process; tests/integration/test_adversarial_image_stop.py does the same with real dockerd and the real tritonserver.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

FILES = Path(__file__).resolve().parents[2] / "roles" / "triton_image" / "files"
# The scripts import the collection's Triton client, which the image build copies beside them.
TRITON_CLIENT_DIR = Path(__file__).resolve().parents[2] / "plugins" / "module_utils"
sys.path[:0] = [str(FILES), str(TRITON_CLIENT_DIR)]

import triton_entrypoint as entrypoint  # noqa: E402

# mode: what the stand-in does on SIGTERM. "stub" starts a child that ignores SIGTERM too (a python-backend stub).
STAND_IN = textwrap.dedent(
    """
    import os, signal, subprocess, sys, time
    mode = os.environ["STAND_IN_MODE"]
    if mode in ("ignore", "stub"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if mode == "stub":
        stub = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
        with open(os.environ["STAND_IN_STUB_PID"], "w") as f:
            f.write(str(stub.pid))
    if mode == "slow-exit":
        signal.signal(signal.SIGTERM, lambda *_: (time.sleep(1), sys.exit(0)))
    print("stand-in serving", flush=True)
    time.sleep(600)
    """
)


def start(tmp_path: Path, mode: str, **env: str) -> subprocess.Popen:
    server = tmp_path / "tritonserver"
    server.write_text(f"#!{sys.executable}\n{STAND_IN}")
    server.chmod(0o755)
    environ = {
        **os.environ,
        "TRITON_SERVER_BIN": str(server),
        "TRITON_REQUIRE_GPU": "false",
        "TRITON_METRICS_URL": "http://127.0.0.1:9/metrics",  # nothing listens: the drain gives up at once
        "TRITON_HEALTH_URL": "http://127.0.0.1:9",
        "TRITON_DRAIN_WATCH_S": "60",
        "STAND_IN_MODE": mode,
        "STAND_IN_STUB_PID": str(tmp_path / "stub.pid"),
        "PYTHONPATH": str(TRITON_CLIENT_DIR),
        **env,
    }
    proc = subprocess.Popen(
        [sys.executable, str(FILES / "triton_entrypoint.py")], env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "stand-in serving"  # its SIGTERM handling is in place
    return proc


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


CASES = [
    # (case id, stand-in mode, environment, signals to send, longest stop, whether the budget must cut it short)
    ("load-ignores-sigterm", "ignore", {"TRITON_STOP_TIMEOUT_S": "4"}, 1, 4.0, True),
    ("load-with-stub", "stub", {"TRITON_STOP_TIMEOUT_S": "4"}, 1, 4.0, True),
    ("second-sigterm-during-load", "ignore", {"TRITON_STOP_TIMEOUT_S": "4"}, 2, 4.0, True),
    ("budget-below-exit-timeout", "ignore", {"TRITON_STOP_TIMEOUT_S": "4", "TRITON_EXIT_TIMEOUT_S": "30"}, 1, 4.0, True),
    ("exits-on-sigterm", "exit", {"TRITON_STOP_TIMEOUT_S": "5"}, 1, 2.0, False),
    ("slow-but-in-budget", "slow-exit", {"TRITON_STOP_TIMEOUT_S": "6"}, 1, 4.0, False),
]


@pytest.mark.parametrize(("mode", "env", "signals", "longest", "cut"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_adversarial_image_stop_budget_ends_the_container_in_time(tmp_path, mode, env, signals, longest, cut):
    """Stand-in: a tritonserver stand-in that ignores SIGTERM like one loading a model. The entrypoint ends within budget."""
    proc = start(tmp_path, mode, **env)
    started = time.monotonic()
    for _signal in range(signals):
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.2)
    _stdout, stderr = proc.communicate(timeout=longest + 10)
    took = time.monotonic() - started
    assert took <= longest + 0.5, (took, stderr)
    assert ("stop budget of" in stderr and "Cut short:" in stderr) is cut, stderr
    if cut:
        assert "models to load at start" in stderr  # nothing answered on HTTP: the log says so
    if mode == "stub":
        stub = int((tmp_path / "stub.pid").read_text())
        deadline = time.monotonic() + 2
        while alive(stub) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(stub), "the backend stub outlived the container's entrypoint"


@pytest.mark.parametrize(
    ("env", "budget"),
    [
        ({"TRITON_STOP_TIMEOUT_S": "90"}, 88.0),
        ({"TRITON_STOP_TIMEOUT_S": "2"}, 1.0),
        ({"TRITON_DRAIN_TIMEOUT_S": "30", "TRITON_EXIT_TIMEOUT_S": "30"}, 77.0),
        ({}, 77.0),
    ],
    ids=["ecs-stop-timeout", "tiny-stop-timeout", "from-timeouts", "defaults"],
)
def test_adversarial_image_stop_budget_fits_the_stop_timeout(env, budget):
    """Stand-in: none (a pure function). The budget ends before ECS's stopTimeout, or covers the drain, unload and exit."""
    assert entrypoint.stop_budget_s(env) == budget


@pytest.mark.parametrize(
    ("index", "says"),
    [
        (None, "did not answer"),
        ([{"name": "bert", "version": "2", "state": "LOADING"}], "bert 2 LOADING"),
        (
            [{"name": "a", "version": "1", "state": "READY"}, {"name": "b", "version": "3", "state": "UNLOADING"}],
            "b 3 UNLOADING; still serving: a",
        ),
        ([], "no model load in progress"),
    ],
    ids=["no-answer", "loading", "unloading-and-ready", "idle"],
)
def test_adversarial_image_stop_log_names_what_was_cut_short(index, says):
    """Stand-in: none (a pure function). The log line names the models whose load or unload the kill interrupts."""
    assert says in entrypoint.what_is_cut_short(index, "bert")
