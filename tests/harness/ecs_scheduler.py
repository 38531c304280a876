"""ECS's service scheduler on a fleet of simulated one-GPU container instances, and what ECS answers about it.

moto stores services, container instances and target groups but runs nothing: a new desired count shows at once as
`runningCount`, a container instance has no GPU and its `remainingResources` never change, and no target is ever
registered or drained. Two parts stand in for ECS here:

- `EcsScheduler`, a thread that polls moto's services (desiredCount, taskDefinition, loadBalancers) every `poll_s` and
  converges each as the ECS service scheduler does. A task is placed on an instance with a free GPU (one task per
  GPU; the instances in fleet order); none free: it is not placed (ECS's "unable to place a task") and the next poll
  tries again. A placed task is an awsvpc task container on that instance (`SimulatedInstance.add_awsvpc_task`: the
  image's real entrypoint over a real tritonserver, CPU) and is PENDING until Triton is ready; then it is registered
  in each target group of its service (the containerPort the service names) and RUNNING (the ALB's health check is
  folded into the start: moto reports every registered target healthy). A task leaves as ECS stops one: DEACTIVATING
  (deregistered from its target groups, reported `draining` for the deregistration delay, which outlasts
  `AlbRoute`'s refresh, so the route no longer sends it anything), then STOPPING (`docker stop`: SIGTERM, the
  entrypoint's drain, SIGKILL after the stop timeout), then STOPPED, its GPU free again. Scale-in stops the PENDING
  tasks first, then the newest. A new task definition is a rolling deployment at minimum healthy 100 %: tasks of the
  new one start first, those of the old one stop once the new ones run. `peak_instances` is the largest number of
  instances that held at least one task (any status but STOPPED) at once.
- `EcsView`, the endpoint the controller is given (`env()`): an HTTP proxy in front of moto that forwards every
  request unchanged except the answers that describe what runs. DescribeServices carries runningCount/pendingCount
  of the scheduler's tasks and ECS's deployments (PRIMARY for the service's task definition, ACTIVE for another
  whose tasks are still there; COMPLETED once no other is left); DescribeContainerInstances carries the instance's
  GPUs in registeredResources and, in remainingResources, the GPUs, CPU and memory no task holds (so the cutover's
  placement check sees the free instances); ListTasks and DescribeTasks answer the scheduler's tasks (awsvpc
  attachment with the container's address, lastStatus, desiredStatus, group `service:<name>`); DescribeTargetHealth
  adds the targets in their deregistration delay as `draining` (Target.DeregistrationInProgress).

`gpu_fleet()` makes the instances: the Auto Scaling group of `create_app` (tests/harness/bluegreen.py) set to N
instances at max size N (no headroom: what the fleet has is what there is), each registered as a container instance
of the cluster, each a `SimulatedInstance` (its introspection and task metadata endpoints) on one shared subnet,
its host path holding a copy of the caller's model repositories. The model agent does not run: a task serves the
repository its task definition's revision names (`task_env`), as the agent's per-task-definition view would.

Not modelled: ECS placement strategies and constraints (first instance with a free GPU), task retries after a
failure to start (recorded in `errors`), the ALB's own health checks, service events, Auto Scaling launching or
terminating instances, capacity providers' managed scaling.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import threading
import time
import urllib.error
import urllib.request
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from .awsvpc import AwsvpcNetwork, AwsvpcTask
from .bluegreen import APP, CLUSTER, BlueGreenApp, create_app
from .instance_refresh import ECS_TARGET, flat_query
from .model_agent import SimulatedInstance
from .moto import ACCOUNT_ID, REGION, MotoServer
from .ports import free_port

DEREGISTRATION_DELAY_S = 1.0  # AlbRoute refreshes every 0.25 s: a deregistered target gets no request after this
STOP_TIMEOUT_S = 30  # the task definition's stopTimeout: SIGKILL after it
READY_TIMEOUT_S = 240
ELBV2_NS = "http://elasticloadbalancing.amazonaws.com/doc/2015-12-01/"
LIVE = ("PENDING", "RUNNING")  # a task the service counts (not yet stopping)


@dataclass
class GpuInstance:
    """One container instance: its EC2 id, container instance ARN, GPU ids and the simulated host."""

    instance_id: str
    container_instance_arn: str
    gpus: list[str]
    node: SimulatedInstance


@dataclass
class Task:
    """One task the scheduler placed, through its lifecycle."""

    arn: str
    service: str
    task_definition: str
    instance: GpuInstance
    gpu: str
    needs: dict[str, int]  # CPU units and MiB it reserves on its instance
    status: str = "PENDING"  # PENDING, RUNNING, DEACTIVATING, STOPPING, STOPPED
    desired_status: str = "RUNNING"
    container: AwsvpcTask | None = None
    ip: str = ""
    targets: list[tuple[str, int]] = field(default_factory=list)  # (target group ARN, port) it is registered in
    draining_until: float = 0.0
    placed_at: float = field(default_factory=time.monotonic)
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))


@dataclass
class Stop:
    """How one task stopped: `docker stop`'s seconds and the container's exit code (0: the drain finished)."""

    task: str
    service: str
    seconds: float
    exit_code: int


class EcsScheduler:
    """ECS's service scheduler for `services` of `cluster`, on `instances` (see the module docstring)."""

    def __init__(
        self,
        moto: MotoServer,
        cluster: str,
        services: list[str],
        instances: list[GpuInstance],
        task_env: Callable[[str], dict[str, str]],
        deregistration_delay_s: float = DEREGISTRATION_DELAY_S,
        stop_timeout_s: int = STOP_TIMEOUT_S,
        poll_s: float = 0.5,
    ) -> None:
        self.ecs, self.elbv2 = moto.client("ecs"), moto.client("elbv2")
        self.cluster, self.service_names, self.instances = cluster, services, instances
        self.task_env = task_env
        self.deregistration_delay_s, self.stop_timeout_s, self.poll_s = deregistration_delay_s, stop_timeout_s, poll_s
        self.tasks: list[Task] = []
        self.stops: list[Stop] = []
        self.errors: list[str] = []
        self.peak_instances = 0
        self.lock = threading.RLock()
        self._definitions: dict[str, dict[str, Any]] = {}
        self._workers: list[threading.Thread] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="ecs-scheduler")

    # ------------------------------------------------------------ lifecycle

    def start(self) -> EcsScheduler:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop converging, then remove every task's container (no drain: cleanup)."""
        self._stop.set()
        self._thread.join(60)
        for worker in list(self._workers):
            worker.join(STOP_TIMEOUT_S + 30)
        with self.lock:
            for task in self.tasks:
                if task.container is not None:
                    task.container.remove()
                task.status = "STOPPED"

    def reset_peak(self) -> None:
        with self.lock:
            self.peak_instances = len(self._busy_instances())

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                self.converge()
            except Exception as err:  # recorded for the test's report; the loop keeps scheduling
                self.errors.append(f"converge: {type(err).__name__}: {err}")

    # ------------------------------------------------------------ views

    def service_tasks(self, service: str, statuses: tuple[str, ...] = LIVE) -> list[Task]:
        with self.lock:
            return [t for t in self.tasks if t.service == service and t.status in statuses]

    def wait_serving(self, counts: dict[str, int], timeout_s: float = READY_TIMEOUT_S) -> None:
        """Until each service runs exactly its count of tasks, all RUNNING, and no other task is left."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.lock:
                done = all(len(self.service_tasks(s)) == n == len(self.service_tasks(s, ("RUNNING",))) for s, n in counts.items()) and all(
                    t.status in ("RUNNING", "STOPPED") for t in self.tasks
                )
            if done:
                return
            if self.errors:
                raise RuntimeError(f"the ECS scheduler stand-in failed: {self.errors}")
            time.sleep(0.2)
        raise TimeoutError(f"services not at {counts} after {timeout_s} s: {self.describe()}")

    def describe(self) -> str:
        with self.lock:
            return ", ".join(f"{t.service}:{t.task_definition.rsplit('/', 1)[-1]}@{t.instance.instance_id}={t.status}" for t in self.tasks)

    def _busy_instances(self) -> set[str]:
        return {t.instance.instance_id for t in self.tasks if t.status != "STOPPED"}

    def free_gpus(self, instance: GpuInstance) -> list[str]:
        with self.lock:
            held = {t.gpu for t in self.tasks if t.instance is instance and t.status != "STOPPED"}
            return [g for g in instance.gpus if g not in held]

    def held(self, instance: GpuInstance) -> list[Task]:
        with self.lock:
            return [t for t in self.tasks if t.instance is instance and t.status != "STOPPED"]

    # ------------------------------------------------------------ converge

    def converge(self) -> None:
        services = self.ecs.describe_services(cluster=self.cluster, services=self.service_names)["services"]
        for service in services:
            if service.get("status") == "ACTIVE":
                self._converge_service(service)

    def definition(self, reference: str) -> dict[str, Any]:
        """A task definition by ARN or family:revision (moto keeps what update_service was given)."""
        if reference not in self._definitions:
            found = self.ecs.describe_task_definition(taskDefinition=reference)["taskDefinition"]
            self._definitions[reference] = self._definitions[found["taskDefinitionArn"]] = found
        return self._definitions[reference]

    def _converge_service(self, service: dict[str, Any]) -> None:
        name, desired = service["serviceName"], int(service["desiredCount"])
        definition = self.definition(service["taskDefinition"])
        arn = definition["taskDefinitionArn"]
        targets = [
            (lb["targetGroupArn"], int(lb["containerPort"])) for lb in service.get("loadBalancers") or [] if lb.get("targetGroupArn")
        ]
        with self.lock:
            live = [t for t in self.service_tasks(name) if t.desired_status == "RUNNING"]
            current = [t for t in live if t.task_definition == arn]
            others = [t for t in live if t.task_definition != arn]
            for _missing in range(desired - len(current)):
                if not self._place(name, definition, targets):
                    break
            surplus = len(current) - desired
            if surplus > 0:  # PENDING ones first, then the newest
                for task in sorted(current, key=lambda t: (t.status == "RUNNING", -t.placed_at))[:surplus]:
                    self._begin_stop(task)
            running_current = [t for t in current if t.status == "RUNNING"]
            if others and len(running_current) >= desired:  # rolling deployment, minimum healthy 100 %
                for task in others:
                    self._begin_stop(task)

    def _place(self, service: str, definition: dict[str, Any], targets: list[tuple[str, int]]) -> bool:
        for instance in self.instances:
            gpus = self.free_gpus(instance)
            if not gpus:
                continue
            containers = definition.get("containerDefinitions") or []
            needs = {
                "CPU": int(definition.get("cpu") or 0) or sum(int(c.get("cpu") or 0) for c in containers),
                "MEMORY": int(definition.get("memory") or 0)
                or sum(int(c.get("memoryReservation") or c.get("memory") or 0) for c in containers),
            }
            arn = f"arn:aws:ecs:{REGION}:{ACCOUNT_ID}:task/{self.cluster}/{uuid.uuid4().hex}"
            task = Task(arn, service, definition["taskDefinitionArn"], instance, gpus[0], needs, targets=[])
            self.tasks.append(task)
            self.peak_instances = max(self.peak_instances, len(self._busy_instances()))
            self._spawn(self._run_task, task, targets)
            return True
        return False

    def _spawn(self, work: Callable[..., None], *args: Any) -> None:
        worker = threading.Thread(target=work, args=args, daemon=True)
        self._workers = [w for w in self._workers if w.is_alive()] + [worker]
        worker.start()

    def _run_task(self, task: Task, targets: list[tuple[str, int]]) -> None:
        definition = self.definition(task.task_definition)
        try:
            container = task.instance.node.add_awsvpc_task(
                definition["family"], definition["revision"], env=self.task_env(task.task_definition), wait_ready=False
            )
            task.container, task.ip = container, container.ip
            container.wait_ready(READY_TIMEOUT_S)
        except Exception as err:  # the task never ran: its GPU is free again (ECS would retry it)
            self.errors.append(f"task {task.arn} of {task.service} did not start: {type(err).__name__}: {err}")
            if task.container is not None:
                task.container.remove()
            with self.lock:
                task.status, task.desired_status = "STOPPED", "STOPPED"
            return
        with self.lock:
            if task.desired_status == "STOPPED":  # scaled in while it started: it never joins its target groups
                self._spawn(self._stop_task, task)
                return
            for group, port in targets:
                self.elbv2.register_targets(TargetGroupArn=group, Targets=[{"Id": task.ip, "Port": port}])
            task.targets = targets
            task.status = "RUNNING"

    def _begin_stop(self, task: Task) -> None:
        if task.desired_status == "STOPPED":
            return
        task.desired_status = "STOPPED"
        if task.status == "RUNNING":
            self._spawn(self._stop_task, task)
        # a PENDING task is stopped by its start thread once its container is up

    def _stop_task(self, task: Task) -> None:
        with self.lock:
            task.status = "DEACTIVATING"
            task.draining_until = time.monotonic() + self.deregistration_delay_s
        try:
            for group, port in task.targets:
                self.elbv2.deregister_targets(TargetGroupArn=group, Targets=[{"Id": task.ip, "Port": port}])
            time.sleep(self.deregistration_delay_s)
            with self.lock:
                task.status = "STOPPING"
            assert task.container is not None
            seconds, code = task.container.stop(timeout_s=self.stop_timeout_s)
            self.stops.append(Stop(task.arn, task.service, round(seconds, 3), code))
        except Exception as err:
            self.errors.append(f"task {task.arn} of {task.service} did not stop cleanly: {type(err).__name__}: {err}")
        finally:
            if task.container is not None:
                task.container.remove()
            with self.lock:
                task.status = "STOPPED"

    # ------------------------------------------------------------ what ECS answers

    def service_view(self, service: dict[str, Any]) -> dict[str, Any]:
        """A DescribeServices entry with the counts and deployments of what runs."""
        name = service.get("serviceName", "")
        if name not in self.service_names:
            return service
        arn = self.definition(service["taskDefinition"])["taskDefinitionArn"] if service.get("taskDefinition") else ""
        with self.lock:
            present = [t for t in self.tasks if t.service == name and t.status != "STOPPED"]
        by_definition: dict[str, list[Task]] = {}
        for task in present:
            by_definition.setdefault(task.task_definition, []).append(task)
        primary = dict((service.get("deployments") or [{}])[0])
        others = [d for d in by_definition if d != arn]

        def counts(tasks: list[Task]) -> dict[str, int]:
            return {
                "runningCount": sum(1 for t in tasks if t.status == "RUNNING"),
                "pendingCount": sum(1 for t in tasks if t.status == "PENDING"),
            }

        primary.update(
            status="PRIMARY",
            taskDefinition=arn,
            desiredCount=service["desiredCount"],
            rolloutState="IN_PROGRESS" if others else "COMPLETED",
            **counts(by_definition.get(arn, [])),
        )
        deployments = [primary] + [
            {
                **primary,
                "id": f"ecs-svc/{uuid.uuid5(uuid.NAMESPACE_URL, d).int % 10**12}",
                "status": "ACTIVE",
                "taskDefinition": d,
                "desiredCount": 0,
                "rolloutState": "COMPLETED",
                **counts(by_definition[d]),
            }
            for d in others
        ]
        return {**service, **counts(present), "deployments": deployments}

    def container_instance_view(self, found: dict[str, Any]) -> dict[str, Any]:
        instance = next((i for i in self.instances if i.instance_id == found.get("ec2InstanceId")), None)
        if instance is None:
            return found
        held = self.held(instance)
        gpu = {"name": "GPU", "type": "STRINGSET", "doubleValue": 0.0, "integerValue": 0, "longValue": 0}
        registered = [r for r in found.get("registeredResources") or [] if r.get("name") != "GPU"] + [
            {**gpu, "stringSetValue": instance.gpus}
        ]
        remaining = []
        for resource in found.get("remainingResources") or []:
            if resource.get("name") in ("CPU", "MEMORY"):
                total = next((int(r["integerValue"]) for r in registered if r.get("name") == resource["name"]), 0)
                resource = {**resource, "integerValue": total - sum(t.needs[resource["name"]] for t in held)}
            if resource.get("name") != "GPU":
                remaining.append(resource)
        remaining.append({**gpu, "stringSetValue": self.free_gpus(instance)})
        return {
            **found,
            "registeredResources": registered,
            "remainingResources": remaining,
            "runningTasksCount": sum(1 for t in held if t.status != "PENDING"),
            "pendingTasksCount": sum(1 for t in held if t.status == "PENDING"),
        }

    def task_view(self, task: Task) -> dict[str, Any]:
        last = {"DEACTIVATING": "DEACTIVATING", "STOPPING": "STOPPING"}.get(task.status, task.status)
        details = [{"name": "subnetId", "value": "subnet-stand-in"}] + (
            [{"name": "privateIPv4Address", "value": task.ip}] if task.ip else []
        )
        return {
            "taskArn": task.arn,
            "clusterArn": f"arn:aws:ecs:{REGION}:{ACCOUNT_ID}:cluster/{self.cluster}",
            "taskDefinitionArn": task.task_definition,
            "containerInstanceArn": task.instance.container_instance_arn,
            "group": f"service:{task.service}",
            "startedBy": "ecs-svc/stand-in",
            "lastStatus": last,
            "desiredStatus": task.desired_status,
            "launchType": "EC2",
            "createdAt": task.created_at.timestamp(),
            "attachments": [
                {"id": task.arn.rsplit("/", 1)[-1], "type": "ElasticNetworkInterface", "status": "ATTACHED", "details": details}
            ],
            "containers": [{"name": "triton", "lastStatus": last, "taskArn": task.arn}],
        }

    def draining_targets(self, target_group: str) -> list[tuple[str, int]]:
        now = time.monotonic()
        with self.lock:
            return [
                (t.ip, port)
                for t in self.tasks
                if t.status in ("DEACTIVATING", "STOPPING") and t.draining_until > now
                for group, port in t.targets
                if group == target_group
            ]


class EcsView:
    """moto behind a proxy that answers what the scheduler runs (see the module docstring). `endpoint`, `env()` and
    `client()` as MotoServer's, for the controller."""

    def __init__(self, moto: MotoServer, scheduler: EcsScheduler) -> None:
        self.moto, self.scheduler = moto, scheduler
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True, name="ecs-view")

    def start(self) -> EcsView:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def env(self) -> dict[str, str]:
        return {**self.moto.env(), "AWS_ENDPOINT_URL": self.endpoint, "AWS_URL": self.endpoint}

    def client(self, service: str) -> Any:
        import boto3

        return boto3.client(
            service, region_name=REGION, endpoint_url=self.endpoint, aws_access_key_id="testing", aws_secret_access_key="testing"
        )

    # ------------------------------------------------------------ answers

    def answer_ecs(self, action: str, params: dict[str, Any]) -> dict[str, Any] | None:
        """An answer for ListTasks / DescribeTasks of the scheduler's services, None to forward."""
        scheduler = self.scheduler
        if action == "ListTasks" and params.get("serviceName") in scheduler.service_names:
            wanted = params.get("desiredStatus", "RUNNING")
            with scheduler.lock:
                arns = [
                    t.arn
                    for t in scheduler.tasks
                    if t.service == params["serviceName"] and t.desired_status == wanted and t.status != "STOPPED"
                ]
            return {"taskArns": arns}
        if action == "DescribeTasks":
            with scheduler.lock:
                mine = {t.arn: t for t in scheduler.tasks}
            asked = params.get("tasks") or []
            if asked and all(a in mine for a in asked):
                return {"tasks": [scheduler.task_view(mine[a]) for a in asked], "failures": []}
        return None

    def rewrite_ecs(self, action: str, answer: dict[str, Any]) -> dict[str, Any]:
        if action == "DescribeServices":
            answer["services"] = [self.scheduler.service_view(s) for s in answer.get("services") or []]
        elif action == "DescribeContainerInstances":
            answer["containerInstances"] = [self.scheduler.container_instance_view(c) for c in answer.get("containerInstances") or []]
        return answer

    def rewrite_target_health(self, params: dict[str, Any], body: bytes) -> bytes:
        """Targets in their deregistration delay, added as `draining` (moto forgot them at DeregisterTargets)."""
        draining = self.scheduler.draining_targets(params.get("TargetGroupArn", ""))
        if not draining:
            return body
        root = ET.fromstring(body)
        holder = next(e for e in root.iter() if e.tag.rsplit("}", 1)[-1] == "TargetHealthDescriptions")
        listed = {e.text for e in holder.iter() if e.tag.rsplit("}", 1)[-1] == "Id"}
        for ip, port in [(ip, port) for ip, port in draining if ip not in listed]:
            member = ET.SubElement(holder, f"{{{ELBV2_NS}}}member")
            target = ET.SubElement(member, f"{{{ELBV2_NS}}}Target")
            ET.SubElement(target, f"{{{ELBV2_NS}}}Id").text = ip
            ET.SubElement(target, f"{{{ELBV2_NS}}}Port").text = str(port)
            ET.SubElement(member, f"{{{ELBV2_NS}}}HealthCheckPort").text = str(port)
            health = ET.SubElement(member, f"{{{ELBV2_NS}}}TargetHealth")
            ET.SubElement(health, f"{{{ELBV2_NS}}}State").text = "draining"
            ET.SubElement(health, f"{{{ELBV2_NS}}}Reason").text = "Target.DeregistrationInProgress"
            ET.SubElement(health, f"{{{ELBV2_NS}}}Description").text = "Target deregistration is in progress"
        return ET.tostring(root, encoding="utf-8")

    # ------------------------------------------------------------ HTTP

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        view = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _any(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                target = self.headers.get("X-Amz-Target", "")
                if target.startswith(ECS_TARGET):
                    action, params = target[len(ECS_TARGET) :], json.loads(body or b"{}")
                    answered = view.answer_ecs(action, params)
                    if answered is not None:
                        return self.send(200, json.dumps(answered, default=str).encode(), {"Content-Type": "application/x-amz-json-1.1"})
                    status, headers, answer = self.forward(body)
                    if status == 200 and action in ("DescribeServices", "DescribeContainerInstances"):
                        answer = json.dumps(view.rewrite_ecs(action, json.loads(answer)), default=str).encode()
                    return self.send(status, answer, headers)
                status, headers, answer = self.forward(body)
                if status == 200 and self.command == "POST" and b"DescribeTargetHealth" in body:
                    params = flat_query(body.decode())
                    if params.get("Action") == "DescribeTargetHealth":
                        answer = view.rewrite_target_health(params, answer)
                self.send(status, answer, headers)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _any

            def forward(self, body: bytes) -> tuple[int, dict[str, str], bytes]:
                request = urllib.request.Request(view.moto.endpoint + self.path, data=body or None, method=self.command)
                for key, value in self.headers.items():
                    if key.lower() not in ("host", "content-length", "connection"):
                        request.add_header(key, value)
                try:
                    with urllib.request.urlopen(request, timeout=60) as answer:
                        return answer.status, dict(answer.headers), answer.read()
                except urllib.error.HTTPError as e:
                    return e.code, dict(e.headers), e.read()

            def send(self, status: int, payload: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                for key, value in headers.items():
                    if key.lower() not in ("content-length", "connection", "transfer-encoding", "date", "server"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)

        return Handler


def gpu_fleet(
    moto: MotoServer,
    workdir: Path,
    count: int,
    cluster: str,
    application: str,
    network: AwsvpcNetwork,
    repositories: Path,
    group: str = "gpu",
) -> list[GpuInstance]:
    """`count` one-GPU container instances: the Auto Scaling group `group` at `count` of max `count`, each of its
    instances registered in `cluster` and simulated on `network`, with `repositories` copied to its host path."""
    autoscaling, ecs = moto.client("autoscaling"), moto.client("ecs")
    autoscaling.update_auto_scaling_group(AutoScalingGroupName=group, MinSize=count, MaxSize=count, DesiredCapacity=count)
    found = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[group])["AutoScalingGroups"][0]["Instances"]
    instances = []
    for member in sorted(found, key=lambda m: m["InstanceId"]):
        instance_id = member["InstanceId"]
        document = json.dumps({"instanceId": instance_id, "region": REGION})
        arn = ecs.register_container_instance(cluster=cluster, instanceIdentityDocument=document)["containerInstance"][
            "containerInstanceArn"
        ]
        node = SimulatedInstance(
            workdir / instance_id, moto, "unused-bucket", "models", application, instance_id, cluster=cluster, network=network
        )
        for repository in repositories.iterdir():  # each one's own mode: the tasks run as uid 1000
            shutil.copytree(repository, node.host_path / repository.name, dirs_exist_ok=True)
        instances.append(GpuInstance(instance_id, arn, [f"GPU-{instance_id}-0"], node))
    return instances


@dataclass
class ScheduledApp:
    """`create_app`'s application whose services run on a simulated GPU fleet (`scheduler`); the controller's
    endpoint is `view` (moto behind EcsView), `moto` the server itself."""

    moto: MotoServer
    app: BlueGreenApp
    fleet: list[GpuInstance]
    scheduler: EcsScheduler
    view: EcsView

    @property
    def services(self) -> dict[str, str]:
        return {color: f"{APP}-{color}" for color in ("blue", "green")}


@contextlib.contextmanager
def scheduled_app(
    workdir: Path,
    instances: int,
    live_tasks: int,
    repositories: Path,
    task_env: Callable[[str], dict[str, str]],
    deregistration_delay_s: float = DEREGISTRATION_DELAY_S,
) -> Iterator[ScheduledApp]:
    """A fresh moto server with `create_app` (blue live at `live_tasks` tasks of revision 1), a fleet of `instances`
    one-GPU instances, the scheduler running blue's tasks (registered once ready) and the view in front of moto;
    everything stopped and removed afterwards."""
    workdir.mkdir(parents=True, exist_ok=True)
    moto = MotoServer(workdir).start()
    network = AwsvpcNetwork().create()  # before the scheduler's threads start tasks on it at once
    fleet: list[GpuInstance] = []
    scheduler = view = None
    try:
        app = create_app(moto, live_tasks=live_tasks)
        elbv2 = moto.client("elbv2")
        for group in app.target_groups.values():  # create_app's stand-in targets: the scheduler registers real tasks
            stale = [t["Target"] for t in elbv2.describe_target_health(TargetGroupArn=group)["TargetHealthDescriptions"]]
            if stale:
                elbv2.deregister_targets(TargetGroupArn=group, Targets=stale)
        fleet = gpu_fleet(moto, workdir / "fleet", instances, CLUSTER, APP, network, repositories)
        services = [f"{APP}-blue", f"{APP}-green"]
        scheduler = EcsScheduler(moto, CLUSTER, services, fleet, task_env, deregistration_delay_s=deregistration_delay_s).start()
        view = EcsView(moto, scheduler).start()
        scheduler.wait_serving({services[0]: live_tasks, services[1]: 0})
        yield ScheduledApp(moto, app, fleet, scheduler, view)
    finally:
        if scheduler is not None:
            scheduler.stop()
        if view is not None:
            view.stop()
        for instance in fleet:
            instance.node.stop()
        network.remove()
        moto.stop()
