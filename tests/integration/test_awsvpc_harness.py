"""The AWS-shaped stand-ins themselves: awsvpc tasks, the ECS agent's introspection and task metadata v4, the ALB route.

Stand-ins: moto servers (a private one per ALB test; the module's shared one for the task tests) hold the ALB's
listeners, rules, weights and registered targets; `AlbRoute` (tests/harness/alb.py) routes as they say. The ALB
targets of the routing tests are two small HTTP servers on loopback (AWS would refuse 127.0.0.1 as an IP target;
moto does not check). The awsvpc task is a Docker container on a user-defined bridge network (tests/harness/awsvpc.py)
running the real Triton entrypoint on the local CPU Triton image; the introspection API and the v4 endpoint are the
simulated instance's (tests/harness/model_agent.py). The task tests start containers: run this file under
`flock /tmp/inferops-heavy.lock`.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import os
import subprocess
import threading
import urllib.error
import urllib.request
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.agent_instance import triton_tasks
from tests.harness.alb import TARGET_GROUP_HEADER, AlbRoute
from tests.harness.awsvpc import HARNESS_LABEL, PID_LABEL, AwsvpcNetwork, AwsvpcTask
from tests.harness.model_agent import SimulatedInstance
from tests.harness.ports import wait_until
from tests.harness.triton import write_model

RELEASE_ID = "r-0123456789ab"


def open_direct(request: urllib.request.Request | str, timeout_s: float = 10):
    return urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=timeout_s)


def get_json(url: str) -> tuple[int, dict]:
    try:
        with open_direct(url) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"null")


def infer_request(values: list[float]) -> bytes:
    return json.dumps({"inputs": [{"name": "INPUT0", "shape": [len(values)], "datatype": "FP32", "data": values}]}).encode()


def infer(url: str, model: str, values: list[float]) -> tuple[list[float], str | None]:
    """OUTPUT0 of one inference, and the target group header when the answer came through a route."""
    request = urllib.request.Request(f"{url}/v2/models/{model}/infer", data=infer_request(values), method="POST")
    with open_direct(request) as resp:
        return json.loads(resp.read())["outputs"][0]["data"], resp.headers.get(TARGET_GROUP_HEADER)


# ---------------------------------------------------------------- the load-balancer route


class EchoServer:
    """A target that answers what it received, as JSON, and counts its requests."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.requests = 0
        echo = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args) -> None:
                pass

            def _echo(self) -> None:
                echo.requests += 1
                length = int(self.headers.get("Content-Length") or 0)
                answer = {
                    "target": echo.name,
                    "method": self.command,
                    "path": self.path,
                    "body": self.rfile.read(length).decode(),
                    "headers": dict(self.headers.items()),
                }
                raw = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            do_GET = do_POST = do_PUT = _echo

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Alb:
    """An ALB in moto: VPC, two IP target groups (blue, green), a listener forwarding by weight."""

    def __init__(self, moto) -> None:
        self.moto = moto
        self.elbv2 = moto.client("elbv2")
        ec2 = moto.client("ec2")
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        subnets = [
            ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i}.0/24", AvailabilityZone=f"us-east-1{zone}")["Subnet"]["SubnetId"]
            for i, zone in enumerate("ab")
        ]
        lb = self.elbv2.create_load_balancer(Name="route", Subnets=subnets)["LoadBalancers"][0]["LoadBalancerArn"]
        self.groups = {
            color: self.elbv2.create_target_group(Name=f"route-{color}", Protocol="HTTP", Port=8000, VpcId=vpc, TargetType="ip")[
                "TargetGroups"
            ][0]["TargetGroupArn"]
            for color in ("blue", "green")
        }
        self.listener = self.elbv2.create_listener(LoadBalancerArn=lb, Protocol="HTTP", Port=80, DefaultActions=self.forward(100, 0))[
            "Listeners"
        ][0]["ListenerArn"]

    def forward(self, blue: int, green: int) -> list[dict]:
        groups = [{"TargetGroupArn": self.groups["blue"], "Weight": blue}, {"TargetGroupArn": self.groups["green"], "Weight": green}]
        return [{"Type": "forward", "ForwardConfig": {"TargetGroups": groups}}]

    def set_weights(self, blue: int, green: int, route: AlbRoute | None = None) -> None:
        """Modify the listener; with `route`, wait until the route has read the change (in its own background time)."""
        self.elbv2.modify_listener(ListenerArn=self.listener, DefaultActions=self.forward(blue, green))
        if route:
            expected = [(self.groups["blue"], blue), (self.groups["green"], green)]
            wait_until(lambda: route.config().weights == expected, 10, f"the route following weights {blue}/{green}", interval_s=0.05)

    def register(self, color: str, ip: str, port: int) -> None:
        self.elbv2.register_targets(TargetGroupArn=self.groups[color], Targets=[{"Id": ip, "Port": port}])

    def color(self, arn: str | None) -> str | None:
        return {v: k for k, v in self.groups.items()}.get(arn)


