# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""Which platforms an image's manifest carries, read from its registry, and whether the fleet's architecture is one.

An x86_64 controller builds an amd64 image by default; a g5g (arm64) instance cannot run it, and ECS only finds out
when the task fails to start. The manifest says it before any write: an image index (OCI) or manifest list (Docker)
names a platform per entry; a single manifest names its platform in its config blob.

Registries: ECR through its API (BatchGetImage; the config blob of a single manifest through
GetDownloadUrlForLayer), any other through the registry HTTP API v2 (anonymous or basic auth).
"""

from __future__ import annotations

import base64
import json
import re
import urllib.error
from collections.abc import Callable
from typing import Any

from ansible.module_utils.urls import open_url

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import ecr as ecr_api
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import InputError

INDEX_TYPES = ("application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json")
MANIFEST_TYPES = ("application/vnd.oci.image.manifest.v1+json", "application/vnd.docker.distribution.manifest.v2+json")
# ECS's cpuArchitecture against the OCI/Go architecture names in manifests.
OCI_ARCHITECTURE = {"X86_64": "amd64", "ARM64": "arm64"}
ECR_HOST = re.compile(r"^(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(\.cn)?$")


# ---------------------------------------------------------------- pure


def parse_reference(image: str) -> dict[str, str]:
    """{registry, repository, reference} of `registry/repo[:tag|@sha256:...]`; InputError naming the fix otherwise."""
    name, _at, digest = image.partition("@")
    head, _slash, rest = name.partition("/")
    if not rest or not ("." in head or ":" in head or head == "localhost"):
        raise InputError(
            f"image {image!r} names no registry: give the full reference the task definition uses, "
            "e.g. 123456789012.dkr.ecr.eu-west-1.amazonaws.com/triton@sha256:... or 127.0.0.1:5000/triton:<tag>"
        )
    repository, tag = rest, "latest"
    if ":" in rest.rsplit("/", 1)[-1]:
        repository, tag = rest.rsplit(":", 1)
    return {"registry": head, "repository": repository, "reference": digest or tag}


def platforms_of_index(index: dict[str, Any]) -> list[str]:
    """`os/architecture[/variant]` of each entry of an image index; attestation entries (unknown/unknown) left out."""
    found = []
    for entry in index.get("manifests") or []:
        platform = entry.get("platform") or {}
        if platform.get("architecture") in (None, "unknown"):
            continue
        found.append("/".join(p for p in (platform.get("os"), platform["architecture"], platform.get("variant")) if p))
    return sorted(set(found))


def platform_of_config(config: dict[str, Any]) -> str:
    return "/".join(p for p in (config.get("os"), config.get("architecture"), config.get("variant")) if p)


def architecture_problem(image: str, platforms: list[str], cpu_architecture: str) -> str | None:
    """Why the fleet cannot run this image (its manifest lacks linux/<architecture>), or None."""
    wanted = f"linux/{OCI_ARCHITECTURE[cpu_architecture]}"
    if any(p == wanted or p.startswith(wanted + "/") for p in platforms):
        return None
    return (
        f"image {image} is built for {', '.join(platforms) or 'no platform its manifest names'}, but the fleet's instances "
        f"are {cpu_architecture} ({wanted}): ECS would fail to start its tasks. Build it for {wanted} "
        f"(triton_image_platform: {wanted}, or a multi-arch build that includes it), or run the fleet on "
        f"{'x86_64' if cpu_architecture == 'ARM64' else 'arm64'} instances"
    )


# ---------------------------------------------------------------- registries


def _get(url: str, headers: dict[str, str], timeout_s: float = 30) -> tuple[str, bytes]:
    response = open_url(url, headers=headers, timeout=timeout_s)  # the registry the image names
    try:
        return response.headers.get("Content-Type", ""), response.read()
    finally:
        response.close()


def registry_reader(ref: dict[str, str], insecure: bool, username: str = "", password: str = "") -> Callable[[str, str], tuple[str, bytes]]:
    """fetch(kind, reference) for `manifests` and `blobs` of a registry speaking the HTTP API v2."""
    base = f"{'http' if insecure else 'https'}://{ref['registry']}/v2/{ref['repository']}"
    auth = {"Authorization": "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()} if username else {}

    def fetch(kind: str, reference: str) -> tuple[str, bytes]:
        accept = {"Accept": ", ".join(INDEX_TYPES + MANIFEST_TYPES)} if kind == "manifests" else {}
        try:
            return _get(f"{base}/{kind}/{reference}", {**accept, **auth})
        except urllib.error.HTTPError as e:
            if e.code == 404:
                raise InputError(f"{ref['registry']}/{ref['repository']} has no {kind[:-1]} {reference}: push the image first") from e
            raise InputError(f"registry {ref['registry']} answered {e.code} for {kind[:-1]} {reference}: {e.reason}") from e
        except (urllib.error.URLError, OSError) as e:
            raise InputError(f"cannot reach registry {ref['registry']} ({e}): check the image reference and the network") from e

    return fetch


def ecr_reader(ecr: Any, ref: dict[str, str], account: str) -> Callable[[str, str], tuple[str, bytes]]:
    """fetch(kind, reference) through the ECR API."""

    def fetch(kind: str, reference: str) -> tuple[str, bytes]:
        if kind == "manifests":
            found = ecr_api.image_manifest(ecr, account, ref["repository"], reference, list(INDEX_TYPES + MANIFEST_TYPES))
            if found is None:
                raise InputError(f"ECR repository {ref['repository']} has no image {reference}: push the image first")
            return found["imageManifestMediaType"], found["imageManifest"].encode()
        return "", _get(ecr_api.layer_download_url(ecr, account, ref["repository"], reference), {})[1]

    return fetch


def read_platforms(fetch: Callable[[str, str], tuple[str, bytes]], reference: str) -> dict[str, Any]:
    """{media_type, platforms} of the image at `reference`: an index's entries, or a single manifest's config."""
    content_type, body = fetch("manifests", reference)
    manifest = json.loads(body)
    media_type = manifest.get("mediaType") or content_type.split(";")[0]
    if media_type in INDEX_TYPES or "manifests" in manifest:
        return {"media_type": media_type, "platforms": platforms_of_index(manifest)}
    config_digest = (manifest.get("config") or {}).get("digest")
    if not config_digest:
        raise InputError(f"the manifest of {reference} ({media_type or 'no media type'}) names no config: not an image manifest")
    return {"media_type": media_type, "platforms": [platform_of_config(json.loads(fetch("blobs", config_digest)[1]))]}


def check(params: dict[str, Any], ecr: Callable[[], Any]) -> dict[str, Any]:
    """The module's run: the image's platforms; InputError when the fleet's architecture is not among them."""
    ref = parse_reference(params["image"])
    match = ECR_HOST.match(ref["registry"])
    if match:
        fetch = ecr_reader(ecr(), ref, match.group("account"))
    else:
        fetch = registry_reader(
            ref, params["registry_insecure"], params.get("registry_username") or "", params.get("registry_password") or ""
        )
    found = read_platforms(fetch, ref["reference"])
    result = {"changed": False, "image": params["image"], "registry": ref["registry"], **found}
    if params.get("cpu_architecture"):
        problem = architecture_problem(params["image"], found["platforms"], params["cpu_architecture"])
        if problem:
            raise InputError(problem)
    return result
