"""The real tritonserver (from the nvidia-pytriton wheel) on free loopback ports, and test model repositories."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from .ports import free_port, wait_until

if TYPE_CHECKING:
    from ansible_collections.inferops.triton_ecs.plugins.module_utils._triton_client import TritonClient

REPO_ROOT = Path(__file__).resolve().parents[2]
TRITON_HOME = REPO_ROOT / ".cache" / "tritonserver"
# The bundled model of the local rehearsal; every test model runs the same code, configured by parameters.
MODEL_SOURCE = REPO_ROOT / "examples" / "model_repository" / "simple" / "1" / "model.py"
STUB_PYTHON = "3.11"  # the stub links Debian's libpython3.11


def _wheel_dirs() -> tuple[Path, Path]:
    import pytriton

    site = Path(pytriton.__file__).resolve().parents[1]
    return site / "pytriton" / "tritonserver", site / "nvidia_pytriton.libs"


def triton_home() -> Path:
    """Lay out the wheel's server like /opt/tritonserver: bin/, backends/python with its stub, caches/, lib/."""
    marker = TRITON_HOME / ".complete"
    if marker.exists():
        return TRITON_HOME
    server, libs = _wheel_dirs()
    staging = TRITON_HOME.with_name("tritonserver.staging")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(server, staging, symlinks=True, ignore=shutil.ignore_patterns("python_backend_stubs", "__pycache__"))
    shutil.copy2(server / "python_backend_stubs" / STUB_PYTHON / "triton_python_backend_stub", staging / "backends" / "python")
    shutil.copytree(libs, staging / "lib", symlinks=True)
    (staging / ".complete").touch()
    shutil.rmtree(TRITON_HOME, ignore_errors=True)
    staging.rename(TRITON_HOME)
    return TRITON_HOME


def model_config(
    name: str, offset: float = 1.0, delay_ms: int = 0, fail_to_load: bool = False, instances: int = 1, fail_every: int = 0
) -> str:
    params = {"offset": str(offset), "delay_ms": str(delay_ms), "fail_to_load": "true" if fail_to_load else "false"}
    if fail_every:
        params["fail_every"] = str(fail_every)  # every Nth request answers an error (33: 3 %)
    parameters = "\n".join(f'parameters: {{ key: "{k}" value: {{ string_value: "{v}" }} }}' for k, v in params.items())
    return f"""name: "{name}"
backend: "python"
max_batch_size: 0
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] }} ]
instance_group [ {{ kind: KIND_CPU count: {instances} }} ]
{parameters}
"""


def write_model(repo: Path, name: str, versions: tuple[int, ...] = (1,), **config) -> Path:
    """A python-backend model in Triton's repository layout: <repo>/<name>/config.pbtxt and <version>/model.py."""
    model_dir = repo / name
    model_dir.mkdir(parents=True, exist_ok=True)
    (model_dir / "config.pbtxt").write_text(model_config(name, **config))
    for version in versions:
        (model_dir / str(version)).mkdir(exist_ok=True)
        shutil.copy2(MODEL_SOURCE, model_dir / str(version) / "model.py")
    return model_dir


class TritonServer:
    def __init__(self, model_repository: Path, log_dir: Path, models: tuple[str, ...] = (), extra_args: tuple[str, ...] = ()) -> None:
        self.model_repository = model_repository
        self.models = models
        self.extra_args = extra_args
        self.http_port, self.grpc_port, self.metrics_port = free_port(), free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.http_port}"
        self.metrics_url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        self.log_path = log_dir / f"triton-{self.http_port}.log"
        self._proc: subprocess.Popen | None = None

    def command(self) -> list[str]:
        home = triton_home()
        cmd = [
            str(home / "bin" / "tritonserver"),
            f"--model-repository={self.model_repository}",
            "--model-control-mode=explicit",
            f"--backend-directory={home / 'backends'}",
            f"--cache-directory={home / 'caches'}",
            f"--http-port={self.http_port}",
            f"--grpc-port={self.grpc_port}",
            f"--metrics-port={self.metrics_port}",
            "--allow-gpu-metrics=false",
            "--exit-timeout-secs=10",
        ]
        cmd += [f"--load-model={m}" for m in self.models]
        return cmd + list(self.extra_args)

    def start(self, wait_ready: bool = True) -> TritonServer:
        env = dict(os.environ, LD_LIBRARY_PATH=str(triton_home() / "lib"))
        log = self.log_path.open("w")
        self._proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, env=env)
        wait_until(self.is_live, 60, "tritonserver live")
        if wait_ready:
            wait_until(self.is_ready, 60, "tritonserver ready")
        return self

    @property
    def client(self) -> TritonClient:
        """The collection's own Triton client on this server's HTTP port."""
        # Imported here: `python -m tests.harness.images` uses this file without the collection on sys.path.
        from ansible_collections.inferops.triton_ecs.plugins.module_utils._triton_client import TritonClient

        return TritonClient(self.url, timeout_s=2)

    def is_live(self) -> bool:
        if self._proc and self._proc.poll() is not None:
            raise RuntimeError(f"tritonserver exited with {self._proc.returncode}; see {self.log_path}")
        return self.client.live()

    def is_ready(self) -> bool:
        return self.client.ready()

    def post(self, path: str, body: dict | None = None) -> tuple[int, dict | list | None]:
        status, raw = self.client.request("POST", path, body or {}, timeout_s=60)
        return status, json.loads(raw) if raw else None

    def infer(self, model: str, values: list[float], version: str = "") -> list[float]:
        path = f"/v2/models/{model}" + (f"/versions/{version}" if version else "") + "/infer"
        body = {"inputs": [{"name": "INPUT0", "shape": [len(values)], "datatype": "FP32", "data": values}]}
        status, result = self.post(path, body)
        if status != 200:
            raise RuntimeError(f"inference on {model} failed with {status}: {result}")
        return result["outputs"][0]["data"]

    def stop(self, sig: int = signal.SIGTERM) -> int | None:
        if not self._proc:
            return None
        self._proc.send_signal(sig)
        try:
            code = self._proc.wait(30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            code = self._proc.wait(10)
        self._proc = None
        return code
