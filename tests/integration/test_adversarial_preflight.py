"""The preflight play as an attacker and an unlucky operator use it (issue 28, classes "secrets in preflight" and
"false success"): a registry password and a token reach it, at -vvv and with the json callback; an INI inventory
holds a placeholder; the account id is empty.

Stand-ins: a moto server on a free port for STS (moto's account 123456789012); the json callback, which prints every
task result with its invocation, as the observer of what leaks.
"""

from __future__ import annotations

from pathlib import Path

from tests.harness.ansible import REPO_ROOT, run_playbook
from tests.harness.moto import MotoServer

PREFLIGHT = REPO_ROOT / "playbooks" / "preflight.yml"
PREFLIGHT_TASK = "Preflight - placeholders, required settings, account"
PASSWORD = "planted-registry-password-5e1f"
TOKEN = "hf_plantedTokenValue0123456789abcdefXYZ"


def test_adversarial_preflight_never_prints_a_secret_at_vvv(tmp_path: Path):
    """Secret-named variables (one of them still a placeholder) pass through the preflight and never reach its
    output, its invocation or its failure message."""
    moto = MotoServer(tmp_path).start()
    try:
        secrets = {
            "aws_endpoint_url": moto.endpoint,
            "triton_image_registry_password": PASSWORD,
            "model_repository_hf_token": TOKEN,
            "triton_image_registry_token": f"REPLACE_ME_{PASSWORD}",
            "model_repository_api_key": "k3y",  # too short to mask: replaced in the invocation instead
        }
        run = run_playbook(PREFLIGHT, inventory=str(REPO_ROOT / "inventories" / "local"), extra_vars=secrets, args=("-vvv",))
    finally:
        moto.stop()
    output = run.stdout + run.stderr
    assert PREFLIGHT_TASK in output  # the preflight ran and printed its result
    assert "triton_image_registry_token = (value not shown" in output  # the placeholder is named, not shown
    assert PASSWORD not in output and TOKEN not in output
    assert '"model_repository_api_key": "(value not shown' in output and '"k3y"' not in output


def test_adversarial_preflight_reads_an_ini_inventory(tmp_path: Path):
    """A placeholder in an INI inventory is found with its file (it was skipped, and the preflight passed)."""
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(
        "localhost ansible_connection=local\n\n[all:vars]\naws_account_id=111111111111\naws_region=eu-west-1\n"
        "task_definition_family=triton\n"
    )
    run = run_playbook(PREFLIGHT, inventory=str(inventory), env={"PWD": str(tmp_path)})
    result = run.result(PREFLIGHT_TASK)
    assert run.rc != 0 and result["failed"]
    assert {"variable": "aws_account_id", "file": "hosts.ini", "value": "111111111111", "marker": "the example account id"} in result[
        "placeholders"
    ]


def test_adversarial_preflight_an_empty_account_id_fails(tmp_path: Path):
    """An empty aws_account_id skipped the account check and passed; it is a problem now."""
    moto = MotoServer(tmp_path).start()
    try:
        run = run_playbook(
            PREFLIGHT,
            inventory=str(REPO_ROOT / "inventories" / "local"),
            extra_vars={"aws_endpoint_url": moto.endpoint, "aws_account_id": ""},
        )
    finally:
        moto.stop()
    assert run.rc != 0
    result = run.result(PREFLIGHT_TASK)
    # the message counts the problems, `problems` lists them (each printed once)
    assert result["msg"].startswith("preflight: 1 problem to fix")
    assert [p for p in result["problems"] if p.startswith("aws_account_id")], result["problems"]
