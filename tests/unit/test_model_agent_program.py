"""The model agent as a program: its import closure read from the sources, and the zipapp built from it
(module model_agent_program, role model_agent). No stand-in: the collection's own files, and the built program run
by this machine's python3 with the standard library alone."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from ansible_collections.inferops.triton_ecs.plugins.module_utils._models import agent_program
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.agent_program import (
    ClosureError,
    agent_closure,
    build_program,
    ensure_program,
    program_file_name,
    program_files,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "ansible_collections.inferops.triton_ecs"
MODELS = "plugins/module_utils/_models"


@pytest.fixture
def collection(tmp_path) -> Path:
    """A copy of the collection's module_utils, to add imports to."""
    shutil.copytree(REPO_ROOT / "plugins" / "module_utils", tmp_path / "plugins" / "module_utils")
    return tmp_path


def append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


def test_the_closure_is_exactly_what_the_agent_imports():
    """Import the agent with Ansible unimportable: every collection file Python ran is in the closure, and nothing else."""
    code = (
        "import sys, json; sys.modules['ansible'] = None; "
        f"import {agent_program.AGENT_MODULE}; "
        f"print(json.dumps(sorted(m.__file__.split('/triton_ecs/', 1)[1] for name, m in sys.modules.items() "
        f"if name.startswith('{PACKAGE}.') and getattr(m, '__file__', None))))"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT / ".build" / "collections"))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    closure = agent_closure(str(REPO_ROOT))
    assert list(closure.files) == json.loads(done.stdout)
    assert f"{MODELS}/agent.py" in closure.files and "plugins/module_utils/_triton_client.py" in closure.files
    assert closure.third_party == ("boto3", "botocore")
    assert not [name for name in closure.requires if name.startswith("ansible")]


def test_an_import_added_to_a_closure_module_adds_its_file(collection):
    (collection / MODELS / "extra.py").write_text("from . import extra_helper\n")
    (collection / MODELS / "extra_helper.py").write_text("import zlib\n")
    before = agent_closure(str(collection))
    assert f"{MODELS}/extra.py" not in before.files and "zlib" not in before.requires
    # A lazy import in a function counts: it runs when the function does.
    append(collection / MODELS / "views.py", f"\n\ndef later():\n    from {PACKAGE}.plugins.module_utils._models import extra\n")
    after = agent_closure(str(collection))
    assert set(after.files) - set(before.files) == {f"{MODELS}/extra.py", f"{MODELS}/extra_helper.py"}
    assert set(after.requires) - set(before.requires) == {"zlib"}


@pytest.mark.parametrize(
    ("line", "imported"),
    [
        ("from ansible.module_utils.basic import AnsibleModule", "ansible.module_utils.basic"),
        ("import ansible", "ansible"),
        ("from ansible_collections.amazon.aws.plugins.module_utils.retries import AWSRetry", "ansible_collections.amazon.aws"),
        # _tags.py imports amazon.aws: refused through the file that reaches it.
        (f"from {PACKAGE}.plugins.module_utils import _tags", "ansible_collections.amazon.aws.plugins.module_utils.tagging"),
    ],
)
def test_an_ansible_import_in_the_closure_is_refused_naming_the_file(collection, line, imported):
    append(collection / MODELS / "views.py", f"\n\ndef later():\n    {line}\n")
    with pytest.raises(ClosureError, match=rf"\.py imports {imported}.*without Ansible"):
        agent_closure(str(collection))


def test_a_collection_import_without_a_file_is_refused(collection):
    append(collection / MODELS / "views.py", f"\nfrom {PACKAGE}.plugins.module_utils._models.missing import thing\n")
    with pytest.raises(ClosureError, match=r"_models\.missing: no file plugins/module_utils/_models/missing\.py"):
        agent_closure(str(collection))


