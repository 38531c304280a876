"""A simulated container instance for the model agent: its config file, a stand-in for the instance's local
endpoints, real tritonserver "tasks", and the agent itself as a subprocess: the program role model_agent installs
(`python3 inferops-model-agent-<digest>.pyz`, built from the checkout by `agent_program.ensure_program` into .cache/).

The stand-in endpoint (one HTTP server in a thread) answers what the agent asks on an EC2 container instance:
- the ECS agent's introspection API: `GET /v1/metadata` (cluster, container instance ARN) and `GET /v1/tasks`,
  in the shape the ECS agent answers, listing two kinds of tasks:
  bridge mode (`add_task`): tritonserver processes on loopback, port bindings container 8000/8002 → the server's
  real loopback ports; awsvpc mode (`add_awsvpc_task`): a container per task on a Docker network standing in for
  the subnet (tests/harness/awsvpc.py), at its own address, the container's Networks naming it;
- IMDSv2: `PUT /latest/api/token`, then `GET /latest/meta-data/instance-id` with that token (401 without it);
- the ECS task metadata endpoint v4 for the awsvpc tasks: `GET $ECS_CONTAINER_METADATA_URI_V4` (the container) and
  `.../task` (the task: Cluster, TaskARN, Family, Revision as a string, statuses, Containers with their Networks).
  It is served on a second listener bound to the task network's gateway (the host's address on that network):
  the containers reach it there, as an ECS task reaches its agent's endpoint from its own network; only that
  network's containers do, and the loopback listener (introspection, IMDS) stays out of their reach, as the
  instance's localhost:51678 is out of an awsvpc task's reach.

S3 is a moto server (tests/harness/moto.py). Usage:

    instance = SimulatedInstance(tmp_path / "i1", moto, BUCKET, PREFIX, "app", "i-0000000000000001")
    instance.add_task()                 # a real tritonserver over the instance's host path (bridge mode)
    instance.add_awsvpc_task("triton", 3, {"TRITON_LOAD_MODELS": "m"})   # a container at its own address (awsvpc)
    instance.run("--boot")              # CompletedProcess of one agent run
    instance.start_agent()              # `--serve` in the background; instance.stop() ends it all
    instance.status()                   # the agent's status object, read from S3
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.agent_program import ensure_program
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.release import (
    build_release,
    release_key,
    render_release,
    status_key,
)

from .ansible import ensure_collection_link
from .awsvpc import AwsvpcNetwork, AwsvpcTask
from .images import task_image
from .moto import ACCOUNT_ID, REGION, MotoServer
from .ports import free_port, stop_detached, wait_until
from .triton import REPO_ROOT, TritonServer

PROGRAM_BUILD_DIR = REPO_ROOT / ".cache" / "model-agent"
TRITON_CONTAINER = "triton"
# Explicit model control, no auto-complete (as docs/models.md recommends): the agent loads what the release names.
TRITON_ARGS = ("--disable-auto-complete-config",)
IMDS_TOKEN = "simulated-imds-token"


def write_release(
    moto: MotoServer,
    bucket: str,
    prefix: str,
    application: str,
    release_id: str,
    models: dict[str, int],
    name: str = "current",
    instances: list[str] | None = None,
) -> dict[str, Any]:
    """Writes a release record (current, previous or canary) straight to S3, as the controller would."""
    record = build_release(
        application, release_id, [{"name": m, "version": v} for m, v in models.items()], "2026-01-01T00:00:00Z", instances
    )
    moto.client("s3").put_object(Bucket=bucket, Key=release_key(prefix, application, name), Body=render_release(record))
    return record


def agent_program() -> str:
    """The agent as the instances run it: the checkout's program, built once per content (a rebuild of unchanged
    sources writes nothing)."""
    return str(ensure_program(str(REPO_ROOT), str(PROGRAM_BUILD_DIR), check_mode=False)["path"])


class InstanceEndpoints:
    """The stand-in for the ECS agent's introspection API, its task metadata endpoint v4 and IMDSv2 of one instance
    (threads, free ports)."""

    def __init__(self, instance_id: str, cluster: str) -> None:
        self.instance_id = instance_id
        self.cluster = cluster
        self.container_instance_arn = f"arn:aws:ecs:{REGION}:{ACCOUNT_ID}:container-instance/{cluster}/{instance_id[2:]}"
        self.tasks: list[dict[str, Any]] = []  # bridge-mode tasks, as listed
        self.awsvpc_tasks: list[AwsvpcTask] = []  # listed as they are at each request; removed ones no longer
        self.task_listeners: dict[str, ThreadingHTTPServer] = {}  # per task network: the v4 endpoint on its gateway
        self.ecs_running = True  # False: the ECS agent is not up yet (/v1/* and /v4/* refuse, as before ecs.service starts)
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), self._handler(instance_api=True))
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def _handler(self, instance_api: bool) -> type[BaseHTTPRequestHandler]:
        """Loopback (instance_api): everything; a task network's gateway: the task metadata endpoint only."""
        endpoints = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, body: Any) -> None:
                raw = (json.dumps(body) if not isinstance(body, str) else body).encode()
                self.send_response(code)
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_PUT(self) -> None:
                if not instance_api:
                    self._send(404, "not found")
                elif self.path == "/latest/api/token" and self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
                    self._send(200, IMDS_TOKEN)
                else:
                    self._send(400, "bad token request")

            def do_GET(self) -> None:
                if self.path.startswith("/v4/"):
                    self._send(*endpoints.task_metadata_answer(self.path))
                elif not instance_api:
                    self._send(404, "not found")
                elif self.path == "/latest/meta-data/instance-id":
                    if self.headers.get("X-aws-ec2-metadata-token") == IMDS_TOKEN:
                        self._send(200, endpoints.instance_id)
                    else:
                        self._send(401, "IMDSv2 token required")
                elif not endpoints.ecs_running:
                    self._send(503, "ECS agent not running")
                elif self.path == "/v1/metadata":
                    self._send(200, endpoints.metadata())
                elif self.path == "/v1/tasks":
                    self._send(200, {"Tasks": endpoints.listing()})
                else:
                    self._send(404, "not found")

        return Handler

    def metadata(self) -> dict[str, Any]:
        return {"Cluster": self.cluster, "ContainerInstanceArn": self.container_instance_arn, "Version": "Amazon ECS Agent - stand-in"}

    def add_bridge_task(self, arn: str, http_port: int, metrics_port: int) -> None:
        """A RUNNING task whose `triton` container publishes 8000 and 8002 on these host ports (bridge network mode)."""
        container = {
            "DockerId": arn.rsplit("/", 1)[-1],
            "DockerName": f"ecs-triton-{arn.rsplit('/', 1)[-1]}",
            "Name": TRITON_CONTAINER,
            "Ports": [
                {"ContainerPort": 8000, "Protocol": "tcp", "HostPort": http_port},
                {"ContainerPort": 8002, "Protocol": "tcp", "HostPort": metrics_port},
            ],
        }
        self.tasks.append(
            {
                "Arn": arn,
                "DesiredStatus": "RUNNING",
                "KnownStatus": "RUNNING",
                "Family": "triton",
                "Version": "1",
                "Containers": [container],
            }
        )

    def listing(self) -> list[dict[str, Any]]:
        """`GET /v1/tasks`: the bridge tasks, then each awsvpc task as it is now (PENDING, RUNNING, STOPPED)."""
        return list(self.tasks) + [task.introspection() for task in list(self.awsvpc_tasks) if not task.removed]

    def add_awsvpc_task(self, task: AwsvpcTask) -> None:
        """List an awsvpc task (before its start, so its container finds its metadata as soon as it runs)."""
        self.awsvpc_tasks.append(task)

    def metadata_uri(self, network: AwsvpcNetwork, task_arn: str) -> str:
        """ECS_CONTAINER_METADATA_URI_V4 of a task on `network`: a listener on the network's gateway (created with
        the first task on that network), the path naming the task."""
        network.create()
        with self._lock:
            if network.name not in self.task_listeners:
                server = ThreadingHTTPServer((network.gateway, 0), self._handler(instance_api=False))
                threading.Thread(target=server.serve_forever, daemon=True).start()
                self.task_listeners[network.name] = server
            port = self.task_listeners[network.name].server_address[1]
        return f"http://{network.gateway}:{port}/v4/{task_arn.rsplit('/', 1)[-1]}"

    def task_metadata_answer(self, path: str) -> tuple[int, Any]:
        """`/v4/<task id>`: the container's metadata; `/v4/<task id>/task`: the task's (stats are not modelled)."""
        if not self.ecs_running:
            return 503, "ECS agent not running"
        parts = path.split("?", 1)[0].strip("/").split("/")
        task = next((t for t in self.awsvpc_tasks if not t.removed and len(parts) > 1 and t.task_id == parts[1]), None)
        if task is None or len(parts) > 3 or (len(parts) == 3 and parts[2] != "task"):
            return 404, "not found"
        return 200, task.task_metadata() if len(parts) == 3 else task.container_metadata()

    def stop(self) -> None:
        for server in [self.server, *self.task_listeners.values()]:
            server.shutdown()
            server.server_close()
        self.task_listeners = {}


