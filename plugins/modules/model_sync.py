#!/usr/bin/python
# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: model_sync
short_description: Sync a published model version from S3 into a local Triton model repository, verified and atomic
version_added: 0.1.0
description:
  - Runs on the container instance. Reads the version's manifest (C(<prefix>/<model>/<version>.manifest.json)),
    fetches only the files no local version already holds with the same SHA-256 (others are hard-linked),
    into a staging directory inside the model directory (same filesystem), verifies every size and SHA-256
    against the manifest, then renames the directory into place as C(<host_path>/<model>/<version>) in one
    step and writes the model's C(config.pbtxt) atomically.
  - A partial or corrupt download is never visible to Triton; a failed sync leaves the repository as it was.
    The model's C(config.pbtxt) and the version's manifest are in place before the version directory appears.
  - A repair of a version in place (a file missing, changed or extra) swaps the new copy with the old one in one
    C(renameat2(RENAME_EXCHANGE)), so a serving version never lacks its directory. On a filesystem that cannot
    exchange, the old copy is renamed away just before the new one comes in.
  - A local file found corrupt (another local version's copy whose SHA-256 no longer matches) is downloaded again
    from S3 and listed in RV(redownloaded); only an object whose download does not match the manifest is blamed on S3.
  - Re-syncing a version already in place reads the manifest and downloads nothing.
  - Files up to O(download_part_mib) are fetched in one GET each, several at once; larger files as parallel ranged
    GETs of O(download_part_mib) into a preallocated staging file, hashed in order as the parts land (no second read
    of the file). O(download_concurrency) connections in all; O(download_buffer_mib) bounds the memory of parts
    waiting to be hashed, whatever the file size.
  - Staging and trash entries (directories or files) left by a killed run are removed by the next run
    (RV(cleaned)). Other unexpected entries of the model directory, and keys of the S3 listing that are no
    manifest, are left alone and named in RV(unexpected) and RV(ignored_keys). Versions are only directories
    named by a canonical positive integer; symlinks are never followed.
  - O(state=pruned) removes all but the newest O(keep_versions) complete local versions (directory, verified
    manifest, files of the listed sizes), never one in O(protect_versions); incomplete ones are neither counted
    nor removed (RV(incomplete)). Run it only after the new version is READY.
author:
  - inferops maintainers (@inferops)
options:
  state:
    description: V(present) syncs O(version); V(pruned) removes old local versions and makes no AWS call.
    type: str
    choices: [present, pruned]
    default: present
  bucket:
    description: S3 bucket holding the published versions. Required with O(state=present).
    type: str
  prefix:
    description: Key prefix above the model directories.
    type: str
    default: ""
  model:
    description: Model name (its directory name in S3 and in the repository).
    type: str
    required: true
  version:
    description: Version to sync, V(latest) for the highest published one.
    type: str
    default: latest
  host_path:
    description: The model repository on the instance, mounted read-only into the Triton task.
    type: path
    required: true
  keep_versions:
    description: With O(state=pruned), how many of the newest local versions to keep (2 or more to roll back).
    type: int
    default: 3
  protect_versions:
    description: With O(state=pruned), versions never removed (those a Triton serves).
    type: list
    elements: int
    default: []
  verify_local:
    description: Re-hash the files already in place instead of trusting the verified manifest kept next to them.
    type: bool
    default: false
  download_concurrency:
    description:
      - S3 connections at once, for every file of the version (S3 serves about 85-90 MB/s per connection; plan one per
        90 MB/s of the instance's network or disk bandwidth, whichever is lower).
    type: int
    default: 64
  download_part_mib:
    description: Size of one ranged GET in MiB; files up to this size are fetched in one GET (AWS recommends 8 or 16).
    type: int
    default: 8
  download_buffer_mib:
    description:
      - Memory in MiB for parts that landed but wait to be hashed in file order (at least O(download_part_mib)); the
        sync's memory stays bounded by it whatever the file size.
    type: int
    default: 256
attributes:
  check_mode:
    details:
      - Reports what would change (files to download, versions to prune) without changing anything.
  diff_mode:
    details:
      - The local versions before and after.
extends_documentation_fragment:
  - inferops.triton_ecs.attributes.full
  - amazon.aws.common.modules
  - amazon.aws.region.modules
  - amazon.aws.boto3
"""

EXAMPLES = r"""
- name: Sync the newest published version of resnet50 to local NVMe
  inferops.triton_ecs.model_sync:
    bucket: models-bucket
    prefix: triton
    model: resnet50
    host_path: /mnt/nvme/models
  register: synced

- name: Keep three versions, never the serving one
  inferops.triton_ecs.model_sync:
    state: pruned
    model: resnet50
    host_path: /mnt/nvme/models
    keep_versions: 3
    protect_versions: [4]
"""

RETURN = r"""
model:
  description: The model name.
  returned: always
  type: str
version:
  description: The synced version number.
  returned: when O(state=present)
  type: int
  sample: 4
version_dir:
  description: The version directory.
  returned: when O(state=present)
  type: str
  sample: /mnt/nvme/models/resnet50/4
downloaded:
  description: Files fetched from S3 (in check mode, to fetch).
  returned: when O(state=present)
  type: list
  elements: str
linked:
  description: Files hard-linked from another local version with the same SHA-256.
  returned: when O(state=present)
  type: list
  elements: str
downloaded_bytes:
  description: Bytes of the files fetched from S3 (in check mode, to fetch).
  returned: when O(state=present)
  type: int
kept:
  description: Files already in place.
  returned: when O(state=present)
  type: list
  elements: str
config_changed:
  description: Whether config.pbtxt was (or would be) rewritten.
  returned: when O(state=present)
  type: bool
redownloaded:
  description: Files downloaded again because the local copy they would have been linked from was corrupt.
  returned: when O(state=present)
  type: list
  elements: str
ignored_keys:
  description: Keys directly under the model prefix in S3 that are not the manifest of a version (ignored).
  returned: when O(state=present)
  type: list
  elements: str
cleaned:
  description: Staging and trash entries of a killed run removed (in check mode, to remove).
  returned: always
  type: list
  elements: str
unexpected:
  description: Entries of the model directory that are no complete version, manifest, config or the sync's own; left alone.
  returned: always
  type: list
  elements: str
incomplete:
  description: Version directories without a verified manifest or with files of the wrong size; prune neither counts nor removes them.
  returned: when O(state=pruned)
  type: list
  elements: int
removed:
  description: Versions removed (in check mode, to remove).
  returned: when O(state=pruned)
  type: list
  elements: int
local_versions:
  description: Versions in place afterwards.
  returned: always
  type: list
  elements: int
"""

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import module_errors  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.module import aws_module, client  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.manifest import ManifestError  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.sync import (  # noqa: E402
    local_versions,
    prune_versions,
    sync_version,
)
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.transfer import DownloadSettings  # noqa: E402


def main() -> None:
    argument_spec = dict(
        state=dict(type="str", choices=["present", "pruned"], default="present"),
        bucket=dict(type="str"),
        prefix=dict(type="str", default=""),
        model=dict(type="str", required=True),
        version=dict(type="str", default="latest"),
        host_path=dict(type="path", required=True),
        keep_versions=dict(type="int", default=3),
        protect_versions=dict(type="list", elements="int", default=[]),
        verify_local=dict(type="bool", default=False),
        download_concurrency=dict(type="int", default=64),
        download_part_mib=dict(type="int", default=8),
        download_buffer_mib=dict(type="int", default=256),
    )
    module = aws_module(argument_spec, required_if=[("state", "present", ["bucket"])])
    p = module.params
    try:  # before any AWS call
        settings = DownloadSettings.from_mib(p["download_concurrency"], p["download_part_mib"], p["download_buffer_mib"], "model_sync")
    except ManifestError as err:
        module.fail_json(msg=f"model {p['model']}: {err}")
    model_dir = f"{p['host_path']}/{p['model']}"
    with module_errors(
        module,
        f"model {p['model']}: S3 call to bucket {p['bucket']} failed",
        {
            ManifestError: lambda err: {"msg": f"model {p['model']}: {err}", "model": p["model"]},
            OSError: lambda err: {
                "msg": f"model {p['model']} under host_path={p['host_path']}: {err}; check the path exists and is writable",
                "model": p["model"],
            },
        },
    ):
        before = local_versions(model_dir)
        if p["state"] == "pruned":
            result = prune_versions(p["host_path"], p["model"], p["keep_versions"], p["protect_versions"], check_mode=module.check_mode)
            after = result["kept"]
        else:
            s3 = client(module, "s3", max_pool_connections=settings.concurrency + 4)
            result = sync_version(
                s3,
                p["bucket"],
                p["prefix"],
                p["model"],
                p["version"],
                p["host_path"],
                check_mode=module.check_mode,
                verify_local=p["verify_local"],
                download_settings=settings,
            )
            after = sorted(set(before) | {result["version"]})
    result["local_versions"] = after
    result["diff"] = {"before": {"local_versions": before}, "after": {"local_versions": after}}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
