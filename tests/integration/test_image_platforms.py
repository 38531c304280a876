"""inferops.triton_ecs.image_platforms reads an image's platforms from its registry and refuses one the fleet lacks.

Stand-ins: the Docker registry on 127.0.0.1:5000 (Debian's docker-registry, a real registry HTTP API v2) and a
private moto server for ECR (BatchGetImage returns the manifest put there). Images are pushed through the registry
API itself (a config blob, one manifest per platform, an OCI index over them), so no image is built: what is read is
exactly what `docker buildx build --platform ...` pushes. moto does not implement GetDownloadUrlForLayer, so a single
(non-index) manifest in ECR is covered by the unit tests' fake registry only.
"""

from __future__ import annotations

import hashlib
import json
import urllib.request
import uuid
from pathlib import Path

from tests.harness.ansible import run_playbook
from tests.harness.moto import MotoServer

PLAYBOOK = Path(__file__).parent / "playbooks" / "image_platforms_module.yml"
REGISTRY = "127.0.0.1:5000"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"


def _digest(body: bytes) -> str:
    return "sha256:" + hashlib.sha256(body).hexdigest()


def _request(method: str, url: str, body: bytes = b"", content_type: str = "") -> urllib.request.addinfourl:
    request = urllib.request.Request(url, data=body if method != "GET" else None, method=method)
    if content_type:
        request.add_header("Content-Type", content_type)
    return urllib.request.urlopen(request, timeout=10)


def push_blob(repo: str, body: bytes) -> str:
    digest = _digest(body)
    with _request("POST", f"http://{REGISTRY}/v2/{repo}/blobs/uploads/") as answer:
        location = answer.headers["Location"]
    if location.startswith("/"):
        location = f"http://{REGISTRY}{location}"
    with _request("PUT", f"{location}{'&' if '?' in location else '?'}digest={digest}", body, "application/octet-stream"):
        pass
    return digest


def push_manifest(repo: str, reference: str, manifest: dict, media_type: str) -> tuple[str, int]:
    body = json.dumps(manifest).encode()
    with _request("PUT", f"http://{REGISTRY}/v2/{repo}/manifests/{reference}", body, media_type):
        pass
    return _digest(body), len(body)


def push_platform(repo: str, tag: str, arch: str) -> dict:
    """A one-platform image (config and an empty layer list) at `tag`; its index entry."""
    config = json.dumps({"architecture": arch, "os": "linux", "rootfs": {"type": "layers", "diff_ids": []}}).encode()
    config_digest = push_blob(repo, config)
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest, "size": len(config)},
        "layers": [],
    }
    digest, size = push_manifest(repo, tag, manifest, OCI_MANIFEST)
    return {"mediaType": OCI_MANIFEST, "digest": digest, "size": size, "platform": {"architecture": arch, "os": "linux"}}


def test_the_registry_and_ecr_manifests_decide_what_the_fleet_can_run(moto_server: MotoServer):
    repo = f"inferops-test/image-platforms-{uuid.uuid4().hex[:8]}"
    amd64 = push_platform(repo, "amd64-only", "amd64")
    arm64 = push_platform(repo, "arm64-only", "arm64")
    index = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [amd64, arm64]}
    push_manifest(repo, "multi", index, OCI_INDEX)
    ecr = moto_server.client("ecr")
    ecr.create_repository(repositoryName="triton")
    ecr.put_image(repositoryName="triton", imageManifest=json.dumps(index), imageManifestMediaType=OCI_INDEX, imageTag="multi")
    amd_index = dict(index, manifests=[amd64])
    ecr.put_image(repositoryName="triton", imageManifest=json.dumps(amd_index), imageManifestMediaType=OCI_INDEX, imageTag="amd64")
    ecr_host = "123456789012.dkr.ecr.us-east-1.amazonaws.com"
    cases = [
        {"name": "amd64 image, x86_64 fleet", "image": f"{REGISTRY}/{repo}:amd64-only", "cpu_architecture": "X86_64"},
        {"name": "amd64 image, arm64 fleet", "image": f"{REGISTRY}/{repo}:amd64-only", "cpu_architecture": "ARM64"},
        {"name": "multi-arch image, arm64 fleet", "image": f"{REGISTRY}/{repo}:multi", "cpu_architecture": "ARM64"},
        {"name": "arm64 image, platforms only", "image": f"{REGISTRY}/{repo}@{arm64['digest']}"},
        {"name": "missing tag", "image": f"{REGISTRY}/{repo}:nope", "cpu_architecture": "X86_64"},
        {"name": "ECR multi-arch, arm64 fleet", "image": f"{ecr_host}/triton:multi", "cpu_architecture": "ARM64"},
        {"name": "ECR amd64 index, arm64 fleet", "image": f"{ecr_host}/triton:amd64", "cpu_architecture": "ARM64"},
    ]
    run = run_playbook(PLAYBOOK, extra_vars={"aws_endpoint_url": moto_server.endpoint, "ipl_cases": cases}, check=True)
    results = {r["item"]["name"]: r for r in run.result("Image platforms")["results"]}

    ok = results["amd64 image, x86_64 fleet"]
    assert not ok.get("failed") and ok["platforms"] == ["linux/amd64"] and ok["media_type"] == OCI_MANIFEST
    refused = results["amd64 image, arm64 fleet"]
    assert refused["failed"]
    assert "is built for linux/amd64, but the fleet's instances are ARM64 (linux/arm64)" in refused["msg"]
    assert results["multi-arch image, arm64 fleet"]["platforms"] == ["linux/amd64", "linux/arm64"]
    assert not results["multi-arch image, arm64 fleet"].get("failed")
    assert results["arm64 image, platforms only"]["platforms"] == ["linux/arm64"]
    assert "has no manifest nope: push the image first" in results["missing tag"]["msg"]
    assert not results["ECR multi-arch, arm64 fleet"].get("failed"), results["ECR multi-arch, arm64 fleet"].get("msg")
    assert results["ECR multi-arch, arm64 fleet"]["registry"] == ecr_host
    assert "the fleet's instances are ARM64" in results["ECR amd64 index, arm64 fleet"]["msg"]
    assert all(not r.get("changed") for r in results.values())
