# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The one place this collection calls the S3 API: one thin function per call.

Every function takes a client made by `AnsibleAWSModule.client("s3", retry_decorator=AWSRetry.jittered_backoff())`
(or `_aws.module.retrying_client()` outside a module: tests, benchmarks) and calls with `aws_retry=True`; errors propagate as
botocore exceptions for the module to report through `fail_json_aws`.
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Iterator
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import ClientError, error_code

CHUNK_BYTES = 1024 * 1024
_MISSING = ("NoSuchKey", "404", "NotFound")
# A conditional write that found the key (PreconditionFailed, 412), or met another write of it in flight (409).
_EXISTS = ("PreconditionFailed", "412", "ConditionalRequestConflict", "409")


def _missing(err: ClientError) -> bool:
    # error_code, not amazon.aws's is_boto3_error_code: the model agent imports this file and runs without Ansible.
    return error_code(err) in _MISSING


def list_keys(s3: Any, bucket: str, prefix: str, delimiter: str = "/") -> list[str]:
    """Object keys directly under `prefix` (not below the next `delimiter`), across pages."""
    # botocore's paginator (botocore retries each page), not pages.full_result: that imports amazon.aws, absent on the agent.
    listed = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix, Delimiter=delimiter).build_full_result()
    return [obj["Key"] for obj in listed.get("Contents", [])]


def keys_after(s3: Any, bucket: str, prefix: str, start_after: str = "") -> Iterator[str]:
    """Every key under `prefix` (at any depth) that sorts after `start_after`, in key order, page by page: the
    caller stops reading when it has what it needs."""
    query = {"Bucket": bucket, "Prefix": prefix, **({"StartAfter": start_after} if start_after else {})}
    for page in s3.get_paginator("list_objects_v2").paginate(**query):
        for obj in page.get("Contents", []):
            yield obj["Key"]


def get_bytes(s3: Any, bucket: str, key: str) -> bytes | None:
    """A small object's body, or None when the key does not exist."""
    try:
        return s3.get_object(aws_retry=True, Bucket=bucket, Key=key)["Body"].read()
    except ClientError as err:
        if _missing(err):
            return None
        raise


def head(s3: Any, bucket: str, key: str) -> dict[str, Any] | None:
    """An object's metadata with the SHA-256 S3 computed over what it received (ChecksumSHA256), or None when absent."""
    try:
        return s3.head_object(aws_retry=True, Bucket=bucket, Key=key, ChecksumMode="ENABLED")
    except ClientError as err:
        if _missing(err):
            return None
        raise


def stored_sha256(head_response: dict[str, Any] | None) -> str | None:
    """The hex SHA-256 of a whole object from its ChecksumSHA256 (None for a multipart composite or no checksum)."""
    checksum = (head_response or {}).get("ChecksumSHA256")
    if not checksum or "-" in checksum:
        return None
    return base64.b64decode(checksum).hex()


def download(s3: Any, bucket: str, key: str, dest: str) -> tuple[int, str]:
    """Streams an object into `dest` (created, fsynced), hashing as it goes; returns (size, sha256)."""
    body = s3.get_object(aws_retry=True, Bucket=bucket, Key=key)["Body"]
    digest = hashlib.sha256()
    size = 0
    with open(dest, "wb") as out:
        for chunk in iter(lambda: body.read(CHUNK_BYTES), b""):
            out.write(chunk)
            digest.update(chunk)
            size += len(chunk)
        out.flush()
        os.fsync(out.fileno())
    return size, digest.hexdigest()


def get_range(s3: Any, bucket: str, key: str, start: int, end: int, etag: str | None) -> Any:
    """The streaming body of bytes start..end (inclusive) of an object; with `etag`, only of that object (If-Match)."""
    extra = {"IfMatch": etag} if etag else {}
    return s3.get_object(aws_retry=True, Bucket=bucket, Key=key, Range=f"bytes={start}-{end}", **extra)["Body"]


def put_object(s3: Any, bucket: str, key: str, body: Any, **extra: Any) -> None:
    """Uploads an object with a SHA-256 checksum: botocore computes it over the bytes it sends, S3 checks and keeps it."""
    s3.put_object(aws_retry=True, Bucket=bucket, Key=key, Body=body, ChecksumAlgorithm="SHA256", **extra)


def put_new_object(s3: Any, bucket: str, key: str, body: bytes) -> bool:
    """Creates an object only where none exists (S3 conditional write, If-None-Match: *); False when the key is
    already taken: S3 never replaces an object this way, whoever wrote it."""
    try:
        put_object(s3, bucket, key, body, IfNoneMatch="*")
    except ClientError as err:
        if error_code(err) in _EXISTS:
            return False
        raise
    return True


