"""The triton_image role's image on the CPU test base: build it through the role, run it, load it, stop it.

Used by tests/integration/test_triton_image.py and bench/drain.py (and reusable by the deploy rehearsal).
Containers are named with the `tti-` prefix; each is removed by `TritonContainer.remove()`.
"""

from __future__ import annotations

import json
import stat
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from .ansible import PlaybookRun, run_playbook
from .docker_triton import TritonInDocker
from .images import TRITON_CPU_BASE, triton_cpu_base
from .ports import free_port

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_PLAYBOOK = REPO_ROOT / "tests" / "integration" / "playbooks" / "triton_image_build.yml"
REGISTRY = "127.0.0.1:5000"
ROLE = "inferops.triton_ecs.triton_image"


def source_checkout(path: Path) -> Path:
    """A throwaway git checkout with one commit: the role tags the image with its SHA (stable while the test runs)."""
    path.mkdir(parents=True, exist_ok=True)
    if not (path / ".git").exists():
        git = ["git", "-C", str(path), "-c", "user.name=test", "-c", "user.email=test@example.invalid"]
        subprocess.run([*git, "init", "-q"], check=True)
        subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "source"], check=True)
    return path


def role_vars(build_dir: Path, source_dir: Path, repository: str, **overrides) -> dict:
    """Settings for the role on the CPU base: unpinned local base, loopback registry, no GPU required."""
    base_repository, base_tag = TRITON_CPU_BASE.rsplit(":", 1)
    settings = {
        "triton_image_base_repository": base_repository,
        "triton_image_base_tag": base_tag,
        "triton_image_allow_unpinned_base": True,
        "triton_image_base_pull": False,
        "triton_image_source_dir": str(source_checkout(source_dir)),
        "triton_image_source_url": "https://example.invalid/inferops/triton_ecs",
        "triton_image_registry": REGISTRY,
        "triton_image_registry_insecure": True,
        "triton_image_repository": repository,
        "triton_image_build_dir": str(build_dir),
        "triton_image_require_gpu": False,
        "triton_image_server_extra_args": ["--allow-gpu-metrics=false"],
    }
    settings.update(overrides)
    return settings


def build_image(settings: dict, check: bool = False, env: dict[str, str] | None = None) -> PlaybookRun:
    triton_cpu_base()
    return run_playbook(BUILD_PLAYBOOK, extra_vars=settings, check=check, env=env)


def task_result(run: PlaybookRun, name: str) -> dict:
    return run.result(f"{ROLE} : {name}")


def digest_ref(run: PlaybookRun) -> str:
    return task_result(run, "Record the pushed digest reference")["ansible_facts"]["triton_image_digest_ref"]


