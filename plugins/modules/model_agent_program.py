#!/usr/bin/python
# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: model_agent_program
short_description: Build the model agent as one Python program (a zipapp) from its import closure
version_added: 0.1.0
description:
  - Reads the collection's C(plugins/module_utils/_models/agent.py) and follows its imports through the collection's
    sources (module-level and lazy ones, absolute and relative) to the files they reach, with the package
    C(__init__.py) files on the way. The result is exactly what the agent imports; nothing is listed by hand.
  - Packs those files under their package names, with a C(__main__.py) that calls the agent's C(main()), into one
    zip file that C(python3 PROGRAM.pyz --config FILE --boot|--serve|--once) runs (the layout C(python -m zipapp)
    makes). The same sources give the same bytes, and the file is named by their digest
    (C(inferops-model-agent-<sha256 prefix>.pyz)) in O(dest_dir).
  - Fails, naming the file and the import, when a file of the closure imports Ansible or another collection (the
    instances run the agent with the system python3 and boto3 alone) or a collection module that has no file.
  - Runs where the collection's files are, the controller (role model_agent delegates it to localhost, once); the
    role then copies the built file to the instances.
author:
  - inferops maintainers (@inferops)
options:
  collection_path:
    description: Root of the collection whose agent is built (the directory holding C(plugins/)).
    type: path
    required: true
  dest_dir:
    description:
      - Directory for the built program, created when missing. Builds of other sources take other names beside it;
        nothing in it is removed.
    type: path
    required: true
notes:
  - The program carries source files, no bytecode, so any python3 the agent supports runs it.
attributes:
  check_mode:
    details:
      - Builds in memory and reports whether the file would be written, without writing it.
  diff_mode:
    details:
      - The program's path before (null when absent) and after.
extends_documentation_fragment:
  - inferops.triton_ecs.attributes.full
"""

EXAMPLES = r"""
- name: Build the model agent on the controller
  inferops.triton_ecs.model_agent_program:
    collection_path: "{{ role_path }}/../.."
    dest_dir: ~/.cache/inferops/model-agent
  delegate_to: localhost
  run_once: true
  register: agent_program

- name: Install it on the instance
  ansible.builtin.copy:
    src: "{{ agent_program.path }}"
    dest: /opt/inferops/model-agent.pyz
    mode: "0644"
"""

RETURN = r"""
path:
  description: The built program on the controller (in check mode, where it would be).
  returned: always
  type: str
  sample: /home/ops/.cache/inferops/model-agent/inferops-model-agent-3985b7ecc44a001c.pyz
sha256:
  description: SHA-256 of the program's bytes.
  returned: always
  type: str
  sample: 3985b7ecc44a001c6f0d5e0d7c1b5a4e0f9f1c2b3a4d5e6f708192a3b4c5d6e7
files:
  description: The collection files the agent imports, relative to O(collection_path), as packed.
  returned: always
  type: list
  elements: str
  sample: [plugins/module_utils/_models/agent.py, plugins/module_utils/_models/sync.py, plugins/module_utils/_aws/s3.py]
third_party:
  description: What the agent imports from outside the collection and the standard library (the instance installs it).
  returned: always
  type: list
  elements: str
  sample: [boto3, botocore]
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.agent_program import ClosureError, ensure_program  # noqa: E402


def main() -> None:
    argument_spec = dict(
        collection_path=dict(type="path", required=True),
        dest_dir=dict(type="path", required=True),
    )
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    try:
        result = ensure_program(module.params["collection_path"], module.params["dest_dir"], module.check_mode)
    except ClosureError as err:
        module.fail_json(msg=f"collection_path={module.params['collection_path']!r}: {err}")
    except OSError as err:
        module.fail_json(msg=f"dest_dir={module.params['dest_dir']!r}: cannot write the program ({err}); give a writable directory")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
