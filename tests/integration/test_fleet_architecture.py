"""Role fleet_capacity publishes the fleet's CPU architecture (ECS's spelling) from the AMI, the instance type or the
inventory; the task definition's runtimePlatform and the image build's platform follow it. No AWS is called."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.harness.ansible import run_playbook

PLAYBOOK = Path(__file__).parent / "playbooks" / "fleet_capacity_architecture.yml"


def manifest(tmp_path: Path, architecture: str) -> str:
    path = tmp_path / "manifest.json"
    build = {
        "artifact_id": "us-east-1:ami-0123456789abcdef0",
        "custom_data": {"architecture": architecture, "model_host_path": "/mnt/models"},
    }
    path.write_text(json.dumps({"builds": [build]}))
    return str(path)


@pytest.mark.parametrize(
    ("variables", "expected", "source"),
    [
        ({"fleet_capacity_instance_type": "g5.xlarge"}, "X86_64", "the instance type g5.xlarge"),
        ({"fleet_capacity_instance_type": "g5g.2xlarge"}, "ARM64", "the instance type g5g.2xlarge"),
        ({"fleet_capacity_instance_type": "g6e.xlarge"}, "X86_64", "the instance type g6e.xlarge"),
        ({"fleet_capacity_instance_type": "g5.xlarge", "fleet_capacity_architecture": "arm64"}, "ARM64", "fleet_capacity_architecture"),
        ({"fleet_capacity_instance_type": "g5.xlarge", "manifest": "arm64"}, "ARM64", "the AMI (custom_data.architecture"),
    ],
)
def test_the_fleet_architecture_is_published(tmp_path, variables, expected, source):
    extra = dict(variables)
    if "manifest" in extra:
        extra["fleet_capacity_packer_manifest"] = manifest(tmp_path, extra.pop("manifest"))
    run = run_playbook(PLAYBOOK, extra_vars=extra)
    published = run.result("What fleet_capacity published")["msg"]
    assert published["cpu_architecture"] == expected, run.stdout[-2000:]
    assert published["source"].startswith(source)
    assert published["triton_image_platform"] == ("linux/arm64" if expected == "ARM64" else "linux/amd64")


def test_an_unknown_architecture_is_refused(tmp_path):
    run = run_playbook(PLAYBOOK, extra_vars={"fleet_capacity_architecture": "sparc"})
    assert run.rc != 0
    assert "set fleet_capacity_architecture to x86_64 or arm64" in run.stdout
