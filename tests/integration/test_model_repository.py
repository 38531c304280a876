"""Model repository end to end: moto server S3 behind the S3-shaped proxy (tests/harness/s3_proxy.py), the real
tritonserver, the modules and the playbooks.
Versions of model `m` answer OUTPUT0 = INPUT0 + <version>, so an inference says which version served it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import s3 as _s3
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.module import retrying_client
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models import sync as _model_sync
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.manifest import ManifestError, file_key
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.publish import publish_version
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.sync import local_versions, sync_version
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.triton_model import ModelStateError, ensure_loaded
from ansible_collections.inferops.triton_ecs.plugins.module_utils._triton_client import TritonClient
from tests.harness.ansible import REPO_ROOT, run_playbook
from tests.harness.model_versions import make_version

PLAYBOOKS = Path(__file__).parent / "playbooks"
BUCKET = "models"
PREFIX = "models"
# Explicit model control (the harness), no auto-complete: docs/models.md recommends it (a second per python model load).
TRITON_ARGS = ("--disable-auto-complete-config",)


class Stack:
    def __init__(self, tmp_path: Path, moto, triton_server) -> None:
        self.moto = moto
        self.s3 = retrying_client(moto.client("s3"))
        moto.client("s3").create_bucket(Bucket=BUCKET)
        self.source = tmp_path / "source"
        self.host = tmp_path / "host"
        self.host.mkdir()
        self._start_triton = triton_server
        self.triton = None

    def start_triton(self):
        self.triton = self._start_triton(self.host, extra_args=TRITON_ARGS)
        self.client = TritonClient(self.triton.url)
        return self.triton

    def publish(self, version: int, broken: bool = False, **kwargs) -> dict:
        version_dir, config = make_version(self.source, "m", version, broken=broken, **kwargs)
        return publish_version(self.s3, BUCKET, PREFIX, "m", version, str(version_dir), str(config))

    def sync(self, version: str | int = "latest") -> dict:
        return sync_version(self.s3, BUCKET, PREFIX, "m", version, str(self.host))

    def serves(self) -> float:
        """What version answered: OUTPUT0 - INPUT0."""
        return self.triton.infer("m", [10.0])[0] - 10.0

    def visible(self) -> list[str]:
        return sorted(os.listdir(self.host / "m"))


@pytest.fixture
def stack(tmp_path, s3_moto_server, triton_server) -> Stack:
    return Stack(tmp_path, s3_moto_server, triton_server)


def test_modules_four_steps(stack):
    make_version(stack.source, "m", 1)
    make_version(stack.source, "m", 2)
    triton = stack.start_triton()
    run = run_playbook(
        PLAYBOOKS / "model_repository_modules.yml",
        {
            "aws_endpoint_url": stack.moto.endpoint,
            "bucket": BUCKET,
            "source_root": str(stack.source),
            "host_path": str(stack.host),
            "triton_url": triton.url,
        },
        env=stack.moto.env(),
    )
    assert run.rc == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert stack.visible() == [".sync.lock", "1", "1.manifest.json", "2", "2.manifest.json", "config.pbtxt"]
    assert local_versions(str(stack.host / "m")) == [1, 2]


def test_sync_models_and_rollback_playbooks(stack, tmp_path):
    triton = stack.start_triton()
    for version in (1, 2, 3):
        make_version(stack.source, "m", version)
    extra = {
        "model_repository_delivery": "push",
        "model_repository_hosts": "localhost",
        "model_repository_become": False,
        "model_repository_bucket": BUCKET,
        "model_repository_prefix": PREFIX,
        "model_repository_models": [{"name": "m"}],
        "model_repository_host_path": str(stack.host),
        "model_repository_triton_urls": [triton.url],
        "model_repository_keep_versions": 2,
        "model_repository_aws_endpoint_url": stack.moto.endpoint,
        "model_repository_aws_region": "us-east-1",
        "model_repository_publish": [
            {"model": "m", "version": v, "source": str(stack.source / "m" / str(v)), "config": str(stack.source / "m" / "config.pbtxt")}
            for v in (1, 2, 3)
        ],
    }
    sync_playbook = REPO_ROOT / "playbooks" / "sync_models.yml"
    rollback_playbook = REPO_ROOT / "playbooks" / "rollback_models.yml"

    # Publish 1..3 in one run: the sync takes the latest (3), loads it, verifies, prunes nothing yet.
    first = run_playbook(sync_playbook, extra, env=stack.moto.env())
    assert first.rc == 0, first.stdout[-4000:]
    assert stack.serves() == 3.0
    synced = [
        t for t in first.tasks if t["name"].endswith("Sync each model version into the host path (staged, verified, renamed into place)")
    ]
    assert [r["version"] for t in synced for h in t["hosts"].values() for r in h["results"]] == [3], [t["name"] for t in first.tasks]

    # Check mode plans the pinned version 2 and changes nothing, on disk or in Triton.
    checked = run_playbook(
        sync_playbook, {**extra, "model_repository_models": [{"name": "m", "version": "2"}]}, check=True, env=stack.moto.env()
    )
    assert checked.rc == 0, checked.stdout[-4000:]
    assert "Sync each model version into the host path (staged, verified, renamed into place)" in " ".join(checked.changed_tasks)
    assert local_versions(str(stack.host / "m")) == [3]
    assert stack.serves() == 3.0

    # Serving version 2 next, through a pinned version: the playbook syncs it, loads it and keeps 2 and 3.
    pinned = run_playbook(sync_playbook, {**extra, "model_repository_models": [{"name": "m", "version": "2"}]}, env=stack.moto.env())
    assert pinned.rc == 0, pinned.stdout[-4000:]
    assert stack.serves() == 2.0
    assert local_versions(str(stack.host / "m")) == [2, 3]

    again = run_playbook(sync_playbook, extra, env=stack.moto.env())
    assert again.rc == 0 and stack.serves() == 3.0
    settled = run_playbook(sync_playbook, extra, env=stack.moto.env())
    assert settled.rc == 0
    assert settled.changed_tasks == []

    rolled = run_playbook(rollback_playbook, extra, env=stack.moto.env())
    assert rolled.rc == 0, rolled.stdout[-4000:]
    assert stack.serves() == 2.0
    assert [name.split(" : ")[-1] for name in rolled.changed_tasks] == ["Serve the version before the newest one on every Triton endpoint"]
    twice = run_playbook(rollback_playbook, extra, env=stack.moto.env())
    assert twice.rc == 0 and twice.changed_tasks == [] and stack.serves() == 2.0


def test_corrupt_file_and_missing_manifest_fail_clearly_and_leave_serving_untouched(stack):
    stack.start_triton()
    stack.publish(1)
    stack.sync(1)
    ensure_loaded(stack.client, "m", 1)
    before = stack.visible()

    stack.publish(2)
    raw = stack.moto.client("s3")
    raw.put_object(Bucket=BUCKET, Key=file_key(PREFIX, "m", 2, "weights.bin"), Body=b"x" * (64 * 1024))  # same size, other bytes
    with pytest.raises(
        ManifestError, match=r"file weights.bin from s3://models/models/m/2/weights.bin: sha256 [0-9a-f]{64} != manifest sha256"
    ):
        stack.sync(2)
    assert stack.visible() == before
    assert stack.serves() == 1.0

    version_dir, _config = make_version(stack.source, "m", 3)
    for name in ("model.py", "weights.bin"):  # files uploaded, manifest never written: an incomplete version
        raw.upload_file(str(version_dir / name), BUCKET, file_key(PREFIX, "m", 3, name))
    with pytest.raises(ManifestError, match=r"version=3 has no manifest in S3 \(published: \[1, 2\]\)"):
        stack.sync(3)
    assert stack.visible() == before
    assert stack.serves() == 1.0


def test_interrupted_download_leaves_nothing_visible(stack, monkeypatch):
    stack.start_triton()
    stack.publish(1)
    stack.sync(1)
    ensure_loaded(stack.client, "m", 1)
    stack.publish(2, weights_bytes=3 * 1024 * 1024)  # several chunks
    before = stack.visible()

    real_download = _s3.download
    seen_partial = []

    def cut(s3, bucket, key, dest):
        body = s3.get_object(aws_retry=True, Bucket=bucket, Key=key)["Body"]
        with open(dest, "wb") as out:
            out.write(body.read(_s3.CHUNK_BYTES))
        seen_partial.append(dest)
        raise ConnectionResetError("connection reset mid-download")

    monkeypatch.setattr(_s3, "download", cut)
    with pytest.raises(ConnectionResetError):
        stack.sync(2)
    assert seen_partial and not os.path.exists(seen_partial[0])
    assert stack.visible() == before
    assert stack.serves() == 1.0

    # A sync killed outright leaves its staging directory: Triton never sees it as a version, the next sync removes it.
    os.makedirs(stack.host / "m" / ".staging-2-killed" / "sub")
    assert ensure_loaded(stack.client, "m", 1)["changed"] is False
    monkeypatch.setattr(_s3, "download", real_download)
    assert stack.sync(2)["downloaded"] == ["weights.bin"]
    assert not any(name.startswith(".staging") for name in stack.visible())
    assert ensure_loaded(stack.client, "m", 2)["after"] == [2]
    assert stack.serves() == 2.0


def test_idempotent_resync_downloads_nothing(stack):
    stack.publish(1)
    stack.publish(2)
    first = stack.sync(2)
    assert first["changed"] and first["downloaded"] == ["model.py", "weights.bin"]

    requests_before = stack.moto.request_count()
    again = stack.sync(2)
    assert again["changed"] is False and again["downloaded"] == [] and again["linked"] == []
    assert stack.moto.request_count() - requests_before == 2  # list the manifests, read one; no file GET

    # A file damaged on disk is noticed by its size and repaired, downloading only that file.
    (stack.host / "m" / "2" / "weights.bin").write_bytes(b"truncated")
    repaired = stack.sync(2)
    assert repaired["changed"] and repaired["downloaded"] == ["weights.bin"] and repaired["kept"] == ["model.py"]
    assert _model_sync.sha256_file(str(stack.host / "m" / "2" / "weights.bin"))[1] == source_sha(stack, 2)


def source_sha(stack: Stack, version: int) -> str:
    return _model_sync.sha256_file(str(stack.source / "m" / str(version) / "weights.bin"))[1]


def test_broken_version_keeps_the_previous_one_serving_and_reports_tritons_reason(stack):
    stack.start_triton()
    stack.publish(1)
    stack.sync(1)
    ensure_loaded(stack.client, "m", 1)
    stack.publish(2, broken=True)
    stack.sync(2)
    with pytest.raises(ModelStateError, match=r"Triton failed to load model m \(version 2\): .*version 2 is broken on purpose"):
        ensure_loaded(stack.client, "m", 2)
    assert stack.serves() == 1.0
    assert ensure_loaded(stack.client, "m", 1)["changed"] is False
