"""Model files larger than one PutObject, and downloads at more than one connection's bandwidth (issue 23).

Stand-in: a moto server behind the S3-shaped proxy (tests/harness/s3_proxy.py) with S3's limits scaled down: a single
PutObject or UploadPart above 5 MiB is refused with EntityTooLarge (S3: 5 GB), and each connection is capped at
8 MiB/s (S3: ~90 MB/s). moto has neither, so without the proxy a single-PUT publish or a single-stream download of a
large file would pass here and fail, or crawl, on AWS.
"""

from __future__ import annotations

import hashlib
import signal
import subprocess
import time
import uuid

import pytest
from botocore.exceptions import ClientError

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import s3 as _s3
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.module import retrying_client
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models import sync as _model_sync
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models import transfer
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.manifest import manifest_key
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.publish import publish_version
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.sync import sync_version
from tests.harness.ansible import run_playbook
from tests.harness.model_agent import SimulatedInstance, write_release
from tests.harness.model_versions import make_version, weights
from tests.harness.s3_proxy import TEST_BYTES_PER_S, TEST_SINGLE_PUT_LIMIT

from .test_adversarial_model_publish import PLAYBOOKS

MIB = transfer.MIB
# Scaled to the proxy's limits: a file of 12 MiB needs a multipart upload, in parts of 5 MiB (S3's smallest).
SCALED_UPLOAD = transfer.UploadSettings.from_mib(5, 5, 4)
SCALED_DOWNLOAD = transfer.DownloadSettings.from_mib(8, 1, 8, "test")


@pytest.fixture
def bucket(shared_s3_moto_server) -> str:
    name = f"large-{uuid.uuid4().hex[:8]}"
    shared_s3_moto_server.client("s3").create_bucket(Bucket=name)
    return name


@pytest.fixture
def s3(shared_s3_moto_server):
    return retrying_client(shared_s3_moto_server.client("s3"))


def large_version(tmp_path, size: int = 12 * MIB):
    """Version 1 of model `big`: model.py (small) and weights.bin of `size` bytes."""
    version_dir, config = make_version(tmp_path / "src", "big", 1)
    (version_dir / "weights.bin").write_bytes(weights(7, size))
    return version_dir, config


def test_the_proxy_states_its_limits_and_refuses_one_put_above_the_single_put_limit(shared_s3_moto_server, bucket):
    proxy = shared_s3_moto_server.proxy
    assert "8 MiB/s per connection" in proxy.describe() and "single PUT limit 5 MiB" in proxy.describe()
    raw = shared_s3_moto_server.client("s3")
    raw.put_object(Bucket=bucket, Key="fits", Body=b"x" * TEST_SINGLE_PUT_LIMIT)
    with pytest.raises(ClientError) as refused:
        raw.put_object(Bucket=bucket, Key="too-large", Body=b"x" * (TEST_SINGLE_PUT_LIMIT + 1))
    assert refused.value.response["Error"]["Code"] == "EntityTooLarge"
    assert "too-large" not in [o["Key"] for o in raw.list_objects_v2(Bucket=bucket).get("Contents", [])]
    with pytest.raises(ClientError) as bad:  # S3 checks a declared SHA-256 against what it receives; moto does not
        raw.put_object(Bucket=bucket, Key="bad", Body=b"abc", ChecksumSHA256=transfer.b64(hashlib.sha256(b"abd").digest()))
    assert bad.value.response["Error"]["Code"] == "BadDigest"


def test_a_single_put_publish_fails_as_on_aws_and_a_multipart_one_publishes_and_syncs(s3, bucket, tmp_path):
    version_dir, config = large_version(tmp_path)
    with pytest.raises(ClientError, match="EntityTooLarge"):  # above the threshold of 64 MiB: one PutObject
        publish_version(s3, bucket, "p", "big", 1, str(version_dir), str(config))
    assert _s3.get_bytes(s3, bucket, manifest_key("p", "big", 1)) is None

    published = publish_version(s3, bucket, "p", "big", 1, str(version_dir), str(config), upload=SCALED_UPLOAD)
    assert published["manifest_written"] and published["multipart"]["weights.bin"]["parts"] == 3
    assert not _s3.list_multipart_uploads(s3, bucket, "p/big/1/weights.bin")  # nothing billed left behind

    host = tmp_path / "host"
    with transfer.Downloads(s3, SCALED_DOWNLOAD) as downloads:
        synced = sync_version(s3, bucket, "p", "big", "1", str(host), downloads=downloads)
        assert downloads.ranged_files == 1
    assert synced["downloaded"] == ["model.py", "weights.bin"]
    assert (host / "big" / "1" / "weights.bin").read_bytes() == (version_dir / "weights.bin").read_bytes()


