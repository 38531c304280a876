"""The AMI rollout's decisions (plugins/module_utils/_ami_rollout/plan.py): pure functions over what AWS shows."""

from __future__ import annotations

import pytest

from ansible_collections.inferops.triton_ecs.plugins.module_utils._ami_rollout import plan as ar
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import InputError

OLD, NEW = "ami-0a1b2c3d4e5f60718", "ami-0f1e2d3c4b5a69788"
PARAMS = {
    "ami_id": NEW,
    "cluster": "inference",
    "test_route_url": "http://test:8080",
    "alarm_names": ["triton-target-5xx"],
    "canary": {},
    "gates": {},
    "refresh": {"checkpoints": [25, 50, 100], "min_healthy_percentage": 90, "max_healthy_percentage": 100},
}


def version(number: int, image: str, default: bool = False) -> dict:
    return {"VersionNumber": number, "DefaultVersion": default, "LaunchTemplateData": {"ImageId": image, "InstanceType": "g5.xlarge"}}


def fleet(
    group_version: str = "1",
    versions: list | None = None,
    instances: dict | None = None,
    refresh: dict | None = None,
    draining: str = "ENABLED",
) -> ar.Fleet:
    instances = {"i-1": "1", "i-2": "1"} if instances is None else instances
    group = {
        "Instances": [{"InstanceId": i, "LaunchTemplate": {"Version": v}, "LifecycleState": "InService"} for i, v in instances.items()]
    }
    return ar.Fleet(
        "triton-gpu",
        group,
        "lt-1",
        "triton-gpu",
        group_version,
        versions if versions is not None else [version(1, OLD, True)],
        refresh,
        [{"name": "triton-gpu", "autoScalingGroupProvider": {"managedDraining": draining}}],
    )


def test_a_new_ami_is_rolled_out_from_the_groups_version_with_a_canary_first():
    plan = ar.decide(fleet(), PARAMS)
    assert (plan.action, plan.base_version, plan.new_version) == ("rollout", "1", "")
    assert plan.steps[0].startswith("create launch template triton-gpu version 2 (new) from version 1")
    assert "canary" in plan.steps[1] and "instance refresh" in plan.steps[4]


def test_a_version_a_stopped_run_created_is_reused():
    versions = [version(1, OLD, True), {**version(2, NEW), "LaunchTemplateData": {"ImageId": NEW, "InstanceType": "g5.xlarge"}}]
    assert ar.decide(fleet(versions=versions), PARAMS).new_version == "2"


def test_the_ami_everywhere_is_a_noop():
    plan = ar.decide(fleet(group_version="2", versions=[version(1, OLD), version(2, NEW, True)], instances={"i-3": "2"}), PARAMS)
    assert plan.action == "noop"


@pytest.mark.parametrize("group_version", ["$Latest", "$Default"])
def test_a_group_on_latest_or_default_is_refused(group_version):
    with pytest.raises(InputError, match="a rollout needs a numbered version"):
        ar.decide(fleet(group_version=group_version), PARAMS)


def test_managed_draining_off_is_refused():
    with pytest.raises(InputError, match="managed draining off"):
        ar.decide(fleet(draining="DISABLED"), PARAMS)


def test_another_refresh_in_progress_is_refused_and_ours_is_resumed():
    other = {"InstanceRefreshId": "r-1", "Status": "InProgress", "DesiredConfiguration": {"LaunchTemplate": {"Version": "1"}}}
    with pytest.raises(InputError, match="one change at a time"):
        ar.decide(fleet(refresh=other), PARAMS)
    ours = {"InstanceRefreshId": "r-2", "Status": "InProgress", "DesiredConfiguration": {"LaunchTemplate": {"Version": "2"}}}
    plan = ar.decide(fleet(versions=[version(1, OLD, True), version(2, NEW)], refresh=ours), PARAMS)
    assert (plan.action, plan.base_version, plan.new_version) == ("resume", "1", "2")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"ami_id": "ami-xyz"}, "ami_id is 'ami-xyz'"),
        ({"refresh": {"checkpoints": [50, 25, 100]}}, "increase strictly and end at 100"),
        ({"refresh": {"checkpoints": [25, 50], "min_healthy_percentage": 90, "max_healthy_percentage": 100}}, "end at 100"),
        ({"refresh": {"checkpoints": [100], "min_healthy_percentage": 100, "max_healthy_percentage": 100}}, "launch before terminate"),
        ({"canary": {"bake_s": -1}}, "canary.bake_s is -1"),
        ({"test_route_url": "test:8080"}, "the http"),
    ],
)
def test_bad_input_names_the_option_and_the_fix(change, message):
    assert any(message in e for e in ar.validate_params({**PARAMS, **change}))


def test_instance_verdicts():
    ok = {"status": "ACTIVE", "agentConnected": True, "registeredResources": [{"name": "GPU", "stringSetValue": ["g0"]}]}
    assert ar.instance_problems("i-1", ok, 1) == []
    assert ar.instance_problems("i-1", None, 1) == ["i-1 has not joined the cluster"]
    assert "registered 0 GPUs, its instance type has 1" in ar.instance_problems("i-1", {**ok, "registeredResources": []}, 1)[0]
    drained = ar.instance_problems("i-1", {**ok, "status": "DRAINING"}, 1)
    assert drained and "gpu_health" in drained[0]
    impaired = {**ok, "healthStatus": {"overallStatus": "IMPAIRED", "details": [{"type": "ACCELERATED_COMPUTE", "status": "IMPAIRED"}]}}
    assert "ACCELERATED_COMPUTE IMPAIRED" in ar.instance_problems("i-1", impaired, 1)[0]
    assert ar.expected_gpus({"GpuInfo": {"Gpus": [{"Count": 8}]}}) == 8 and ar.expected_gpus({}) is None


def test_checkpoints_are_gated_once_each_in_order():
    assert ar.checkpoint_reached({"PercentageComplete": 30}, [25, 50, 100], []) == 25
    assert ar.checkpoint_reached({"PercentageComplete": 30}, [25, 50, 100], [25]) is None
    assert ar.checkpoint_reached({"PercentageComplete": 100}, [25, 50, 100], [25]) == 50


def test_preferences_carry_checkpoints_alarms_and_auto_rollback():
    params = {**PARAMS, "refresh": {**PARAMS["refresh"], "instance_warmup_s": 600, "checkpoint_delay_s": 600}}
    prefs = ar.preferences(params)
    assert prefs["CheckpointPercentages"] == [25, 50, 100] and prefs["AutoRollback"] and prefs["SkipMatching"]
    assert prefs["AlarmSpecification"] == {"Alarms": ["triton-target-5xx"]} and prefs["ScaleInProtectedInstances"] == "Refresh"
