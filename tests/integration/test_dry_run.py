"""`deploy.yml --check --diff` on the local rehearsal: a dry run that writes nothing.

Stand-ins: moto servers on free ports for AWS (their request recorder counts the write calls), the real dockerd and
local registry for the image, a real tritonserver container for the first (real) deploy's standby. One deployment
is shared by the module's cases; the fresh-account case gets an empty moto server of its own.
"""

from __future__ import annotations

import subprocess

import pytest

from tests.harness.ansible import REPO_ROOT, run_playbook
from tests.harness.aws_calls import start_recording, writes
from tests.harness.images import local_rehearsal_base
from tests.harness.moto import MotoServer

STANDBY_CONTAINER = "inferops-test-dry-run-standby"
KNOWN_AFTER_APPLY = "(known after apply)"
CUTOVER_ROLE = "inferops.triton_ecs.bluegreen_cutover"
# The json callback names a role's task "<role> : <task>".
SLOW_START_TASK = (
    "inferops.triton_ecs.fleet_load_balancing : Slow start for Triton warm-up, and the deregistration delay (what a check run compares)"
)


def _extra(moto: MotoServer) -> dict:
    return {
        "aws_endpoint_url": moto.endpoint,
        # A fixed image tag: the image's inputs, not the checkout's HEAD, decide whether a check run sees a change.
        "triton_image_revision": "dry-run-test",
        "triton_image_version": "dry-run-test",
        "deploy_local_standby": {
            "container_name": STANDBY_CONTAINER,
            "port": 18120,
            "model_repository": str(REPO_ROOT / "examples" / "model_repository"),
        },
    }


def _deploy(moto: MotoServer, check: bool = False, **overrides):
    return run_playbook(
        REPO_ROOT / "deploy.yml",
        extra_vars={**_extra(moto), **overrides},
        inventory=str(REPO_ROOT / "inventories" / "local"),
        check=check,
        diff=check,
    )


def _state(moto: MotoServer) -> dict:
    """What a write would move: task definition revisions, listener weights, each service's count and revision."""
    ecs, elbv2 = moto.client("ecs"), moto.client("elbv2")
    groups = {g["TargetGroupArn"]: g["TargetGroupName"] for g in elbv2.describe_target_groups()["TargetGroups"]}
    lb = elbv2.describe_load_balancers(Names=["triton-local"])["LoadBalancers"][0]
    listeners = elbv2.describe_listeners(LoadBalancerArn=lb["LoadBalancerArn"])["Listeners"]
    weights = {
        (li["Port"], groups[tg["TargetGroupArn"]]): tg["Weight"]
        for li in listeners
        for tg in li["DefaultActions"][0]["ForwardConfig"]["TargetGroups"]
    }
    services = ecs.describe_services(cluster="triton-local", services=["triton-blue", "triton-green"])["services"]
    attributes = {
        name: elbv2.describe_target_group_attributes(TargetGroupArn=arn)["Attributes"]
        for arn, name in sorted(groups.items(), key=lambda g: g[1])
    }
    return {
        "revisions": ecs.list_task_definitions(familyPrefix="triton-local")["taskDefinitionArns"],
        "weights": weights,
        "services": {s["serviceName"]: (s["desiredCount"], s["taskDefinition"]) for s in services},
        "target_group_attributes": attributes,
    }


@pytest.fixture(scope="module")
def deployed():
    """One real deploy of the local rehearsal; the check runs below start from it."""
    local_rehearsal_base()
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        moto = MotoServer(Path(tmp)).start()
        try:
            first = _deploy(moto)
            assert first.rc == 0, first.stderr[-3000:] + first.stdout[-3000:]
            yield moto
        finally:
            subprocess.run(["docker", "rm", "-f", STANDBY_CONTAINER], check=False, capture_output=True)
            moto.stop()


def test_check_on_an_up_to_date_deployment_changes_and_writes_nothing(deployed):
    before = _state(deployed)
    start_recording(deployed)
    run = _deploy(deployed, check=True)
    assert run.rc == 0, run.stderr[-3000:] + run.stdout[-3000:]
    assert run.changed_tasks == []
    assert writes(deployed) == []
    assert _state(deployed) == before
    # the cutover showed its plan without touching anything
    assert run.result(f"{CUTOVER_ROLE} : Blue/green | 1 discover - which colour is live, what each runs")["plan"]["phases"] == []


def test_check_with_one_input_changed_reports_only_its_task_with_a_diff(deployed):
    before = _state(deployed)
    start_recording(deployed)
    run = _deploy(deployed, check=True, fleet_load_balancing_slow_start_s=90)
    assert run.rc == 0, run.stderr[-3000:] + run.stdout[-3000:]
    assert run.changed_tasks == [SLOW_START_TASK]
    changed = [r for r in run.result(SLOW_START_TASK)["results"] if r["changed"]]
    assert len(changed) == 2  # blue and green
    assert all(r["diff"]["after"]["slow_start.duration_seconds"] == "90" for r in changed), changed
    assert writes(deployed) == []
    assert _state(deployed) == before


def test_check_on_an_empty_account_shows_the_plan_without_failing_or_writing(tmp_path):
    local_rehearsal_base()
    empty = MotoServer(tmp_path).start()
    try:
        start_recording(empty)
        standby = {**_extra(empty)["deploy_local_standby"], "container_name": STANDBY_CONTAINER + "-fresh", "port": 18121}
        run = _deploy(empty, check=True, deploy_local_standby=standby)
        actions = writes(empty)
    finally:
        empty.stop()
    assert run.rc == 0, run.stderr[-3000:] + run.stdout[-3000:]
    assert actions == []
    assert KNOWN_AFTER_APPLY in run.stdout
    for task in (
        "inferops.triton_ecs.fleet_load_balancing : Target groups a real run would create (check mode)",
        "inferops.triton_ecs.fleet_capacity : Auto Scaling group changes a real run would make (check mode)",
        "inferops.triton_ecs.fleet_services : Services a real run would create (check mode, what they use is created first)",
        "The cutover a real run would make (check mode; the fleet is created first)",
    ):
        assert task in run.changed_tasks, run.changed_tasks
