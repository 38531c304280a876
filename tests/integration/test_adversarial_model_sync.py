"""Adversarial model syncs and prunes (issue 12, class "syncing and pruning models"; issue 28, classes "a failed sync
replaces the serving model's config.pbtxt" and "model_sync keeps downloading after the first 404").

Stand-in: a moto server for S3 behind the S3-shaped proxy (tests/harness/s3_proxy.py) and a real local filesystem
(ext4 here) as the instance's model repository; a watcher thread stands in for Triton looking at the directory while
the sync works. The existing
tests/integration/test_model_repository.py runs the same code with a real tritonserver.
"""

from __future__ import annotations

import os
import threading
import uuid
from pathlib import Path

import pytest

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import s3 as _s3
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.module import retrying_client
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models import sync as _model_sync
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.manifest import file_key
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.publish import publish_version
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.sync import prune_versions, sync_version
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.transfer import DownloadSettings
from tests.harness.model_versions import make_version, weights


class Repo:
    """A bucket with published versions of model `m`, and an instance's host path."""

    def __init__(self, moto, tmp_path: Path) -> None:
        self.raw = moto.client("s3")
        self.bucket = f"adv-sync-{uuid.uuid4().hex[:8]}"
        self.raw.create_bucket(Bucket=self.bucket)
        self.s3 = retrying_client(self.raw)
        self.source = tmp_path / "source"
        self.host = tmp_path / "host"
        self.model_dir = self.host / "m"

    def publish(self, *versions: int) -> None:
        for version in versions:
            publish_version(self.s3, self.bucket, "p", "m", version, *map(str, make_version(self.source, "m", version)))

    def sync(self, version="latest", **kwargs) -> dict:
        return sync_version(self.s3, self.bucket, "p", "m", version, str(self.host), **kwargs)


@pytest.fixture
def repo(shared_s3_moto_server, tmp_path) -> Repo:
    return Repo(shared_s3_moto_server, tmp_path)


def _symlink_elsewhere(model_dir: Path, name: str) -> None:
    target = model_dir.parent.parent / "elsewhere"
    target.mkdir(exist_ok=True)
    (target / "keep.me").write_text("not the sync's to delete")
    (model_dir / name).symlink_to(target)


# Entries a model directory may hold that are no version of ours: never a version, never break a sync, never removed.
UNEXPECTED_LOCAL = [
    ("file-named-like-a-version", lambda d: (d / "7").write_text("x"), "7"),
    ("non-numeric-dir", lambda d: (d / "abc").mkdir(), "abc"),
    ("zero-padded-dir", lambda d: (d / "007").mkdir(), "007"),
    ("unicode-digit-dir", lambda d: (d / "\u0663").mkdir(), "\u0663"),
    ("zero-dir", lambda d: (d / "0").mkdir(), "0"),
    ("beyond-int64-dir", lambda d: (d / ("9" * 20)).mkdir(), "9" * 20),
    ("symlink-named-like-a-version", lambda d: _symlink_elsewhere(d, "5"), "5"),
    ("stray-file", lambda d: (d / "notes.txt").write_text("hi"), "notes.txt"),
    ("manifest-without-version", lambda d: (d / "9.manifest.json").write_text("{}"), "9.manifest.json"),
    ("version-without-manifest", lambda d: ((d / "4").mkdir(), (d / "4" / "model.py").write_text("x")), "4"),
]


@pytest.mark.parametrize("plant", [c[1] for c in UNEXPECTED_LOCAL], ids=[c[0] for c in UNEXPECTED_LOCAL])
def test_adversarial_model_sync_unexpected_local_entries_never_break_a_sync(repo, plant):
    """Stand-in: moto server S3 + local filesystem. Sync and prune work around the entry, name it, and leave it alone."""
    name = next(c[2] for c in UNEXPECTED_LOCAL if c[1] is plant)
    repo.publish(1, 2)
    repo.model_dir.mkdir(parents=True)
    plant(repo.model_dir)
    for version in (1, 2):
        result = repo.sync(version)
        assert name in result["unexpected"], result
    pruned = prune_versions(str(repo.host), "m", 1, [])
    assert pruned["removed"] == [1] and name in pruned["unexpected"]
    assert os.path.lexists(repo.model_dir / name)
    elsewhere = repo.host.parent / "elsewhere"
    assert not elsewhere.exists() or (elsewhere / "keep.me").exists()  # a symlink's target is never touched
    assert _model_sync.complete_versions(str(repo.model_dir), "m") == [2]