@pytest.fixture
def alb(moto_server):
    return Alb(moto_server)


@pytest.fixture
def targets(alb):
    servers = {color: EchoServer(color) for color in ("blue", "green")}
    for color, server in servers.items():
        alb.register(color, "127.0.0.1", server.port)
    yield servers
    for server in servers.values():
        server.stop()


def send(route: AlbRoute, n: int) -> list[str]:
    """n GETs on one keep-alive connection: the target each answer came from, checked against the group header."""
    connection = http.client.HTTPConnection("127.0.0.1", route.server.server_address[1], timeout=10)
    answers = []
    for _request in range(n):
        connection.request("GET", "/v2/health/ready")
        response = connection.getresponse()
        body = json.loads(response.read())
        assert response.status == 200, body
        answers.append((body["target"], response.getheader(TARGET_GROUP_HEADER)))
    connection.close()
    return answers


def test_route_follows_the_listener_weights_in_moto(alb, targets, moto_server):
    with AlbRoute(moto_server, listener_arn=alb.listener) as route:
        measured = {}
        for blue, green, n in ((100, 0, 20), (0, 100, 20), (50, 50, 20), (90, 10, 10)):
            alb.set_weights(blue, green, route)
            route.reset_counts()
            answers = send(route, n)
            assert all(alb.color(group) == target for target, group in answers), answers
            measured[(blue, green)] = Counter(target for target, _group in answers)
            assert route.counts() == {alb.groups[c]: k for c, k in measured[(blue, green)].items()}
    assert measured == {
        (100, 0): {"blue": 20},
        (0, 100): {"green": 20},
        (50, 50): {"blue": 10, "green": 10},
        (90, 10): {"blue": 9, "green": 1},
    }
    assert targets["blue"].requests == 20 + 10 + 9 and targets["green"].requests == 20 + 10 + 1


def test_route_forwards_the_request_and_keeps_the_client_connection(alb, targets, moto_server):
    with AlbRoute(moto_server, listener_arn=alb.listener) as route:
        connection = http.client.HTTPConnection("127.0.0.1", route.server.server_address[1], timeout=10)
        connection.request("POST", "/v2/models/m/infer?x=1&y=two", body=b'{"inputs": []}', headers={"X-Client": "bench"})
        first = connection.getresponse()
        echoed = json.loads(first.read())
        socket_after_first = connection.sock
        connection.request("PUT", "/again", body=b"")
        second = connection.getresponse()
        second.read()
        assert connection.sock is socket_after_first, "the route closed the client's keep-alive connection"
        connection.close()
    assert first.status == 200 and first.getheader(TARGET_GROUP_HEADER) == alb.groups["blue"]
    assert echoed["method"] == "POST" and echoed["path"] == "/v2/models/m/infer?x=1&y=two" and echoed["body"] == '{"inputs": []}'
    assert echoed["headers"]["X-Client"] == "bench"
    assert echoed["headers"]["X-Forwarded-For"] == "127.0.0.1"
    assert echoed["headers"]["Host"] == f"127.0.0.1:{route.server.server_address[1]}"  # passed through, as an ALB does
    assert second.status == 200


