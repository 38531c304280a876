"""inventories/example is a contract: filled only where it has placeholders, it deploys end to end on an account
shaped as its comments describe, and each dry run predicts its real run.

Stand-ins (tests/harness/example_rehearsal.py, example_account.py): a moto server for AWS (AWS managed policies
loaded; no IAM evaluation, no routing), one container instance running the real model agent, an ECS scheduler
stand-in running each service's tasks as awsvpc task containers with the image's real entrypoint over a real
tritonserver (CPU), the test listener's route as an HTTPS proxy following moto's weights and targets. The rehearsal
starts containers: run this file under `flock /tmp/inferops-heavy.lock`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness.ansible import REPO_ROOT, run_playbook
from tests.harness.aws_calls import start_recording, writes
from tests.harness.example_account import MOTO_ENV, create_account, fill_example, profile_env, write_packer_manifest
from tests.harness.example_rehearsal import Rehearsal
from tests.harness.moto import MotoServer

PREFLIGHT_TASK = "Preflight - placeholders, required settings, account"


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory: pytest.TempPathFactory) -> Rehearsal:
    return Rehearsal(tmp_path_factory.mktemp("example")).run()


def test_every_run_of_the_example_passes(rehearsal: Rehearsal) -> None:
    names = [r.name for r in rehearsal.runs]
    assert names == [
        "preflight",
        "infrastructure.yml --check --diff",
        "infrastructure.yml",
        "model release (first)",
        "deploy.yml --check --diff",
        "deploy.yml",
        "deploy.yml (again)",
        "model release (second)",
        "rollback_models.yml",
        "deploy.yml (second image, old colour kept)",
        "rollback_traffic.yml",
    ], rehearsal.report()
    assert rehearsal.failed_runs() == [], rehearsal.report()
    assert rehearsal.stand_in_errors == [], rehearsal.report()


def test_the_cutovers_gate_through_the_test_listener_and_the_summary_names_the_rule_host(rehearsal: Rehearsal) -> None:
    """The gates reached the standby through the HTTPS test listener; finding 8: production is the host-header rule's
    host on the shared listener, not the ALB's DNS name (which reaches the listener's default action, a 404)."""
    assert rehearsal.test_route_requests > 0
    summary = rehearsal.result("deploy.yml", "Summary")["msg"]
    assert "production URL: https://localhost:443" in summary, summary
    rollback = rehearsal.result("rollback_traffic.yml", "Put production traffic back on the previous colour")
    assert rollback["decision"] == "rollback", rollback


def test_only_placeholders_were_replaced(rehearsal: Rehearsal) -> None:
    assert rehearsal.edits == []


def test_a_second_deploy_changes_nothing(rehearsal: Rehearsal) -> None:
    assert rehearsal.noop_changed() == [], rehearsal.report()


def test_each_dry_run_predicts_its_real_run_and_writes_nothing(rehearsal: Rehearsal) -> None:
    assert rehearsal.unpredicted() == {}, rehearsal.report()
    by_name = {r.name: r for r in rehearsal.runs}
    assert by_name["deploy.yml"].changed, "the first deploy changed nothing: nothing was predicted"


def test_ids_that_do_not_exist_fail_the_preflight_and_the_dry_run_before_any_write(tmp_path: Path) -> None:
    """Finding 5: the VPC of the example named but never created; the preflight names its variable and the fix."""
    moto = MotoServer(tmp_path, env=MOTO_ENV).start()
    try:
        account = create_account(moto, tmp_path)
        account.substitutions["vpc-0123456789abcdef0"] = "vpc-0aaaabbbbccccdddd"
        inventory = fill_example(tmp_path / "checkout" / "inventories" / "acme", account)
        write_packer_manifest(tmp_path / "checkout" / "packer" / "manifest.json", account)
        env = profile_env(tmp_path, moto, account)
        start_recording(moto)
        runs = [
            run_playbook(REPO_ROOT / "playbooks" / "preflight.yml", inventory=str(inventory), env=env),
            run_playbook(REPO_ROOT / "deploy.yml", inventory=str(inventory), env=env, check=True, diff=True),
        ]
        written = writes(moto)
    finally:
        moto.stop()
    for run in runs:
        assert run.rc != 0 and run.failed_tasks == [PREFLIGHT_TASK], run.stdout[-2000:]
        problems = run.result(PREFLIGHT_TASK)["problems"]
        assert problems == [
            "fleet_load_balancing_vpc_id = 'vpc-0aaaabbbbccccdddd': no such VPC in account 123456789012, region eu-west-1: "
            "give the id of the VPC the fleet runs in (aws ec2 describe-vpcs)"
        ]
    assert written == []


def _filled(tmp_path: Path, moto: MotoServer, manifest: bool = True) -> tuple[Path, dict[str, str]]:
    account = create_account(moto, tmp_path)
    inventory = fill_example(tmp_path / "checkout" / "inventories" / "acme", account)
    if manifest:
        write_packer_manifest(tmp_path / "checkout" / "packer" / "manifest.json", account)
    return inventory, profile_env(tmp_path, moto, account)


def test_a_missing_packer_manifest_names_its_variable_and_the_fix(tmp_path: Path) -> None:
    """Finding 6: no `packer build` yet; infrastructure.yml (which has no preflight) fails with the fix, not a lookup error."""
    moto = MotoServer(tmp_path, env=MOTO_ENV).start()
    try:
        inventory, env = _filled(tmp_path, moto, manifest=False)
        run = run_playbook(REPO_ROOT / "playbooks" / "infrastructure.yml", inventory=str(inventory), env=env, check=True)
    finally:
        moto.stop()
    assert run.rc != 0 and run.failed_tasks == [
        "inferops.triton_ecs.fleet_capacity : Check the Packer manifest is there (or an AMI id is given)"
    ]
    msg = run.result(run.failed_tasks[0])["msg"]
    assert "fleet_capacity_packer_manifest is" in msg and "packer build packer/" in msg and "fleet_capacity_ami_id" in msg


def test_manage_switches_given_as_strings_on_the_command_line_are_honoured(tmp_path: Path) -> None:
    """Finding 10: `-e fleet_services_manage=false` is the string "false"; every switch is read with `| bool`."""
    moto = MotoServer(tmp_path, env=MOTO_ENV).start()
    try:
        inventory, env = _filled(tmp_path, moto)
        switches = ("fleet_services_manage=false", "fleet_autoscaling_manage=false", "fleet_alarms_dashboard_manage=false")
        args = tuple(arg for switch in switches for arg in ("-e", switch))
        run = run_playbook(REPO_ROOT / "playbooks" / "infrastructure.yml", inventory=str(inventory), env=env, check=True, args=args)
    finally:
        moto.stop()
    assert run.rc == 0, run.stdout[-3000:]
    for task in (
        "inferops.triton_ecs.fleet_services : Blue and green services, created when missing",
        "inferops.triton_ecs.fleet_autoscaling : Scalable target and policies on the live colour",
        "inferops.triton_ecs.fleet_alarms : Dashboard of the service",
    ):
        assert run.result(task).get("skipped"), task