UNEXPECTED_KEYS = [
    "abc.manifest.json",
    "007.manifest.json",
    "0.manifest.json",
    "1.manifest.json.bak",
    "README",
    f"{'9' * 20}.manifest.json",
    "\u0663.manifest.json",
]


@pytest.mark.parametrize("key", UNEXPECTED_KEYS)
def test_adversarial_model_sync_unexpected_s3_keys_are_ignored_and_named(repo, key):
    """Stand-in: moto server S3. `latest` is still the highest valid version; the odd key is named in ignored_keys."""
    repo.publish(1, 2)
    repo.raw.put_object(Bucket=repo.bucket, Key=f"p/m/{key}", Body=b"{not a manifest")
    result = repo.sync("latest")
    assert result["version"] == 2 and f"p/m/{key}" in result["ignored_keys"]
    assert (repo.model_dir / "2" / "model.py").exists()


STALE = [
    ("staging-dir", lambda d: ((d / ".staging-2-abc").mkdir(), (d / ".staging-2-abc" / "weights.bin").write_bytes(b"half"))),
    ("staging-file", lambda d: (d / ".staging-xyz").write_bytes(b"half a config")),
    ("trash-dir", lambda d: ((d / ".trash-1" / "1").mkdir(parents=True), (d / ".trash-1" / "1" / "model.py").write_text("old"))),
    ("trash-file", lambda d: (d / ".trash-q").write_text("x")),
    ("staging-symlink", lambda d: (d / ".staging-link").symlink_to(d / "1")),
]


@pytest.mark.parametrize("plant", [c[1] for c in STALE], ids=[c[0] for c in STALE])
def test_adversarial_model_sync_stale_staging_and_trash_are_cleaned_by_the_next_run(repo, plant):
    """Stand-in: moto server S3 + local filesystem. A run with nothing else to do still cleans, then changes nothing."""
    repo.publish(1)
    repo.sync(1)
    plant(repo.model_dir)
    stale = _model_sync.stale_entries(str(repo.model_dir))
    assert stale
    assert repo.sync(1, check_mode=True)["cleaned"] == stale
    cleaned = repo.sync(1)
    assert cleaned["changed"] is True and cleaned["cleaned"] == stale and cleaned["downloaded"] == []
    assert sorted(os.listdir(repo.model_dir)) == [".sync.lock", "1", "1.manifest.json", "config.pbtxt"]
    assert (repo.model_dir / "1" / "model.py").exists()  # a symlink into the version was removed, not followed
    assert repo.sync(1)["changed"] is False


@pytest.mark.parametrize(
    ("keep", "protect", "removed"),
    [(1, [], [1, 2]), (1, [1], [2]), (2, [], [1]), (1, [3], [1, 2]), (5, [], [])],
    ids=["keep-1", "keep-1-protect-oldest", "keep-2", "keep-1-protect-newest", "keep-more-than-present"],
)
def test_adversarial_model_sync_prune_counts_only_complete_versions(repo, keep, protect, removed):
    """Stand-in: local filesystem. Complete: 1, 2, 4. Incomplete 3 and 7 and a symlink 9 are neither counted nor removed."""
    repo.publish(1, 2, 3, 4)
    for version in (1, 2, 3, 4):
        repo.sync(version)
    (repo.model_dir / "7").mkdir()  # no manifest: incomplete
    (repo.model_dir / "7" / "model.py").write_text("hand-made")
    (repo.model_dir / "3" / "weights.bin").write_bytes(b"truncated")  # wrong size: 3 is incomplete now
    _symlink_elsewhere(repo.model_dir, "9")
    result = prune_versions(str(repo.host), "m", keep, protect)
    assert result["removed"] == removed
    assert result["incomplete"] == [3, 7]
    assert (repo.model_dir / "7" / "model.py").exists() and (repo.model_dir / "3").is_dir()
    assert os.path.islink(repo.model_dir / "9") and (repo.host.parent / "elsewhere" / "keep.me").exists()


