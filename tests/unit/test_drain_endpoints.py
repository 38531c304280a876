"""The old colour's task endpoints from DescribeTasks answers (issue 22, item 8): awsvpc addresses, tasks left out.

Stand-in: none (pure functions over DescribeTasks-shaped payloads, written after AWS's Task and Attachment shapes).
"""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.drain_endpoints import (
    DrainWatch,
    left_out,
    service_endpoints,
    task_address,
)

SERVICE = "triton-blue"
ARN = "arn:aws:ecs:us-east-1:123456789012:task/inference/"


def eni(address: str | None, status: str = "ATTACHED") -> dict[str, Any]:
    details = [{"name": "subnetId", "value": "subnet-1"}, {"name": "networkInterfaceId", "value": "eni-1"}]
    if address:
        details.append({"name": "privateIPv4Address", "value": address})
    return {"id": "a-1", "type": "ElasticNetworkInterface", "status": status, "details": details}


def task(
    task_id: str,
    *attachments: dict[str, Any],
    last: str = "RUNNING",
    desired: str = "RUNNING",
    group: str = f"service:{SERVICE}",
    containers: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return {
        "taskArn": ARN + task_id,
        "group": group,
        "lastStatus": last,
        "desiredStatus": desired,
        "attachments": list(attachments),
        "containers": containers if containers is not None else [{"name": "triton", "lastStatus": last}],
    }


def test_awsvpc_tasks_give_one_metrics_url_each_on_the_metrics_port():
    tasks = [task("b", eni("10.0.2.7")), task("a", eni("10.0.1.5"))]
    assert service_endpoints(tasks, SERVICE, 8002) == (["http://10.0.1.5:8002/metrics", "http://10.0.2.7:8002/metrics"], [])
    assert service_endpoints(tasks, SERVICE, 9102)[0] == ["http://10.0.1.5:9102/metrics", "http://10.0.2.7:9102/metrics"]


@pytest.mark.parametrize(
    ("stopped", "why"),
    [
        (task("s", eni("10.0.1.9"), last="STOPPED", desired="STOPPED"), "stopped"),
        (task("s", eni("10.0.1.9"), last="RUNNING", desired="STOPPED"), "being stopped: it is leaving and would stop answering"),
        (task("s", eni("10.0.1.9"), last="DEPROVISIONING", desired="STOPPED"), "tearing down its interface"),
        (task("s", eni(None, "PRECREATED"), last="PROVISIONING"), "starting: it has taken no traffic"),
        (task("s", eni("10.0.1.9"), group="service:triton-green"), "another service's task (a listing wider than the service)"),
    ],
)
def test_tasks_that_are_not_running_in_the_service_are_no_endpoints(stopped, why):
    urls, not_watched = service_endpoints([task("a", eni("10.0.1.5")), stopped], SERVICE, 8002)
    assert (urls, not_watched) == (["http://10.0.1.5:8002/metrics"], []), why


def test_a_running_task_without_an_attachment_is_named_not_watched():
    urls, not_watched = service_endpoints([task("a", eni("10.0.1.5")), task("bare")], SERVICE, 8002)
    assert urls == ["http://10.0.1.5:8002/metrics"]
    assert not_watched == ["task bare has no network interface attachment"]


def test_a_bridge_or_host_task_is_named_with_the_override_as_the_fix():
    bridge = task("br", containers=[{"name": "triton", "networkBindings": [{"containerPort": 8002, "hostPort": 32768}]}])
    urls, not_watched = service_endpoints([bridge], SERVICE, 8002)
    assert urls == [] and len(not_watched) == 1
    assert not_watched[0].startswith("task br uses bridge or host networking") and "drain.metrics_urls" in not_watched[0]


def test_an_interface_not_attached_yet_is_named_with_its_status():
    urls, not_watched = service_endpoints([task("att", eni("10.0.1.5", "ATTACHING"))], SERVICE, 8002)
    assert urls == [] and not_watched == [
        "task att has no attached network interface with a private IPv4 address (its interface is ATTACHING)"
    ]


def test_several_interfaces_the_attached_one_with_an_address_wins_one_url_per_task():
    assert task_address(task("t", eni("10.0.9.9", "DELETED"), eni("10.0.1.5"))) == ("10.0.1.5", "")
    assert task_address(task("t", eni(None), eni("10.0.1.6"))) == ("10.0.1.6", "")
    assert service_endpoints([task("t", eni("10.0.1.5"), eni("10.0.1.6"))], SERVICE, 8002) == (["http://10.0.1.5:8002/metrics"], [])


def test_the_containers_network_interfaces_give_the_address_when_the_attachment_lacks_it():
    containers = [{"name": "triton", "networkInterfaces": [{"attachmentId": "a-1", "privateIpv4Address": "10.0.1.8"}]}]
    assert task_address(task("t", eni(None), containers=containers)) == ("10.0.1.8", "")


def test_the_drain_names_what_it_leaves_out():
    assert left_out(DrainWatch("blue", "ecs_tasks", ["http://10.0.1.5:8002/metrics"])) == ""
    watch = DrainWatch("blue", "ecs_tasks", [], ["task bare has no network interface attachment", "task br uses bridge"])
    assert left_out(watch) == "; not watched: task bare has no network interface attachment; task br uses bridge"
    assert watch.as_dict() == {"color": "blue", "source": "ecs_tasks", "urls": [], "not_watched": watch.not_watched}
