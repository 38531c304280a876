"""Per-task-definition views of the model store, on a real local filesystem (tmp_path)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ansible_collections.inferops.triton_ecs.plugins.module_utils._models import views
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.manifest import (
    ManifestError,
    build_manifest,
    render_manifest,
    sha256_bytes,
)


def store_version(host: Path, model: str, version: int, config: str = "") -> None:
    """A complete version in the store, as the sync leaves it: files plus the verified manifest beside them."""
    body = f"weights {model} {version}".encode()
    (host / model / str(version)).mkdir(parents=True)
    (host / model / str(version) / "model.py").write_bytes(body)
    text = config or f'name: "{model}"  # version {version}\n'
    manifest = build_manifest(model, version, {"model.py": (len(body), sha256_bytes(body))}, text)
    (host / model / f"{version}.manifest.json").write_bytes(render_manifest(manifest))


def test_a_view_links_exactly_its_release_with_the_config_of_its_version(tmp_path: Path):
    store_version(tmp_path, "resnet50", 3)
    store_version(tmp_path, "resnet50", 4)
    assert views.ensure_view(str(tmp_path), "triton-7", {"resnet50": [3]}) is True
    view = tmp_path / ".task-definitions" / "triton-7" / "resnet50"
    assert os.readlink(view / "3") == "../../../resnet50/3"
    assert (view / "3" / "model.py").read_bytes() == b"weights resnet50 3"  # the link resolves into the store
    assert (view / "config.pbtxt").read_text() == 'name: "resnet50"  # version 3\n'
    assert sorted(os.listdir(view)) == ["3", "config.pbtxt"]
    assert views.ensure_view(str(tmp_path), "triton-7", {"resnet50": [3]}) is False  # nothing to change
    assert views.read_view(str(tmp_path), "triton-7") == {"resnet50": [3]}


def test_a_hot_update_links_both_versions_then_only_the_new_one(tmp_path: Path):
    store_version(tmp_path, "resnet50", 3)
    store_version(tmp_path, "resnet50", 4)
    views.ensure_view(str(tmp_path), "triton-7", {"resnet50": [3]})
    assert views.ensure_view(str(tmp_path), "triton-7", {"resnet50": [3, 4]}) is True
    assert views.read_view(str(tmp_path), "triton-7") == {"resnet50": [3, 4]}
    assert "version 4" in (tmp_path / ".task-definitions" / "triton-7" / "resnet50" / "config.pbtxt").read_text()
    views.ensure_view(str(tmp_path), "triton-7", {"resnet50": [4]})
    assert views.read_view(str(tmp_path), "triton-7") == {"resnet50": [4]}


def test_two_views_protect_their_versions_from_the_prune_and_leave_the_store_alone(tmp_path: Path):
    for version in (2, 3, 4):
        store_version(tmp_path, "resnet50", version)
    store_version(tmp_path, "bert", 1)
    views.ensure_view(str(tmp_path), "triton-3", {"resnet50": [3], "bert": [1]})
    views.ensure_view(str(tmp_path), "triton-4", {"resnet50": [4]})
    assert views.linked_versions(str(tmp_path)) == {"resnet50": {3, 4}, "bert": {1}}
    views.ensure_view(str(tmp_path), "triton-3", {"resnet50": [3]})  # bert left the release
    assert views.read_view(str(tmp_path), "triton-3") == {"resnet50": [3]}
    views.remove_view(str(tmp_path), "triton-3")
    assert views.view_names(str(tmp_path)) == ["triton-4"]
    assert sorted(os.listdir(tmp_path / "resnet50")) == ["2", "2.manifest.json", "3", "3.manifest.json", "4", "4.manifest.json"]


def test_a_version_not_complete_in_the_store_never_goes_into_a_view(tmp_path: Path):
    (tmp_path / "resnet50" / "5").mkdir(parents=True)  # a directory without its verified manifest
    with pytest.raises(ManifestError, match="resnet50 version 5 is not complete"):
        views.ensure_view(str(tmp_path), "triton-7", {"resnet50": [5]})
    assert views.view_names(str(tmp_path)) == []  # nothing half made is left in sight
    with pytest.raises(ManifestError, match="no version to link"):
        views.ensure_view(str(tmp_path), "triton-7", {"resnet50": []})
    with pytest.raises(ManifestError, match="is not a task definition's"):
        views.view_path(str(tmp_path), "../escape")


def test_staging_left_by_a_killed_agent_is_cleaned(tmp_path: Path):
    (tmp_path / ".task-definitions" / ".staging-triton-7-x").mkdir(parents=True)
    assert views.view_names(str(tmp_path)) == []
    assert views.clean_stale(str(tmp_path)) == [".staging-triton-7-x"]
    assert os.listdir(tmp_path / ".task-definitions") == []