def test_adversarial_model_sync_local_corruption_is_refetched_not_blamed_on_s3(repo):
    """Stand-in: moto server S3 + local filesystem. A linked-from copy corrupted in place: download again, no error."""
    repo.publish(1, 2, 3)
    repo.sync(1)
    repo.sync(2)  # model.py is a hard link of version 1's
    model_py = repo.model_dir / "1" / "model.py"
    model_py.write_bytes(b"#" * model_py.stat().st_size)  # same size, other bytes: only a hash sees it
    third = repo.sync(3)
    assert third["redownloaded"] == ["model.py"]
    assert (repo.model_dir / "3" / "model.py").read_bytes() == (repo.source / "m" / "3" / "model.py").read_bytes()
    repaired = repo.sync(1, verify_local=True)
    assert repaired["changed"] is True and "model.py" in repaired["downloaded"] + repaired["redownloaded"]
    assert model_py.read_bytes() == (repo.source / "m" / "1" / "model.py").read_bytes()


@pytest.mark.parametrize("damage", ["missing-file", "extra-file", "truncated-file", "symlinked-file"])
def test_adversarial_model_sync_repair_never_leaves_the_version_without_its_directory(repo, damage):
    """Stand-in: local filesystem, a watcher thread for Triton. A serving version repaired 5 times is always there."""
    repo.publish(1)
    repo.sync(1)
    version_dir = repo.model_dir / "1"
    missing: list[str] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            if not version_dir.is_dir() or not (version_dir / "model.py").exists():
                missing.append(damage)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        for _attempt in range(5):
            if damage == "missing-file":
                (version_dir / "weights.bin").unlink()
            elif damage == "extra-file":
                (version_dir / "stray.bin").write_bytes(b"x")
            elif damage == "truncated-file":
                (version_dir / "weights.bin").write_bytes(b"short")
            else:
                (version_dir / "weights.bin").unlink()
                (version_dir / "weights.bin").symlink_to(repo.source / "m" / "1" / "weights.bin")
            assert repo.sync(1)["changed"] is True
    finally:
        stop.set()
        watcher.join()
    assert missing == []
    assert not os.path.islink(version_dir / "weights.bin")
    assert repo.sync(1)["changed"] is False


def test_adversarial_model_sync_a_version_appears_only_with_its_config_and_manifest(repo):
    """Stand-in: local filesystem, a watcher thread for Triton. Whenever the version directory exists, so do the rest."""
    repo.publish(1)
    seen: list[tuple[bool, bool]] = []
    stop = threading.Event()

    def watch() -> None:
        # One look after the sync has ended too, so that a watcher the scheduler starved still sees the outcome.
        while True:
            finished = stop.is_set()
            if (repo.model_dir / "1").is_dir():
                seen.append(((repo.model_dir / "config.pbtxt").exists(), (repo.model_dir / "1.manifest.json").exists()))
            if finished:
                return

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        repo.sync(1)
    finally:
        stop.set()
        watcher.join()
    assert seen and all(config and manifest for config, manifest in seen)


# Issue 28, class "a failed sync replaces the serving model's config.pbtxt".


def _tree(root: Path) -> dict[str, object]:
    """Every entry under root: file bytes, link targets, directories; the sync's lock file left out."""
    found: dict[str, object] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if rel == ".sync.lock":
            continue
        found[rel] = ("link", os.readlink(path)) if path.is_symlink() else ("dir",) if path.is_dir() else path.read_bytes()
    return found


def _publish_with_config(repo: Repo, version: int, config_text: str, extra_files: int = 0) -> None:
    version_dir, config = make_version(repo.source, "m", version)
    config.write_text(config_text)
    for index in range(extra_files):
        (version_dir / f"shard-{index:02d}.bin").write_bytes(f"shard {index} of version {version}".encode())
    publish_version(repo.s3, repo.bucket, "p", "m", version, str(version_dir), str(config))


def _break_swap(monkeypatch) -> None:
    def refuse(*_args) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_model_sync, "exchange", lambda *_a: False)
    monkeypatch.setattr(_model_sync.os, "rename", refuse)


FAILED_SYNCS = [
    ("file-deleted-from-s3", lambda repo, _mp: repo.raw.delete_object(Bucket=repo.bucket, Key=file_key("p", "m", 2, "weights.bin"))),
    (
        "file-replaced-in-s3",
        lambda repo, _mp: repo.raw.put_object(
            Bucket=repo.bucket, Key=file_key("p", "m", 2, "weights.bin"), Body=b"\0" * len(weights(2, 64 * 1024))
        ),
    ),
    ("swap-fails-after-verification", lambda _repo, mp: _break_swap(mp)),
]


