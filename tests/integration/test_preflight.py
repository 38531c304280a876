"""The preflight play: every placeholder of inventories/example in one run, and credentials of another account
refused before any write or build.

Stand-ins: a moto server on a free port for AWS (its STS answers with moto's account 123456789012; its request
recorder counts the write calls); no AWS at all for the example inventory, whose profile does not exist here.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.harness.ansible import REPO_ROOT, run_playbook
from tests.harness.aws_calls import start_recording, writes
from tests.harness.moto import ACCOUNT_ID, MotoServer

PREFLIGHT_TASK = "Preflight - placeholders, required settings, account"
EXAMPLE = REPO_ROOT / "inventories" / "example"
# The markers inventories/example puts in every value to replace (docs/dry_run.md), counted here independently.
MARKER = re.compile(r"111111111111|0123456789abcdef|00000000-0000-0000-0000-000000000000|example\.com|example-|REPLACE_")


def _example_placeholder_lines() -> list[tuple[str, str]]:
    """(file, line) of every value line of the example inventory that carries a marker (comments left out)."""
    found = []
    for path in sorted(EXAMPLE.rglob("*.yml")):
        for line in path.read_text().splitlines():
            if not line.lstrip().startswith("#") and MARKER.search(line.split(" #", 1)[0]):
                found.append((str(path.relative_to(REPO_ROOT)), line.strip()))
    return found


def test_example_inventory_lists_every_placeholder_in_one_run():
    run = run_playbook(REPO_ROOT / "playbooks" / "preflight.yml", inventory=str(EXAMPLE), env={"PWD": str(REPO_ROOT)})
    assert run.rc != 0
    result = run.result(PREFLIGHT_TASK)
    assert result["failed"]
    expected = _example_placeholder_lines()
    assert len(result["placeholders"]) == len(expected), (result["placeholders"], expected)
    files = {p["file"] for p in result["placeholders"]}
    assert files == {f for f, _line in expected}
    problems = "\n".join(result["problems"])
    for placeholder in result["placeholders"]:
        assert f"{placeholder['variable']} = {placeholder['value']!r} in {placeholder['file']}" in problems
    # the account is a placeholder, named once; the missing profile is named with its fix
    assert sum(1 for p in result["placeholders"] if p["variable"] == "aws_account_id") == 1
    assert "aws_profile 'triton-deploy' is not a profile of this machine" in problems
    # each problem is printed once: the message counts them, `problems` lists them
    assert result["msg"] == f"preflight: {len(result['problems'])} problems to fix before anything is written (listed under problems)"
    assert not any(problem in result["msg"] for problem in result["problems"])


def test_an_override_on_the_command_line_is_no_placeholder():
    run = run_playbook(
        REPO_ROOT / "playbooks" / "preflight.yml",
        inventory=str(EXAMPLE),
        extra_vars={"triton_vpc_id": "vpc-0a1b2c3d4e5f6a7b8"},
        env={"PWD": str(REPO_ROOT)},
    )
    variables = {p["variable"] for p in run.result(PREFLIGHT_TASK)["placeholders"]}
    assert "triton_vpc_id" not in variables
    assert "triton_private_subnets[0]" in variables


def test_credentials_of_another_account_are_refused_before_any_write_or_build(tmp_path: Path):
    moto = MotoServer(tmp_path).start()
    try:
        start_recording(moto)
        run = run_playbook(
            REPO_ROOT / "deploy.yml",
            inventory=str(REPO_ROOT / "inventories" / "local"),
            extra_vars={"aws_endpoint_url": moto.endpoint, "aws_account_id": "210987654321"},
        )
        actions = writes(moto)
    finally:
        moto.stop()
    assert run.rc != 0
    assert run.failed_tasks == [PREFLIGHT_TASK]
    msg = "\n".join(run.result(PREFLIGHT_TASK)["problems"])
    assert f"belong to account {ACCOUNT_ID}" in msg and "aws_account_id is 210987654321" in msg
    assert "region us-east-1" in msg and "AWS_PROFILE" in msg
    assert actions == []
    # nothing after the preflight ran: no image build, no AWS task (before it, only the model host path and the
    # fleet's architecture settled from the inventory and Packer's manifest, which reads no AWS)
    assert [t["name"] for t in run.tasks] == [
        "Settle the model host path (the AMI's)",
        "inferops.triton_ecs.fleet_capacity : Settle the model host path (the AMI's, from its Packer manifest)",
        "Settle the fleet's CPU architecture (the AMI's, or the instance type's)",
        "inferops.triton_ecs.fleet_capacity : Settle the fleet's CPU architecture",
        "inferops.triton_ecs.fleet_capacity : Check the fleet's CPU architecture",
        PREFLIGHT_TASK,
    ]


def test_the_local_inventory_passes(tmp_path: Path):
    moto = MotoServer(tmp_path).start()
    try:
        run = run_playbook(
            REPO_ROOT / "playbooks" / "preflight.yml",
            inventory=str(REPO_ROOT / "inventories" / "local"),
            extra_vars={"aws_endpoint_url": moto.endpoint},
        )
    finally:
        moto.stop()
    assert run.rc == 0, run.stdout[-3000:]
    assert run.result(PREFLIGHT_TASK)["caller"]["Account"] == ACCOUNT_ID
    assert "region us-east-1" in run.result("Preflight passed")["msg"]
