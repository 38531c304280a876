#!/usr/bin/env python3
"""Container entrypoint: pre-start self-check, then tritonserver; on SIGTERM drain first, then forward the signal.

A failed self-check prints ONE line on stderr (what the ECS console shows next to the stopped task) and exits 78.
Configuration comes from the environment (the image sets defaults; the task definition may override them):
  TRITON_SERVER_BIN          /opt/tritonserver/bin/tritonserver
  TRITON_MODEL_REPOSITORY    /models
  TRITON_MODEL_CONTROL_MODE  explicit
  TRITON_LOAD_MODELS         models loaded at start, comma separated (explicit mode)
  INFEROPS_MODEL_VIEW        "task-definition": serve the model agent's view of this task's release,
                             <repository>/.task-definitions/<family>-<revision>/ (family and revision from the ECS task
                             metadata endpoint, ECS_CONTAINER_METADATA_URI_V4), loading every model in it; any other
                             non-empty value names the view directly; unset: serve the repository as it is
  INFEROPS_MODEL_VIEW_WAIT_S longest wait for that view to appear (240): the agent builds it for the release
  INFEROPS_METRICS_TARGET_FILE  where to write the metrics sidecar's scrape target (a Prometheus file_sd JSON on a
                             task volume both containers mount): Triton's metrics port on localhost, labelled with the
                             task's Service and Color (the service's -blue/-green suffix) read from the task metadata
                             endpoint, so Triton's own figures split by colour. Unset: nothing is written. A failure
                             never stops Triton: the target is then written without those labels (application-wide)
  TRITON_HTTP_PORT / TRITON_GRPC_PORT / TRITON_METRICS_PORT   8000 / 8001 / 8002
  TRITON_EXIT_TIMEOUT_S      tritonserver --exit-timeout-secs (30)
  TRITON_METRICS_INTERVAL_MS tritonserver --metrics-interval-ms (250); tritonserver's exit waits for its metrics
                             thread's next tick, so this also bounds that part of a stop (Triton's default: 2000)
  TRITON_EXTRA_ARGS          more tritonserver flags (shell words); container CMD arguments are appended too
  TRITON_REQUIRE_GPU         true: nvidia-smi must work, show TRITON_GPU_COUNT GPUs and a recent enough driver
  TRITON_GPU_COUNT           GPUs that must be visible (1)
  TRITON_MIN_DRIVER_VERSION  minimum NVIDIA driver; empty: derived from CUDA_VERSION (set by NGC images)
  TRITON_MIN_SHM_MB          minimum /dev/shm size for the python backend (0: no check)
  TRITON_DRAIN_TIMEOUT_S     longest wait for quiet on SIGTERM (30)
  TRITON_DRAIN_QUIET_S       how long counters must stay still to count as quiet (0.3)
  TRITON_DRAIN_WATCH_S       metrics sampling interval while serving, so a quiet server stops at once (1)
  TRITON_DRAIN_UNLOAD        true: once quiet, unload the models before SIGTERM (tritonserver then exits at once,
                             instead of checking for live models once a second while it unloads them) (true)
  TRITON_STOP_TIMEOUT_S      the container's stop timeout (ECS stopTimeout). The entrypoint's own budget from the first
                             SIGTERM is this minus 2 s; when it is spent, tritonserver (and the python-backend stubs) are
                             killed and the log says what was cut short, so ECS's SIGKILL never decides. Unset: the
                             drain timeout + 15 s unload + exit timeout + 2 s. tritonserver does not stop while a model
                             loads (a load request in flight keeps it alive past --exit-timeout-secs): the budget does.
Python stdlib only: it runs inside the Triton image.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass

import triton_drain

EX_CONFIG = 78  # sysexits: configuration error; the pre-start check failed
NVIDIA_SMI_TIMEOUT_S = 10
UNLOAD_TIMEOUT_S = 15  # then SIGTERM anyway: tritonserver's exit timeout still bounds the shutdown
STOP_MARGIN_S = 2.0  # the budget ends this long before the container's stop timeout: time to kill and exit
PROBE_TIMEOUT_S = 0.5  # asking Triton what it is doing, before the kill, must not eat the margin

# Minimum Linux driver per CUDA major version (CUDA minor-version compatibility, from the CUDA toolkit release
# notes). NGC images also carry forward-compatibility libraries; override with TRITON_MIN_DRIVER_VERSION.
MIN_DRIVER_FOR_CUDA_MAJOR = {"11": "450.80.02", "12": "525.60.13", "13": "580.65.06"}

TRUE_WORDS = {"1", "true", "yes", "on"}


class PrestartError(Exception):
    """One-line reason the container must not start."""


def version_tuple(version: str) -> tuple[int, ...]:
    """'535.104.05' -> (535, 104, 5); non-numeric parts end the tuple ('550.54.15-rc1' -> (550, 54))."""
    parts = []
    for part in version.strip().split("."):
        digits = ""
        for char in part:
            if not char.isdigit():
                break
            digits += char
        if not digits:
            break
        parts.append(int(digits))
        if len(digits) != len(part):
            break
    if not parts:
        raise ValueError(f"not a version: {version!r}")
    return tuple(parts)


def version_at_least(version: str, minimum: str) -> bool:
    have, want = version_tuple(version), version_tuple(minimum)
    width = max(len(have), len(want))
    return have + (0,) * (width - len(have)) >= want + (0,) * (width - len(want))


def min_driver_version(env: dict[str, str]) -> str:
    explicit = env.get("TRITON_MIN_DRIVER_VERSION", "").strip()
    if explicit:
        return explicit
    cuda = env.get("CUDA_VERSION", "").strip()
    return MIN_DRIVER_FOR_CUDA_MAJOR.get(cuda.split(".")[0], "") if cuda else ""


def parse_driver_versions(nvidia_smi_output: str) -> list[str]:
    """Output of `nvidia-smi --query-gpu=driver_version --format=csv,noheader`: one line per visible GPU."""
    return [line.strip() for line in nvidia_smi_output.splitlines() if line.strip()]


def check_gpus(driver_versions: list[str], expected_count: int, minimum_driver: str) -> None:
    if len(driver_versions) < expected_count:
        raise PrestartError(f"{len(driver_versions)} GPU(s) visible, {expected_count} required (check the task's GPU resourceRequirements)")
    if minimum_driver:
        too_old = sorted({v for v in driver_versions if not version_at_least(v, minimum_driver)})
        if too_old:
            raise PrestartError(f"NVIDIA driver {too_old[0]} is older than {minimum_driver}, the minimum for this image's CUDA")


def check_shm(total_bytes: int, minimum_mb: int) -> None:
    if minimum_mb and total_bytes < minimum_mb * 1024 * 1024:
        raise PrestartError(
            f"/dev/shm is {total_bytes // (1024 * 1024)} MiB, the python backend needs at least {minimum_mb} MiB "
            "(set linuxParameters.sharedMemorySize)"
        )


def query_nvidia_smi() -> str:
    try:
        proc = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=NVIDIA_SMI_TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError as exc:
        raise PrestartError("GPU required but nvidia-smi is not present (is the task placed with the nvidia runtime?)") from exc
    except subprocess.TimeoutExpired as exc:
        raise PrestartError(f"GPU required but nvidia-smi did not answer within {NVIDIA_SMI_TIMEOUT_S}s") from exc
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise PrestartError(f"GPU required but nvidia-smi failed: {detail[0] if detail else f'exit {proc.returncode}'}")
    return proc.stdout


def is_true(value: str | None) -> bool:
    return (value or "").strip().lower() in TRUE_WORDS


def prestart_check(env: dict[str, str], shm_path: str = "/dev/shm") -> None:
    if is_true(env.get("TRITON_REQUIRE_GPU")):
        check_gpus(parse_driver_versions(query_nvidia_smi()), int(env.get("TRITON_GPU_COUNT", "1")), min_driver_version(env))
    minimum_shm = int(env.get("TRITON_MIN_SHM_MB", "0") or 0)
    if minimum_shm:
        try:
            stat = os.statvfs(shm_path)
        except OSError as exc:
            raise PrestartError(f"{shm_path} is missing ({exc.strerror}); the python backend needs shared memory") from exc
        check_shm(stat.f_blocks * stat.f_frsize, minimum_shm)


VIEWS_DIR = ".task-definitions"  # where the model agent builds each task definition revision's view
METADATA_TIMEOUT_S = 2
VIEW_POLL_S = 1.0


_TASK_METADATA: dict[str, dict] = {}  # one read per start, shared by the model view and the metrics target


def task_metadata(metadata_uri: str, attempts: int = 3) -> dict:
    """This task's metadata (ECS task metadata endpoint v4, `/task`), read once; OSError/ValueError when it never answers."""
    if metadata_uri not in _TASK_METADATA:
        for attempt in range(attempts):
            try:
                with urllib.request.urlopen(f"{metadata_uri.rstrip('/')}/task", timeout=METADATA_TIMEOUT_S) as resp:
                    _TASK_METADATA[metadata_uri] = json.loads(resp.read())
                break
            except (OSError, ValueError):
                if attempt == attempts - 1:
                    raise
                time.sleep(1)
    return _TASK_METADATA[metadata_uri]