@pytest.mark.parametrize("break_it", [c[1] for c in FAILED_SYNCS], ids=[c[0] for c in FAILED_SYNCS])
def test_adversarial_model_sync_a_failed_sync_leaves_every_file_of_the_serving_version_as_it_was(repo, monkeypatch, break_it):
    """Stand-in: moto server S3 behind the S3-shaped proxy + local filesystem. Version 1 serves (its config.pbtxt is
    what a task outside a view loads); version 2, with another config, fails to sync at three different points: the
    model directory afterwards is byte for byte what it was, config.pbtxt included, and a later good sync works."""
    _publish_with_config(repo, 1, 'name: "m"\nbackend: "python"\n# config of version 1\n')
    _publish_with_config(repo, 2, 'name: "m"\nbackend: "python"\n# config of version 2\n')
    repo.sync(1)
    before = _tree(repo.model_dir)
    break_it(repo, monkeypatch)
    with pytest.raises((OSError, ValueError)):
        repo.sync(2)
    assert _tree(repo.model_dir) == before
    assert b"config of version 1" in (repo.model_dir / "config.pbtxt").read_bytes()
    monkeypatch.undo()
    _publish_with_config(repo, 3, 'name: "m"\nbackend: "python"\n# config of version 3\n')
    repo.sync(3)
    assert b"config of version 3" in (repo.model_dir / "config.pbtxt").read_bytes()


def test_adversarial_model_sync_the_agent_puts_the_targets_config_back(repo):
    """Stand-in: local filesystem. After a good sync of version 2 (its config in place) production rolls back to 1:
    `use_config`, which the agent runs for its target, makes config.pbtxt version 1's again; a second call changes nothing."""
    _publish_with_config(repo, 1, 'name: "m"\nbackend: "python"\n# config of version 1\n')
    _publish_with_config(repo, 2, 'name: "m"\nbackend: "python"\n# config of version 2\n')
    repo.sync(1)
    repo.sync(2)
    assert b"config of version 2" in (repo.model_dir / "config.pbtxt").read_bytes()
    assert _model_sync.use_config(str(repo.host), "m", 1) is True
    assert b"config of version 1" in (repo.model_dir / "config.pbtxt").read_bytes()
    assert _model_sync.use_config(str(repo.host), "m", 1) is False
    with pytest.raises(ValueError, match="version 7 is not complete"):
        _model_sync.use_config(str(repo.host), "m", 7)


# Issue 28, class "model_sync keeps downloading after the first 404 and names no key".


class CountingS3:
    """The sync's S3 client, counting the GETs of a version's files (manifests left out)."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.file_gets: list[str] = []
        self.lock = threading.Lock()

    def get_object(self, **kwargs):
        if not kwargs["Key"].endswith(".manifest.json"):
            with self.lock:
                self.file_gets.append(kwargs["Key"])
        return self.inner.get_object(**kwargs)

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.mark.parametrize("concurrency", [1, 4])
def test_adversarial_model_sync_stops_at_the_first_404_and_names_the_key(repo, concurrency):
    """Stand-in: moto server S3 behind the S3-shaped proxy. Every file of version 1 deleted after publishing (24 files):
    the sync starts no GET after the first 404 (at most one per connection already in flight), names the missing
    object's s3:// URL and says to republish; nothing of the version appears."""
    _publish_with_config(repo, 1, 'name: "m"\nbackend: "python"\n', extra_files=22)
    keys = _s3.list_keys(repo.s3, repo.bucket, "p/m/1/")
    assert len(keys) == 24
    for key in keys:
        repo.raw.delete_object(Bucket=repo.bucket, Key=key)
    counting = CountingS3(repo.s3)
    with pytest.raises(ValueError) as failure:
        sync_version(counting, repo.bucket, "p", "m", 1, str(repo.host), download_settings=DownloadSettings(concurrency=concurrency))
    message = str(failure.value)
    assert f"s3://{repo.bucket}/p/m/1/" in message and "missing (404)" in message and "republish" in message, message
    assert 1 <= len(counting.file_gets) <= concurrency, counting.file_gets
    assert not (repo.model_dir / "1").exists()
