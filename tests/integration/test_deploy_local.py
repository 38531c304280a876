"""deploy.yml on inventories/local end to end, against a fresh moto server: the local rehearsal of the AWS flow.

A real image is built on the CPU Triton base and pushed to the local registry, the task definition registered, the
infrastructure created in moto, and the cutover gated on a container of that image (the standby's test route).
One deployment is shared by the module's cases, in order: the second run, the dry runs (`--check --diff`, the
request recorder of moto counting write calls), then a failed release, last because it changes the state.
test_dry_run.py has the dry run on an empty account.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess

import pytest

from tests.harness.aws_calls import start_recording, writes
from tests.harness.images import local_rehearsal_base
from tests.harness.local_rehearsal import STANDBY, deploy, state
from tests.harness.moto import MotoServer
from tests.harness.triton import write_model

# The json callback names a role's task "<role> : <task>".
TARGET_GROUPS_TASK = (
    "inferops.triton_ecs.fleet_load_balancing : "
    "Target groups, health-checked on Triton's readiness, with slow start and the deregistration delay"
)
TASK_DEFINITION_TASK = "inferops.triton_ecs.task_definition : Register the Triton task definition"


@pytest.fixture(scope="module")
def local_deploy(tmp_path_factory):
    """Runs deploy.yml twice on one fresh moto server; later tests in this module go on from that state."""
    local_rehearsal_base()
    moto = MotoServer(tmp_path_factory.mktemp("deploy")).start()
    try:
        first = deploy(moto)
        second = deploy(moto)
        yield moto, first, second
    finally:
        subprocess.run(["docker", "rm", "-f", STANDBY["container_name"]], check=False, capture_output=True)
        moto.stop()


def _revisions(moto) -> list[str]:
    return moto.client("ecs").list_task_definitions(familyPrefix="triton-local")["taskDefinitionArns"]


def _ledger(moto) -> list[dict]:
    """The release ledger's entries (docs/runbook.md) in the rehearsal's model bucket, in time order."""
    s3 = moto.client("s3")
    listed = s3.list_objects_v2(Bucket="triton-local-models").get("Contents", [])
    keys = [o["Key"] for o in listed if "ledger/triton/" in o["Key"]]
    return [json.loads(s3.get_object(Bucket="triton-local-models", Key=key)["Body"].read()) for key in keys]


def _weights(moto) -> dict[str, int]:
    elbv2 = moto.client("elbv2")
    groups = {g["TargetGroupArn"]: g["TargetGroupName"].rsplit("-", 1)[-1] for g in elbv2.describe_target_groups()["TargetGroups"]}
    lb = elbv2.describe_load_balancers(Names=["triton-local"])["LoadBalancers"][0]
    listener = next(li for li in elbv2.describe_listeners(LoadBalancerArn=lb["LoadBalancerArn"])["Listeners"] if li["Port"] == 80)
    forward = listener["DefaultActions"][0]["ForwardConfig"]["TargetGroups"]
    return {groups[tg["TargetGroupArn"]]: tg["Weight"] for tg in forward}


def test_first_run_builds_registers_creates_and_cuts_over(local_deploy):
    moto, first, _second = local_deploy
    assert first.rc == 0, first.stderr[-3000:] + first.stdout[-3000:]
    assert "LOCAL REHEARSAL" in first.result("Say this is a local rehearsal")["msg"]
    assert first.result(TASK_DEFINITION_TASK)["changed"]
    assert first.deprecations == []  # issue 14: no deprecation warning in any run
    assert len(_revisions(moto)) == 1
    # One model host path (inventories/local's fleet_capacity_model_host_path): the task's /models and the agents'.
    registered = first.result(TASK_DEFINITION_TASK)["task_definition"]
    # The host path is the models' only one; the metrics sidecar's scrape-target volume is the task's own (no host).
    assert [v["host"]["sourcePath"] for v in registered["volumes"] if "host" in v] == ["/srv/inferops/models"]
    template = moto.client("ec2").describe_launch_template_versions(LaunchTemplateName="triton-local-gpu", Versions=["$Latest"])
    assert (
        '"host_path": "/srv/inferops/models"'
        in base64.b64decode(template["LaunchTemplateVersions"][0]["LaunchTemplateData"]["UserData"]).decode()
    )
    image = first.result(TASK_DEFINITION_TASK)["image"]
    assert image.startswith("127.0.0.1:5000/inferops/triton@sha256:")
    # services were created empty; the gated cutover brought green up and moved all traffic to it
    assert _weights(moto) == {"blue": 0, "green": 100}
    services = moto.client("ecs").describe_services(cluster="triton-local", services=["triton-blue", "triton-green"])["services"]
    counts = {s["serviceName"]: (s["desiredCount"], s["taskDefinition"].rsplit("/", 1)[-1]) for s in services}
    assert counts == {"triton-blue": (0, "triton-local:1"), "triton-green": (1, "triton-local:1")}
    # the release ledger has the deploy: green brought up and on the production route, with what it runs
    ledger = _ledger(moto)
    assert [(e["kind"], e["outcome"], e["color"], e["production_color"]) for e in ledger] == [("deploy", "succeeded", "green", "green")]
    assert ledger[0]["image"] == image and ledger[0]["task_definition"].endswith("task-definition/triton-local:1")
    assert ledger[0]["ami_id"] == "ami-0a1b2c3d4e5f6a7b8" and ledger[0]["caller"].startswith("arn:aws:")
    assert [t["outcome"] for t in ledger[0]["verdicts"]["gates"]] == ["ok"]


def test_second_run_changes_nothing(local_deploy):
    moto, _first, second = local_deploy
    assert second.rc == 0, second.stderr[-3000:]
    assert second.changed_tasks == []
    assert len(_ledger(moto)) == 1  # a run that changed nothing appends no ledger entry
    assert second.deprecations == []
    assert second.result("Cut traffic over to the new task definition").get("skipped")  # nothing to cut over
    assert len(_revisions(moto)) == 1


def test_check_on_an_up_to_date_deployment_changes_and_writes_nothing(local_deploy):
    moto = local_deploy[0]
    before = state(moto)
    start_recording(moto)
    run = deploy(moto, check=True)
    assert run.rc == 0, run.stderr[-3000:] + run.stdout[-3000:]
    assert run.changed_tasks == []
    assert writes(moto) == []
    assert state(moto) == before
    # the live colour serves the release and the other runs nothing: the cutover's planner says so, and nothing runs
    assert "green is live at 100% with the requested task definition" in run.result("Nothing to cut over")["msg"]
    assert run.result("Cut traffic over to the new task definition").get("skipped")


def test_check_with_one_input_changed_reports_only_its_task_with_a_diff(local_deploy):
    moto = local_deploy[0]
    before = state(moto)
    start_recording(moto)
    run = deploy(moto, check=True, fleet_load_balancing_slow_start_s=90)
    assert run.rc == 0, run.stderr[-3000:] + run.stdout[-3000:]
    assert run.changed_tasks == [TARGET_GROUPS_TASK]
    diff = run.result(TARGET_GROUPS_TASK)["diff"]
    for color in ("blue", "green"):  # both groups, and only their slow start
        assert diff["after"][color]["attributes"]["slow_start.duration_seconds"] == "90", diff
        assert {**diff["before"][color], "attributes": None} == {**diff["after"][color], "attributes": None}, diff
    assert writes(moto) == []
    assert state(moto) == before


def test_check_of_a_release_with_a_new_task_definition_shows_its_diff_and_the_cutover_it_would_make(local_deploy):
    """The dry run of a release: the task definition's diff, then the cutover a real run would make onto the revision
    it would register (known after apply: it has no ARN yet), with no write and no stand-in container started."""
    moto = local_deploy[0]
    before = state(moto)
    start_recording(moto)
    run = deploy(moto, check=True, task_definition_environment={"INFEROPS_RELEASE": "2"})
    assert run.rc == 0, run.stderr[-3000:] + run.stdout[-3000:]
    registered = run.result(TASK_DEFINITION_TASK)
    assert registered["changed"] and registered["task_definition_arn"] is None
    environments = [c.get("environment", []) for c in registered["diff"]["after"]["containerDefinitions"]]
    assert any({"name": "INFEROPS_RELEASE", "value": "2"} in env for env in environments), environments
    assert "The cutover a real run would make (check mode; the fleet is created first)" in run.changed_tasks
    assert run.result("Stand in for the standby's ECS tasks with a local container").get("skipped")
    assert writes(moto) == []
    assert state(moto) == before


def test_a_release_whose_model_fails_to_load_rolls_back(local_deploy, tmp_path):
    moto = local_deploy[0]
    broken = tmp_path / "models"
    write_model(broken, "simple", fail_to_load=True)
    broken_standby = {"container_name": STANDBY["container_name"] + "-broken", "port": STANDBY["port"] + 1, "model_repository": str(broken)}
    try:
        run = deploy(
            moto,
            task_definition_environment={"RELEASE": "broken-model"},
            deploy_local_standby=broken_standby,
            bluegreen_cutover_gates={"expected_models": ["simple"], "timeout_s": 5, "interval_s": 1},
        )
    finally:
        subprocess.run(["docker", "rm", "-f", broken_standby["container_name"]], check=False, capture_output=True)
        shutil.rmtree(broken, ignore_errors=True)
    assert run.rc != 0
    failed = [h for t in run.tasks if "Blue/green |" in t["name"] for h in t["hosts"].values() if h.get("failed")]
    # the server dies at start (its model fails to load), so the standby never gets a healthy target
    assert failed and failed[0]["msg"].startswith("rolled back to green"), failed
    assert len(_revisions(moto)) == 2
    # the previous colour still serves everything, with its task definition
    assert _weights(moto) == {"blue": 0, "green": 100}
    green = moto.client("ecs").describe_services(cluster="triton-local", services=["triton-green"])["services"][0]
    assert green["taskDefinition"].endswith("triton-local:1")
    blue = moto.client("ecs").describe_services(cluster="triton-local", services=["triton-blue"])["services"][0]
    assert blue["desiredCount"] == 0
