"""awsvpc tasks without AWS: a Docker container per task on a user-defined bridge network standing in for a subnet.

What is modelled, and how:
- the subnet: `AwsvpcNetwork`, a user-defined Docker bridge network. Docker's IPAM picks a free subnet from its
  address pools (no fixed subnet: parallel tests never clash) and gives each container its own address, as a task
  ENI has its own; the host reaches every task at <ip>:8000, and 127.0.0.1:8000 reaches none (as on an instance).
- the task: `AwsvpcTask`, one container running the REAL Triton entrypoint (the triton_image role's in-image scripts,
  bind-mounted read-only at /opt/inferops/bin from this checkout) on the local CPU Triton image, as uid 1000 with
  the instance's model host path read-only at /models and the `ECS_CONTAINER_METADATA_URI_V4` the ECS agent gives
  each container. `docker stop` sends SIGTERM: the entrypoint's real drain runs.
- what the ECS agent says about the task: `introspection()` (an entry of `GET /v1/tasks` in awsvpc mode) and
  `task_metadata()` / `container_metadata()` (the task metadata endpoint v4), served by the instance's stand-in
  endpoints (tests/harness/model_agent.py InstanceEndpoints).

Not modelled: security groups, ENI trunking and per-instance ENI limits, the task's other containers, ECS health
checks and restarts. Every container and network carries labels naming the harness and the creating process:
`AwsvpcNetwork.create` removes those a dead test process left behind.

    with AwsvpcNetwork() as network:
        task = AwsvpcTask(network, task_image(), host_path, {"TRITON_LOAD_MODELS": "m"}, "triton", 3, arn).start()
        task.wait_ready(120)
        task.url                      # http://172.x.y.z:8000
        task.stop(30)                 # (seconds, exit code) of `docker stop -t 30`
"""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

from .docker_triton import TritonInDocker

REPO_ROOT = Path(__file__).resolve().parents[2]
TRITON_IMAGE_ROLE = REPO_ROOT / "roles" / "triton_image"
SCRIPTS_DIR = "/opt/inferops/bin"
MODELS_DIR = "/models"
CONTAINER_NAME = "triton"  # the container's name in the task definition
HTTP_PORT, METRICS_PORT = 8000, 8002
IMAGE_USER = "1000:1000"  # NGC's triton-server
SHM_MB = 256  # as the local rehearsal's standby container
HARNESS_LABEL = "inferops.test.harness"
PID_LABEL = "inferops.test.pid"
NETWORK_LABEL = "inferops.test.network"
STATUS_CACHE_S = 0.5  # how long a `docker inspect` answers the introspection's KnownStatus


def docker(*args: str, check: bool = True, timeout_s: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=check, timeout=timeout_s)


def _process_alive(pid: str) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


def remove_stale() -> None:
    """Remove the task containers and networks of test processes that died without cleaning up (a killed pytest):
    Docker's address pools hold a few dozen networks, and seven test runs share this dockerd."""
    # Containers first: a network with containers on it cannot be removed.
    for kind, list_all, labels, force in (("container", ["-a"], ".Config.Labels", ["-f"]), ("network", [], ".Labels", [])):
        listed = docker(kind, "ls", *list_all, "--filter", f"label={HARNESS_LABEL}", "--format", "{{.ID}}")
        for item in listed.stdout.split():
            pid = docker(kind, "inspect", "--format", f'{{{{index {labels} "{PID_LABEL}"}}}}', item, check=False)
            if pid.returncode == 0 and not _process_alive(pid.stdout.strip()):
                docker(kind, "rm", *force, item, check=False)


class AwsvpcNetwork:
    """A user-defined Docker bridge network: the stand-in for the VPC subnet the tasks' ENIs are in."""

    def __init__(self, name_prefix: str = "inferops-subnet") -> None:
        self.name = f"{name_prefix}-{uuid.uuid4().hex[:10]}"
        self.subnet: ipaddress.IPv4Network | None = None
        self.gateway = ""  # the host's address on the network: containers reach the instance's endpoints there
        self.tasks: list[AwsvpcTask] = []

    def create(self) -> AwsvpcNetwork:
        if self.subnet is not None:
            return self
        remove_stale()
        labels = ["--label", f"{HARNESS_LABEL}=awsvpc-network", "--label", f"{PID_LABEL}={os.getpid()}"]
        docker("network", "create", "--driver", "bridge", *labels, self.name)
        config = json.loads(docker("network", "inspect", "--format", "{{json .IPAM.Config}}", self.name).stdout)
        ipv4 = next(c for c in config if ":" not in c["Subnet"])
        self.subnet = ipaddress.ip_network(ipv4["Subnet"])
        self.gateway = ipv4.get("Gateway") or str(next(self.subnet.hosts()))
        return self

    def remove(self) -> None:
        """Force-remove the harness's containers still on the network, then the network (no error when gone)."""
        for task in self.tasks:
            task.remove()
        leftovers = docker("ps", "-aq", "--filter", f"label={NETWORK_LABEL}={self.name}", check=False).stdout.split()
        if leftovers:
            docker("rm", "-f", *leftovers, check=False)
        docker("network", "rm", self.name, check=False)
        self.subnet = None

    def __enter__(self) -> AwsvpcNetwork:
        return self.create()

    def __exit__(self, *exc: object) -> None:
        self.remove()


