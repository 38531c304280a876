"""The synced repository: Triton's layout, every file's SHA-256 as the manifest in S3 says, nothing half-written."""

from __future__ import annotations

import hashlib
import json

import pytest

MODEL = "simple"
BUCKET = "molecule-models"
PREFIX = "triton"


@pytest.fixture(scope="module")
def host_path(host):
    return host.ansible.get_variables()["model_repository_host_path"]


@pytest.fixture(scope="module")
def s3_manifest(aws_client):
    s3 = aws_client("s3")
    return json.loads(s3.get_object(Bucket=BUCKET, Key=f"{PREFIX}/{MODEL}/2.manifest.json")["Body"].read())


def test_newest_version_is_in_place_with_its_config(host, host_path, s3_manifest):
    model_dir = host.file(f"{host_path}/{MODEL}")
    assert model_dir.is_directory
    assert sorted(n for n in model_dir.listdir() if n.isdigit()) == ["2"]
    assert host.file(f"{host_path}/{MODEL}/config.pbtxt").content_string == s3_manifest["config"]["text"]


def test_every_file_matches_the_published_manifest(host, host_path, s3_manifest):
    version_dir = f"{host_path}/{MODEL}/2"
    listed = {entry["path"]: entry for entry in s3_manifest["files"]}
    assert sorted(host.file(version_dir).listdir()) == sorted(listed)
    for path, entry in listed.items():
        data = host.file(f"{version_dir}/{path}").content
        assert len(data) == entry["size"], path
        assert hashlib.sha256(data).hexdigest() == entry["sha256"], path
    local = json.loads(host.file(f"{host_path}/{MODEL}/2.manifest.json").content_string)
    assert local == s3_manifest


def test_nothing_half_written_is_visible(host, host_path):
    names = host.file(f"{host_path}/{MODEL}").listdir()
    assert not [n for n in names if n.startswith((".staging", ".trash"))]
    assert host.file(f"{host_path}/{MODEL}/2").mode == 0o755
