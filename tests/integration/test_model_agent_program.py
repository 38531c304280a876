"""Module model_agent_program through ansible-playbook on this machine (the controller it runs on in role
model_agent): check mode, real run, check mode again, real run again; a closure that imports Ansible refused. No
stand-in: the collection's own sources, the program run by this python3."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.harness.ansible import run_playbook
from tests.harness.triton import REPO_ROOT

PLAYBOOK = REPO_ROOT / "tests" / "integration" / "playbooks" / "model_agent_program_module.yml"
TASK = "Build the model agent program"


def build(collection: Path, dest: Path, check: bool = False) -> dict:
    run = run_playbook(PLAYBOOK, {"map_collection_path": str(collection), "map_dest_dir": str(dest)}, check=check, diff=True)
    return run.result(TASK)


def test_built_once_then_no_change_in_check_mode_and_real_runs(tmp_path):
    dest = tmp_path / "build"
    planned = build(REPO_ROOT, dest, check=True)
    assert planned["changed"] is True and not dest.exists(), planned
    assert planned["diff"]["before"] == {"path": None} and planned["path"].startswith(str(dest))
    built = build(REPO_ROOT, dest)
    assert built["changed"] is True and built["path"] == planned["path"] and Path(built["path"]).is_file(), built
    assert "plugins/module_utils/_models/agent.py" in built["files"] and built["third_party"] == ["boto3", "botocore"]
    for check in (True, False):
        again = build(REPO_ROOT, dest, check=check)
        assert again["changed"] is False and again["path"] == built["path"] and again["sha256"] == built["sha256"], again
    assert [p.name for p in dest.iterdir()] == [Path(built["path"]).name]
    helped = subprocess.run([sys.executable, "-S", built["path"], "--help"], capture_output=True, text=True, check=False)
    assert helped.returncode == 0 and "--boot" in helped.stdout, helped.stderr


def test_a_closure_that_imports_ansible_is_refused_before_anything_is_written(tmp_path):
    collection = tmp_path / "collection"
    shutil.copytree(REPO_ROOT / "plugins" / "module_utils", collection / "plugins" / "module_utils")
    views = collection / "plugins" / "module_utils" / "_models" / "views.py"
    views.write_text(views.read_text() + "\nfrom ansible.module_utils.basic import AnsibleModule\n")
    refused = build(collection, tmp_path / "build")
    assert refused["failed"] is True and not (tmp_path / "build").exists()
    assert "plugins/module_utils/_models/views.py imports ansible.module_utils.basic" in refused["msg"], refused["msg"]
    assert refused["msg"].startswith(f"collection_path='{collection}'")