def task_view_name(metadata_uri: str) -> str:
    """<family>-<revision> of this task, from the ECS task metadata endpoint v4."""
    task = task_metadata(metadata_uri)
    family, revision = task.get("Family"), str(task.get("Revision") or "")
    if not family or not revision.isdigit():
        raise PrestartError(f"the task metadata endpoint gave Family={family!r} Revision={revision!r}; cannot name this task's model view")
    return f"{family}-{revision}"


def model_view(env: dict[str, str]) -> str | None:
    """The view this task serves (INFEROPS_MODEL_VIEW), or None to serve the repository as it is."""
    mode = env.get("INFEROPS_MODEL_VIEW", "").strip()
    if not mode:
        return None
    if mode == "task-definition":
        uri = env.get("ECS_CONTAINER_METADATA_URI_V4", "").strip()
        if not uri:
            raise PrestartError("INFEROPS_MODEL_VIEW=task-definition but ECS_CONTAINER_METADATA_URI_V4 is unset (not an ECS task?)")
        try:
            mode = task_view_name(uri)
        except (OSError, ValueError) as exc:
            raise PrestartError(f"the task metadata endpoint {uri} did not answer: {exc}") from exc
    if "/" in mode or mode.startswith("."):
        raise PrestartError(f"INFEROPS_MODEL_VIEW={mode!r} is not a view name (<family>-<revision>)")
    return os.path.join(env.get("TRITON_MODEL_REPOSITORY", "/models"), VIEWS_DIR, mode)