def test_route_answers_503_without_a_target_and_502_when_the_target_is_down(alb, moto_server):
    with AlbRoute(moto_server, listener_arn=alb.listener) as route:
        status, body = get_json(route.url + "/v2/health/ready")
        assert status == 503
        assert body == {"error": f"target group {alb.groups['blue']} has no registered target"}

        closed = EchoServer("gone")
        closed.stop()  # its port refuses connections now
        alb.register("blue", "127.0.0.1", closed.port)
        route.refresh()
        status, body = get_json(route.url + "/v2/health/ready")
        assert status == 502 and f"target 127.0.0.1:{closed.port}" in body["error"]

        alb.set_weights(0, 0, route)
        status, body = get_json(route.url + "/")
        assert status == 503 and "no target group with a weight above 0" in body["error"]
        assert route.statuses() == {(alb.groups["blue"], 503): 1, (alb.groups["blue"], 502): 1}


def test_route_of_a_listener_rule(alb, targets, moto_server):
    rule = alb.elbv2.create_rule(
        ListenerArn=alb.listener,
        Priority=10,
        Conditions=[{"Field": "path-pattern", "Values": ["/v2/*"]}],
        Actions=alb.forward(0, 100),
    )["Rules"][0]["RuleArn"]
    with AlbRoute(moto_server, rule_arn=rule) as by_rule, AlbRoute(moto_server, listener_arn=alb.listener) as by_default:
        assert {target for target, _group in send(by_rule, 4)} == {"green"}
        assert {target for target, _group in send(by_default, 4)} == {"blue"}
    with pytest.raises(ValueError, match="exactly one of listener_arn"):
        AlbRoute(moto_server, listener_arn=alb.listener, rule_arn=rule)


# ---------------------------------------------------------------- awsvpc tasks: Docker network, introspection, v4


def docker(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=False)


def test_a_task_that_fails_to_start_leaves_nothing_behind(tmp_path):
    network = AwsvpcNetwork().create()
    task = AwsvpcTask(network, "inferops-test/absent-image:none", tmp_path, {}, "triton", 1, "arn:aws:ecs:us-east-1:123456789012:task/c/0f")
    with pytest.raises(RuntimeError, match="docker run of task 0f"):
        task.start()
    assert docker("inspect", task.name).returncode != 0
    network.remove()
    assert docker("network", "inspect", network.name).returncode != 0


def test_networks_of_dead_test_processes_are_removed(awsvpc_network):
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = f"inferops-subnet-stale-{os.getpid()}"
    docker("network", "create", "--label", f"{HARNESS_LABEL}=awsvpc-network", "--label", f"{PID_LABEL}={dead.pid}", stale)
    awsvpc_network.create()
    assert docker("network", "inspect", stale).returncode != 0, "a dead process's network was left behind"
    assert awsvpc_network.subnet is not None and ipaddress.ip_address(awsvpc_network.gateway) in awsvpc_network.subnet
    assert docker("network", "inspect", awsvpc_network.name).returncode == 0


@pytest.fixture(scope="module")
def instance(shared_moto_server, tmp_path_factory):
    """A simulated instance with one awsvpc task of task definition triton:7 serving model `simple`."""
    workdir = tmp_path_factory.mktemp("awsvpc")
    instance = SimulatedInstance(workdir / "i1", shared_moto_server, "models", "models", "triton", "i-0000000000000001")
    try:
        write_model(instance.host_path, "simple", offset=1.0)
        env = {"TRITON_LOAD_MODELS": "simple", "INFEROPS_RELEASE_ID": RELEASE_ID, "TRITON_EXIT_TIMEOUT_S": "10"}
        instance.add_awsvpc_task("triton", 7, env)
        yield instance
    finally:
        instance.stop()


@pytest.fixture(scope="module")
def task(instance):
    return instance.awsvpc_tasks[0]


def test_task_is_reached_at_its_own_address(task):
    address = ipaddress.ip_address(task.ip)
    assert not address.is_loopback and address in task.network.subnet
    assert task.url == f"http://{task.ip}:8000"
    assert infer(task.url, "simple", [1.0, 2.0])[0] == [2.0, 3.0]
    with open_direct(task.metrics_url) as resp:
        assert b"nv_inference_request_success" in resp.read()


