"""Manifests, keys, version choice and the file, prune and rollback plans (pure functions)."""

from __future__ import annotations

import json

import pytest

from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.manifest import (
    ManifestError,
    build_manifest,
    check_version,
    manifest_key,
    parse_manifest,
    pick_version,
    plan_files,
    prune_plan,
    render_manifest,
    rollback_target,
    safe_path,
    sha256_bytes,
    verify_file,
    versions_from_keys,
)

SHA_A = sha256_bytes(b"a")
SHA_B = sha256_bytes(b"b")


def manifest(**files):
    return build_manifest("m", 2, files or {"model.py": (1, SHA_A)}, 'name: "m"\n')


def test_keys_follow_the_layout_and_ignore_versions_without_a_manifest():
    assert manifest_key("/p/q/", "m", 3) == "p/q/m/3.manifest.json"
    assert manifest_key("", "m", 3) == "m/3.manifest.json"
    keys = [
        "p/m/1.manifest.json",
        "p/m/10.manifest.json",
        "p/m/2.manifest.json",
        "p/m/x.manifest.json",
        "p/m/0.manifest.json",
        "p/m/3/model.py",
        "p/other/4.manifest.json",
    ]
    assert versions_from_keys(keys, "p", "m") == [1, 2, 10]


def test_pick_version_latest_or_a_published_one():
    assert pick_version([1, 2, 10], "latest") == 10
    assert pick_version([1, 2, 10], "2") == 2
    with pytest.raises(ManifestError, match="version=3 has no manifest"):
        pick_version([1, 2], 3)
    with pytest.raises(ManifestError, match="no published version"):
        pick_version([], "latest")
    for bad in ("0", "-1", "1.5", "v2", " "):
        with pytest.raises(ManifestError, match="positive integer"):
            check_version(bad)


def test_manifest_round_trips_and_renders_canonically():
    built = manifest(**{"b/w.bin": (1, SHA_B), "model.py": (1, SHA_A)})
    raw = render_manifest(built)
    assert parse_manifest(raw, "m", 2) == built
    assert render_manifest(json.loads(raw)) == raw
    assert [f["path"] for f in built["files"]] == ["b/w.bin", "model.py"]


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda m: m.update(version=3), "copied to the wrong key"),
        (lambda m: m.update(format=2), "format=2"),
        (lambda m: m["config"].update(text="changed"), "config.text does not match"),
        (lambda m: m.update(files=[]), "non-empty list"),
        (lambda m: m["files"][0].update(sha256="ABC"), "64 lowercase hex"),
        (lambda m: m["files"][0].update(size=-1), "byte count"),
        (lambda m: m["files"][0].update(path="../escape"), "not a plain relative path"),
        (lambda m: m["files"].append(dict(m["files"][0])), "listed twice"),
    ],
)
def test_parse_manifest_refuses_bad_manifests(mutate, message):
    built = manifest()
    mutate(built)
    with pytest.raises(ManifestError, match=message):
        parse_manifest(render_manifest(built), "m", 2)
    with pytest.raises(ManifestError, match="not JSON"):
        parse_manifest(b"{", "m", 2)


@pytest.mark.parametrize("path", ["/abs", "a/../b", "..", ".hidden", "a/.b", "a\\b", "", "a//b", "./a"])
def test_safe_path_refuses_paths_leaving_the_version_directory(path):
    with pytest.raises(ManifestError):
        safe_path(path)


def test_verify_file_names_the_file_and_both_values():
    verify_file("w.bin", (1, SHA_A), 1, SHA_A, "s3://b/k")
    with pytest.raises(ManifestError, match=r"w.bin from s3://b/k: size 2 != manifest size 1"):
        verify_file("w.bin", (1, SHA_A), 2, SHA_A, "s3://b/k")
    with pytest.raises(ManifestError, match=f"sha256 {SHA_B} != manifest sha256 {SHA_A}"):
        verify_file("w.bin", (1, SHA_A), 1, SHA_B, "s3://b/k")


def test_plan_downloads_only_what_is_nowhere_local():
    wanted = {"model.py": (1, SHA_A), "w.bin": (1, SHA_B), "x.bin": (1, SHA_A)}
    in_place = {"model.py": (1, SHA_A), "w.bin": (1, SHA_A)}
    elsewhere = {("w.bin", SHA_B): "/r/m/1/w.bin"}
    assert plan_files(wanted, in_place, elsewhere) == {"keep": ["model.py"], "link": ["w.bin"], "download": ["x.bin"]}
    assert plan_files(wanted, {}, {}) == {"keep": [], "link": [], "download": ["model.py", "w.bin", "x.bin"]}


def test_prune_keeps_the_newest_and_the_protected():
    assert prune_plan([1, 2, 3, 4, 5], 2, []) == [1, 2, 3]
    assert prune_plan([1, 2, 3, 4, 5], 2, [1]) == [2, 3]
    assert prune_plan([4, 5], 3, []) == []
    with pytest.raises(ManifestError, match="keep at least 1"):
        prune_plan([1, 2], 0, [])


def test_rollback_target_is_relative_to_the_newest_version():
    assert rollback_target([1, 2, 3], [3]) == 2
    assert rollback_target([1, 2, 3], [2]) == 2  # a second rollback stays put
    assert rollback_target([2, 3, 4], [3]) == 3  # newest failed to load: the serving one is the target
    assert rollback_target([1, 2, 3], [1]) == 1  # rolled back further by hand: stays
    assert rollback_target([1, 2, 3], [1, 3]) == 1  # the standby, not blindly the newest minus one
    assert rollback_target([3], [3]) is None
    assert rollback_target([], []) is None
