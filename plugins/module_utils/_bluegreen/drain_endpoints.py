# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""What the drain watches on the old colour: the Triton metrics endpoint of each of its RUNNING tasks, read from
what ECS's DescribeTasks answers, or the URLs the caller gave (`drain.metrics_urls`, which win).

Pure functions over AWS's answers; the drain phase (`cutover_phases.py`) makes the calls (`_aws/ecs.py`) and
samples the endpoints.

An awsvpc task has an address of its own: its network interface's private IPv4 address, in the task's
`ElasticNetworkInterface` attachment (and in its containers' `networkInterfaces`). A bridge or host task shares
its instance's address behind a host port; the services of this collection use awsvpc (`_bluegreen/services.py`
refuses other modes), so such a task is not resolved - it is named in `not_watched`, and `drain.metrics_urls`
covers a fleet that uses them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ENI = "ElasticNetworkInterface"
TRITON_METRICS_PORT = 8002  # tritonserver's --metrics-port default


@dataclass
class DrainWatch:
    """The endpoints the drain of one colour watches, where they came from, and what it leaves out (and why)."""

    color: str
    source: str  # metrics_urls (the caller's), ecs_tasks (found through ECS), none (nothing to look for)
    urls: list[str] = field(default_factory=list)
    not_watched: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"color": self.color, "source": self.source, "urls": list(self.urls), "not_watched": list(self.not_watched)}


def metrics_url(address: str, port: int) -> str:
    return f"http://{address}:{port}/metrics"


def task_id(task: dict[str, Any]) -> str:
    return str(task.get("taskArn", "")).rsplit("/", 1)[-1] or "(no ARN)"


def task_address(task: dict[str, Any]) -> tuple[str | None, str]:
    """(the task's own private IPv4 address, "") for an awsvpc task, else (None, why it has none)."""
    enis = [a for a in task.get("attachments") or [] if a.get("type") == ENI]
    for eni in enis:
        if eni.get("status", "ATTACHED") != "ATTACHED":  # PRECREATED or ATTACHING: not yet; DETACHING, DELETED: leaving
            continue
        details = {d.get("name"): d.get("value") for d in eni.get("details") or []}
        if details.get("privateIPv4Address"):
            return details["privateIPv4Address"], ""
    containers = task.get("containers") or []
    for container in containers:
        for interface in container.get("networkInterfaces") or []:
            if interface.get("privateIpv4Address"):
                return interface["privateIpv4Address"], ""
    if enis:
        statuses = sorted({str(e.get("status")) for e in enis})
        return None, f"has no attached network interface with a private IPv4 address (its interface is {', '.join(statuses)})"
    if any(c.get("networkBindings") for c in containers):
        return None, "uses bridge or host networking (no network interface of its own): give drain.metrics_urls to watch it"
    return None, "has no network interface attachment"


def service_endpoints(tasks: list[dict[str, Any]], service: str, port: int) -> tuple[list[str], list[str]]:
    """(metrics URLs, one line per running task left out and why) of `service`'s RUNNING tasks in `tasks`.

    A task that is not RUNNING, or is being stopped (desired status STOPPED), is no endpoint: a starting task has
    taken no traffic, a stopping one is leaving and would stop answering. A task of another group is left out: ListTasks
    filters by service on AWS, and a service's tasks are in group `service:<name>`.
    """
    urls: list[str] = []
    not_watched: list[str] = []
    for task in sorted(tasks, key=lambda t: str(t.get("taskArn", ""))):
        if task.get("group", f"service:{service}") != f"service:{service}":
            continue
        if task.get("lastStatus") != "RUNNING" or task.get("desiredStatus", "RUNNING") != "RUNNING":
            continue
        address, why = task_address(task)
        if address is None:
            not_watched.append(f"task {task_id(task)} {why}")
        elif metrics_url(address, port) not in urls:
            urls.append(metrics_url(address, port))
    return urls, not_watched


def left_out(watch: DrainWatch) -> str:
    """The endpoints the drain does not watch and why, for its timeline entry ("" when it watches them all)."""
    return f"; not watched: {'; '.join(watch.not_watched)}" if watch.not_watched else ""
