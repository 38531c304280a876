#!/usr/bin/python
# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: triton_model
short_description: Load, unload or roll back a model version on a Triton Inference Server
version_added: 0.1.0
description:
  - Talks to one Triton endpoint over its HTTP API (model-repository extension), through Ansible's URL utilities.
    Triton must run with C(--model-control-mode=explicit).
  - O(state=loaded) serves a model; with O(version), that version alone, loaded through a config override whose
    C(version_policy) names it. The version it replaces keeps serving until the new one is READY.
  - O(state=unloaded) unloads every version and, since Triton answers before the unload finishes, waits for it.
  - O(state=rolled_back), while the newest version serves, serves the previous one alone (the standby when
    O(standby) kept one loaded, else the newest version below the newest). Once an older version serves it changes
    nothing, so running it twice is not two steps back.
  - Nothing changes when the model already serves what is asked (the exact READY version set).
author:
  - inferops maintainers (@inferops)
options:
  url:
    description: Triton HTTP endpoint, for example V(http://127.0.0.1:8000).
    type: str
    required: true
  model:
    description: Model name, as in the model repository.
    type: str
    required: true
  state:
    description: What the model should be doing afterwards.
    type: str
    choices: [loaded, unloaded, rolled_back]
    default: loaded
  version:
    description:
      - With O(state=loaded), the version to serve alone. Unset serves whatever the model's config selects
        (the newest version by default), and a model already READY is left as it is.
    type: int
  standby:
    description:
      - With O(state=loaded) and O(version), keep the newest READY version below O(version) loaded too, so a
        rollback to it is a switch, not a load. Requests that name no version go to the highest READY version,
        O(version). Costs the memory of a second copy of the model.
    type: bool
    default: false
  repository_versions:
    description:
      - With O(state=rolled_back), the versions present in the model repository (the host path).
        Unset uses the versions Triton has seen since it started.
    type: list
    elements: int
  wait:
    description: Wait until the index shows the wanted outcome (the version READY and alone, or nothing loaded).
    type: bool
    default: true
  timeout_s:
    description: Seconds to wait for a load (Triton loads synchronously), an unload, or the index to settle.
    type: int
    default: 300
  validate_certs:
    description: Verify TLS certificates of an V(https) endpoint.
    type: bool
    default: true
notes:
  - Triton keeps one config per model; a version whose config differs from the serving one needs a fresh sync
    of its C(config.pbtxt) and O(state=loaded) without O(version).
  - A model Triton has never loaded is first loaded from its on-disk config, then pinned to O(version).
attributes:
  check_mode:
    details:
      - Reports the versions it would load or unload without changing anything.
  diff_mode:
    details:
      - The READY versions before and after.
extends_documentation_fragment:
  - inferops.triton_ecs.attributes.full
"""

EXAMPLES = r"""
- name: Serve version 3 of resnet50
  inferops.triton_ecs.triton_model:
    url: http://127.0.0.1:8000
    model: resnet50
    version: 3

- name: Serve version 4, keeping version 3 loaded for an instant rollback
  inferops.triton_ecs.triton_model:
    url: http://127.0.0.1:8000
    model: resnet50
    version: 4
    standby: true

- name: Roll back to the previous version
  inferops.triton_ecs.triton_model:
    url: http://127.0.0.1:8000
    model: resnet50
    state: rolled_back
    repository_versions: [2, 3]

- name: Unload it
  inferops.triton_ecs.triton_model:
    url: http://127.0.0.1:8000
    model: resnet50
    state: unloaded
"""

RETURN = r"""
model:
  description: The model name.
  returned: always
  type: str
  sample: resnet50
before:
  description: Versions READY before the task.
  returned: always
  type: list
  elements: int
  sample: [2]
after:
  description: Versions READY after the task (in check mode, what they would be).
  returned: always
  type: list
  elements: int
  sample: [3]
version:
  description: The version a rollback serves.
  returned: when O(state=rolled_back)
  type: int
  sample: 2
actions:
  description: What the module did (or would do in check mode).
  returned: always
  type: list
  elements: str
  sample: ["load resnet50 version 3"]
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import module_errors  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.triton_model import (  # noqa: E402
    ModelStateError,
    ensure_loaded,
    ensure_rolled_back,
    ensure_unloaded,
)
from ansible_collections.inferops.triton_ecs.plugins.module_utils._triton_client import TritonClient, TritonError  # noqa: E402


def main() -> None:
    argument_spec = dict(
        url=dict(type="str", required=True),
        model=dict(type="str", required=True),
        state=dict(type="str", choices=["loaded", "unloaded", "rolled_back"], default="loaded"),
        version=dict(type="int"),
        standby=dict(type="bool", default=False),
        repository_versions=dict(type="list", elements="int"),
        wait=dict(type="bool", default=True),
        timeout_s=dict(type="int", default=300),
        validate_certs=dict(type="bool", default=True),
    )
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    p = module.params
    if p["version"] is not None and (p["state"] != "loaded" or p["version"] < 1):
        module.fail_json(msg=f"version={p['version']}: set it only with state=loaded, to a positive integer (the version directory name)")
    if p["timeout_s"] < 1:
        module.fail_json(msg=f"timeout_s={p['timeout_s']}: give at least 1 second")
    # Short HTTP timeouts for index polls; loads get their own timeout.
    client = TritonClient(p["url"], timeout_s=min(10, p["timeout_s"]), validate_certs=p["validate_certs"])
    common = dict(wait=p["wait"], timeout_s=p["timeout_s"], check_mode=module.check_mode)
    with module_errors(module, reports={(ModelStateError, TritonError): lambda err: {"msg": str(err), "model": p["model"]}}):
        if p["state"] == "loaded":
            result = ensure_loaded(client, p["model"], p["version"], standby=p["standby"], **common)
        elif p["state"] == "unloaded":
            result = ensure_unloaded(client, p["model"], **common)
        else:
            result = ensure_rolled_back(client, p["model"], p["repository_versions"], **common)
    result["diff"] = {"before": {"ready_versions": result["before"]}, "after": {"ready_versions": result["after"]}}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
