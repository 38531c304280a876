"""A stand-in for what moto 5.2.5 does not model of an AMI rollout: an HTTP proxy in front of a moto server.

Every request goes to moto unchanged (botocore has already validated its shape against the service model), except:

- Auto Scaling `StartInstanceRefresh`, `DescribeInstanceRefreshes`, `CancelInstanceRefresh` and
  `RollbackInstanceRefresh` (moto has none) are answered here. A refresh runs in a thread: with skip matching, it
  replaces the group's instances not on the desired launch template version one at a time, pausing
  `CheckpointDelay` seconds at each checkpoint (its `PercentageComplete` is the last checkpoint reached), and ends
  `Successful`. Each replacement models ECS managed draining and the group: the container instance is set DRAINING
  (moto's UpdateContainerInstancesState), the instance shows `LifecycleState` `Terminating:Wait` for `drain_s`, its
  tasks are stopped, its container instance deregistered, then moto's TerminateInstanceInAutoScalingGroup (without
  decrementing) makes moto launch the replacement from the group's launch template. moto launches only from the
  group's own version, so the stand-in points the group at the desired version while it replaces, and back at the
  original one on a rollback or a cancel (AWS changes the group only when the refresh succeeds). With `AutoRollback`
  and an `AlarmSpecification`, an alarm in ALARM (moto's CloudWatch state) between two replacements rolls back, as
  AWS does. A rollback replaces the instances of the desired version the same way and ends `RollbackSuccessful`.
- moto reports every instance of a group on the template's default version: `DescribeAutoScalingGroups` answers are
  rewritten with the version each instance was launched from (recorded here) and `Terminating:Wait` while one leaves.
- An instance's boot (`RunInstances` answers and the refresh's replacements) is modelled by its AMI's `Boot`: it
  joins the cluster (moto's RegisterContainerInstance) or not; `DescribeContainerInstances` answers carry the GPUs the
  ECS agent would register (moto registers none) and its health report; `DescribeTasks` answers carry `task_address`
  as a task's awsvpc address (moto's ENI addresses are reachable by nobody), so a test's Triton can stand behind it.
- EC2 `DeleteLaunchTemplateVersions` (moto has none) is answered here: the versions deleted are left out of every
  later `DescribeLaunchTemplateVersions` answer (moto still launches nothing from them: the group never points there).
- ECS `RunTask` of an awsvpc task: moto 5.2.5 fails it on EC2 (its ENI has no private DNS name) and ignores placement
  constraints. The stand-in places it: on the instance a `memberOf(ec2InstanceId == ...)` constraint names (refused
  without one, or when that instance is not ACTIVE in the cluster), RUNNING at once, its ENI address the instance's
  `Boot.task_address`; `DescribeTasks` and `StopTask` answer for the tasks it placed.
- ECS `managedDraining` of a capacity provider, which moto drops, is kept from Create/UpdateCapacityProvider and put
  back into DescribeCapacityProviders answers.

Not modelled: lifecycle hooks (ECS's own hook is implied by the drain above), warm pools, instance warmup (a
replacement counts at once), MinHealthy/MaxHealthyPercentage (always one at a time), bake time, scaling activities.
`calls` lists every request's (service, action), answered here or by moto.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
import urllib.request
import uuid
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .moto import MotoServer
from .ports import free_port

ASG_NS = "http://autoscaling.amazonaws.com/doc/2011-01-01/"
EC2_NS = "http://ec2.amazonaws.com/doc/2016-11-15/"
ECS_TARGET = "AmazonEC2ContainerServiceV20141113."
ET.register_namespace("", ASG_NS)
ET.register_namespace("", EC2_NS)


@dataclass
class Boot:
    """What an instance of one AMI does at boot, as far as the AWS APIs show it."""

    joins: bool = True
    gpus: int = 1
    health: str = "OK"  # the ECS agent's overall and ACCELERATED_COMPUTE status: OK or IMPAIRED
    task_address: str = "127.0.0.1"  # the awsvpc address of a task placed on it


@dataclass
class RefreshRun:
    refresh_id: str
    group: str
    desired_version: str
    preferences: dict[str, Any]
    original: dict[str, str]
    status: str = "Pending"
    reason: str = ""
    percentage: int = 0
    to_update: int = 0
    started: str = field(default_factory=lambda: datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
    abort: str = ""  # rollback | cancel


def flat_query(body: str) -> dict[str, Any]:
    """The query protocol's flattened parameters (A.B.member.1=x) as nested dicts and lists."""
    root: dict[str, Any] = {}
    for key, values in urllib.parse.parse_qs(body, keep_blank_values=True).items():
        node: Any = root
        parts = key.split(".")
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            if part == "member":
                continue
            if part.isdigit():
                part = int(part) - 1
                while len(node) <= part:
                    node.append({})
                if last:
                    node[part] = values[0]
                else:
                    node = node[part]
                continue
            nxt_is_member = not last and (parts[i + 1] == "member" or parts[i + 1].isdigit())
            if last:
                node[part] = values[0]
            else:
                node = node.setdefault(part, [] if nxt_is_member else {})
    return root


