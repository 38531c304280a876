"""One release per colour on one instance: the live colour keeps its models until the cutover has moved traffic off it.

Stand-ins: a moto server for S3; the ECS agent's introspection API, its task metadata endpoint v4 and IMDSv2 answered
by stand-in HTTP servers (tests/harness/model_agent.py); each colour's task an awsvpc task stand-in
(tests/harness/awsvpc.py): a container at its own address on a Docker network, running the image's real entrypoint
with INFEROPS_MODEL_VIEW=task-definition over a real tritonserver (CPU, python backend), the instance's host path
read-only at /models, listed in awsvpc mode as a task of its task definition revision. The agent runs as on an instance
(`python3 -m ..._models.agent --serve`) and reaches each task at its address; the release records are written as
model_release writes them (schema 2, bound to task definition revisions). Run under the heavy lock (containers).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.module import retrying_client
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.publish import publish_version
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.release import build_release, release_key, render_release
from ansible_collections.inferops.triton_ecs.plugins.module_utils._triton_client import TritonClient
from tests.harness.clients import ClientThreads
from tests.harness.model_agent import SimulatedInstance
from tests.harness.model_versions import make_version

PREFIX = "models"
APP = "triton"
MODEL = "m"
INSTANCE = "i-0000000000000001"
IMAGE = "registry.example/triton@sha256:" + "a" * 64
BLUE_TD = "arn:aws:ecs:us-east-1:123456789012:task-definition/triton:1"
GREEN_TD = "arn:aws:ecs:us-east-1:123456789012:task-definition/triton:2"


class Records:
    def __init__(self, moto, bucket: str) -> None:
        self.s3, self.bucket = moto.client("s3"), bucket

    def put(self, name: str, release_id: str, task_definition: str, version: int, instances: list[str] | None = None) -> None:
        record = build_release(
            APP, release_id, [{"name": MODEL, "version": version}], "2026-12-01T00:00:00Z", instances, IMAGE, task_definition
        )
        self.s3.put_object(Bucket=self.bucket, Key=release_key(PREFIX, APP, name), Body=render_release(record))

    def delete(self, name: str) -> None:
        self.s3.delete_object(Bucket=self.bucket, Key=release_key(PREFIX, APP, name))


class Answers(ClientThreads):
    """A client per colour asking the model (no version named) until stopped; which versions answered."""

    def __init__(self, tritons: dict[str, Any]) -> None:
        self.seen: dict[str, set[float]] = {colour: set() for colour in tritons}
        self.failed: list[str] = []
        super().__init__(tritons.items())

    def _run(self, colour: str, task: Any) -> None:
        client = TritonClient(task.url, timeout_s=10)
        while not self.stop_event.is_set():
            try:
                self.seen[colour].add(infer(client) - 10.0)
            except Exception as err:  # any client-side failure is a failed request
                self.failed.append(f"{colour}: {type(err).__name__}: {err}")


def infer(client: TritonClient) -> float:
    return client.infer(MODEL, [{"name": "INPUT0", "shape": [1], "datatype": "FP32", "data": [10.0]}])[0]["data"][0]


def start_task(instance: SimulatedInstance, revision: int) -> Any:
    """A task of triton:<revision>: the entrypoint reads its revision from the task metadata endpoint, waits for its view
    and serves it (every model in it loaded at start)."""
    env = {"INFEROPS_MODEL_VIEW": "task-definition", "TRITON_EXTRA_ARGS": "--disable-auto-complete-config"}
    return instance.add_awsvpc_task("triton", revision, env=env)


def ready_versions(task: Any) -> list[int]:
    index = TritonClient(task.url, timeout_s=10).repository_index()
    return sorted(int(e["version"]) for e in index if e.get("state") == "READY")


@pytest.fixture
def instance(shared_moto_server, tmp_path: Path):
    bucket = f"colours-{uuid.uuid4().hex[:8]}"
    shared_moto_server.client("s3").create_bucket(Bucket=bucket)
    s3 = retrying_client(shared_moto_server.client("s3"))
    for version in (1, 2, 3):
        version_dir, config = make_version(tmp_path / "source", MODEL, version)
        publish_version(s3, bucket, PREFIX, MODEL, version, str(version_dir), str(config))
    made = SimulatedInstance(tmp_path / INSTANCE, shared_moto_server, bucket, PREFIX, APP, INSTANCE, keep_versions=1)
    yield made, Records(shared_moto_server, bucket)
    made.stop()


def release_applied(release_id: str, tasks: int):
    def check(status: dict) -> bool:
        held = status.get("releases", {}).get(release_id)
        return bool(held and held["applied"] and len(held["tasks"]) == tasks)

    return check


def test_each_colour_serves_its_own_release_through_standby_promotion_hot_update_and_prune(instance):
    node, records = instance
    records.put("current", "r-blue", BLUE_TD, 1)
    boot = node.run("--boot")
    assert boot.returncode == 0, boot.stderr
    blue = start_task(node, 1)  # the live colour, on its release's view
    assert ready_versions(blue) == [1]
    node.start_agent()
    node.wait_status(release_applied("r-blue", 1), 30, "blue serves r-blue")

    with Answers({"blue": blue}) as live:
        # A cutover brings r-green up: its versions and its view reach the instance before its task starts...
        records.put("standby", "r-green", GREEN_TD, 2)
        status = node.wait_status(release_applied("r-green", 0), 60, "r-green held before its colour starts")
        assert status["releases"]["r-green"]["views"] == ["triton-2"]
        green = start_task(node, 2)
        assert ready_versions(green) == [2]  # it loads exactly its release at start
        node.wait_status(release_applied("r-green", 1), 60, "green serves r-green")
        assert ready_versions(blue) == [1]  # ... while the live colour never saw version 2
        # The cutover finished: production's record is r-green, the old colour's release is previous.
        records.put("previous", "r-blue", BLUE_TD, 1)
        records.put("current", "r-green", GREEN_TD, 2)
        records.delete("standby")
        node.wait_status(lambda s: s["release_id"] == "r-green" and release_applied("r-blue", 1)(s), 30, "promoted")
    assert live.failed == [] and live.seen["blue"] == {1.0}

    with Answers({"blue": blue, "green": green}) as both:
        # A model-only release on the colour that serves: a canary of r-green's task definition on this instance.
        records.put("canary", "r-green3", GREEN_TD, 3, instances=[INSTANCE])
        node.wait_status(release_applied("r-green3", 1), 90, "green hot-updated to version 3")
    assert both.failed == []
    assert both.seen["blue"] == {1.0} and 3.0 in both.seen["green"] and 1.0 not in both.seen["green"]
    assert ready_versions(blue) == [1] and ready_versions(green) == [3]
    views = node.host_path / ".task-definitions"
    assert sorted(p.name for p in (views / "triton-2" / MODEL).iterdir()) == ["3", "config.pbtxt"]
    # keep_versions=1, yet version 1 stays: the old colour's view links it and its task serves it.
    node.wait_status(lambda s: s["state"] == "applied", 30, "pruned")
    assert (node.host_path / MODEL / "1").is_dir() and not (node.host_path / MODEL / "2").exists()
