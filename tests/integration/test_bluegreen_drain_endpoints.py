"""The cutover's drain finds the old colour's task endpoints through ECS (issue 22, item 8): ansible-playbook runs
the bluegreen module against a private moto server; a real tritonserver stands in for a task's metrics endpoint.

Stand-ins, and where each one differs from AWS:
- Discovery (ListTasks, DescribeTasks): moto's ECS starts no task when a service scales, so `run_task` with the
  service's group (`service:triton-blue`, the group ECS gives a service's tasks) stands in for the blue service's
  tasks, on the Fargate launch type (moto places EC2 tasks only on registered container instances). moto gives each
  awsvpc task an ENI attachment with a private IPv4 address, and crashes on it unless the VPC has DNS hostnames on:
  the test turns them on. moto moves a task one lifecycle state on at every DescribeTasks (RUNNING, DEACTIVATING,
  STOPPING...); its state manager is set to keep tasks RUNNING, as a service's tasks stay. moto ignores ListTasks'
  serviceName filter; the module also keeps only the service's group, and a green task in the cluster shows it does.
- No reach from the controller: the addresses moto hands out (10.x) serve no Triton metrics from this machine (the
  sandbox's network answers 404; elsewhere they do not route), as a controller outside the VPC sees them.
- The watch itself: a tritonserver on loopback, reached through `drain.metrics_urls` (the override), because a
  discovered 10.x address cannot be mapped to a local server without changing this machine's network.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.harness.ansible import PlaybookRun, run_playbook
from tests.harness.bluegreen import APP, CLUSTER, CUTOVER_PLAYBOOK, BlueGreenApp, create_app
from tests.harness.triton import TritonServer, write_model


@pytest.fixture
def app(moto_server) -> BlueGreenApp:
    app = create_app(moto_server)
    app.register_targets("green", 2)  # stands in for ECS registering the green tasks once they run
    return app


def keep_tasks_running(app: BlueGreenApp) -> None:
    """moto's state manager: a task leaves RUNNING only after a million DescribeTasks (by default, at the next one)."""
    body = json.dumps({"model_name": "ecs::task", "transition": {"progression": "manual", "times": 1_000_000}}).encode()
    request = urllib.request.Request(f"{app.moto.endpoint}/moto-api/state-manager/set-transition", data=body, method="POST")
    with urllib.request.urlopen(request, timeout=10) as resp:
        assert resp.status == 201


def run_service_tasks(app: BlueGreenApp, service: str, count: int) -> dict[str, str]:
    """Stand-in for `service`'s scheduler starting `count` awsvpc tasks: task ARN -> its ENI's address as EC2 sees it."""
    keep_tasks_running(app)
    ec2, ecs = app.moto.client("ec2"), app.ecs()
    vpc = ec2.describe_vpcs(Filters=[{"Name": "cidr", "Values": ["10.0.0.0/16"]}])["Vpcs"][0]["VpcId"]
    ec2.modify_vpc_attribute(VpcId=vpc, EnableDnsHostnames={"Value": True})
    subnet = ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["Subnets"][0]["SubnetId"]
    group = ec2.describe_security_groups(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["SecurityGroups"][0]["GroupId"]
    container = {"name": "triton", "image": "registry.local/triton:r1", "memory": 4096, "portMappings": [{"containerPort": 8002}]}
    definition = ecs.register_task_definition(family=f"{APP}-awsvpc", networkMode="awsvpc", containerDefinitions=[container])
    tasks = ecs.run_task(
        cluster=CLUSTER,
        taskDefinition=definition["taskDefinition"]["taskDefinitionArn"],
        count=count,
        group=f"service:{service}",
        launchType="FARGATE",
        networkConfiguration={"awsvpcConfiguration": {"subnets": [subnet], "securityGroups": [group]}},
    )["tasks"]
    addresses = {}
    for task in tasks:
        eni_id = next(d["value"] for d in task["attachments"][0]["details"] if d["name"] == "networkInterfaceId")
        addresses[task["taskArn"]] = ec2.describe_network_interfaces(NetworkInterfaceIds=[eni_id])["NetworkInterfaces"][0][
            "PrivateIpAddress"
        ]
    return addresses


def cutover(app: BlueGreenApp, check: bool = False, **overrides: Any) -> tuple[PlaybookRun, dict]:
    args = app.module_args("triton:2", gates={"timeout_s": 0, "interval_s": 1, "request_timeout_s": 1}, **overrides)
    result = run_playbook(CUTOVER_PLAYBOOK, {"bg_args": args}, check=check, diff=True, env=app.moto.env())
    return result, result.result("Cutover")


def drain_entry(res: dict) -> dict:
    return next(e for e in res["timeline"] if e["phase"] == "drain")


def test_drain_finds_the_old_colours_running_tasks_and_falls_back_without_reach(app):
    blue = run_service_tasks(app, f"{APP}-blue", 3)
    run_service_tasks(app, f"{APP}-green", 1)  # another service's task: not the old colour's
    stopped = sorted(blue)[0]
    app.ecs().stop_task(cluster=CLUSTER, task=stopped, reason="replaced")
    expected = sorted(f"http://{address}:9102/metrics" for arn, address in blue.items() if arn != stopped)
    drain = {"quiet_period_s": 2, "timeout_s": 120, "metrics_port": 9102}

    run_, res = cutover(app, check=True, drain=drain)
    assert run_.rc == 0, run_.stderr
    assert res["planned"] and res["drain_watch"]["source"] == "ecs_tasks" and res["drain_watch"]["color"] == "blue"
    assert sorted(res["drain_watch"]["urls"]) == expected and res["drain_watch"]["not_watched"] == []
    assert app.weights() == {"blue": 100, "green": 0}

    run_, res = cutover(app, drain=drain)
    assert run_.rc == 0, run_.stderr
    entry = drain_entry(res)
    assert entry["outcome"] == "ok"
    assert entry["detail"] == "no reach to 2 task endpoints of blue from the controller: waited the quiet period of 2 s"
    # one request timeout (1 s, the endpoints sampled at once) and the quiet period, not drain.timeout_s (120 s)
    assert 2 <= entry["duration_s"] < 10
    assert sorted(res["drain_watch"]["not_watched"]) == sorted(f"{url} did not answer from the controller" for url in expected)
    assert app.snapshot()["services"]["blue"][1] == 0


def test_metrics_urls_win_over_the_tasks_found_and_are_watched_on_a_real_triton(app, triton_server, tmp_path: Path):
    run_service_tasks(app, f"{APP}-blue", 2)
    repo = tmp_path / "models"
    write_model(repo, "simple", offset=1.0)
    triton: TritonServer = triton_server(repo, models=("simple",))
    drain = {"quiet_period_s": 1, "timeout_s": 60, "metrics_urls": {"blue": [triton.metrics_url]}}

    run_, res = cutover(app, check=True, drain=drain)
    assert run_.rc == 0, run_.stderr
    assert res["drain_watch"] == {"color": "blue", "source": "metrics_urls", "urls": [triton.metrics_url], "not_watched": []}

    run_, res = cutover(app, drain=drain)
    assert run_.rc == 0, run_.stderr
    entry = drain_entry(res)
    assert entry["outcome"] == "ok" and entry["detail"] == "blue quiet for 1 s on 1 endpoint(s) of drain.metrics_urls"
    assert res["drain_watch"]["urls"] == [triton.metrics_url]
