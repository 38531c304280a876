"""A SIGTERM while Triton loads a model still ends the container in time (issue 12, class "the image's stop budget").

Stand-in: real dockerd and the locally built CPU Triton image (tests/harness/images.py, the wheel's real
tritonserver), running this checkout's entrypoint (roles/triton_image/files, mounted read-only at the path the role's
image uses). A python-backend model whose initialize() takes minutes keeps a load in flight; tritonserver itself
does not stop while a load request is open, so only the entrypoint's budget can end the container before
`docker stop`'s (ECS's) SIGKILL.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from tests.harness.images import triton_cpu_base
from tests.harness.ports import wait_until
from tests.harness.triton import write_model
from tests.harness.triton_image import TritonContainer, world_readable

FILES = Path(__file__).resolve().parents[2] / "roles" / "triton_image" / "files"
# The scripts import the collection's Triton client, which the image build copies beside them.
TRITON_CLIENT = Path(__file__).resolve().parents[2] / "plugins" / "module_utils" / "_triton_client.py"
STOP_TIMEOUT_S = 8  # ECS's stopTimeout stand-in: the entrypoint's budget is 2 s less
SLOW_MODEL = """import time


class TritonPythonModel:
    def initialize(self, args):
        time.sleep(600)  # a model that takes minutes to load

    def execute(self, requests):
        return []
"""


def slow_repository(root: Path) -> Path:
    write_model(root, "fast")
    slow = write_model(root, "slow")
    (slow / "1" / "model.py").write_text(SLOW_MODEL)
    return world_readable(root)


def post(container: TritonContainer, path: str, timeout_s: float = 2) -> bytes:
    request = urllib.request.Request(f"http://{container.url}{path}", data=b"{}", method="POST")
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        return response.read()


def load_in_background(container: TritonContainer, model: str) -> None:
    def load() -> None:
        with contextlib.suppress(OSError):  # the container is stopped under it: that is the point
            post(container, f"/v2/repository/models/{model}/load", timeout_s=120)

    threading.Thread(target=load, daemon=True).start()
    wait_until(lambda: b'"LOADING"' in post(container, "/v2/repository/index"), 60, f"{model} LOADING", interval_s=0.1)


# (case id, models loaded at start, model loaded through the API during the stop, SIGTERMs, what the log must say)
CASES = [
    ("api-load", "", "slow", 1, "Cut short: model loads/unloads in progress: slow 1 LOADING"),
    ("api-load-while-serving", "fast", "slow", 1, "unloaded 1 model(s)"),
    ("api-load-second-sigterm", "fast", "slow", 2, "slow 1 LOADING"),
    ("startup-load", "slow", None, 1, "SIGTERM received"),
]


@pytest.mark.parametrize(("at_start", "api_load", "signals", "says"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_adversarial_image_stop_during_a_model_load_ends_within_the_budget(tmp_path, at_start, api_load, signals, says):
    """Stand-in: real dockerd + the locally built CPU Triton image. `docker stop -t 60` returns within STOP_TIMEOUT_S."""
    env = {
        "TRITON_LOAD_MODELS": at_start,
        "TRITON_REQUIRE_GPU": "false",
        "TRITON_STOP_TIMEOUT_S": str(STOP_TIMEOUT_S),
        "TRITON_DRAIN_TIMEOUT_S": "1",
        "TRITON_EXIT_TIMEOUT_S": "2",
        "TRITON_EXTRA_ARGS": "--allow-gpu-metrics=false --disable-auto-complete-config",
        "LD_LIBRARY_PATH": "/opt/tritonserver/lib",  # the role's image registers it with ldconfig; the bare base does not
        "PYTHONPATH": "/opt/inferops/lib",
    }
    mount = (
        "-v",
        f"{FILES}:/opt/inferops/bin:ro",
        "-v",
        f"{TRITON_CLIENT}:/opt/inferops/lib/_triton_client.py:ro",
        "--entrypoint",
        "python3",
    )
    container = TritonContainer(
        triton_cpu_base(),
        slow_repository(tmp_path / "models"),
        env=env,
        args=("/opt/inferops/bin/triton_entrypoint.py",),
        extra_docker_args=mount,
    )
    container.start()
    try:
        if api_load:
            container.wait_ready(120)
            load_in_background(container, api_load)
        else:
            wait_until(lambda: "loading: slow:1" in container.logs(), 60, "the start-up load of slow", interval_s=0.2)
        started = time.monotonic()
        for _signal in range(signals - 1):
            subprocess.run(["docker", "kill", "-s", "TERM", container.name], check=True, capture_output=True)
            time.sleep(0.3)
        took, exit_code = container.stop(timeout_s=60)
        took = time.monotonic() - started
        logs = container.logs()
        assert took <= STOP_TIMEOUT_S, f"stopped after {took:.1f}s; docker's SIGKILL would have decided\n{logs[-3000:]}"
        assert says in logs, logs[-3000:]
        assert exit_code != 0 or not api_load
    finally:
        container.remove()