COLORS = ("blue", "green")


def metrics_labels(task: dict) -> dict[str, str]:
    """Service and Color of this task: ECS names the service that started it (ServiceName, ECS agent 1.63.1 or later),
    and a colour's service is <app>-blue or <app>-green (role fleet_services). {} for a task of no service."""
    service = str(task.get("ServiceName") or "").strip()
    if not service:
        return {}
    labels = {"Service": service}
    color = service.rsplit("-", 1)[-1]
    if color in COLORS:
        labels["Color"] = color
    return labels


def write_metrics_target(path: str, metrics_port: str, labels: dict[str, str]) -> None:
    """The sidecar's scrape target as a Prometheus file_sd file, replaced at once (the sidecar watches it)."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    staging = f"{path}.tmp"
    with open(staging, "w", encoding="utf-8") as handle:
        json.dump([{"targets": [f"localhost:{metrics_port}"], "labels": labels}], handle)
    os.chmod(staging, 0o644)  # the sidecar runs as another user
    os.replace(staging, path)


def publish_metrics_target(env: dict[str, str]) -> dict[str, str] | None:
    """Write INFEROPS_METRICS_TARGET_FILE (when set) with this task's labels; the labels written, None when off or unwritable."""
    path = env.get("INFEROPS_METRICS_TARGET_FILE", "").strip()
    if not path:
        return None
    labels: dict[str, str] = {}
    uri = env.get("ECS_CONTAINER_METADATA_URI_V4", "").strip()
    try:
        labels = metrics_labels(task_metadata(uri)) if uri else {}
    except (OSError, ValueError) as exc:
        log(f"the task metadata endpoint {uri} did not answer ({exc}): Triton's metrics are published without a colour")
    if uri and "Color" not in labels:
        log(f"no colour in this task's service name ({labels.get('Service') or 'none'}): Triton's metrics carry no Color dimension")
    try:
        write_metrics_target(path, env.get("TRITON_METRICS_PORT", "8002"), labels)
    except OSError as exc:
        log(f"could not write the metrics target {path} ({exc}): the metrics sidecar has nothing to scrape")
        return None
    return labels


def wait_for_view(path: str, timeout_s: float, sleep=time.sleep, clock=time.monotonic) -> list[str]:
    """The models of the view once it exists; PrestartError naming what to check when it never appears."""
    deadline = clock() + timeout_s
    while not os.path.isdir(path):
        if clock() >= deadline:
            raise PrestartError(
                f"model view {path} did not appear within {timeout_s:g}s: is the model agent running on this instance, and "
                "does a release record (standby.json or current.json) name this task definition? (docs/runbook.md)"
            )
        sleep(VIEW_POLL_S)
    return sorted(m for m in os.listdir(path) if not m.startswith(".") and os.path.isdir(os.path.join(path, m)))


