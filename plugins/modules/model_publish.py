#!/usr/bin/python
# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: model_publish
short_description: Publish a model version to S3 for model_sync, files first and the manifest last
version_added: 0.1.0
description:
  - Uploads the files of a local version directory to C(s3://<bucket>/<prefix>/<model>/<version>/), skipping files
    S3 already holds with the same size and SHA-256, then writes the manifest C(<prefix>/<model>/<version>.manifest.json)
    listing every file with its size and SHA-256 and carrying the model's C(config.pbtxt).
  - Every upload carries a SHA-256 checksum that S3 checks on receipt and keeps; the module reads it back and compares it
    with the manifest before the manifest is written. A file that changed while publishing fails the task, and no
    manifest is written.
  - The manifest is written last, so readers ignore a version whose upload did not finish. Running the task again
    resumes an interrupted publish. It uploads only the files S3 does not already hold verified.
  - The source tree is read strictly. A symlink is followed only when it resolves inside O(source), and its content is
    published under the link's path. A symlink leading outside, a dangling symlink, a special file (FIFO, socket,
    device), a hidden entry and an empty directory each fail the task, before any write, with their paths named.
    C(__pycache__) directories are left out and listed in RV(ignored).
  - Versions are immutable. Publishing other content under a version that has a manifest fails before any write;
    publishing the same content again changes nothing.
  - Files larger than O(multipart_threshold_mib) go up as multipart uploads (one C(PutObject) carries at most 5 GB),
    O(upload_concurrency) parts at once, each part with the SHA-256 computed in the same local read that computes the
    file's SHA-256 for the manifest; S3 refuses a part that does not match it. The object's stored checksum (the
    composite of the part digests) is compared with the local one before the manifest is written.
  - An interrupted multipart upload is resumed by the next run (the parts S3 holds with the same size and SHA-256 are
    kept, ListParts); an upload that fails is aborted, so no billed parts are left. Set the bucket's
    C(AbortIncompleteMultipartUpload) lifecycle rule for uploads never resumed (role C(fleet_iam),
    C(fleet_iam_model_bucket_abort_incomplete_uploads_days)).
author:
  - inferops maintainers (@inferops)
options:
  bucket:
    description: S3 bucket.
    type: str
    required: true
  prefix:
    description: Key prefix above the model directories.
    type: str
    default: ""
  model:
    description: Model name.
    type: str
    required: true
  version:
    description: Version number (a positive integer, Triton's version directory name).
    type: int
    required: true
  source:
    description:
      - Local version directory holding the model files (for example C(model.py), C(model.plan)).
      - Regular files only; symlinks only inside this directory.
    type: path
    required: true
  config:
    description: The model's C(config.pbtxt).
    type: path
    required: true
  multipart_threshold_mib:
    description:
      - Files larger than this many MiB go up as multipart uploads; smaller ones in one C(PutObject).
      - At least 5; at most 4768 (5 GB, the largest single C(PutObject)).
    type: int
    default: 64
  part_size_mib:
    description:
      - Size of one part of a multipart upload in MiB (S3 - 5 MiB to 5 GiB, at most 10,000 parts; a file that would
        need more parts gets larger parts, in whole MiB).
    type: int
    default: 16
  upload_concurrency:
    description: Parts of one file sent at once (S3 serves about 85-90 MB/s per connection).
    type: int
    default: 16
attributes:
  check_mode:
    support: full
    details:
      - Reports the files it would upload without writing to S3.
  diff_mode:
    support: none
extends_documentation_fragment:
  - inferops.triton_ecs.attributes
  - amazon.aws.common.modules
  - amazon.aws.region.modules
  - amazon.aws.boto3
"""

EXAMPLES = r"""
- name: Publish version 4 of resnet50
  inferops.triton_ecs.model_publish:
    bucket: models-bucket
    prefix: triton
    model: resnet50
    version: 4
    source: build/resnet50/4
    config: build/resnet50/config.pbtxt
"""

RETURN = r"""
manifest_key:
  description: S3 key of the manifest.
  returned: always
  type: str
  sample: triton/resnet50/4.manifest.json
manifest:
  description: The manifest (files with size and SHA-256, the config text and its SHA-256).
  returned: always
  type: dict
uploaded:
  description: Files uploaded and verified (in check mode, to upload).
  returned: always
  type: list
  elements: str
already_in_s3:
  description: Files S3 already held with the same size and SHA-256 (from an earlier, maybe interrupted, publish).
  returned: always
  type: list
  elements: str
ignored:
  description: Entries of the source tree left out on purpose (C(__pycache__) directories).
  returned: always
  type: list
  elements: str
manifest_written:
  description: Whether the manifest was written by this run. Nothing is written when the version is already published with the same content.
  returned: always
  type: bool
multipart:
  description:
    - Files uploaded (in check mode, to upload) as multipart uploads, with their part size, number of parts and,
      after an upload, the part numbers an interrupted earlier upload already held (C(resumed_parts)).
  returned: always
  type: dict
  sample: {"model.plan": {"part_bytes": 16777216, "parts": 1600, "resumed_parts": []}}
"""

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import module_errors  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.module import aws_module, client  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.manifest import ManifestError  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.publish import publish_version  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.transfer import UploadSettings  # noqa: E402


def main() -> None:
    argument_spec = dict(
        bucket=dict(type="str", required=True),
        prefix=dict(type="str", default=""),
        model=dict(type="str", required=True),
        version=dict(type="int", required=True),
        source=dict(type="path", required=True),
        config=dict(type="path", required=True),
        multipart_threshold_mib=dict(type="int", default=64),
        part_size_mib=dict(type="int", default=16),
        upload_concurrency=dict(type="int", default=16),
    )
    module = aws_module(argument_spec)
    p = module.params
    try:  # before any AWS call
        upload = UploadSettings.from_mib(p["multipart_threshold_mib"], p["part_size_mib"], p["upload_concurrency"])
    except ManifestError as err:
        module.fail_json(msg=f"model {p['model']}: {err}")
    s3 = client(module, "s3", max_pool_connections=upload.concurrency + 4)
    with module_errors(
        module,
        f"model {p['model']} version {p['version']}: S3 call to bucket {p['bucket']} failed",
        {ManifestError: lambda err: {"msg": f"model {p['model']}: {err}", "model": p["model"]}},
    ):
        result = publish_version(
            s3, p["bucket"], p["prefix"], p["model"], p["version"], p["source"], p["config"], check_mode=module.check_mode, upload=upload
        )
    module.exit_json(**result)


if __name__ == "__main__":
    main()
