"""Large files: part sizes, composite checksums, the one-pass local digests, multipart upload (resume, abort) and
parallel ranged downloads hashed in order, against an in-memory S3 (mocked at the client boundary) that behaves as
S3 does for multipart uploads: a part's SHA-256 checked on receipt, the composite checksum, ListParts."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import random
import threading
import time

import pytest
from botocore.exceptions import ClientError

from ansible_collections.inferops.triton_ecs.plugins.module_utils._models import transfer
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.manifest import ManifestError
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.publish import publish_version
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.sync import sync_version
from tests.unit.one_page_listings import OnePageListings

MIB = transfer.MIB


def sha_b64(data: bytes) -> str:
    return base64.b64encode(hashlib.sha256(data).digest()).decode()


def client_error(code: str, op: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}}, op)


class MultipartS3(OnePageListings):
    """S3's object and multipart calls over dicts. Parts are checked against their ChecksumSHA256 (BadDigest);
    a completed upload keeps the composite checksum; ranged GETs answer their bytes, slowly and out of order
    when `jitter_s` is set; `cut` cuts the body of the ranges named in it once."""

    def __init__(self, jitter_s: float = 0.0) -> None:
        self.objects: dict[str, tuple[bytes, str | None, str]] = {}
        self.uploads: dict[str, dict] = {}
        self.calls: list[tuple] = []
        self.jitter_s = jitter_s
        self.cut: set[tuple[int, int]] = set()
        self.open_ranges = 0
        self.max_open_ranges = 0
        self._lock = threading.Lock()
        self._ids = 0

    def _etag(self, data: bytes) -> str:
        return '"' + hashlib.md5(data).hexdigest() + '"'

    def head_object(self, aws_retry, Bucket, Key, ChecksumMode=None):
        self.calls.append(("head", Key))
        if Key not in self.objects:
            raise client_error("404", "HeadObject")
        data, checksum, etag = self.objects[Key]
        return {"ContentLength": len(data), "ETag": etag, **({"ChecksumSHA256": checksum} if checksum else {})}

    def get_object(self, aws_retry, Bucket, Key, Range=None, IfMatch=None):
        self.calls.append(("get", Key, Range))
        if Key not in self.objects:
            raise client_error("NoSuchKey", "GetObject")
        data, _checksum, etag = self.objects[Key]
        if IfMatch is not None and IfMatch != etag:
            raise client_error("PreconditionFailed", "GetObject")
        if Range is None:
            return {"Body": io.BytesIO(data)}
        start, end = (int(x) for x in Range.removeprefix("bytes=").split("-"))
        with self._lock:
            self.open_ranges += 1
            self.max_open_ranges = max(self.max_open_ranges, self.open_ranges)
        try:
            if self.jitter_s:
                time.sleep(random.uniform(0, self.jitter_s))
            piece = data[start : end + 1]
            with self._lock:
                if (start, end) in self.cut:
                    self.cut.discard((start, end))
                    piece = piece[: len(piece) // 2]
            return {"Body": io.BytesIO(piece)}
        finally:
            with self._lock:
                self.open_ranges -= 1

    def put_object(self, aws_retry, Bucket, Key, Body, ChecksumAlgorithm=None, **_kw):
        self.calls.append(("put", Key))
        data = Body if isinstance(Body, bytes) else Body.read()
        self.objects[Key] = (data, sha_b64(data) if ChecksumAlgorithm == "SHA256" else None, self._etag(data))

    def create_multipart_upload(self, aws_retry, Bucket, Key, ChecksumAlgorithm):
        self._ids += 1
        upload_id = f"u{self._ids}"
        self.uploads[upload_id] = {
            "Key": Key,
            "parts": {},
            "Initiated": f"2026-01-01T00:00:{self._ids:02d}Z",
            "Algorithm": ChecksumAlgorithm,
        }
        self.calls.append(("create", Key))
        return {"UploadId": upload_id}

    def upload_part(self, aws_retry, Bucket, Key, UploadId, PartNumber, Body, ChecksumSHA256):
        self.calls.append(("part", Key, PartNumber))
        if sha_b64(Body) != ChecksumSHA256:
            raise client_error("BadDigest", "UploadPart")
        self.uploads[UploadId]["parts"][PartNumber] = (Body, ChecksumSHA256)
        return {"ETag": self._etag(Body)}

    def complete_multipart_upload(self, aws_retry, Bucket, Key, UploadId, MultipartUpload):
        self.calls.append(("complete", Key))
        upload = self.uploads.pop(UploadId)
        parts = [upload["parts"][p["PartNumber"]] for p in MultipartUpload["Parts"]]
        data = b"".join(body for body, _checksum in parts)
        composite = transfer.composite_sha256([hashlib.sha256(body).digest() for body, _checksum in parts])
        self.objects[Key] = (data, composite, self._etag(data))

    def abort_multipart_upload(self, aws_retry, Bucket, Key, UploadId):
        self.calls.append(("abort", Key, UploadId))
        if self.uploads.pop(UploadId, None) is None:
            raise client_error("NoSuchUpload", "AbortMultipartUpload")

    def list_multipart_uploads(self, aws_retry, Bucket, Prefix):
        found = [
            {"Key": u["Key"], "UploadId": i, "Initiated": u["Initiated"], "ChecksumAlgorithm": u["Algorithm"]}
            for i, u in self.uploads.items()
            if u["Key"].startswith(Prefix)
        ]
        return {"Uploads": found}

    def list_parts(self, aws_retry, Bucket, Key, UploadId):
        parts = self.uploads[UploadId]["parts"]
        return {
            "Parts": [
                {"PartNumber": n, "Size": len(body), "ETag": self._etag(body), "ChecksumSHA256": checksum}
                for n, (body, checksum) in sorted(parts.items())
            ]
        }

    def list_objects_v2(self, aws_retry, Bucket, Prefix, Delimiter, **_kw):
        keys = sorted(k for k in self.objects if k.startswith(Prefix) and Delimiter not in k[len(Prefix) :])
        return {"Contents": [{"Key": k} for k in keys], "IsTruncated": False}


def data_of(size: int, seed: int = 1) -> bytes:
    return random.Random(seed).randbytes(size)


# ---------------------------------------------------------------- pure parts


def test_part_sizes_grow_only_when_a_file_would_need_over_10000_parts():
    assert transfer.upload_part_bytes(26 * 1024 * MIB, 16 * MIB) == 16 * MIB
    grown = transfer.upload_part_bytes(200 * 1024 * MIB, 16 * MIB)
    assert grown % MIB == 0 and grown > 16 * MIB and -(-200 * 1024 * MIB // grown) <= transfer.S3_MAX_PARTS
    with pytest.raises(transfer.TransferError, match="5 TiB"):
        transfer.upload_part_bytes(6 * 1024**4, 16 * MIB)
    assert transfer.part_ranges(10, 4) == [(0, 3), (4, 7), (8, 9)]
    assert transfer.part_ranges(8, 4) == [(0, 3), (4, 7)]


def test_the_composite_is_s3s_checksum_of_checksums_and_moto_may_leave_out_the_part_count():
    digests = [hashlib.sha256(b"a").digest(), hashlib.sha256(b"b").digest()]
    composite = transfer.composite_sha256(digests)
    assert composite == base64.b64encode(hashlib.sha256(digests[0] + digests[1]).digest()).decode() + "-2"
    assert transfer.composite_matches(composite, composite)
    assert transfer.composite_matches(composite.split("-")[0], composite)  # moto's HeadObject
    assert not transfer.composite_matches(composite.split("-")[0] + "-3", composite)
    assert not transfer.composite_matches(None, composite)


@pytest.mark.parametrize(("size", "part", "chunk"), [(0, 5, 3), (10, 5, 3), (11, 5, 3), (11, 4, 4), (7, 16, 3)])
def test_one_read_gives_the_file_digest_and_every_part_digest(tmp_path, size, part, chunk):
    data = data_of(size)
    path = tmp_path / "f"
    path.write_bytes(data)
    got_size, sha, parts = transfer.file_digests(str(path), part, chunk_bytes=chunk)
    assert (got_size, sha) == (size, hashlib.sha256(data).hexdigest())
    expected = [hashlib.sha256(data[s : e + 1]).digest() for s, e in transfer.part_ranges(size, part)] or [hashlib.sha256(b"").digest()]
    assert parts == expected
    assert transfer.file_digests(str(path), None)[2] == []


def test_settings_name_the_field_and_the_fix():
    with pytest.raises(transfer.TransferError, match=r"part_size_mib=4; expected an integer >= 5 \(S3 refuses"):
        transfer.UploadSettings.from_mib(64, 4, 8)
    with pytest.raises(transfer.TransferError, match="part_size_mib=6000; S3 refuses parts over 5 GiB"):
        transfer.UploadSettings.from_mib(64, 6000, 8)
    with pytest.raises(transfer.TransferError, match="multipart_threshold_mib=5000; one PutObject carries at most 5 GB"):
        transfer.UploadSettings.from_mib(5000, 16, 8)
    with pytest.raises(transfer.TransferError, match="download buffer_mib=4 is smaller than part_mib=8"):
        transfer.DownloadSettings.from_mib(8, 8, 4, "model_sync")
    with pytest.raises(transfer.TransferError, match="download concurrency=0"):
        transfer.DownloadSettings.from_mib(0, 8, 64, "model_sync")
    settings = transfer.UploadSettings.from_mib(5, 5, 2)
    assert settings.multipart(5 * MIB + 1) and not settings.multipart(5 * MIB)


def test_only_parts_with_the_same_size_and_verified_sha256_are_resumed():
    ranges = transfer.part_ranges(10, 4)
    digests = [hashlib.sha256(b"%d" % i).digest() for i in range(3)]
    listed = [
        {"PartNumber": 1, "Size": 4, "ETag": "e1", "ChecksumSHA256": transfer.b64(digests[0])},
        {"PartNumber": 2, "Size": 4, "ETag": "e2", "ChecksumSHA256": transfer.b64(digests[0])},  # other content
        {"PartNumber": 3, "Size": 2, "ETag": "e3"},  # no checksum kept: sent again
        {"PartNumber": 4, "Size": 2, "ETag": "e4", "ChecksumSHA256": "x"},  # beyond the file
    ]
    assert transfer.resumable_parts(listed, ranges, digests) == {
        1: {"PartNumber": 1, "ETag": "e1", "ChecksumSHA256": transfer.b64(digests[0])}
    }


# ---------------------------------------------------------------- multipart upload


def test_a_multipart_upload_sends_every_part_with_its_digest_and_completes(tmp_path):
    s3 = MultipartS3()
    data = data_of(23 * MIB)
    (tmp_path / "f").write_bytes(data)
    _size, _sha, digests = transfer.file_digests(str(tmp_path / "f"), 5 * MIB)
    sent = transfer.upload_multipart(s3, "b", "k", str(tmp_path / "f"), 5 * MIB, digests, 4)
    assert sent["parts"] == 5 and sent["resumed_parts"] == [] and not s3.uploads
    assert s3.objects["k"][0] == data and s3.objects["k"][1] == transfer.composite_sha256(digests)


def test_an_interrupted_upload_is_resumed_from_the_parts_s3_holds_and_stale_ones_are_aborted(tmp_path):
    s3 = MultipartS3()
    data = data_of(12 * MIB)
    (tmp_path / "f").write_bytes(data)
    _size, _sha, digests = transfer.file_digests(str(tmp_path / "f"), 5 * MIB)
    stale = s3.create_multipart_upload(True, "b", "k", "SHA256")["UploadId"]
    other = s3.create_multipart_upload(True, "b", "k", "CRC32")["UploadId"]  # newer, but its parts carry no SHA-256
    upload = s3.create_multipart_upload(True, "b", "k", "SHA256")["UploadId"]
    s3.uploads[other]["Initiated"] = "2026-01-01T00:09:00Z"
    s3.upload_part(True, "b", "k", upload, 1, data[: 5 * MIB], sha_b64(data[: 5 * MIB]))  # what a killed publish left
    s3.upload_part(True, "b", "k", upload, 2, b"x" * 5 * MIB, sha_b64(b"x" * 5 * MIB))  # a part of older content
    s3.calls.clear()
    sent = transfer.upload_multipart(s3, "b", "k", str(tmp_path / "f"), 5 * MIB, digests, 4)
    assert sent == {"upload_id": upload, "parts": 3, "resumed_parts": [1]}
    assert ("abort", "k", stale) in s3.calls and ("abort", "k", other) in s3.calls
    assert sorted(c[2] for c in s3.calls if c[0] == "part") == [2, 3]
    assert s3.objects["k"][0] == data and not s3.uploads


def test_a_file_changed_after_it_was_hashed_is_refused_and_its_upload_aborted(tmp_path):
    s3 = MultipartS3()
    path = tmp_path / "f"
    path.write_bytes(data_of(12 * MIB))
    _size, _sha, digests = transfer.file_digests(str(path), 5 * MIB)
    path.write_bytes(data_of(12 * MIB, seed=2))
    with pytest.raises(transfer.TransferError, match="the file changed while publishing; the upload was aborted"):
        transfer.upload_multipart(s3, "b", "k", str(path), 5 * MIB, digests, 2)
    assert not s3.uploads and "k" not in s3.objects


def test_publish_sends_large_files_as_multipart_and_verifies_the_composite_before_the_manifest(tmp_path):
    s3 = MultipartS3()
    src = tmp_path / "src" / "1"
    src.mkdir(parents=True)
    (src / "model.plan").write_bytes(data_of(11 * MIB))
    (src / "model.py").write_text("small\n")
    (tmp_path / "config.pbtxt").write_text('name: "m"\n')
    settings = transfer.UploadSettings.from_mib(5, 5, 3)
    planned = publish_version(s3, "b", "p", "m", 1, str(src), str(tmp_path / "config.pbtxt"), check_mode=True, upload=settings)
    assert planned["multipart"] == {"model.plan": {"part_bytes": 5 * MIB, "parts": 3}} and not s3.objects
    done = publish_version(s3, "b", "p", "m", 1, str(src), str(tmp_path / "config.pbtxt"), upload=settings)
    assert done["manifest_written"] and done["multipart"]["model.plan"]["resumed_parts"] == []
    assert [c[0] for c in s3.calls if c[0] in ("create", "complete", "put")] == ["create", "complete", "put", "put"]
    manifest = done["manifest"]["files"]
    assert {f["path"]: f["sha256"] for f in manifest}["model.plan"] == hashlib.sha256((src / "model.plan").read_bytes()).hexdigest()
    # A second publish of the same content changes nothing; a half-published one skips the verified large file.
    assert publish_version(s3, "b", "p", "m", 1, str(src), str(tmp_path / "config.pbtxt"), upload=settings)["changed"] is False
    del s3.objects["p/m/1.manifest.json"]
    again = publish_version(s3, "b", "p", "m", 1, str(src), str(tmp_path / "config.pbtxt"), upload=settings)
    assert again["already_in_s3"] == ["model.plan", "model.py"] and again["uploaded"] == []


def test_publish_refuses_a_multipart_object_whose_composite_does_not_match(tmp_path, monkeypatch):
    s3 = MultipartS3()
    src = tmp_path / "src" / "1"
    src.mkdir(parents=True)
    (src / "model.plan").write_bytes(data_of(11 * MIB))
    (tmp_path / "config.pbtxt").write_text('name: "m"\n')
    original = s3.complete_multipart_upload

    def swap_a_part(aws_retry, Bucket, Key, UploadId, MultipartUpload):
        original(aws_retry, Bucket, Key, UploadId, MultipartUpload)
        data, _checksum, etag = s3.objects[Key]
        s3.objects[Key] = (data, transfer.composite_sha256([b"\0" * 32] * 3), etag)

    monkeypatch.setattr(s3, "complete_multipart_upload", swap_a_part)
    with pytest.raises(ManifestError, match=r"model.plan .* does not match the manifest .*composite of the parts.*no manifest was written"):
        publish_version(s3, "b", "p", "m", 1, str(src), str(tmp_path / "config.pbtxt"), upload=transfer.UploadSettings.from_mib(5, 5, 2))
    assert "p/m/1.manifest.json" not in s3.objects


# ---------------------------------------------------------------- ranged downloads


@pytest.mark.parametrize("buffered", [1, 4, 64])
def test_ranged_parts_land_out_of_order_are_hashed_in_order_and_memory_stays_within_the_buffer(tmp_path, buffered):
    """With room for every part, all are hashed from memory; with less, the rest from the file they were written to."""
    s3 = MultipartS3(jitter_s=0.02)
    data = data_of(3 * MIB + 123)
    s3.put_object(True, "b", "k", data)
    settings = transfer.DownloadSettings(concurrency=8, part_bytes=64 * 1024, buffer_bytes=buffered * 64 * 1024)
    with transfer.Downloads(s3, settings) as downloads:
        size, sha = downloads.fetch_ranged("b", "k", str(tmp_path / "out"), len(data))
        assert downloads.counters() == (len(data), 1)
        assert 1 <= downloads._buffers.peak_in_use <= buffered
        assert downloads._buffers.available() == buffered
    assert (size, sha) == (len(data), hashlib.sha256(data).hexdigest())
    assert (tmp_path / "out").read_bytes() == data
    assert s3.max_open_ranges <= 8  # the connections
    ranges = [c[2] for c in s3.calls if c[0] == "get"]
    assert len(ranges) == len(transfer.part_ranges(len(data), 64 * 1024))


def test_a_cut_part_is_fetched_again_and_every_part_asks_for_the_same_object_version(tmp_path):
    s3 = MultipartS3()
    data = data_of(300 * 1024)
    s3.put_object(True, "b", "k", data)
    s3.cut = {(0, 65535), (131072, 196607)}
    etags = []
    original = s3.get_object

    def record(aws_retry, Bucket, Key, Range=None, IfMatch=None):
        etags.append(IfMatch)
        return original(aws_retry, Bucket, Key, Range, IfMatch)

    s3.get_object = record
    with transfer.Downloads(s3, transfer.DownloadSettings(4, 64 * 1024, 256 * 1024)) as downloads:
        assert downloads.fetch_ranged("b", "k", str(tmp_path / "out"), len(data))[1] == hashlib.sha256(data).hexdigest()
    assert set(etags) == {s3.objects["k"][2]} and len(etags) == 5 + 2


def test_a_failed_part_stops_the_file_and_gives_every_buffer_back(tmp_path):
    s3 = MultipartS3()
    data = data_of(512 * 1024)
    s3.put_object(True, "b", "k", data)
    s3.cut = {(65536, 131071)}
    settings = transfer.DownloadSettings(4, 64 * 1024, 128 * 1024)
    with transfer.Downloads(s3, settings) as downloads:
        original = s3.get_object

        def always_cut(*args, **kwargs):
            s3.cut.add((65536, 131071))
            return original(*args, **kwargs)

        s3.get_object = always_cut
        with pytest.raises(transfer.TransferError, match=r"bytes 65536-131071 came back short .* the download was cut"):
            downloads.fetch_ranged("b", "k", str(tmp_path / "out"), len(data))
        s3.get_object = original
        assert downloads.fetch_ranged("b", "k", str(tmp_path / "again"), len(data))[1] == hashlib.sha256(data).hexdigest()
        assert downloads._buffers.available() == settings.buffered_parts


def test_sync_fetches_large_files_ranged_small_ones_whole_and_refuses_a_corrupt_one(tmp_path):
    s3 = MultipartS3(jitter_s=0.005)
    src = tmp_path / "src" / "1"
    src.mkdir(parents=True)
    (src / "model.plan").write_bytes(data_of(700 * 1024))
    for i in range(6):
        (src / f"tok{i}.json").write_bytes(data_of(1000 + i, seed=i))
    (tmp_path / "config.pbtxt").write_text('name: "m"\n')
    publish_version(s3, "b", "p", "m", 1, str(src), str(tmp_path / "config.pbtxt"))
    host = tmp_path / "host"
    settings = transfer.DownloadSettings(6, 128 * 1024, 512 * 1024)
    with transfer.Downloads(s3, settings) as downloads:
        done = sync_version(s3, "b", "p", "m", "1", str(host), downloads=downloads)
        assert downloads.ranged_files == 1 and downloads.files == 7
    assert done["downloaded_bytes"] == sum(f.stat().st_size for f in src.iterdir())
    assert (host / "m" / "1" / "model.plan").read_bytes() == (src / "model.plan").read_bytes()
    assert oct(os.stat(host / "m" / "1" / "model.plan").st_mode & 0o777) == "0o644"
    ranged = [c for c in s3.calls if c[0] == "get" and c[2]]
    assert len(ranged) == len(transfer.part_ranges(700 * 1024, 128 * 1024))

    data, checksum, etag = s3.objects["p/m/1/model.plan"]
    s3.objects["p/m/1/model.plan"] = (data[:-1] + b"\0", checksum, etag)  # replaced in S3, same size
    with pytest.raises(ManifestError, match=r"model.plan from s3://b/p/m/1/model.plan: sha256 .* != manifest sha256"):
        sync_version(s3, "b", "p", "m", "1", str(tmp_path / "host2"), download_settings=settings)
    assert sorted(os.listdir(tmp_path / "host2" / "m")) == [".sync.lock"]  # no version, no staging, no config


def test_hydration_figures_and_their_file(tmp_path):
    figures = transfer.transfer_figures(100 * MIB, 3, 1000.0, 1002.0)
    assert figures["throughput_bytes_per_s"] == 50 * MIB and figures["seconds"] == 2.0 and figures["files"] == 3
    assert figures["started"] == "1970-01-01T00:16:40Z"
    transfer.save_hydration(str(tmp_path / "models"), figures)
    assert transfer.load_hydration(str(tmp_path / "models")) == figures
    (tmp_path / "models" / transfer.HYDRATION_FILE).write_text("{not json")
    assert transfer.load_hydration(str(tmp_path / "models")) is None
    assert transfer.load_hydration(str(tmp_path / "nowhere")) is None


def test_the_agents_download_settings_come_from_its_configuration_file():
    from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.agent_config import ConfigError, parse_config

    base = {"bucket": "models", "application": "triton", "region": "us-east-1"}
    config = parse_config(json.dumps(base).encode(), "model-agent.json")
    assert transfer.agent_download_settings(config) == transfer.DownloadSettings(64, 8 * MIB, 256 * MIB)
    tuned = parse_config(json.dumps(dict(base, download_concurrency=64, download_part_mib=16, download_buffer_mib=512)).encode(), "f")
    assert transfer.agent_download_settings(tuned).buffered_parts == 32
    with pytest.raises(ConfigError, match="download_buffer_mib=4 is smaller than download_part_mib=8"):
        parse_config(json.dumps(dict(base, download_buffer_mib=4)).encode(), "f")
    with pytest.raises(ConfigError, match="download_concurrency=0; expected an integer from 1 to 1024"):
        parse_config(json.dumps(dict(base, download_concurrency=0)).encode(), "f")


def test_preallocation_reserves_the_blocks_and_keeps_bytes_already_written(tmp_path):
    path = tmp_path / "staging"
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        os.ftruncate(fd, 4 * MIB)
        os.pwrite(fd, b"landed", 3 * MIB)  # a part that arrived before the preallocation ran
        transfer.preallocate(fd, 4 * MIB)
        assert os.fstat(fd).st_size == 4 * MIB and os.fstat(fd).st_blocks * 512 >= 4 * MIB
        assert os.pread(fd, 6, 3 * MIB) == b"landed"
    finally:
        os.close(fd)
