"""Publish and sync against an in-memory S3 (mocked at the client boundary) and a temporary host path."""

from __future__ import annotations

import base64
import hashlib
import io
import os

import pytest
from botocore.exceptions import ClientError

from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.manifest import ManifestError
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.publish import publish_version
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.sync import local_versions, prune_versions, sync_version
from tests.unit.one_page_listings import OnePageListings


class FakeS3(OnePageListings):
    """The S3 calls the collection makes, over a dict; records every call."""

    def __init__(self):
        self.objects: dict[str, tuple[bytes, dict]] = {}
        self.calls: list[tuple[str, str]] = []

    def _missing(self, op):
        return ClientError({"Error": {"Code": "NoSuchKey", "Message": "missing"}}, op)

    def list_objects_v2(self, aws_retry, Bucket, Prefix, Delimiter, **_kw):
        self.calls.append(("list", Prefix))
        keys = sorted(k for k in self.objects if k.startswith(Prefix) and Delimiter not in k[len(Prefix) :])
        return {"Contents": [{"Key": k} for k in keys], "IsTruncated": False}

    def get_object(self, aws_retry, Bucket, Key):
        self.calls.append(("get", Key))
        if Key not in self.objects:
            raise self._missing("GetObject")
        return {"Body": io.BytesIO(self.objects[Key][0])}

    def head_object(self, aws_retry, Bucket, Key, ChecksumMode=None):
        self.calls.append(("head", Key))
        if Key not in self.objects:
            raise self._missing("HeadObject")
        data, checksum = self.objects[Key]
        return {"ContentLength": len(data), **({"ChecksumSHA256": checksum} if ChecksumMode == "ENABLED" and checksum else {})}

    def put_object(self, aws_retry, Bucket, Key, Body, ChecksumAlgorithm=None, **_kw):
        """Like S3: with ChecksumAlgorithm=SHA256 the SHA-256 of the bytes received is kept."""
        self.calls.append(("put", Key))
        data = Body if isinstance(Body, bytes) else Body.read()
        checksum = base64.b64encode(hashlib.sha256(data).digest()).decode() if ChecksumAlgorithm == "SHA256" else None
        self.objects[Key] = (data, checksum)


def write_version(root, version, weights):
    vdir = root / "src" / str(version)
    (vdir / "sub").mkdir(parents=True, exist_ok=True)
    (vdir / "model.py").write_text("same in every version\n")
    (vdir / "sub" / "weights.bin").write_bytes(weights)
    (root / "config.pbtxt").write_text('name: "m"\n')
    return str(vdir), str(root / "config.pbtxt")


@pytest.fixture
def s3():
    return FakeS3()


def test_publish_writes_files_then_the_manifest_last_and_skips_unchanged(s3, tmp_path):
    src, config = write_version(tmp_path, 1, b"w1")
    planned = publish_version(s3, "b", "p", "m", 1, src, config, check_mode=True)
    assert planned["changed"] and planned["uploaded"] == ["model.py", "sub/weights.bin"] and not s3.objects
    publish_version(s3, "b", "p", "m", 1, src, config)
    puts = [key for op, key in s3.calls if op == "put"]
    assert puts == ["p/m/1/model.py", "p/m/1/sub/weights.bin", "p/m/1.manifest.json"]
    assert publish_version(s3, "b", "p", "m", 1, src, config)["changed"] is False
    write_version(tmp_path, 1, b"other")
    with pytest.raises(ManifestError, match="versions are immutable"):
        publish_version(s3, "b", "p", "m", 1, src, config)


def test_sync_check_mode_writes_nothing_then_sync_links_unchanged_files(s3, tmp_path):
    host = tmp_path / "host"
    for version, weights in ((1, b"w1"), (2, b"w2")):
        publish_version(s3, "b", "p", "m", version, *write_version(tmp_path, version, weights))

    planned = sync_version(s3, "b", "p", "m", "1", str(host), check_mode=True)
    assert planned["changed"] and planned["downloaded"] == ["model.py", "sub/weights.bin"] and not host.exists()

    sync_version(s3, "b", "p", "m", "1", str(host))
    s3.calls.clear()
    second = sync_version(s3, "b", "p", "m", "latest", str(host))
    assert second["version"] == 2 and second["linked"] == ["model.py"] and second["downloaded"] == ["sub/weights.bin"]
    assert [call[0] for call in s3.calls] == ["list", "get", "get"]  # manifests listed, manifest read, one file fetched
    assert (host / "m" / "2" / "sub" / "weights.bin").read_bytes() == b"w2"
    assert os.stat(host / "m" / "2" / "model.py").st_ino == os.stat(host / "m" / "1" / "model.py").st_ino
    assert (host / "m" / "config.pbtxt").read_text() == 'name: "m"\n'
    assert oct(os.stat(host / "m" / "2" / "sub").st_mode & 0o777) == "0o755"

    s3.calls.clear()
    assert sync_version(s3, "b", "p", "m", "2", str(host))["changed"] is False
    assert [call[0] for call in s3.calls] == ["list", "get"]


def test_a_file_not_in_the_manifest_is_removed_by_a_resync(s3, tmp_path):
    host = tmp_path / "host"
    publish_version(s3, "b", "p", "m", 1, *write_version(tmp_path, 1, b"w1"))
    sync_version(s3, "b", "p", "m", "1", str(host))
    (host / "m" / "1" / "stray.bin").write_bytes(b"x")
    assert sync_version(s3, "b", "p", "m", "1", str(host), check_mode=True)["changed"]
    repaired = sync_version(s3, "b", "p", "m", "1", str(host))
    assert repaired["downloaded"] == [] and repaired["kept"] == ["model.py", "sub/weights.bin"]
    assert sorted(os.listdir(host / "m" / "1")) == ["model.py", "sub"]


def test_prune_keeps_the_newest_and_the_protected(s3, tmp_path):
    host = tmp_path / "host"
    for version in (1, 2, 3, 4):
        publish_version(s3, "b", "p", "m", version, *write_version(tmp_path, version, b"w%d" % version))
        sync_version(s3, "b", "p", "m", str(version), str(host))
    planned = prune_versions(str(host), "m", 2, [1], check_mode=True)
    assert planned["removed"] == [2] and local_versions(str(host / "m")) == [1, 2, 3, 4]
    assert prune_versions(str(host), "m", 2, [1])["removed"] == [2]
    assert local_versions(str(host / "m")) == [1, 3, 4]
    assert not (host / "m" / "2.manifest.json").exists()
    assert prune_versions(str(host), "m", 2, [1])["changed"] is False
