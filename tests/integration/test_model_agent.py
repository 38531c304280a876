"""The model agent end to end on a simulated instance (tests/harness/model_agent.py).

Stand-ins: a moto server for S3 behind the S3-shaped proxy (tests/harness/s3_proxy.py); the ECS agent's introspection
API and IMDSv2 answered by a stand-in HTTP server listing real tritonserver processes (CPU, python backend) as bridge-mode tasks; the agent itself runs as on an
instance, `python3 -m ..._models.agent` in a subprocess. The full-disk case uses a real tmpfs of 1 MiB (needs root
to mount; skipped otherwise, with that reason).
"""

from __future__ import annotations

import filecmp
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.module import retrying_client
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models import sync as _model_sync
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.manifest import manifest_key, parse_manifest
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.publish import publish_version
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.transfer import UploadSettings
from tests.harness.clients import ClientThreads
from tests.harness.model_agent import SimulatedInstance, write_release
from tests.harness.model_versions import make_version

PREFIX = "models"
APP = "triton"
MODEL = "m"


class Fleet:
    """A bucket with published versions, and the simulated instances made over it."""

    def __init__(self, moto, tmp_path: Path) -> None:
        self.moto = moto
        self.tmp_path = tmp_path
        self.bucket = f"agent-{uuid.uuid4().hex[:8]}"
        moto.client("s3").create_bucket(Bucket=self.bucket)
        self.s3 = retrying_client(moto.client("s3"))
        self.instances: list[SimulatedInstance] = []

    def publish(self, version: int, model: str = MODEL, **kwargs) -> None:
        version_dir, config = make_version(self.tmp_path / "source", model, version, **kwargs)
        # Multipart above the proxy's single-PUT limit (5 MiB), as model_publish is told for S3's 5 GB.
        publish_version(
            self.s3, self.bucket, PREFIX, model, version, str(version_dir), str(config), upload=UploadSettings.from_mib(5, 5, 4)
        )

    def release(self, release_id: str, models: dict[str, int]) -> None:
        write_release(self.moto, self.bucket, PREFIX, APP, release_id, models)

    def instance(self, name: str = "i-0000000000000001", **config) -> SimulatedInstance:
        instance = SimulatedInstance(self.tmp_path / name, self.moto, self.bucket, PREFIX, APP, name, **config)
        self.instances.append(instance)
        return instance

    def close(self) -> None:
        for instance in self.instances:
            instance.stop()


@pytest.fixture
def fleet(shared_s3_moto_server, tmp_path):
    fleet = Fleet(shared_s3_moto_server, tmp_path)
    yield fleet
    fleet.close()


class Clients(ClientThreads):
    """Two client threads per tritonserver sending requests (no version named) until stopped; counts failures."""

    def __init__(self, tritons) -> None:
        self.sent = 0
        self.failed: list[str] = []
        super().__init__([(t,) for t in tritons for _client in range(2)])

    def _run(self, triton) -> None:
        while not self.stop_event.is_set():
            try:
                answer = triton.infer(MODEL, [10.0])[0] - 10.0
                if answer not in (1.0, 2.0):
                    self.failed.append(f"answer from version {answer}")
            except Exception as err:  # any client-side failure is a failed request
                self.failed.append(f"{type(err).__name__}: {err}")
            self.sent += 1


def serving_everywhere(version: int):
    def check(status: dict) -> bool:
        loaded = status["models"].get(MODEL, {}).get("loaded", {})
        return status["applied"] and len(loaded) == 2 and all(v == [version] for v in loaded.values())

    return check


