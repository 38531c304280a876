# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The one place this collection calls ECR: registry login (decoding the authorization token is pure) and
image digest lookups. Every call is made with `aws_retry=True` on a client built with AWSRetry."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from ansible_collections.amazon.aws.plugins.module_utils.botocore import is_boto3_error_code
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import InputError


def decode_authorization(data: dict[str, Any]) -> dict[str, str]:
    """One `authorizationData` entry -> {registry, username, password, expires_at}.

    The token is base64 of `user:password` (the user is AWS); the registry is the proxy endpoint without scheme."""
    token = data.get("authorizationToken") or ""
    try:
        user, sep, password = base64.b64decode(token, validate=True).decode("utf-8").partition(":")
    except (binascii.Error, UnicodeDecodeError) as e:
        raise InputError(f"ECR authorizationToken is not base64 of user:password ({e})") from e
    if not sep or not user or not password:
        raise InputError("ECR authorizationToken does not hold user:password")
    endpoint = data.get("proxyEndpoint") or ""
    registry = endpoint.split("://", 1)[-1].rstrip("/")
    if not registry:
        raise InputError("ECR authorization data has no proxyEndpoint")
    expires = data.get("expiresAt")
    return {
        "registry": registry,
        "username": user,
        "password": password,
        "expires_at": expires.isoformat() if hasattr(expires, "isoformat") else str(expires or ""),
    }


def get_authorization(ecr: Any) -> dict[str, str]:
    """Thin client call: the registry of the caller's account and region, with login credentials."""
    response = ecr.get_authorization_token(aws_retry=True)
    entries = response.get("authorizationData") or []
    if not entries:
        raise InputError("ECR returned no authorization data")
    return decode_authorization(entries[0])


def image_digest(ecr: Any, registry_id: str, repository: str, tag: str) -> str | None:
    """sha256 digest of `repository:tag` in ECR, or None when the tag does not exist."""
    try:
        images = ecr.describe_images(aws_retry=True, registryId=registry_id, repositoryName=repository, imageIds=[{"imageTag": tag}])[
            "imageDetails"
        ]
    except is_boto3_error_code(["ImageNotFoundException", "RepositoryNotFoundException"]):
        return None
    return images[0]["imageDigest"] if images else None


def image_manifest(ecr: Any, registry_id: str, repository: str, reference: str, media_types: list[str]) -> dict[str, Any] | None:
    """{imageManifest, imageManifestMediaType} of `repository` at a tag or digest, or None when it does not exist."""
    image_id = {"imageDigest": reference} if reference.startswith("sha256:") else {"imageTag": reference}
    try:
        images = ecr.batch_get_image(
            aws_retry=True, registryId=registry_id, repositoryName=repository, imageIds=[image_id], acceptedMediaTypes=media_types
        )["images"]
    except is_boto3_error_code("RepositoryNotFoundException"):
        return None
    return images[0] if images else None


def layer_download_url(ecr: Any, registry_id: str, repository: str, digest: str) -> str:
    """A short-lived URL of one blob (a layer or an image config) of `repository`."""
    return ecr.get_download_url_for_layer(aws_retry=True, registryId=registry_id, repositoryName=repository, layerDigest=digest)[
        "downloadUrl"
    ]


def repository_exists(ecr: Any, name: str) -> bool:
    try:
        ecr.describe_repositories(aws_retry=True, repositoryNames=[name])
    except is_boto3_error_code("RepositoryNotFoundException"):
        return False
    return True
