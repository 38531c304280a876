"""A new instance on the SIMULATED Amazon Linux 2023 systemd container (molecule/new_instance/molecule.yml):
the model agent's boot hydration from a moto S3 server runs before a stand-in ecs.service, and a failed hydration
keeps it stopped. Storage: instance_storage's directory fallback (the container has no instance store)."""

from __future__ import annotations

import json
import time

import pytest

BOOT = "inferops-model-agent-boot.service"
SERVE = "inferops-model-agent.service"
STORAGE = "inferops-instance-storage.service"
PROGRAM = "/opt/inferops/model-agent.pyz"
BUCKET = "molecule-new-instance"
RELEASE_KEY = "models/releases/triton/current.json"
STATUS_KEY = "models/status/triton/i-0000000000000001.json"
RELEASE = {"schema": 1, "application": "triton", "release_id": "r1", "created": "2026-01-01T00:00:00Z"}


def props(host, unit: str, *names: str) -> dict[str, str]:
    out = host.check_output("systemctl show -p %s %s", ",".join(names), unit)
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def status(aws_client) -> dict:
    return json.loads(aws_client("s3").get_object(Bucket=BUCKET, Key=STATUS_KEY)["Body"].read())


def write_release(aws_client, release_id: str, version: int) -> None:
    body = dict(RELEASE, release_id=release_id, models=[{"name": "simple", "version": version}])
    aws_client("s3").put_object(Bucket=BUCKET, Key=RELEASE_KEY, Body=json.dumps(body).encode())


def boot_afresh(host) -> None:
    """As after a reboot: nothing of ECS or the agent running, no failed state remembered."""
    host.run(f"systemctl stop ecs.service {SERVE} {BOOT}")
    host.run(f"systemctl reset-failed ecs.service {SERVE} {BOOT}")


def test_ecs_requires_the_hydration_which_waits_for_the_storage(host):
    ecs = props(host, "ecs.service", "Requires", "After")
    assert BOOT in ecs["Requires"].split() and BOOT in ecs["After"].split()
    boot = props(host, BOOT, "After", "Before", "UnitFileState", "Type")
    assert STORAGE in boot["After"].split() and "ecs.service" in boot["Before"].split()
    assert (boot["UnitFileState"], boot["Type"]) == ("enabled", "oneshot")
    assert props(host, SERVE, "UnitFileState")["UnitFileState"] == "enabled"


def test_the_agent_is_one_program_run_without_ansible_on_the_instance(host):
    assert host.run("python3 -c 'import ansible'").rc != 0
    program = host.file(PROGRAM)
    assert program.is_file and (program.user, program.mode) == ("root", 0o644)
    assert not host.file("/opt/inferops/model-agent").exists  # no package tree beside it
    helped = host.run(f"python3 {PROGRAM} --help")
    assert helped.rc == 0 and helped.stdout.startswith("usage: inferops-model-agent"), helped.stderr
    for unit, mode in ((BOOT, "--boot"), (SERVE, "--serve")):
        assert f"/usr/bin/python3 {PROGRAM} --config /etc/inferops/model-agent.json {mode}" in host.check_output(f"systemctl cat {unit}")


def test_ecs_starts_only_after_the_models_are_hydrated(host, aws_client):
    write_release(aws_client, "r1", 1)
    boot_afresh(host)
    host.run("rm -rf /mnt/models/simple")
    host.check_output("systemctl start ecs.service")
    boot = props(host, BOOT, "ActiveState", "Result", "ExecMainExitTimestampMonotonic")
    ecs = props(host, "ecs.service", "ActiveState", "ExecMainStartTimestampMonotonic")
    assert (boot["ActiveState"], boot["Result"], ecs["ActiveState"]) == ("active", "success", "active")
    # The hydration process had exited before the ECS agent's process started.
    assert 0 < int(boot["ExecMainExitTimestampMonotonic"]) <= int(ecs["ExecMainStartTimestampMonotonic"])
    assert host.file("/mnt/models/simple/1/weights.bin").content_string == "weights of version 1\n"
    assert host.file("/mnt/models/simple/1.manifest.json").exists
    assert host.file("/mnt/models/simple/config.pbtxt").exists
    reported = status(aws_client)
    assert (reported["release_id"], reported["state"], reported["models"]["simple"]["synced"]) == ("r1", "hydrating", [1])


def test_the_serving_agent_reports_the_release_applied(host, aws_client):
    host.check_output(f"systemctl start {SERVE}")
    deadline = time.monotonic() + 30
    while status(aws_client)["state"] != "applied":
        assert time.monotonic() < deadline, status(aws_client)
        time.sleep(0.5)
    assert status(aws_client)["container_instance_arn"].endswith("container-instance/fleet/0000000000000001")


@pytest.fixture
def missing_version_release(host, aws_client):
    write_release(aws_client, "r2", 9)
    yield
    write_release(aws_client, "r1", 1)
    boot_afresh(host)


def test_a_failed_hydration_keeps_ecs_stopped(host, aws_client, missing_version_release):
    boot_afresh(host)
    last_ecs_start = props(host, "ecs.service", "ExecMainStartTimestampMonotonic")["ExecMainStartTimestampMonotonic"]
    assert host.run("systemctl start ecs.service").rc != 0
    boot = props(host, BOOT, "ActiveState", "Result")
    ecs = props(host, "ecs.service", "ActiveState", "ExecMainStartTimestampMonotonic")
    assert (boot["ActiveState"], boot["Result"]) == ("failed", "exit-code")
    # The ECS agent's process never started this time.
    assert ecs["ActiveState"] != "active" and ecs["ExecMainStartTimestampMonotonic"] == last_ecs_start
    journal = host.check_output(f"journalctl -u {BOOT} --no-pager -n 50")
    assert "version=9 has no manifest in S3" in journal and "ECS stays stopped" in journal
    reported = status(aws_client)
    assert (reported["state"], reported["release_id"]) == ("failed", "r2")
    # After the last attempt the agent asks Auto Scaling (moto's, where this stand-in instance is in no group).
    assert "is in no Auto Scaling group: not marked Unhealthy, ECS stays stopped" in reported["last_error"]
    assert host.file("/mnt/models/simple/1/weights.bin").exists  # what was hydrated before is kept