def test_parallel_ranged_gets_beat_the_per_connection_cap_that_holds_one_stream(s3, bucket, tmp_path):
    version_dir, _config = large_version(tmp_path, size=12 * MIB)
    key = "p/cap/weights.bin"
    _size, sha, digests = transfer.file_digests(str(version_dir / "weights.bin"), 5 * MIB)
    transfer.upload_multipart(s3, bucket, key, str(version_dir / "weights.bin"), 5 * MIB, digests, 4)
    with transfer.Downloads(s3, SCALED_DOWNLOAD) as downloads:
        downloads.fetch_ranged(bucket, key, str(tmp_path / "warm"), 12 * MIB)  # the proxy's cache of the object version
        started = time.monotonic()
        assert downloads.fetch_small(bucket, key, str(tmp_path / "single"))[1] == sha
        single_s = time.monotonic() - started
        started = time.monotonic()
        assert downloads.fetch_ranged(bucket, key, str(tmp_path / "ranged"), 12 * MIB)[1] == sha
        ranged_s = time.monotonic() - started
    assert single_s >= 0.9 * 12 * MIB / TEST_BYTES_PER_S, single_s  # one connection: held to its cap
    assert ranged_s < single_s / 2, (ranged_s, single_s)


def test_an_interrupted_multipart_publish_resumes_from_list_parts_and_a_failed_one_is_aborted(s3, bucket, tmp_path, monkeypatch):
    version_dir, config = large_version(tmp_path, size=16 * MIB)
    one_at_a_time = transfer.UploadSettings.from_mib(5, 5, 1)
    key = "p/big/1/weights.bin"
    real_upload_part = _s3.upload_part

    def killed_at_part_3(s3_, bucket_, key_, upload_id, number, body, checksum):
        if number == 3:
            raise KeyboardInterrupt  # the publisher killed outright: no chance to abort
        return real_upload_part(s3_, bucket_, key_, upload_id, number, body, checksum)

    monkeypatch.setattr(_s3, "upload_part", killed_at_part_3)
    with pytest.raises(KeyboardInterrupt):
        publish_version(s3, bucket, "p", "big", 1, str(version_dir), str(config), upload=one_at_a_time)
    assert len(_s3.list_multipart_uploads(s3, bucket, key)) == 1  # left for the next publish to resume
    monkeypatch.setattr(_s3, "upload_part", real_upload_part)
    resumed = publish_version(s3, bucket, "p", "big", 1, str(version_dir), str(config), upload=one_at_a_time)
    kept = resumed["multipart"]["weights.bin"]["resumed_parts"]  # parts sent after the kill's part may have landed too
    assert {1, 2} <= set(kept) and 3 not in kept and resumed["manifest_written"]
    assert not _s3.list_multipart_uploads(s3, bucket, key)

    def fails_at_part_2(s3_, bucket_, key_, upload_id, number, body, checksum):
        if number == 2:
            raise ClientError({"Error": {"Code": "InternalError", "Message": "injected"}}, "UploadPart")
        return real_upload_part(s3_, bucket_, key_, upload_id, number, body, checksum)

    monkeypatch.setattr(_s3, "upload_part", fails_at_part_2)
    version_dir_2 = tmp_path / "src" / "big" / "2"
    version_dir_2.mkdir()
    (version_dir_2 / "weights.bin").write_bytes(weights(8, 11 * MIB))
    with pytest.raises(ClientError, match="injected"):
        publish_version(s3, bucket, "p", "big", 2, str(version_dir_2), str(config), upload=one_at_a_time)
    assert not _s3.list_multipart_uploads(s3, bucket, "p/big/2/weights.bin")  # aborted: no billed parts
    assert _s3.get_bytes(s3, bucket, manifest_key("p", "big", 2)) is None


def test_a_part_changed_after_hashing_is_refused_by_s3s_digest_check(s3, bucket, tmp_path):
    path = tmp_path / "weights.bin"
    path.write_bytes(weights(1, 11 * MIB))
    _size, _sha, digests = transfer.file_digests(str(path), 5 * MIB)
    path.write_bytes(weights(2, 11 * MIB))  # rewritten after the local pass
    with pytest.raises(transfer.TransferError, match="the file changed while publishing; the upload was aborted"):
        transfer.upload_multipart(s3, bucket, "p/changed/weights.bin", str(path), 5 * MIB, digests, 2)
    assert not _s3.list_multipart_uploads(s3, bucket, "p/changed/weights.bin")