def registry_manifest_digest(repository: str, tag: str) -> str:
    req = urllib.request.Request(
        f"http://{REGISTRY}/v2/{repository}/manifests/{tag}",
        method="HEAD",
        headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.headers.get("Docker-Content-Digest", "")
    except urllib.error.HTTPError as err:
        if err.code == 404:
            return ""
        raise


def image_size_bytes(ref: str) -> int:
    out = subprocess.run(["docker", "image", "inspect", "--format", "{{.Size}}", ref], capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


class TritonContainer(TritonInDocker):
    """`docker run` of the role's image with a host model repository mounted read-only at /models."""

    def __init__(
        self,
        image: str,
        models: Path,
        env: dict[str, str] | None = None,
        shm_mb: int = 256,
        args: tuple[str, ...] = (),
        extra_docker_args: tuple[str, ...] = (),
    ) -> None:
        self.image = image
        self.models = models
        self.env = env or {}
        self.shm_mb = shm_mb
        self.args = args
        self.extra_docker_args = extra_docker_args
        self.name = f"tti-{uuid.uuid4().hex[:10]}"
        self.http_port, self.metrics_port = free_port(), free_port()
        self.url = f"127.0.0.1:{self.http_port}"
        self.started_at: float | None = None

    @property
    def http_url(self) -> str:
        return f"http://{self.url}"

    def start(self) -> TritonContainer:
        cmd = ["docker", "run", "-d", "--name", self.name, f"--shm-size={self.shm_mb}m"]
        cmd += ["-p", f"127.0.0.1:{self.http_port}:8000", "-p", f"127.0.0.1:{self.metrics_port}:8002"]
        cmd += ["-v", f"{self.models}:/models:ro"]
        for key, value in self.env.items():
            cmd += ["-e", f"{key}={value}"]
        self.started_at = time.monotonic()
        subprocess.run([*cmd, *self.extra_docker_args, self.image, *self.args], check=True, capture_output=True)
        return self

    def wait_exit(self, timeout_s: float) -> int:
        out = subprocess.run(["docker", "wait", self.name], capture_output=True, text=True, timeout=timeout_s, check=True)
        return int(out.stdout.strip())

    def healthcheck(self, *args: str) -> tuple[int, str]:
        """Run the image's health check inside the container (as ECS does); (exit code, its output)."""
        proc = subprocess.run(
            ["docker", "exec", self.name, "/opt/inferops/bin/triton_healthcheck.py", *args],
            check=False,
            capture_output=True,
            text=True,
            timeout=30,
        )
        return proc.returncode, (proc.stdout + proc.stderr).strip()

    def stop(self, timeout_s: int = 60) -> tuple[float, int]:
        """`docker stop -t timeout_s`: (seconds it took, the container's exit code)."""
        started = time.monotonic()
        subprocess.run(["docker", "stop", "-t", str(timeout_s), self.name], check=True, capture_output=True, timeout=timeout_s + 30)
        took = time.monotonic() - started
        return took, self.exit_code()

    def remove(self) -> None:
        subprocess.run(["docker", "rm", "-f", self.name], check=False, capture_output=True)


@dataclass
class Request:
    started: float
    ended: float = 0.0
    error: str = ""


@dataclass
class DrainRun:
    """What happened around one `docker stop` under load (times relative to the stop call)."""

    requests: list[Request] = field(default_factory=list)
    stop_seconds: float = 0.0
    exit_code: int = -1

    def accepted_before_stop(self) -> list[Request]:
        return [r for r in self.requests if r.started < 0]

    def in_flight_during_stop(self) -> list[Request]:
        """Requests running while the container was stopping: in flight at the stop, or sent during the lag."""
        return [r for r in self.requests if r.ended > 0]

    @property
    def failed_during_stop(self) -> list[Request]:
        """Failures among every request sent before the clients quit (before the stop and during the lag)."""
        return [r for r in self.requests if r.error]

    @property
    def longest_inflight_seconds(self) -> float:
        return max((r.ended - r.started for r in self.in_flight_during_stop()), default=0.0)

    @property
    def last_completion_after_stop(self) -> float:
        return max((r.ended for r in self.requests if not r.error), default=0.0)


def stop_under_load(
    container: TritonContainer,
    model: str,
    clients: int = 4,
    warmup_s: float = 1.5,
    lag_s: float = 0.5,
    stop_timeout_s: int = 60,
) -> DrainRun:
    """Concurrent tritonclient clients send requests; `docker stop` while they are in flight.

    Like a load balancer that is still finishing the target's deregistration, clients keep sending for lag_s after
    the stop began, then send nothing more. The drain must serve those late requests too."""
    import numpy as np
    import tritonclient.http as httpclient

    run = DrainRun()
    lock = threading.Lock()
    stopping = threading.Event()
    stop_at: list[float] = []

    def client_loop() -> None:
        data = np.array([1.0, 2.0], dtype=np.float32)
        while not stopping.is_set():
            inputs = [httpclient.InferInput("INPUT0", list(data.shape), "FP32")]
            inputs[0].set_data_from_numpy(data)
            request = Request(time.monotonic())
            # A new connection per request, as a load balancer opens them: once tritonserver has SIGTERM it
            # accepts no new connection, so only a drain keeps these working.
            client = httpclient.InferenceServerClient(container.url, connection_timeout=10, network_timeout=stop_timeout_s + 30)
            try:
                output = client.infer(model, inputs).as_numpy("OUTPUT0")
                if output is None or output.tolist() != (data + 1).tolist():
                    request.error = f"wrong output {output}"
            except Exception as exc:  # any client failure counts as a failed request
                request.error = f"{type(exc).__name__}: {exc}"
            finally:
                client.close()
            request.ended = time.monotonic()
            with lock:
                run.requests.append(request)

    threads = [threading.Thread(target=client_loop, daemon=True) for _client in range(clients)]
    for thread in threads:
        thread.start()
    time.sleep(warmup_s)  # let the clients fill the queue before the stop
    stop_at.append(time.monotonic())
    lag = threading.Timer(lag_s, stopping.set)
    lag.start()
    run.stop_seconds, run.exit_code = container.stop(stop_timeout_s)
    lag.join()
    for thread in threads:
        thread.join(stop_timeout_s + 30)
    for request in run.requests:
        request.started -= stop_at[0]
        request.ended -= stop_at[0]
    return run


def world_readable(path: Path) -> Path:
    """The container runs as uid 1000: the mounted model repository must be readable by it."""
    for item in [path, *path.rglob("*")]:
        mode = item.stat().st_mode
        item.chmod(mode | stat.S_IROTH | (stat.S_IXOTH if item.is_dir() else 0))
    return path


def infer(container: TritonContainer, model: str, values: list[float]) -> list[float]:
    body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [len(values)], "datatype": "FP32", "data": values}]}).encode()
    req = urllib.request.Request(f"http://{container.url}/v2/models/{model}/infer", data=body, method="POST")
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())["outputs"][0]["data"]