def test_the_program_is_the_same_bytes_for_the_same_sources(collection):
    first = build_program(program_files(str(collection), agent_closure(str(collection))))
    assert build_program(program_files(str(collection), agent_closure(str(collection)))) == first
    append(collection / MODELS / "views.py", "\n# a change\n")
    changed = build_program(program_files(str(collection), agent_closure(str(collection))))
    assert program_file_name(changed) != program_file_name(first)
    assert program_file_name(first).startswith("inferops-model-agent-") and program_file_name(first).endswith(".pyz")


def test_the_program_lays_out_the_packages_with_a_main():
    closure = agent_closure(str(REPO_ROOT))
    with zipfile.ZipFile(io.BytesIO(build_program(program_files(str(REPO_ROOT), closure)))) as archive:
        names = set(archive.namelist())
        main = archive.read("__main__.py").decode()
    assert {f"{PACKAGE.replace('.', '/')}/{path}" for path in closure.files} | {"__main__.py"} <= names
    # Every level has an __init__.py (zipimport on the AMI's python3.9), the ones absent from the repository empty.
    for level in ("ansible_collections", "ansible_collections/inferops", "ansible_collections/inferops/triton_ecs/plugins/module_utils"):
        assert f"{level}/__init__.py" in names
    assert f"from {agent_program.AGENT_MODULE} import main" in main
    assert not [name for name in names if name.endswith(".pyc")]


def program_run(program: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """The program under this python3 with the standard library alone (-S: no site-packages, so no Ansible, no boto3)."""
    env = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8"}
    return subprocess.run([sys.executable, "-S", str(program), *args], env=env, cwd=cwd, capture_output=True, text=True, check=False)


def test_the_built_program_runs_with_the_standard_library_alone(tmp_path):
    result = ensure_program(str(REPO_ROOT), str(tmp_path / "build"), check_mode=False)
    program = Path(result["path"])
    assert program.parent == tmp_path / "build" and program.stat().st_mode & 0o777 == 0o644
    bare = [sys.executable, "-S", "-c", "import ansible"]
    assert subprocess.run(bare, env={}, capture_output=True, check=False).returncode != 0  # the environment has no Ansible
    helped = program_run(program, "--help", cwd=tmp_path)
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith("usage: inferops-model-agent") and "--serve" in helped.stdout
    # A configuration check: the program reads its file and names the bad key, before any AWS call.
    (tmp_path / "agent.json").write_text(json.dumps({"bucket": "b", "application": "triton", "region": "eu-west-1", "poll_interval_s": 0}))
    checked = program_run(program, "--config", str(tmp_path / "agent.json"), "--boot", cwd=tmp_path)
    assert checked.returncode == 2 and "poll_interval_s=0" in checked.stderr, checked.stderr


def test_ensure_program_writes_once_and_never_in_check_mode(tmp_path):
    dest = tmp_path / "build"
    planned = ensure_program(str(REPO_ROOT), str(dest), check_mode=True)
    assert planned["changed"] and not dest.exists()
    assert planned["diff"] == {"before": {"path": None}, "after": {"path": planned["path"]}}
    built = ensure_program(str(REPO_ROOT), str(dest), check_mode=False)
    assert built["changed"] and built["path"] == planned["path"] and Path(built["path"]).is_file()
    assert ensure_program(str(REPO_ROOT), str(dest), check_mode=True)["changed"] is False
    again = ensure_program(str(REPO_ROOT), str(dest), check_mode=False)
    assert again["changed"] is False and again["diff"]["before"] == again["diff"]["after"]
    assert [p.name for p in dest.iterdir()] == [Path(built["path"]).name]  # no partial file left behind
    # A damaged file of the same name is rewritten.
    Path(built["path"]).write_bytes(b"damaged")
    assert ensure_program(str(REPO_ROOT), str(dest), check_mode=False)["changed"] is True
    assert ensure_program(str(REPO_ROOT), str(dest), check_mode=False)["changed"] is False