def server_command(env: dict[str, str], extra: list[str], view: str | None = None, view_models: list[str] | None = None) -> list[str]:
    """tritonserver's command line; with a view, its repository is the view and it loads every model in it."""
    cmd = [
        env.get("TRITON_SERVER_BIN", "/opt/tritonserver/bin/tritonserver"),
        f"--model-repository={view or env.get('TRITON_MODEL_REPOSITORY', '/models')}",
        f"--model-control-mode={env.get('TRITON_MODEL_CONTROL_MODE', 'explicit')}",
        f"--http-port={env.get('TRITON_HTTP_PORT', '8000')}",
        f"--grpc-port={env.get('TRITON_GRPC_PORT', '8001')}",
        f"--metrics-port={env.get('TRITON_METRICS_PORT', '8002')}",
        f"--exit-timeout-secs={env.get('TRITON_EXIT_TIMEOUT_S', '30')}",
        f"--metrics-interval-ms={env.get('TRITON_METRICS_INTERVAL_MS', '250')}",
    ]
    load = view_models if view is not None else [m.strip() for m in env.get("TRITON_LOAD_MODELS", "").split(",") if m.strip()]
    cmd += [f"--load-model={m}" for m in load or []]
    return cmd + shlex.split(env.get("TRITON_EXTRA_ARGS", "")) + extra


def stop_budget_s(env: dict[str, str]) -> float:
    """Seconds from the first SIGTERM until the entrypoint kills tritonserver, whatever it is doing."""
    stop_timeout = env.get("TRITON_STOP_TIMEOUT_S", "").strip()
    if stop_timeout:
        return max(1.0, float(stop_timeout) - STOP_MARGIN_S)
    drain = float(env.get("TRITON_DRAIN_TIMEOUT_S", "30"))
    exit_timeout = float(env.get("TRITON_EXIT_TIMEOUT_S", "30"))
    return drain + UNLOAD_TIMEOUT_S + exit_timeout + STOP_MARGIN_S


def what_is_cut_short(index: list[dict] | None, load_at_start: str) -> str:
    """One line naming what the kill interrupts, from Triton's repository index (None: Triton did not answer)."""
    if index is None:
        models = load_at_start.strip() or "none named"
        return f"tritonserver did not answer (still starting, or stuck); models to load at start: {models}"
    busy = sorted(
        f"{e.get('name')} {e.get('version', '')} {e['state']}".replace("  ", " ")
        for e in index
        if e.get("state") in ("LOADING", "UNLOADING")
    )
    ready = sorted({str(e.get("name")) for e in index if e.get("state") == "READY"})
    parts = [f"model loads/unloads in progress: {', '.join(busy)}" if busy else "no model load in progress"]
    if ready:
        parts.append(f"still serving: {', '.join(ready)}")
    return "; ".join(parts)


def log(message: str) -> None:
    print(f"triton-entrypoint: {message}", file=sys.stderr, flush=True)


