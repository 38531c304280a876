"""Adversarial model publishing (issue 12, class "publishing models").

Stand-in: a moto server for S3 behind the S3-shaped proxy (tests/harness/s3_proxy.py: S3's single-PUT limit and
per-connection cap, scaled down; the same HTTP path as AWS; it computes ChecksumSHA256 over what it receives), and
real files, symlinks, FIFOs and sockets on the local filesystem. What is uploaded must be exactly what the manifest
says, a bad source tree must fail before any write, and an interrupted publish must resume.
"""

from __future__ import annotations

import os
import socket
import uuid
from pathlib import Path

import pytest

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.module import retrying_client
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.manifest import ManifestError, manifest_files, manifest_key
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.publish import publish_version
from tests.harness.ansible import run_playbook
from tests.harness.model_versions import make_version

PLAYBOOKS = Path(__file__).parent / "playbooks"


@pytest.fixture
def bucket(shared_s3_moto_server):
    name = f"adv-publish-{uuid.uuid4().hex[:8]}"
    shared_s3_moto_server.client("s3").create_bucket(Bucket=name)
    return name


@pytest.fixture
def s3(shared_s3_moto_server):
    return retrying_client(shared_s3_moto_server.client("s3"))


def keys(shared_s3_moto_server, bucket: str) -> list[str]:
    return sorted(o["Key"] for o in shared_s3_moto_server.client("s3").list_objects_v2(Bucket=bucket).get("Contents", []))


def _bind_socket(path: Path) -> None:
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    sock.close()


# (case id, how to spoil the version directory `v` (outside: a directory next to the tree), what the error names)
BAD_TREES = [
    ("symlink-to-file-outside", lambda v, out: (v / "weights.link").symlink_to(out / "secret.txt"), "outside the source tree"),
    ("symlink-to-dir-outside", lambda v, out: (v / "extra").symlink_to(out), "outside the source tree"),
    ("symlink-to-root", lambda v, out: (v / "root").symlink_to("/"), "outside the source tree"),
    ("relative-symlink-escaping", lambda v, out: (v / "up").symlink_to("../../outside/secret.txt"), "outside the source tree"),
    ("dangling-symlink", lambda v, out: (v / "gone").symlink_to(v / "missing.bin"), "dangling symlink"),
    (
        "symlink-loop",
        lambda v, out: ((v / "sub").mkdir(), (v / "sub" / "x.bin").write_bytes(b"x"), (v / "sub" / "loop").symlink_to(v / "sub")),
        "symlink loop",
    ),
    ("fifo", lambda v, out: os.mkfifo(v / "pipe"), "special file"),
    ("unix-socket", lambda v, out: _bind_socket(v / "sock"), "special file"),
    ("hidden-file", lambda v, out: (v / ".env").write_text("TOKEN=x"), "hidden"),
    ("hidden-dir", lambda v, out: ((v / ".git").mkdir(), (v / ".git" / "HEAD").write_text("ref")), "hidden"),
    ("empty-dir", lambda v, out: (v / "tokenizer").mkdir(), "empty directory"),
    ("nested-empty-dir", lambda v, out: (v / "a" / "b").mkdir(parents=True), "empty directory"),
]


@pytest.mark.parametrize("spoil", [c[1] for c in BAD_TREES], ids=[c[0] for c in BAD_TREES])
def test_adversarial_model_publish_bad_tree_fails_before_any_write(shared_s3_moto_server, s3, bucket, tmp_path, spoil):
    """Stand-in: moto server S3 behind the S3-shaped proxy. A tree that cannot be published as it is fails, names the entry, writes nothing."""
    case = next(c for c in BAD_TREES if c[1] is spoil)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not part of the model")
    version_dir, config = make_version(tmp_path / "src", "m", 1)
    spoil(version_dir, outside)
    with pytest.raises(ManifestError, match=case[2]):
        publish_version(s3, bucket, "p", "m", 1, str(version_dir), str(config))
    assert keys(shared_s3_moto_server, bucket) == []


@pytest.mark.parametrize("kind", ["fifo", "directory", "missing"])
def test_adversarial_model_publish_bad_config_fails_without_hanging(s3, bucket, tmp_path, kind):
    """Stand-in: moto server S3 behind the S3-shaped proxy. A config that is a FIFO (reading it would block forever), a directory or missing fails."""
    version_dir, _config = make_version(tmp_path / "src", "m", 1)
    config = tmp_path / "config.pbtxt"
    if kind == "fifo":
        os.mkfifo(config)
    elif kind == "directory":
        config.mkdir()
    with pytest.raises(ManifestError, match="config="):
        publish_version(s3, bucket, "p", "m", 1, str(version_dir), str(config))


def test_adversarial_model_publish_symlinks_inside_are_followed_and_caches_reported(shared_s3_moto_server, s3, bucket, tmp_path):
    """Stand-in: moto server S3 behind the S3-shaped proxy. Links inside the tree publish their content under the link's path; __pycache__ is reported."""
    version_dir, config = make_version(tmp_path / "src", "m", 1)
    (version_dir / "shared").mkdir()
    (version_dir / "shared" / "vocab.txt").write_text("a b c")
    (version_dir / "vocab.txt").symlink_to("shared/vocab.txt")
    (version_dir / "tokenizer").symlink_to(version_dir / "shared")
    (version_dir / "__pycache__").mkdir()
    (version_dir / "__pycache__" / "model.cpython-311.pyc").write_bytes(b"\0")
    result = publish_version(s3, bucket, "p", "m", 1, str(version_dir), str(config))
    listed = set(manifest_files(result["manifest"]))
    assert listed == {"model.py", "weights.bin", "shared/vocab.txt", "vocab.txt", "tokenizer/vocab.txt"}
    assert result["ignored"] == ["__pycache__/"]
    assert set(keys(shared_s3_moto_server, bucket)) == {f"p/m/1/{p}" for p in listed} | {"p/m/1.manifest.json"}


