"""image_platform: the platforms of an image's manifest, and the refusal of an image the fleet's architecture lacks."""

from __future__ import annotations

import json

import pytest

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import InputError
from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet import image_platform as ip

ECR_IMAGE = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/team/triton@sha256:" + "ab" * 32


def test_references_split_into_registry_repository_and_reference():
    assert ip.parse_reference(ECR_IMAGE) == {
        "registry": "123456789012.dkr.ecr.eu-west-1.amazonaws.com",
        "repository": "team/triton",
        "reference": "sha256:" + "ab" * 32,
    }
    assert ip.parse_reference("127.0.0.1:5000/triton:abc123") == {
        "registry": "127.0.0.1:5000",
        "repository": "triton",
        "reference": "abc123",
    }
    assert ip.parse_reference("localhost/triton")["reference"] == "latest"
    with pytest.raises(InputError, match="names no registry"):
        ip.parse_reference("triton:latest")


def test_an_index_names_its_platforms_without_attestations():
    index = {
        "manifests": [
            {"platform": {"os": "linux", "architecture": "amd64"}},
            {"platform": {"os": "linux", "architecture": "arm64", "variant": "v8"}},
            {"platform": {"os": "unknown", "architecture": "unknown"}},  # buildx's attestation entry
        ]
    }
    assert ip.platforms_of_index(index) == ["linux/amd64", "linux/arm64/v8"]


@pytest.mark.parametrize(
    ("platforms", "arch", "refused"),
    [
        (["linux/amd64"], "X86_64", False),
        (["linux/amd64"], "ARM64", True),
        (["linux/amd64", "linux/arm64/v8"], "ARM64", False),
        (["linux/arm64"], "X86_64", True),
        ([], "X86_64", True),
    ],
)
def test_the_fleet_architecture_must_be_among_the_platforms(platforms, arch, refused):
    problem = ip.architecture_problem("reg/triton:1", platforms, arch)
    assert (problem is not None) == refused
    if refused:
        assert f"the fleet's instances are {arch}" in problem
        assert "triton_image_platform" in problem  # the fix


def fake_registry(manifest: dict, config: dict | None = None):
    calls = []

    def fetch(kind: str, reference: str):
        calls.append((kind, reference))
        if kind == "manifests":
            return manifest.get("mediaType", ""), json.dumps(manifest).encode()
        return "", json.dumps(config).encode()

    return fetch, calls


def test_a_single_manifest_names_its_platform_in_its_config():
    manifest = {"mediaType": ip.MANIFEST_TYPES[1], "config": {"digest": "sha256:" + "cd" * 32}, "layers": []}
    fetch, calls = fake_registry(manifest, {"os": "linux", "architecture": "amd64"})
    assert ip.read_platforms(fetch, "tag") == {"media_type": ip.MANIFEST_TYPES[1], "platforms": ["linux/amd64"]}
    assert calls == [("manifests", "tag"), ("blobs", "sha256:" + "cd" * 32)]


def test_an_index_is_read_in_one_request():
    fetch, calls = fake_registry({"mediaType": ip.INDEX_TYPES[0], "manifests": [{"platform": {"os": "linux", "architecture": "arm64"}}]})
    assert ip.read_platforms(fetch, "tag")["platforms"] == ["linux/arm64"]
    assert calls == [("manifests", "tag")]