def image_scripts() -> dict[str, Path]:
    """What the triton_image role installs in /opt/inferops/bin, by file name, from this checkout: the role's own lists
    (vars/main.yml `triton_image_scripts` from files/, `triton_image_script_libraries` beside them)."""
    variables = yaml.safe_load((TRITON_IMAGE_ROLE / "vars" / "main.yml").read_text())
    scripts = {name: TRITON_IMAGE_ROLE / "files" / name for name in variables["triton_image_scripts"]}
    for entry in variables["triton_image_script_libraries"]:
        path = Path(entry.replace("{{ role_path }}", str(TRITON_IMAGE_ROLE))).resolve()
        scripts[path.name] = path
    missing = [str(p) for p in scripts.values() if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"roles/triton_image/vars/main.yml lists scripts that do not exist: {', '.join(missing)}")
    return scripts


class AwsvpcTask(TritonInDocker):
    """One ECS task in awsvpc mode: its `triton` container on the network, at its own address."""

    ready_interval_s = 0.2

    def __init__(
        self,
        network: AwsvpcNetwork,
        image: str,
        host_path: Path,
        env: dict[str, str],
        family: str,
        revision: int | str,
        arn: str,
        cluster: str = "fleet",
        metadata_uri: str = "",
        shm_mb: int = SHM_MB,
        args: tuple[str, ...] = (),
        name_prefix: str = "inferops-task",
    ) -> None:
        self.network = network
        self.image = image
        self.host_path = host_path
        self.env = dict(env)
        self.family = family
        self.revision = str(revision)  # ECS gives it as a string in the metadata and the introspection
        self.arn = arn
        self.task_id = arn.rsplit("/", 1)[-1]
        self.cluster = cluster
        self.metadata_uri = metadata_uri
        self.shm_mb = shm_mb
        self.args = args
        self.name = f"{name_prefix}-{uuid.uuid4().hex[:10]}"
        self.container_id = ""
        self.desired_status = "RUNNING"
        self.removed = False
        self.started_at: float | None = None
        self._lock = threading.Lock()
        self._network_settings: dict[str, Any] = {}
        self._known: tuple[float, str] = (0.0, "PENDING")

    # -- lifecycle

    def labels(self) -> dict[str, str]:
        """The ECS agent's container labels, plus the harness's own (for cleanup)."""
        return {
            "com.amazonaws.ecs.cluster": self.cluster,
            "com.amazonaws.ecs.container-name": CONTAINER_NAME,
            "com.amazonaws.ecs.task-arn": self.arn,
            "com.amazonaws.ecs.task-definition-family": self.family,
            "com.amazonaws.ecs.task-definition-version": self.revision,
            HARNESS_LABEL: "awsvpc-task",
            NETWORK_LABEL: self.network.name,
            PID_LABEL: str(os.getpid()),
        }

    def environment(self) -> dict[str, str]:
        """No GPU here; then the caller's settings; then what the ECS agent sets in every container."""
        env = {"TRITON_REQUIRE_GPU": "false", **self.env}
        if self.metadata_uri:
            env["ECS_CONTAINER_METADATA_URI_V4"] = self.metadata_uri
        return env

    def run_command(self) -> list[str]:
        cmd = ["docker", "run", "-d", "--name", self.name, "--network", self.network.name, "--user", IMAGE_USER]
        cmd += [f"--shm-size={self.shm_mb}m"]
        for key, value in self.labels().items():
            cmd += ["--label", f"{key}={value}"]
        for name, source in image_scripts().items():
            cmd += ["-v", f"{source}:{SCRIPTS_DIR}/{name}:ro"]
        cmd += ["-v", f"{self.host_path}:{MODELS_DIR}:ro"]
        for key, value in self.environment().items():
            cmd += ["-e", f"{key}={value}"]
        # python3 runs the script: the checkout's files are not executable; the image's are (the role chmods them).
        return [*cmd, "--entrypoint", "python3", self.image, f"{SCRIPTS_DIR}/triton_entrypoint.py", *self.args]

    def start(self) -> AwsvpcTask:
        self.network.create()
        self.network.tasks.append(self)
        self.started_at = time.monotonic()
        try:
            run = subprocess.run(self.run_command(), capture_output=True, text=True, check=False, timeout=120)
            if run.returncode != 0:
                raise RuntimeError(f"docker run of task {self.task_id} ({self.name}) failed: {run.stderr.strip()[-2000:]}")
            self.container_id = run.stdout.strip()
            self.network_settings()
        except BaseException:
            self.remove()
            raise
        return self

    def network_settings(self) -> dict[str, Any]:
        """The container's endpoint on the network (IPAddress, MacAddress), read once it is known."""
        with self._lock:
            if not self._network_settings.get("IPAddress"):
                out = docker("inspect", "--format", "{{json .NetworkSettings.Networks}}", self.name, check=False)
                if out.returncode == 0:
                    self._network_settings = json.loads(out.stdout).get(self.network.name) or {}
            return self._network_settings

    @property
    def ip(self) -> str:
        ip = self.network_settings().get("IPAddress")
        if not ip:
            raise RuntimeError(f"task {self.task_id} ({self.name}) has no address on {self.network.name} (not started?)")
        return ip

    @property
    def url(self) -> str:
        return f"http://{self.ip}:{HTTP_PORT}"

    @property
    def http_url(self) -> str:
        return self.url

    @property
    def what(self) -> str:
        return f"task {self.task_id} ({self.name})"

    @property
    def metrics_url(self) -> str:
        return f"http://{self.ip}:{METRICS_PORT}/metrics"

    def known_status(self) -> str:
        """PENDING, RUNNING or STOPPED, as the ECS agent reports it (from `docker inspect`, cached briefly)."""
        with self._lock:
            checked_at, status = self._known
            if status == "STOPPED" or time.monotonic() - checked_at < STATUS_CACHE_S:
                return status
            state = docker("inspect", "--format", "{{.State.Status}}", self.name, check=False).stdout.strip()
            if state == "running":
                status = "RUNNING"
            elif state == "created" or not (state or self.container_id):  # not yet run
                status = "PENDING"
            else:  # exited, dead, or gone
                status = "STOPPED"
            self._known = (time.monotonic(), status)
            return status

    def stop(self, timeout_s: int = 60) -> tuple[float, int]:
        """`docker stop -t timeout_s` (SIGTERM, then SIGKILL when the timeout passes), as ECS stops a task with its
        stopTimeout; DesiredStatus is STOPPED from the start, as ECS shows a stopping task. (seconds, exit code)."""
        self.desired_status = "STOPPED"
        started = time.monotonic()
        docker("stop", "-t", str(timeout_s), self.name, timeout_s=timeout_s + 30)
        took = time.monotonic() - started
        return took, self.exit_code()

    def remove(self) -> None:
        """`docker rm -f` (no drain): cleanup. The introspection stops listing the task, as after ECS's task cleanup."""
        if not self.removed:
            docker("rm", "-f", self.name, check=False)
            self.removed = True
            self.desired_status = "STOPPED"

    def __enter__(self) -> AwsvpcTask:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.remove()

    # -- what the ECS agent says about it

    def _networks(self, detailed: bool) -> list[dict[str, Any]]:
        settings = self.network_settings()
        ip = settings.get("IPAddress")
        network: dict[str, Any] = {"NetworkMode": "awsvpc", "IPv4Addresses": [ip] if ip else []}
        if detailed and ip and self.network.subnet is not None:
            network.update(
                {
                    "AttachmentIndex": 0,
                    "MACAddress": settings.get("MacAddress", ""),
                    "IPv4SubnetCIDRBlock": str(self.network.subnet),
                    "PrivateDNSName": f"ip-{ip.replace('.', '-')}.ec2.internal",
                    "SubnetGatewayIpv4Address": f"{self.network.gateway}/{self.network.subnet.prefixlen}",
                }
            )
        return [network]

    def introspection(self) -> dict[str, Any]:
        """This task in the ECS agent's `GET /v1/tasks` answer (awsvpc: the container's Networks, no host ports)."""
        container = {"DockerId": self.container_id, "DockerName": self.name, "Name": CONTAINER_NAME, "Networks": self._networks(False)}
        return {
            "Arn": self.arn,
            "DesiredStatus": self.desired_status,
            "KnownStatus": self.known_status(),
            "Family": self.family,
            "Version": self.revision,
            "Containers": [container],
        }

    def container_metadata(self) -> dict[str, Any]:
        """`GET $ECS_CONTAINER_METADATA_URI_V4`: the container's own metadata."""
        return {
            "DockerId": self.container_id,
            "Name": CONTAINER_NAME,
            "DockerName": self.name,
            "Image": self.image,
            "Labels": {k: v for k, v in self.labels().items() if k.startswith("com.amazonaws.ecs.")},
            "DesiredStatus": self.desired_status,
            "KnownStatus": self.known_status(),
            "Type": "NORMAL",
            "Networks": self._networks(True),
        }

    def task_metadata(self) -> dict[str, Any]:
        """`GET $ECS_CONTAINER_METADATA_URI_V4/task`: the task's metadata (Revision a string, as ECS gives it)."""
        return {
            "Cluster": self.cluster,
            "TaskARN": self.arn,
            "Family": self.family,
            "Revision": self.revision,
            "DesiredStatus": self.desired_status,
            "KnownStatus": self.known_status(),
            "LaunchType": "EC2",
            "Containers": [self.container_metadata()],
        }