class Interrupting:
    """The S3 client, with a fault injected into put_object: fail the Nth upload, or change the file as it is sent."""

    def __init__(self, s3, fail_at: int | None = None, change: Path | None = None) -> None:
        self.s3, self.fail_at, self.change, self.puts = s3, fail_at, change, 0

    def __getattr__(self, name):
        return getattr(self.s3, name)

    def put_object(self, **kwargs):
        self.puts += 1
        if self.fail_at == self.puts:
            raise ConnectionResetError("connection reset in the middle of a publish")
        if self.change is not None and kwargs["Key"].endswith(self.change.name):
            self.change.write_bytes(b"edited while the publish ran")
            kwargs["Body"] = self.change.open("rb")
        return self.s3.put_object(**kwargs)


@pytest.mark.parametrize("fail_at", [1, 2, 3, 4])
def test_adversarial_model_publish_interrupted_resumes(shared_s3_moto_server, s3, bucket, tmp_path, fail_at):
    """Stand-in: moto server S3 behind the S3-shaped proxy. Cut at the Nth upload (N=4: the manifest): no manifest; the rerun uploads only the rest."""
    version_dir, config = make_version(tmp_path / "src", "m", 1)
    (version_dir / "extra.bin").write_bytes(b"e" * 1000)
    with pytest.raises(ConnectionResetError):
        publish_version(Interrupting(s3, fail_at=fail_at), bucket, "p", "m", 1, str(version_dir), str(config))
    assert manifest_key("p", "m", 1) not in keys(shared_s3_moto_server, bucket)
    resumed = publish_version(s3, bucket, "p", "m", 1, str(version_dir), str(config))
    assert resumed["changed"] is True and resumed["manifest_written"] is True
    assert len(resumed["already_in_s3"]) == min(fail_at - 1, 3)
    assert sorted(resumed["already_in_s3"] + resumed["uploaded"]) == ["extra.bin", "model.py", "weights.bin"]
    again = publish_version(s3, bucket, "p", "m", 1, str(version_dir), str(config))
    assert again["changed"] is False and again["uploaded"] == [] and again["manifest_written"] is False
    assert "skipped" not in again  # Ansible would mark the task skipped


def test_adversarial_model_publish_file_changed_during_upload_writes_no_manifest(shared_s3_moto_server, s3, bucket, tmp_path):
    """Stand-in: moto server S3 behind the S3-shaped proxy. S3's SHA-256 of what arrived differs from the manifest: fail, no manifest written."""
    version_dir, config = make_version(tmp_path / "src", "m", 1)
    with pytest.raises(ManifestError, match="changed while publishing"):
        publish_version(Interrupting(s3, change=version_dir / "weights.bin"), bucket, "p", "m", 1, str(version_dir), str(config))
    assert manifest_key("p", "m", 1) not in keys(shared_s3_moto_server, bucket)


@pytest.mark.parametrize("planted", ["same-size-other-bytes", "no-checksum"])
def test_adversarial_model_publish_never_trusts_an_unverified_object(shared_s3_moto_server, s3, bucket, tmp_path, planted):
    """Stand-in: moto server S3 behind the S3-shaped proxy. An object already at the key is skipped only when S3's SHA-256 matches; else re-uploaded."""
    version_dir, config = make_version(tmp_path / "src", "m", 1)
    data = (version_dir / "weights.bin").read_bytes()
    raw = shared_s3_moto_server.client("s3")
    if planted == "same-size-other-bytes":
        raw.put_object(Bucket=bucket, Key="p/m/1/weights.bin", Body=b"\0" * len(data), ChecksumAlgorithm="SHA256")
    else:
        raw.put_object(Bucket=bucket, Key="p/m/1/weights.bin", Body=data)
    result = publish_version(s3, bucket, "p", "m", 1, str(version_dir), str(config))
    assert "weights.bin" in result["uploaded"]
    assert raw.get_object(Bucket=bucket, Key="p/m/1/weights.bin")["Body"].read() == data


def test_adversarial_model_publish_task_result_is_truthful(shared_s3_moto_server, bucket, tmp_path):
    """Stand-in: moto server S3 behind the S3-shaped proxy, through ansible-playbook. Publishing twice: changed then not, never reported as skipped."""
    version_dir, config = make_version(tmp_path / "src", "m", 1)
    run = run_playbook(
        PLAYBOOKS / "adversarial_model_publish.yml",
        {"aws_endpoint_url": shared_s3_moto_server.endpoint, "bucket": bucket, "source": str(version_dir), "config": str(config)},
    )
    assert run.rc == 0, run.stdout[-3000:] + run.stderr[-2000:]
    first, second = run.result("Publish"), run.result("Publish again")
    assert first["changed"] is True and first["manifest_written"] is True and not first.get("skipped")
    assert second["changed"] is False and second["manifest_written"] is False and not second.get("skipped")
