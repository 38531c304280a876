"""One model host path (issue 22, item 6): packer's model_host_path, recorded in Packer's manifest (custom_data), is
what role fleet_capacity publishes for the agent's configuration and the task definition; the role and the preflight
refuse every other name of the path that differs.

Stand-ins: a manifest.json as Packer's manifest post-processor writes it (tests/harness/infrastructure.py); no AWS at
all (fleet_capacity's input check and the example inventory's preflight fail before any call; the example inventory's
profile does not exist here). The AMI's, the agent's and the task's uses of the value are checked in
tests/unit/test_packer_template.py, tests/unit/test_model_release.py (user data), test_infrastructure.py and
test_deploy_local.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.harness.ansible import REPO_ROOT, run_playbook
from tests.harness.infrastructure import MODEL_HOST_PATH, packer_manifest

PLAYBOOK = Path(__file__).parent / "playbooks" / "fleet_capacity_model_host_path.yml"
CHECK = "inferops.triton_ecs.fleet_capacity : Check the capacity input"
PREFLIGHT_TASK = "Preflight - placeholders, required settings, account"
EXAMPLE = REPO_ROOT / "inventories" / "example"


def old_manifest(directory: Path) -> Path:
    """A manifest from before the AMI recorded its model host path (no custom_data.model_host_path)."""
    path = directory / "old-manifest.json"
    path.write_text(json.dumps({"builds": [{"name": "triton-gpu", "artifact_id": "us-east-1:ami-0aaaaaaaaaaaaaaa0"}]}))
    return path


def settle(**variables):
    run = run_playbook(PLAYBOOK, extra_vars={"fleet_capacity_ami_id": "", **variables})
    return run, run.result("What fleet_capacity published")["msg"] if run.rc == 0 else None


@pytest.mark.parametrize(
    ("case", "variables", "path", "source"),
    [
        ("from-the-manifest", {}, MODEL_HOST_PATH, "the AMI (custom_data.model_host_path of "),
        ("named-the-same", {"fleet_capacity_model_host_path": MODEL_HOST_PATH}, MODEL_HOST_PATH, "fleet_capacity_model_host_path"),
        ("ami-by-id", {"fleet_capacity_ami_id": "ami-0a1b2c3d4e5f6a7b8"}, "/mnt/models", "the AMI default (packer model_host_path)"),
        (
            "ami-by-id-named",
            {"fleet_capacity_ami_id": "ami-0a1b2c3d4e5f6a7b8", "fleet_capacity_model_host_path": "/data/models"},
            "/data/models",
            "fleet_capacity_model_host_path",
        ),
    ],
)
def test_the_model_host_path_is_the_amis_unless_named(tmp_path, case, variables, path, source):
    run, published = settle(fleet_capacity_packer_manifest=str(packer_manifest(tmp_path)), **variables)
    assert run.rc == 0, run.stdout[-3000:]
    assert published["model_host_path"] == path
    assert any(label.startswith(source) for label in published["sources"]), published["sources"]
    # Settled once per run: a later play keeps it (the second include is skipped, not re-read from a changed input).
    assert run.results("inferops.triton_ecs.fleet_capacity : Settle the model host path (the AMI's, from its Packer manifest)")[1][
        "skipped"
    ]


def test_a_manifest_without_the_path_means_packers_default(tmp_path):
    run, published = settle(fleet_capacity_packer_manifest=str(old_manifest(tmp_path)))
    assert run.rc == 0, run.stdout[-3000:]
    assert published == {"model_host_path": "/mnt/models", "sources": {"the AMI default (packer model_host_path)": "/mnt/models"}}


def test_fleet_capacity_refuses_another_path_than_the_amis_before_any_aws_call(tmp_path):
    manifest = packer_manifest(tmp_path)
    run = run_playbook(
        PLAYBOOK,
        extra_vars={
            "run_role": True,
            "fleet_capacity_ami_id": "",
            "fleet_capacity_packer_manifest": str(manifest),
            "fleet_capacity_subnets": ["subnet-0a1b2c3d4e5f6a7b8"],
            "fleet_capacity_model_host_path": "/mnt/models",
            "fleet_capacity_model_agent_settings": {"host_path": "/opt/triton/models"},
        },
    )
    assert run.rc != 0
    check = run.result(CHECK)
    assert check["failed"]
    assert (
        f'fleet_capacity_model_host_path is "/mnt/models" but the AMI of {manifest} was baked with model_host_path '
        f'"{MODEL_HOST_PATH}": remove fleet_capacity_model_host_path'
    ) in check["msg"]
    assert 'fleet_capacity_model_agent_settings.host_path is "/opt/triton/models" but the model host path is "/mnt/models"' in check["msg"]
    # Nothing after the check ran: the launch template is the role's first write.
    assert run.tasks[-1]["name"] == CHECK


def preflight(tmp_path, **variables):
    """The example inventory's preflight, with a Packer manifest whose AMI was baked with MODEL_HOST_PATH."""
    extra = {"fleet_capacity_packer_manifest": str(packer_manifest(tmp_path)), **variables}
    run = run_playbook(REPO_ROOT / "playbooks" / "preflight.yml", inventory=str(EXAMPLE), extra_vars=extra, env={"PWD": str(REPO_ROOT)})
    return run.result(PREFLIGHT_TASK)["problems"]


def test_the_example_inventory_agrees_with_its_ami(tmp_path):
    problems = preflight(tmp_path)
    assert not [p for p in problems if "model host path" in p or "fleet_capacity_packer_manifest" in p], problems


def test_the_preflight_refuses_a_task_definition_that_mounts_another_path(tmp_path):
    # What inventories/example set before issue 22: Triton would have started on an empty /models on every instance.
    triton = {"models": ["resnet50"], "model_repository_host_path": "/opt/triton/models"}
    problems = preflight(tmp_path, task_definition_triton=triton, model_repository_host_path=MODEL_HOST_PATH)
    (problem,) = [p for p in problems if p.startswith("the model host path differs:")]
    assert f"the AMI (custom_data.model_host_path of {tmp_path / 'manifest.json'}) = '{MODEL_HOST_PATH}'" in problem
    assert "task_definition_triton.model_repository_host_path = '/opt/triton/models'" in problem
    assert f"model_repository_host_path = '{MODEL_HOST_PATH}'" in problem  # set and equal: named, not the culprit
    assert "remove task_definition_triton.model_repository_host_path" in problem


def test_the_preflight_names_a_missing_packer_manifest(tmp_path):
    problems = preflight(tmp_path, fleet_capacity_packer_manifest=str(tmp_path / "absent.json"))
    assert any(p.startswith("fleet_capacity_packer_manifest is missing: the manifest.json `packer build packer/` wrote") for p in problems)