def test_the_modules_publish_and_sync_a_large_file_in_four_steps_each(shared_s3_moto_server, bucket, tmp_path):
    version_dir, config = large_version(tmp_path)
    run = run_playbook(
        PLAYBOOKS / "large_model_modules.yml",
        {
            "aws_endpoint_url": shared_s3_moto_server.endpoint,
            "bucket": bucket,
            "source": str(version_dir),
            "config": str(config),
            "host_path": str(tmp_path / "host"),
            "weights_bytes": 12 * MIB,
            "model_py_bytes": (version_dir / "model.py").stat().st_size,
        },
    )
    assert run.rc == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert (tmp_path / "host" / "big" / "1" / "weights.bin").read_bytes() == (version_dir / "weights.bin").read_bytes()
    assert shared_s3_moto_server.proxy.stats["ranged_gets"] > 0


def test_the_fleet_role_puts_the_abort_incomplete_multipart_upload_rule_once_and_keeps_other_rules(shared_s3_moto_server, bucket):
    raw = shared_s3_moto_server.client("s3")
    other = {"ID": "logs-expire", "Filter": {"Prefix": "logs/"}, "Status": "Enabled", "Expiration": {"Days": 30}}
    raw.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": [other]})
    run = run_playbook(PLAYBOOKS / "model_bucket_lifecycle.yml", {"aws_endpoint_url": shared_s3_moto_server.endpoint, "bucket": bucket})
    assert run.rc == 0, run.stdout[-4000:] + run.stderr[-2000:]
    steps = [r.get("changed") for t in run.tasks if "Abort the model bucket" in t["name"] for r in t["hosts"].values()]
    assert steps == [True, False]
    rules = {r["ID"]: r for r in raw.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]}
    assert rules["inferops-abort-incomplete-model-uploads"]["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 7}
    assert rules["inferops-abort-incomplete-model-uploads"]["Filter"] == {"Prefix": "models/"}
    assert rules["logs-expire"]["Expiration"] == {"Days": 30}


def test_the_agent_hydrates_a_large_file_ranged_reports_its_figures_and_a_kill_mid_file_leaves_no_version(
    shared_s3_moto_server, s3, bucket, tmp_path
):
    """The agent's --boot (a subprocess, as on an instance) through the capped proxy; SIGKILL while the large file's
    parts land: no version directory, only staging, which the next boot removes; its status reports the figures."""
    version_dir, config = large_version(tmp_path, size=24 * MIB)
    publish_version(s3, bucket, "p", "big", 1, str(version_dir), str(config), upload=SCALED_UPLOAD)
    write_release(shared_s3_moto_server, bucket, "p", "triton", "r-large", {"big": 1})
    instance = SimulatedInstance(
        tmp_path / "instance", shared_s3_moto_server, bucket, "p", "triton", "i-0000000000000023", boot_attempts=1,
        download_concurrency=4, download_part_mib=1, download_buffer_mib=2,
    )  # fmt: skip
    model_dir = instance.host_path / "big"
    try:
        agent = subprocess.Popen(instance.command("--boot"), env=instance.env(), stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while not list(model_dir.glob(".staging-*/weights.bin")):
            assert time.monotonic() < deadline and agent.poll() is None, "the agent never started the large file"
            time.sleep(0.01)
        time.sleep(0.3)  # some parts landed, most not (4 connections of 8 MiB/s for 24 MiB)
        agent.send_signal(signal.SIGKILL)
        agent.wait(10)
        assert not (model_dir / "1").exists() and _model_sync.stale_entries(str(model_dir))

        boot = instance.run("--boot")
        assert boot.returncode == 0, boot.stderr[-3000:]
        assert _model_sync.complete_versions(str(model_dir), "big") == [1] and not _model_sync.stale_entries(str(model_dir))
        assert (model_dir / "1" / "weights.bin").read_bytes() == (version_dir / "weights.bin").read_bytes()
        hydration = instance.status()["hydration"]
        total = sum(f.stat().st_size for f in version_dir.iterdir())
        assert hydration["bytes"] == total and hydration["files"] == 2
        assert hydration["seconds"] > 0 and abs(hydration["throughput_bytes_per_s"] - total / hydration["seconds"]) < total * 0.01
        # 4 connections of 8 MiB/s: more than one connection's worth, at most four
        assert TEST_BYTES_PER_S < hydration["throughput_bytes_per_s"] <= 4.2 * TEST_BYTES_PER_S, hydration

        instance.run("--once")  # the serving agent, another process, reports the boot's figures
        assert instance.status()["hydration"] == hydration
    finally:
        instance.stop()
