# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""Where an application's release ledger lives (`bucket`, `prefix`, `application`), shared by the release_ledger and
release_ledger_info modules; the argument spec is `_ledger/store.LEDGER_OPTIONS`."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  bucket:
    description: S3 bucket of the model repository (the ledger lives beside the release records).
    type: str
    required: true
  prefix:
    description: Key prefix of the model repository.
    type: str
    default: ""
  application:
    description: The application (the ECS service family); names the ledger's prefix.
    type: str
    required: true
"""