def get_with_etag(s3: Any, bucket: str, key: str) -> tuple[bytes, str] | None:
    """A small object's body and ETag (what a conditional write of it names), or None when the key does not exist."""
    try:
        answer = s3.get_object(aws_retry=True, Bucket=bucket, Key=key)
    except ClientError as err:
        if _missing(err):
            return None
        raise
    return answer["Body"].read(), answer["ETag"]


def put_object_if(s3: Any, bucket: str, key: str, body: bytes, etag: str | None, **extra: Any) -> str | None:
    """Writes an object only if it is still what the caller read: If-Match its ETag, or If-None-Match: * when it read
    no object. Returns the new ETag, or None when another writer got there first (412, 409, or the key gone)."""
    condition = {"IfMatch": etag} if etag else {"IfNoneMatch": "*"}
    try:
        answer = s3.put_object(aws_retry=True, Bucket=bucket, Key=key, Body=body, ChecksumAlgorithm="SHA256", **condition, **extra)
    except ClientError as err:
        if error_code(err) in _EXISTS or (etag and _missing(err)):
            return None
        raise
    return answer.get("ETag") or ""


def delete_object_if(s3: Any, bucket: str, key: str, etag: str) -> bool:
    """Deletes an object only if it is still the one with this ETag (If-Match); False when it changed or went."""
    try:
        s3.delete_object(aws_retry=True, Bucket=bucket, Key=key, IfMatch=etag)
    except ClientError as err:
        if error_code(err) in _EXISTS or _missing(err):
            return False
        raise
    return True


def upload_file(s3: Any, bucket: str, key: str, path: str) -> None:
    with open(path, "rb") as body:
        put_object(s3, bucket, key, body)


def delete_object(s3: Any, bucket: str, key: str) -> None:
    """Deletes an object; S3 answers a missing key with success too."""
    s3.delete_object(aws_retry=True, Bucket=bucket, Key=key)


# ---------------------------------------------------------------- multipart uploads (objects above one PutObject)


def create_multipart_upload(s3: Any, bucket: str, key: str) -> str:
    """Starts a multipart upload whose parts each carry a SHA-256 that S3 checks on receipt; returns its UploadId."""
    return s3.create_multipart_upload(aws_retry=True, Bucket=bucket, Key=key, ChecksumAlgorithm="SHA256")["UploadId"]


def upload_part(s3: Any, bucket: str, key: str, upload_id: str, number: int, body: Any, sha256_b64: str) -> str:
    """Uploads one part with its SHA-256 (computed locally beforehand): S3 refuses bytes that do not match (BadDigest)."""
    answer = s3.upload_part(
        aws_retry=True, Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=body, ChecksumSHA256=sha256_b64
    )
    return answer["ETag"]


def complete_multipart_upload(s3: Any, bucket: str, key: str, upload_id: str, parts: list[dict[str, Any]]) -> None:
    """parts: [{PartNumber, ETag, ChecksumSHA256}] in order."""
    s3.complete_multipart_upload(aws_retry=True, Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts})


def abort_multipart_upload(s3: Any, bucket: str, key: str, upload_id: str) -> None:
    """Deletes an unfinished upload and its parts (S3 bills them until then); an upload already gone counts as aborted."""
    try:
        s3.abort_multipart_upload(aws_retry=True, Bucket=bucket, Key=key, UploadId=upload_id)
    except ClientError as err:
        if error_code(err) != "NoSuchUpload":
            raise


def list_multipart_uploads(s3: Any, bucket: str, key: str) -> list[dict[str, Any]]:
    """The unfinished multipart uploads of exactly this key, oldest first."""
    listed = s3.get_paginator("list_multipart_uploads").paginate(Bucket=bucket, Prefix=key).build_full_result()
    return sorted((u for u in listed.get("Uploads", []) if u["Key"] == key), key=lambda u: str(u.get("Initiated", "")))


def list_parts(s3: Any, bucket: str, key: str, upload_id: str) -> list[dict[str, Any]]:
    """The parts an unfinished upload holds: [{PartNumber, Size, ETag, ChecksumSHA256 (when S3 kept one)}]."""
    listed = s3.get_paginator("list_parts").paginate(Bucket=bucket, Key=key, UploadId=upload_id).build_full_result()
    return listed.get("Parts", [])


def bucket_exists(s3: Any, bucket: str) -> bool:
    """Whether the bucket exists (HeadBucket; a bucket of another account that denies the caller reads as existing)."""
    try:
        s3.head_bucket(aws_retry=True, Bucket=bucket)
    except ClientError as err:
        if error_code(err) in ("404", "NoSuchBucket", "NotFound"):
            return False
        if error_code(err) in ("403", "AccessDenied"):
            return True
        raise
    return True