@dataclass
class Supervisor:
    """Runs tritonserver as a child; SIGTERM/SIGINT start one drain, after which the signal goes to tritonserver."""

    env: dict[str, str]
    proc: subprocess.Popen | None = None

    def __post_init__(self) -> None:
        self.tracker = triton_drain.QuietTracker()
        self.stopping = threading.Event()
        self.forwarded = threading.Event()
        self.exited = threading.Event()
        self.metrics_url = triton_drain.metrics_url(self.env)
        self.budget_s = stop_budget_s(self.env)
        self.deadline = float("inf")
        self.index_at_stop: list[dict] | None = None  # Triton refuses new HTTP connections once SIGTERM reaches it

    def fetch(self) -> dict[str, float]:
        return triton_drain.fetch_metrics(self.metrics_url)

    def watch(self) -> None:
        """Sample the counters while serving, so a server that has been quiet for a while stops without waiting."""
        interval = float(self.env.get("TRITON_DRAIN_WATCH_S", "1"))
        while not self.stopping.wait(interval):
            try:
                self.tracker.observe(triton_drain.sample_from(self.fetch()), time.monotonic())
            except (OSError, ValueError):
                continue

    def left_s(self, keep_for_exit: float = 0.0) -> float:
        """Seconds of the stop budget left, keeping `keep_for_exit` for what comes after."""
        return max(0.0, self.deadline - time.monotonic() - keep_for_exit)

    def drain_then_forward(self, signum: int) -> None:
        # tritonserver's own exit timeout comes after the drain and the unload: keep room for it in the budget
        exit_timeout = float(self.env.get("TRITON_EXIT_TIMEOUT_S", "30"))
        self.index_at_stop = self.probe_index()
        result = triton_drain.wait_until_quiet(
            self.fetch,
            self.tracker,
            timeout_s=min(float(self.env.get("TRITON_DRAIN_TIMEOUT_S", "30")), self.left_s(exit_timeout)),
            quiet_s=float(self.env.get("TRITON_DRAIN_QUIET_S", triton_drain.DEFAULT_QUIET_S)),
        )
        log(f"drain {'done' if result.quiet else 'cut short'} after {result.waited_s:.1f}s ({result.reason})")
        if self.forwarded.is_set():
            return  # a second signal already went through
        if result.quiet and is_true(self.env.get("TRITON_DRAIN_UNLOAD", "true")):
            started = time.monotonic()
            try:
                done, models = triton_drain.unload_models(triton_drain.http_url(self.env), min(UNLOAD_TIMEOUT_S, self.left_s(exit_timeout)))
                log(f"unloaded {len(models)} model(s) in {time.monotonic() - started:.1f}s" + ("" if done else " (timed out)"))
            except (OSError, ValueError) as exc:
                log(f"unloading models before SIGTERM failed ({exc}); tritonserver will unload them")
        if self.forwarded.is_set():
            return  # a second signal went through while the models unloaded
        self.index_at_stop = self.probe_index() or self.index_at_stop
        log("stopping tritonserver")
        self.forward(signum)

    def probe_index(self) -> list[dict] | None:
        try:
            return triton_drain.repository_index(triton_drain.http_url(self.env), PROBE_TIMEOUT_S)
        except (OSError, ValueError):
            return None

    def forward(self, signum: int) -> None:
        # os.kill, not Popen.poll/send_signal: only reap() may wait on the child, or its status could be lost
        self.forwarded.set()
        if self.proc and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signum)

    def on_signal(self, signum: int, _frame: object) -> None:
        if self.stopping.is_set():
            if not self.forwarded.is_set():
                log(f"second {signal.Signals(signum).name}: stopping tritonserver without waiting for quiet")
                self.forward(signum)
            return
        self.stopping.set()
        self.deadline = time.monotonic() + self.budget_s
        log(f"{signal.Signals(signum).name} received; draining until Triton is quiet (stop budget {self.budget_s:g}s)")
        threading.Thread(target=self.enforce_budget, daemon=True).start()
        threading.Thread(target=self.drain_then_forward, args=(signum,), daemon=True).start()

    def enforce_budget(self) -> None:
        """When the stop budget is spent and tritonserver still runs, say what it was doing and kill its process group."""
        if self.exited.wait(max(0.0, self.left_s(PROBE_TIMEOUT_S))):
            return
        index = self.probe_index()
        if index is None:
            index = self.index_at_stop  # what it was doing when the SIGTERM was forwarded
        if self.exited.wait(self.left_s()):
            return
        cut_short = what_is_cut_short(index, self.env.get("TRITON_LOAD_MODELS", ""))
        log(f"stop budget of {self.budget_s:g}s spent and tritonserver still runs; killing it. Cut short: {cut_short}")
        if self.proc and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)  # its own group: the python-backend stubs go too

    def run(self, cmd: list[str]) -> int:
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self.on_signal)
        # Its own process group, so the stop budget can end tritonserver and its backend stubs at once.
        self.proc = subprocess.Popen(cmd, start_new_session=True)
        if self.forwarded.is_set():  # the signal came before tritonserver existed: nothing to drain
            self.forward(signal.SIGTERM)
        threading.Thread(target=self.watch, daemon=True).start()
        return self.reap()

    def reap(self) -> int:
        """Wait for tritonserver, also reaping orphans (this process is PID 1 in the container)."""
        assert self.proc is not None
        while True:
            try:
                pid, status = os.waitpid(-1, 0)
            except ChildProcessError:
                return self.proc.returncode if self.proc.returncode is not None else 1
            if pid == self.proc.pid:
                self.exited.set()
                self.proc.returncode = os.waitstatus_to_exitcode(status)
                code = self.proc.returncode
                return 128 - code if code < 0 else code


def main(argv: list[str] | None = None) -> int:
    env = dict(os.environ)
    try:
        prestart_check(env)
        publish_metrics_target(env)
        view = model_view(env)
        if view is not None:
            log(f"waiting for the model view {view}")
        view_models = wait_for_view(view, float(env.get("INFEROPS_MODEL_VIEW_WAIT_S", "240"))) if view is not None else None
    except (PrestartError, ValueError) as exc:
        print("triton pre-start check failed: " + " ".join(str(exc).split()), file=sys.stderr, flush=True)
        return EX_CONFIG
    cmd = server_command(env, list(sys.argv[1:] if argv is None else argv), view, view_models)
    log("starting " + " ".join(shlex.quote(c) for c in cmd))
    code = Supervisor(env).run(cmd)
    log(f"tritonserver exited with {code}")
    return code


if __name__ == "__main__":
    sys.exit(main())