class SimulatedInstance:
    """One container instance: host path, agent config, stand-in endpoints, tritonserver tasks, the agent process."""

    def __init__(
        self,
        workdir: Path,
        moto: MotoServer,
        bucket: str,
        prefix: str,
        application: str,
        instance_id: str,
        cluster: str = "fleet",
        poll_interval_s: int = 1,
        network: AwsvpcNetwork | None = None,
        **config: Any,
    ) -> None:
        """`network`: the subnet of the awsvpc tasks, shared by a fleet's instances; None: the instance makes its own
        with its first awsvpc task and removes it at stop()."""
        ensure_collection_link()
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.moto = moto
        self.host_path = workdir / "models"
        self.host_path.mkdir(exist_ok=True)
        self.endpoints = InstanceEndpoints(instance_id, cluster)
        self.instance_id = instance_id
        self.tritons: list[TritonServer] = []
        self.awsvpc_tasks: list[AwsvpcTask] = []
        self.network = network
        self.owns_network = network is None
        self.agent: subprocess.Popen | None = None
        self.config: dict[str, Any] = {
            "bucket": bucket,
            "prefix": prefix,
            "application": application,
            "cluster": cluster,
            "region": REGION,
            "host_path": str(self.host_path),
            "poll_interval_s": poll_interval_s,
            "keep_versions": 2,
            "introspection_url": self.endpoints.url,
            "imds_url": self.endpoints.url,
            "endpoint_url": moto.endpoint,
            # A failed boot marks the instance Unhealthy through Auto Scaling: moto's too (no ASG: "in no group").
            "autoscaling_endpoint_url": moto.endpoint,
            "triton_http_port": 8000,
            "triton_metrics_port": 8002,
            "boot_attempts": 2,
            "boot_retry_delay_s": 0,
            "load_timeout_s": 60,
            **config,
        }
        self.config_path = workdir / "model-agent.json"
        self.write_config()

    def write_config(self) -> None:
        self.config_path.write_text(json.dumps(self.config, indent=1))

    def add_task(self) -> TritonServer:
        """A real tritonserver over the host path, listed by the stand-in introspection API as a bridge task."""
        triton = TritonServer(self.host_path, self.workdir, extra_args=TRITON_ARGS).start()
        self.tritons.append(triton)
        arn = f"arn:aws:ecs:{REGION}:123456789012:task/{self.endpoints.cluster}/{self.instance_id[2:]}{len(self.tritons):04d}"
        self.endpoints.add_bridge_task(arn, triton.http_port, triton.metrics_port)
        return triton

    def add_awsvpc_task(
        self,
        family: str,
        revision: int | str,
        env: dict[str, str] | None = None,
        image: str | None = None,
        wait_ready: bool = True,
        timeout_s: float = 120,
    ) -> AwsvpcTask:
        """A task of task definition `family:revision` in awsvpc mode: the real Triton entrypoint in a container at its
        own address, the host path read-only at /models, `env` its environment (TRITON_LOAD_MODELS, INFEROPS_* ...);
        listed by the introspection stand-in, its metadata at its ECS_CONTAINER_METADATA_URI_V4. `wait_ready`: until
        Triton's /v2/health/ready answers 200."""
        if self.network is None:
            self.network = AwsvpcNetwork()
        arn = f"arn:aws:ecs:{REGION}:{ACCOUNT_ID}:task/{self.endpoints.cluster}/{uuid.uuid4().hex}"
        task = AwsvpcTask(
            self.network,
            image or task_image(),
            self.host_path,
            env or {},
            family,
            revision,
            arn,
            cluster=self.endpoints.cluster,
            metadata_uri=self.endpoints.metadata_uri(self.network, arn),
        )
        self.awsvpc_tasks.append(task)
        self.endpoints.add_awsvpc_task(task)
        task.start()
        if wait_ready:
            task.wait_ready(timeout_s)
        return task

    def command(self, mode: str) -> list[str]:
        return [sys.executable, agent_program(), "--config", str(self.config_path), mode]

    def env(self) -> dict[str, str]:
        # No PYTHONPATH to the collection: every module the agent runs comes from the program.
        env = dict(os.environ, **self.moto.env())
        env.pop("PYTHONPATH", None)
        return env

    def run(self, mode: str, timeout_s: float = 120) -> subprocess.CompletedProcess:
        """One agent run (`--boot` or `--once`), its journal in stderr."""
        return subprocess.run(self.command(mode), env=self.env(), capture_output=True, text=True, timeout=timeout_s, check=False)

    def start_agent(self) -> subprocess.Popen:
        """`--serve` in the background; its journal goes to <workdir>/agent.log."""
        log = (self.workdir / "agent.log").open("a")
        self.agent = subprocess.Popen(self.command("--serve"), env=self.env(), stdout=log, stderr=subprocess.STDOUT)
        return self.agent

    def stop_agent(self) -> None:
        if self.agent:
            self.agent.terminate()
            try:
                self.agent.wait(10)
            except subprocess.TimeoutExpired:
                self.agent.kill()
                self.agent.wait(10)
            self.agent = None

    def agent_log(self) -> str:
        path = self.workdir / "agent.log"
        return path.read_text() if path.exists() else ""

    def status(self) -> dict[str, Any] | None:
        """The agent's status object as the controller reads it (None before the first write)."""
        key = status_key(self.config["prefix"], self.config["application"], self.instance_id)
        s3 = self.moto.client("s3")
        try:
            return json.loads(s3.get_object(Bucket=self.config["bucket"], Key=key)["Body"].read())
        except s3.exceptions.NoSuchKey:
            return None

    def wait_status(self, check: Any, timeout_s: float, what: str) -> dict[str, Any]:
        """Polls the status object until check(status) holds."""
        found: dict[str, Any] = {}

        def ready() -> bool:
            found["status"] = self.status()
            return found["status"] is not None and bool(check(found["status"]))

        try:
            wait_until(ready, timeout_s, what, interval_s=0.2)
        except TimeoutError as err:
            raise TimeoutError(f"{err}; last status: {found.get('status')}; agent log tail: {self.agent_log()[-2000:]}") from err
        return found["status"]

    def stop(self) -> None:
        self.stop_agent()
        for triton in self.tritons:
            triton.stop()
        self.tritons = []
        for task in self.awsvpc_tasks:
            task.remove()
        if self.network is not None and self.owns_network:
            self.network.remove()
        self.endpoints.stop()