def test_boot_hydrates_then_a_release_change_reaches_every_task_and_a_bad_version_is_refused(fleet):
    """Boot: versions on disk before any task. Serve: r2 loaded on both tasks with clients running (no failed
    request); r3 names a version that fails to load: status failed, version 2 keeps serving on both tasks."""
    fleet.publish(1)
    fleet.publish(2)
    fleet.publish(3, broken=True)
    fleet.release("r1", {MODEL: 1})
    instance = fleet.instance()

    boot = instance.run("--boot")
    assert boot.returncode == 0, boot.stderr
    assert _model_sync.complete_versions(str(instance.host_path / MODEL), MODEL) == [1]
    hydrated = instance.status()
    assert (hydrated["state"], hydrated["release_id"], hydrated["applied"]) == ("hydrating", "r1", False)
    assert hydrated["hydrated_at"] and hydrated["tasks"] == []

    tritons = [instance.add_task(), instance.add_task()]
    instance.start_agent()
    instance.wait_status(serving_everywhere(1), 60, "release r1 applied")
    with Clients(tritons) as clients:
        fleet.release("r2", {MODEL: 2})
        applied = instance.wait_status(serving_everywhere(2), 60, "release r2 applied")
        assert applied["release_id"] == "r2" and applied["last_error"] is None
        assert applied["container_instance_arn"] == instance.endpoints.container_instance_arn
        assert set(applied["inference_failures"]) == {t["arn"] for t in applied["tasks"]}

        fleet.release("r3", {MODEL: 3})
        failed = instance.wait_status(lambda s: s["release_id"] == "r3" and s["state"] == "failed", 60, "r3 refused")
        time.sleep(0.5)  # clients keep going on version 2 after the refusal
    assert failed["applied"] is False
    assert "version 3 failed to load or answer" in failed["last_error"] and "broken on purpose" in failed["last_error"]
    assert all(versions == [2] for versions in failed["models"][MODEL]["loaded"].values())
    assert [t.infer(MODEL, [10.0]) for t in tritons] == [[12.0], [12.0]]
    assert clients.sent > 20 and clients.failed == []
    assert all(v == 0 for task in failed["inference_failures"].values() for v in task.values())
    # Pruned as model_sync prunes: keep 2, never the serving (2) or the wanted (3) version.
    assert _model_sync.complete_versions(str(instance.host_path / MODEL), MODEL) == [2, 3]

    # A version that loads but answers nothing is caught by the smoke inference: the release is reported failed.
    fleet.publish(4, answers=False)
    fleet.release("r4", {MODEL: 4})
    silent = instance.wait_status(lambda s: s["release_id"] == "r4" and s["state"] == "failed", 60, "r4 refused")
    assert silent["applied"] is False and "smoke inference on m version 4" in silent["last_error"]