class RefreshProxy:
    def __init__(self, moto: MotoServer, cluster: str, drain_s: float = 0.6) -> None:
        self.moto = moto
        self.cluster = cluster
        self.drain_s = drain_s
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.boots: dict[str, Boot] = {}  # AMI id -> its boot
        self.booted: dict[str, Boot] = {}  # instance id -> the boot it had
        self.versions: dict[str, str] = {}  # instance id -> launch template version it was launched from
        self.leaving: set[str] = set()
        self.refreshes: dict[str, list[RefreshRun]] = {}
        self.draining_setting: dict[str, str] = {}
        self.deleted_versions: set[tuple[str, str]] = set()  # (launch template id, version)
        self.tasks: dict[str, dict[str, Any]] = {}  # awsvpc tasks placed here
        self.calls: list[tuple[str, str]] = []
        self.drained_before_termination: dict[str, str] = {}
        self.lock = threading.RLock()
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    # ------------------------------------------------------------ lifecycle

    def start(self) -> RefreshProxy:
        self.thread.start()
        return self

    def stop(self) -> None:
        with self.lock:
            for runs in self.refreshes.values():
                for run in runs:
                    run.abort = run.abort or "cancel"
        self.server.shutdown()
        self.server.server_close()

    def env(self) -> dict[str, str]:
        env = self.moto.env()
        env["AWS_ENDPOINT_URL"] = env["AWS_URL"] = self.endpoint
        return env

    def client(self, service: str) -> Any:
        import boto3

        env = self.moto.env()
        return boto3.client(
            service, region_name=env["AWS_REGION"], endpoint_url=self.endpoint, aws_access_key_id="testing", aws_secret_access_key="testing"
        )

    # ------------------------------------------------------------ instances

    def boot(self, instance_id: str, version: str | None = None) -> None:
        """An instance comes up: it joins the cluster as its AMI's Boot says (the test's stand-in for the AMI)."""
        ec2, ecs = self.moto.client("ec2"), self.moto.client("ecs")
        found = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
        boot = self.boots.get(found["ImageId"], Boot())
        with self.lock:
            self.booted[instance_id] = boot
            if version is not None:
                self.versions[instance_id] = version
        if boot.joins:
            document = json.dumps(
                {"instanceId": instance_id, "instanceType": found["InstanceType"], "region": self.moto.env()["AWS_REGION"]}
            )
            ecs.register_container_instance(cluster=self.cluster, instanceIdentityDocument=document)

    def container_instance(self, instance_id: str) -> str:
        ecs = self.moto.client("ecs")
        arns = ecs.list_container_instances(cluster=self.cluster)["containerInstanceArns"]
        if not arns:
            return ""
        described = ecs.describe_container_instances(cluster=self.cluster, containerInstances=arns)["containerInstances"]
        return next((c["containerInstanceArn"] for c in described if c["ec2InstanceId"] == instance_id and c["status"] != "INACTIVE"), "")

    def replace(self, run: RefreshRun, instance_id: str, version: str) -> None:
        """ECS managed draining, then the group's termination and moto's replacement, then the new instance's boot."""
        ecs, autoscaling = self.moto.client("ecs"), self.moto.client("autoscaling")
        arn = self.container_instance(instance_id)
        if arn:
            ecs.update_container_instances_state(cluster=self.cluster, containerInstances=[arn], status="DRAINING")
            self.drained_before_termination[instance_id] = "DRAINING"
        with self.lock:
            self.leaving.add(instance_id)
        time.sleep(self.drain_s)
        if arn:
            for task in ecs.list_tasks(cluster=self.cluster, containerInstance=arn)["taskArns"]:
                ecs.stop_task(cluster=self.cluster, task=task, reason="container instance DRAINING (managed draining)")
            ecs.deregister_container_instance(cluster=self.cluster, containerInstance=arn, force=True)
        before = {i["InstanceId"] for i in self._group(autoscaling, run.group)["Instances"]}
        autoscaling.terminate_instance_in_auto_scaling_group(InstanceId=instance_id, ShouldDecrementDesiredCapacity=False)
        with self.lock:
            self.leaving.discard(instance_id)
        for new in sorted({i["InstanceId"] for i in self._group(autoscaling, run.group)["Instances"]} - before):
            self.boot(new, version)

    @staticmethod
    def _group(autoscaling: Any, name: str) -> dict[str, Any]:
        return autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[name])["AutoScalingGroups"][0]

    # ------------------------------------------------------------ the refresh

    def _alarming(self, run: RefreshRun) -> bool:
        names = ((run.preferences.get("AlarmSpecification") or {}).get("Alarms")) or []
        if not names or str(run.preferences.get("AutoRollback", "false")).lower() != "true":
            return False
        alarms = self.moto.client("cloudwatch").describe_alarms(AlarmNames=names)["MetricAlarms"]
        return any(a["StateValue"] == "ALARM" for a in alarms)

    def _wait(self, run: RefreshRun, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end and not run.abort:
            if self._alarming(run):
                run.abort = "rollback"
                return
            time.sleep(0.1)

    def _run(self, run: RefreshRun) -> None:
        autoscaling = self.moto.client("autoscaling")
        try:
            group = self._group(autoscaling, run.group)
            outdated = [i["InstanceId"] for i in group["Instances"] if self.versions.get(i["InstanceId"]) != run.desired_version]
            total = max(len(group["Instances"]), 1)
            run.to_update, run.status = len(outdated), "InProgress"
            autoscaling.update_auto_scaling_group(
                AutoScalingGroupName=run.group,
                LaunchTemplate={"LaunchTemplateId": run.original["LaunchTemplateId"], "Version": run.desired_version},
            )
            checkpoints = [int(p) for p in run.preferences.get("CheckpointPercentages") or [100]]
            delay = float(run.preferences.get("CheckpointDelay", 0))
            done = total - len(outdated)
            for point in checkpoints:
                while outdated and done * 100 < point * total and not run.abort:
                    if self._alarming(run):
                        run.abort = "rollback"
                        break
                    self.replace(run, outdated.pop(0), run.desired_version)
                    done += 1
                    run.to_update = len(outdated)
                if run.abort:
                    break
                run.percentage = point
                if point < 100:
                    run.reason = f"Waiting at checkpoint {point}%"
                    self._wait(run, delay)
                    run.reason = ""
            if run.abort == "rollback":
                self._roll_back(run)
            elif run.abort == "cancel":
                self._put_back(run)
                run.status = "Cancelled"
            else:
                run.status, run.percentage = "Successful", 100
        except Exception as e:  # a stand-in failure shows as a failed refresh, as AWS would show its own
            run.status, run.reason = "Failed", f"stand-in error: {e}"

    def _put_back(self, run: RefreshRun) -> None:
        self.moto.client("autoscaling").update_auto_scaling_group(AutoScalingGroupName=run.group, LaunchTemplate=run.original)

    def _roll_back(self, run: RefreshRun) -> None:
        run.status, run.reason = "RollbackInProgress", "rolling back"
        self._put_back(run)
        group = self._group(self.moto.client("autoscaling"), run.group)
        for instance in [i["InstanceId"] for i in group["Instances"] if self.versions.get(i["InstanceId"]) == run.desired_version]:
            self.replace(run, instance, run.original["Version"])
        run.status, run.reason = "RollbackSuccessful", "rolled back"

    # ------------------------------------------------------------ answers

    def answer_autoscaling(self, action: str, params: dict[str, Any]) -> str | None:
        group = params.get("AutoScalingGroupName", "")
        runs = self.refreshes.setdefault(group, [])
        active = next((r for r in runs if r.status in ("Pending", "InProgress", "Cancelling", "RollbackInProgress")), None)
        if action == "StartInstanceRefresh":
            if active:
                return self.error("InstanceRefreshInProgress", f"An Instance Refresh is already in progress for {group}")
            template = self._group(self.moto.client("autoscaling"), group)["LaunchTemplate"]
            original = {"LaunchTemplateId": template["LaunchTemplateId"], "Version": str(template["Version"])}
            desired = ((params.get("DesiredConfiguration") or {}).get("LaunchTemplate") or {}).get("Version", original["Version"])
            run = RefreshRun(uuid.uuid4().hex, group, str(desired), params.get("Preferences") or {}, original)
            runs.insert(0, run)
            threading.Thread(target=self._run, args=(run,), daemon=True).start()
            return self.result(action, f"<InstanceRefreshId>{run.refresh_id}</InstanceRefreshId>")
        if action in ("CancelInstanceRefresh", "RollbackInstanceRefresh"):
            if not active:
                return self.error("ActiveInstanceRefreshNotFound", f"No in progress or pending Instance Refresh found for {group}")
            active.abort = "rollback" if action == "RollbackInstanceRefresh" else "cancel"
            active.status = "RollbackInProgress" if action == "RollbackInstanceRefresh" else "Cancelling"
            return self.result(action, f"<InstanceRefreshId>{active.refresh_id}</InstanceRefreshId>")
        if action == "DescribeInstanceRefreshes":
            members = "".join(self.describe(run) for run in runs)
            return self.result(action, f"<InstanceRefreshes>{members}</InstanceRefreshes>")
        return None

    @staticmethod
    def describe(run: RefreshRun) -> str:
        points = "".join(f"<member>{p}</member>" for p in run.preferences.get("CheckpointPercentages") or [])
        return (
            f"<member><InstanceRefreshId>{run.refresh_id}</InstanceRefreshId><AutoScalingGroupName>{run.group}</AutoScalingGroupName>"
            f"<Status>{run.status}</Status><StatusReason>{run.reason}</StatusReason><StartTime>{run.started}</StartTime>"
            f"<PercentageComplete>{run.percentage}</PercentageComplete><InstancesToUpdate>{run.to_update}</InstancesToUpdate>"
            f"<Preferences><CheckpointPercentages>{points}</CheckpointPercentages></Preferences>"
            f"<DesiredConfiguration><LaunchTemplate><LaunchTemplateId>{run.original['LaunchTemplateId']}</LaunchTemplateId>"
            f"<Version>{run.desired_version}</Version></LaunchTemplate></DesiredConfiguration></member>"
        )

    @staticmethod
    def result(action: str, inner: str) -> str:
        return (
            f'<{action}Response xmlns="{ASG_NS}"><{action}Result>{inner}</{action}Result>'
            f"<ResponseMetadata><RequestId>{uuid.uuid4()}</RequestId></ResponseMetadata></{action}Response>"
        )

    @staticmethod
    def error(code: str, message: str) -> str:
        return f'<ErrorResponse xmlns="{ASG_NS}"><Error><Type>Sender</Type><Code>{code}</Code><Message>{message}</Message></Error></ErrorResponse>'

    def rewrite_groups(self, body: bytes) -> bytes:
        root = ET.fromstring(body)
        for member in root.iter(f"{{{ASG_NS}}}member"):
            instance = member.find(f"{{{ASG_NS}}}InstanceId")
            if instance is None or member.find(f"{{{ASG_NS}}}LifecycleState") is None:
                continue
            with self.lock:
                version, leaving = self.versions.get(instance.text or ""), (instance.text in self.leaving)
            node = member.find(f"{{{ASG_NS}}}LaunchTemplate/{{{ASG_NS}}}Version")
            if version is not None and node is not None:
                node.text = version
            if leaving:
                member.find(f"{{{ASG_NS}}}LifecycleState").text = "Terminating:Wait"  # type: ignore[union-attr]
        return ET.tostring(root, encoding="utf-8")

    def rewrite_ecs(self, action: str, request: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
        if action in ("CreateCapacityProvider", "UpdateCapacityProvider"):
            setting = (request.get("autoScalingGroupProvider") or {}).get("managedDraining")
            name = request.get("name", "")
            self.draining_setting[name] = setting or self.draining_setting.get(name) or "ENABLED"  # AWS's default
        if action in ("DescribeCapacityProviders", "CreateCapacityProvider", "UpdateCapacityProvider"):
            providers = answer.get("capacityProviders") or ([answer["capacityProvider"]] if "capacityProvider" in answer else [])
            for provider in providers:
                if provider.get("autoScalingGroupProvider") is not None:
                    provider["autoScalingGroupProvider"]["managedDraining"] = self.draining_setting.get(provider.get("name", ""), "ENABLED")
        if action == "DescribeContainerInstances":
            for found in answer.get("containerInstances") or []:
                boot = self.booted.get(found.get("ec2InstanceId", ""))
                if boot is None:
                    continue
                found["registeredResources"] = [r for r in found.get("registeredResources") or [] if r.get("name") != "GPU"] + [
                    {"name": "GPU", "type": "STRINGSET", "stringSetValue": [f"GPU-{found['ec2InstanceId']}-{n}" for n in range(boot.gpus)]}
                ]
                found["healthStatus"] = {"overallStatus": boot.health, "details": [{"type": "ACCELERATED_COMPUTE", "status": boot.health}]}
        if action in ("DescribeTasks", "RunTask"):
            by_arn = self._container_instance_boots()
            for task in answer.get("tasks") or []:
                boot = by_arn.get(task.get("containerInstanceArn", ""))
                for attachment in task.get("attachments") or [] if boot else []:
                    for detail in attachment.get("details") or []:
                        if detail.get("name") == "privateIPv4Address":
                            detail["value"] = boot.task_address  # type: ignore[union-attr]
        return answer

    def answer_tasks(self, action: str, params: dict[str, Any]) -> dict[str, Any] | None:
        if action == "RunTask":
            if not params.get("networkConfiguration"):
                return None
            expressions = [c.get("expression", "") for c in params.get("placementConstraints") or [] if c.get("type") == "memberOf"]
            wanted = next((e.split("==", 1)[1].strip() for e in expressions if e.replace(" ", "").startswith("ec2InstanceId==")), "")
            arn = self.container_instance(wanted) if wanted else ""
            if not arn:
                return {"tasks": [], "failures": [{"arn": wanted or "(any)", "reason": "RESOURCE:placement constraint not met"}]}
            boot = self.booted.get(wanted, Boot())
            task_arn = f"arn:aws:ecs:us-east-1:123456789012:task/{self.cluster}/{uuid.uuid4().hex}"
            details = [{"name": "privateIPv4Address", "value": boot.task_address}]
            task = {
                "taskArn": task_arn,
                "clusterArn": f"arn:aws:ecs:us-east-1:123456789012:cluster/{self.cluster}",
                "taskDefinitionArn": params.get("taskDefinition", ""),
                "containerInstanceArn": arn,
                "lastStatus": "RUNNING",
                "desiredStatus": "RUNNING",
                "startedBy": params.get("startedBy", ""),
                "launchType": "EC2",
                "attachments": [{"id": uuid.uuid4().hex, "type": "ElasticNetworkInterface", "status": "ATTACHED", "details": details}],
            }
            self.tasks[task_arn] = task
            return {"tasks": [task], "failures": []}
        if action == "DescribeTasks":
            mine = [self.tasks[a] for a in params.get("tasks") or [] if a in self.tasks]
            return {"tasks": mine, "failures": []} if mine else None
        if action == "StopTask" and params.get("task") in self.tasks:
            task = self.tasks[params["task"]]
            task.update({"lastStatus": "STOPPED", "desiredStatus": "STOPPED", "stoppedReason": params.get("reason", "")})
            return {"task": task}
        return None

    def delete_versions(self, params: dict[str, Any]) -> str:
        template = params.get("LaunchTemplateId", "")
        items = ""
        for version in params.get("LaunchTemplateVersion") or []:
            self.deleted_versions.add((template, str(version)))
            items += f"<item><launchTemplateId>{template}</launchTemplateId><versionNumber>{version}</versionNumber></item>"
        return (
            f'<DeleteLaunchTemplateVersionsResponse xmlns="{EC2_NS}"><requestId>{uuid.uuid4()}</requestId>'
            f"<successfullyDeletedLaunchTemplateVersionSet>{items}</successfullyDeletedLaunchTemplateVersionSet>"
            "<unsuccessfullyDeletedLaunchTemplateVersionSet/></DeleteLaunchTemplateVersionsResponse>"
        )

    def rewrite_versions(self, body: bytes) -> bytes:
        root = ET.fromstring(body)

        def child(item: ET.Element, name: str) -> str:
            return next((c.text or "" for c in item if c.tag.rsplit("}", 1)[-1] == name), "")

        for holder in [e for e in root.iter() if e.tag.rsplit("}", 1)[-1] == "launchTemplateVersionSet"]:
            for item in list(holder):
                if (child(item, "launchTemplateId"), child(item, "versionNumber")) in self.deleted_versions:
                    holder.remove(item)
        return ET.tostring(root, encoding="utf-8")

    def _container_instance_boots(self) -> dict[str, Boot]:
        ecs = self.moto.client("ecs")
        arns = ecs.list_container_instances(cluster=self.cluster)["containerInstanceArns"]
        if not arns:
            return {}
        found = ecs.describe_container_instances(cluster=self.cluster, containerInstances=arns)["containerInstances"]
        return {c["containerInstanceArn"]: self.booted[c["ec2InstanceId"]] for c in found if c["ec2InstanceId"] in self.booted}

    # ------------------------------------------------------------ HTTP

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                target = self.headers.get("X-Amz-Target", "")
                if target.startswith(ECS_TARGET):
                    service, action, params = "ecs", target[len(ECS_TARGET) :], json.loads(body or b"{}")
                else:
                    params = flat_query(body.decode())
                    service = "autoscaling" if params.get("Version") == "2011-01-01" else self.headers.get("X-Service", "query")
                    action = params.get("Action", "")
                proxy.calls.append((service, action))
                if service == "autoscaling":
                    answered = proxy.answer_autoscaling(action, params)
                    if answered is not None:
                        status = 400 if answered.startswith("<ErrorResponse") else 200
                        return self.send(status, answered.encode(), "text/xml")
                if action == "DeleteLaunchTemplateVersions":
                    return self.send(200, proxy.delete_versions(params).encode(), "text/xml")
                if service == "ecs" and action in ("RunTask", "DescribeTasks", "StopTask"):
                    placed = proxy.answer_tasks(action, params)
                    if placed is not None:
                        return self.send(200 if "__type" not in placed else 400, json.dumps(placed).encode(), "application/x-amz-json-1.1")
                status, headers, answer = self.forward(body)
                if action == "DescribeLaunchTemplateVersions" and status == 200:
                    answer = proxy.rewrite_versions(answer)
                if service == "autoscaling" and action == "DescribeAutoScalingGroups" and status == 200:
                    answer = proxy.rewrite_groups(answer)
                elif service == "ecs" and status == 200:
                    answer = json.dumps(proxy.rewrite_ecs(action, params, json.loads(answer))).encode()
                elif action == "RunInstances" and status == 200:
                    for instance in ET.fromstring(answer).iter():
                        if instance.tag.endswith("instanceId"):
                            proxy.boot(instance.text or "")
                self.send(status, answer, headers.get("Content-Type", "text/xml"))

            def forward(self, body: bytes) -> tuple[int, dict[str, str], bytes]:
                request = urllib.request.Request(proxy.moto.endpoint + self.path, data=body, method="POST")
                for key, value in self.headers.items():
                    if key.lower() not in ("host", "content-length", "connection"):
                        request.add_header(key, value)
                try:
                    with urllib.request.urlopen(request, timeout=30) as answer:
                        return answer.status, dict(answer.headers), answer.read()
                except urllib.error.HTTPError as e:
                    return e.code, dict(e.headers), e.read()

            def send(self, status: int, payload: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        return Handler