def test_introspection_lists_the_task_in_awsvpc_mode(instance, task):
    status, listing = get_json(instance.endpoints.url + "/v1/tasks")
    assert status == 200
    assert listing["Tasks"] == [
        {
            "Arn": task.arn,
            "DesiredStatus": "RUNNING",
            "KnownStatus": "RUNNING",
            "Family": "triton",
            "Version": "7",
            "Containers": [
                {
                    "DockerId": task.container_id,
                    "DockerName": task.name,
                    "Name": "triton",
                    "Networks": [{"NetworkMode": "awsvpc", "IPv4Addresses": [task.ip]}],
                }
            ],
        }
    ]
    # The model agent's own parser reaches it at its address, not through host ports.
    assert triton_tasks(listing, "triton", 8000, 8002) == [
        {"arn": task.arn, "url": f"http://{task.ip}:8000", "metrics_url": f"http://{task.ip}:8002/metrics", "view": "triton-7"}
    ]


def exec_in(task: AwsvpcTask, script: str) -> str:
    proc = subprocess.run(["docker", "exec", task.name, "python3", "-c", script], capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_container_reads_its_task_from_the_metadata_endpoint(instance, task):
    read = (
        "import json, os, urllib.request; print(urllib.request.urlopen(os.environ['ECS_CONTAINER_METADATA_URI_V4'] + '{}').read().decode())"
    )
    metadata = json.loads(exec_in(task, read.format("/task")))
    assert {k: metadata[k] for k in ("Cluster", "TaskARN", "Family", "Revision", "DesiredStatus", "KnownStatus")} == {
        "Cluster": "fleet",
        "TaskARN": task.arn,
        "Family": "triton",
        "Revision": "7",
        "DesiredStatus": "RUNNING",
        "KnownStatus": "RUNNING",
    }
    (container,) = metadata["Containers"]
    assert container["Name"] == "triton" and container["DockerId"] == task.container_id
    assert container["Labels"]["com.amazonaws.ecs.task-definition-version"] == "7"
    network = container["Networks"][0]
    assert network["NetworkMode"] == "awsvpc" and network["IPv4Addresses"] == [task.ip]
    assert network["IPv4SubnetCIDRBlock"] == str(task.network.subnet)
    assert json.loads(exec_in(task, read.format(""))) == container  # $ECS_CONTAINER_METADATA_URI_V4: the container itself

    # The container reaches the metadata endpoint on its network's gateway, and nothing else of the instance there.
    uri = exec_in(task, "import os; print(os.environ['ECS_CONTAINER_METADATA_URI_V4'])").strip()
    assert uri.startswith(f"http://{task.network.gateway}:") and uri.endswith(f"/v4/{task.task_id}")
    probe = "import urllib.request, urllib.error\ntry:\n    urllib.request.urlopen('{}')\nexcept urllib.error.HTTPError as e:\n    print(e.code)"
    assert exec_in(task, probe.format(uri.rsplit("/v4/", 1)[0] + "/v1/tasks")).strip() == "404"
    assert exec_in(task, probe.format(uri + "/stats")).strip() == "404"
    assert exec_in(task, "import os; print(os.environ['INFEROPS_RELEASE_ID'], os.getuid())").split() == [RELEASE_ID, "1000"]


def test_production_route_reaches_the_task(shared_moto_server, task):
    alb = Alb(shared_moto_server)
    alb.register("blue", task.ip, 8000)
    with AlbRoute(shared_moto_server, listener_arn=alb.listener) as route:
        outputs, group = infer(route.url, "simple", [5.0])
    assert outputs == [6.0] and group == alb.groups["blue"]


def test_docker_stop_drains_through_the_entrypoint(instance, task):
    took, code = task.stop(30)
    logs = task.logs()
    assert code == 0, logs[-3000:]
    assert "triton-entrypoint: SIGTERM received; draining" in logs
    assert "triton-entrypoint: drain done" in logs
    assert "triton-entrypoint: tritonserver exited with 0" in logs
    assert took < 30
    _status, listing = get_json(instance.endpoints.url + "/v1/tasks")
    assert [(t["DesiredStatus"], t["KnownStatus"]) for t in listing["Tasks"]] == [("STOPPED", "STOPPED")]
    assert triton_tasks(listing, "triton", 8000, 8002) == []