def test_agent_killed_mid_sync_leaves_no_half_version_and_the_next_boot_finishes(fleet):
    """SIGKILL while the files download: the version directory is never visible incomplete; a restart completes it."""
    fleet.publish(1, weights_bytes=48 * 1024 * 1024)
    fleet.release("r1", {MODEL: 1})
    instance = fleet.instance(boot_attempts=1)
    model_dir = instance.host_path / MODEL
    seen_incomplete: list[str] = []
    stop = threading.Event()

    def watch() -> None:  # what Triton would see: a version directory is complete whenever it exists
        while not stop.is_set():
            if (model_dir / "1").is_dir() and _model_sync.complete_versions(str(model_dir), MODEL) != [1]:
                seen_incomplete.append(str(sorted(os.listdir(model_dir / "1"))))
            time.sleep(0.002)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    agent = subprocess.Popen(instance.command("--boot"), env=instance.env(), stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while not any(n.startswith(".staging-") for n in (os.listdir(model_dir) if model_dir.is_dir() else [])):
        assert time.monotonic() < deadline and agent.poll() is None, "the agent never started staging"
        time.sleep(0.005)
    agent.send_signal(signal.SIGKILL)
    agent.wait(10)
    agent.stderr.close()
    assert not (model_dir / "1").exists()

    rerun = instance.run("--boot")
    stop.set()
    watcher.join(5)
    assert rerun.returncode == 0, rerun.stderr
    assert _model_sync.complete_versions(str(model_dir), MODEL) == [1]
    assert _model_sync.stale_entries(str(model_dir)) == []  # the killed run's staging was removed
    assert seen_incomplete == []


def put_manifest(fleet: Fleet, version: int, mutate) -> None:
    """Publishes a version, then rewrites its manifest in S3 through `mutate` (as a broken or hostile publisher)."""
    fleet.publish(version)
    key = manifest_key(PREFIX, MODEL, version)
    manifest = parse_manifest(fleet.moto.client("s3").get_object(Bucket=fleet.bucket, Key=key)["Body"].read(), MODEL, version)
    mutate(manifest)
    fleet.moto.client("s3").put_object(Bucket=fleet.bucket, Key=key, Body=json.dumps(manifest).encode())


def corrupt_file(fleet: Fleet, version: int) -> None:
    """The same size, other bytes: only the SHA-256 tells."""
    fleet.publish(version)
    key = f"{PREFIX}/{MODEL}/{version}/weights.bin"
    size = len(fleet.moto.client("s3").get_object(Bucket=fleet.bucket, Key=key)["Body"].read())
    fleet.moto.client("s3").put_object(Bucket=fleet.bucket, Key=key, Body=b"\0" * size)


BAD_RELEASES = [
    ("missing-version", lambda fleet: None, {MODEL: 9}, r"version=9 has no manifest in S3 \(published: \[1\]\)"),
    ("missing-model", lambda fleet: None, {MODEL: 1, "absent": 1}, r"version=1 has no manifest in S3 \(published: none\)"),
    (
        "path-traversal",
        lambda fleet: put_manifest(fleet, 2, lambda m: m["files"][0].update(path="../../escape.py")),
        {MODEL: 2},
        r"file path '../../escape.py' in the manifest is not a plain relative path",
    ),
    ("wrong-digest", lambda fleet: corrupt_file(fleet, 2), {MODEL: 2}, r"sha256 [0-9a-f]{64} != manifest sha256"),
]


@pytest.mark.parametrize(("case", "prepare", "models", "error"), BAD_RELEASES, ids=[c[0] for c in BAD_RELEASES])
def test_a_bad_release_fails_boot_clearly_and_loses_nothing_on_disk(fleet, case, prepare, models, error):
    """Boot exits 1 (ECS stays stopped), the journal and the status object say why, the hydrated version stays."""
    fleet.publish(1)
    fleet.release("r1", {MODEL: 1})
    instance = fleet.instance(boot_attempts=2)
    assert instance.run("--boot").returncode == 0
    prepare(fleet)
    fleet.release("r2", models)

    boot = instance.run("--boot")
    assert boot.returncode == 1
    assert "boot hydration attempt 2/2 failed" in boot.stderr and "ECS stays stopped" in boot.stderr
    status = instance.status()
    assert (status["state"], status["release_id"], status["applied"]) == ("failed", "r2", False)
    assert re.search(error, status["last_error"]), status["last_error"]
    assert _model_sync.complete_versions(str(instance.host_path / MODEL), MODEL) == [1]
    assert not (instance.host_path.parent / "escape.py").exists() and not (instance.host_path / "escape.py").exists()
    assert _model_sync.stale_entries(str(instance.host_path / MODEL)) == []


def test_s3_unreachable_at_boot_is_a_clear_error_and_loses_nothing(fleet):
    """The endpoint refuses connections: boot exits 1 naming the endpoint; what was hydrated stays on disk."""
    fleet.publish(1)
    fleet.release("r1", {MODEL: 1})
    instance = fleet.instance(boot_attempts=2)
    assert instance.run("--boot").returncode == 0
    instance.config["endpoint_url"] = "http://127.0.0.1:9"  # discard port: nothing listens
    instance.write_config()

    boot = instance.run("--boot", timeout_s=60)
    assert boot.returncode == 1
    assert 'Could not connect to the endpoint URL: "http://127.0.0.1:9/' in boot.stderr
    assert "cannot write the status object" in boot.stderr
    assert _model_sync.complete_versions(str(instance.host_path / MODEL), MODEL) == [1]


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MiB tmpfs: a real full disk (ENOSPC)."""
    mount_point = tmp_path / "small-disk"
    mount_point.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount_point)], check=True)
    yield mount_point
    subprocess.run(["umount", "-l", str(mount_point)], check=False)


def test_a_full_disk_fails_boot_clearly_and_loses_nothing(fleet, small_disk):
    """Version 2 (2 MiB) does not fit the 1 MiB host path: ENOSPC named, staging removed, version 1 intact."""
    fleet.publish(1)
    fleet.publish(2, weights_bytes=2 * 1024 * 1024)
    fleet.release("r1", {MODEL: 1})
    instance = fleet.instance(boot_attempts=1, host_path=str(small_disk))
    instance.host_path = small_disk
    assert instance.run("--boot").returncode == 0
    fleet.release("r2", {MODEL: 2})

    boot = instance.run("--boot")
    assert boot.returncode == 1
    assert "No space left on device" in instance.status()["last_error"]
    model_dir = str(small_disk / MODEL)
    assert _model_sync.complete_versions(model_dir, MODEL) == [1]
    assert _model_sync.stale_entries(model_dir) == []
    source = fleet.tmp_path / "source" / MODEL / "1"
    assert filecmp.cmpfiles(source, small_disk / MODEL / "1", ["model.py", "weights.bin"], shallow=False) == (
        ["model.py", "weights.bin"],
        [],
        [],
    )