def main(argv: list[str] | None = None) -> int:
    """`up` serves the stand-in endpoints (introspection + IMDSv2) of one instance in a detached process and records
    its URL and pid in the state file; `down` stops it. For molecule/new_instance, whose container shares the
    host's network."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tests.harness.model_agent")
    parser.add_argument("command", choices=["up", "down", "serve"])
    parser.add_argument("--state-file", required=True, type=Path)
    parser.add_argument("--instance-id", default="i-0000000000000001")
    parser.add_argument("--cluster", default="fleet")
    args = parser.parse_args(argv)
    state = json.loads(args.state_file.read_text()) if args.state_file.exists() else {}
    if args.command == "serve":
        endpoints = InstanceEndpoints(args.instance_id, args.cluster)
        partial = args.state_file.with_suffix(".partial")  # renamed into place: `up` never reads half a file
        partial.write_text(json.dumps({"pid": os.getpid(), "url": endpoints.url, "instance_id": args.instance_id}))
        partial.rename(args.state_file)
        endpoints.thread.join()
        return 0
    if args.command == "up":
        if not state.get("pid"):
            command = [sys.executable, "-m", "tests.harness.model_agent", "serve", "--state-file", str(args.state_file)]
            command += ["--instance-id", args.instance_id, "--cluster", args.cluster]
            subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO_ROOT)
            wait_until(args.state_file.exists, 30, "stand-in instance endpoints")
        return 0
    stop_detached(args.state_file, grace_s=0.2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
