"""The AMI rollout (module ami_rollout's run, in process) against a moto server behind the instance refresh stand-in.

moto 5.2.5 models launch templates and their versions, the Auto Scaling group, EC2 instances, ECS container
instances, RunTask (without placement constraints), target groups and listeners, and alarm states: those are real
moto calls. It models no instance refresh, no ECS managed draining, no GPU resources of a container instance, and no
reachable task address: `tests/harness/instance_refresh.py` stands in for those (its docstring says how), in front of
moto; botocore validates every request the rollout makes, answered by moto or by the stand-in. Triton on the canary is
the real tritonserver (CPU, python backend), reached through the test listener's route (`tests/harness/alb.py`) at
the address the stand-in gives the canary's task. Start the file under `flock /tmp/inferops-heavy.lock`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from ansible_collections.amazon.aws.plugins.module_utils.retries import AWSRetry, RetryingBotoClientWrapper
from ansible_collections.inferops.triton_ecs.plugins.module_utils._ami_rollout.runner import Clients, roll_ami
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import InputError
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.controller_watch import ControllerWatch
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.guard import CutoverGuard, GuardedClock
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.lock import LOCK_PREFIX, CutoverLock, new_owner
from tests.harness.alb import AlbRoute
from tests.harness.ami_fleet import ALARM, AMI_NEW, AMI_OLD, AmiFleet, create_fleet
from tests.harness.instance_refresh import Boot, RefreshProxy
from tests.harness.triton import TritonServer, write_model

SMOKE = {
    "model": "simple",
    "inputs": [{"name": "INPUT0", "shape": [2], "datatype": "FP32", "data": [1.0, 2.0]}],
    "expected_outputs": [{"name": "OUTPUT0", "data": [2.0, 3.0]}],
}
WRITES = (
    "Create",
    "Run",
    "Start",
    "Stop",
    "Terminate",
    "Modify",
    "Delete",
    "Register",
    "Deregister",
    "Update",
    "Rollback",
    "Cancel",
    "Add",
    "Remove",
)


@pytest.fixture(scope="module")
def triton(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    base = tmp_path_factory.mktemp("canary")
    write_model(base / "repo", "simple")
    server = TritonServer(base / "repo", base, models=("simple",)).start()
    yield server
    server.stop()


@pytest.fixture
def fleet(moto_server, triton) -> Iterator[AmiFleet]:
    proxy = RefreshProxy(moto_server, "inference").start()
    try:
        yield create_fleet(moto_server, proxy, triton.http_port)
    finally:
        proxy.stop()


@pytest.fixture
def route(fleet) -> Iterator[AlbRoute]:
    with AlbRoute(fleet.moto, listener_arn=fleet.test_listener_arn) as served:
        yield served


def run(fleet: AmiFleet, params: dict, check_mode: bool = False) -> dict:
    wrap = AWSRetry.jittered_backoff(retries=3)
    aws = Clients(*(RetryingBotoClientWrapper(fleet.proxy.client(s), wrap) for s in ("ec2", "ecs", "elbv2", "autoscaling", "cloudwatch")))
    guard = CutoverGuard(ControllerWatch(), None)
    owner = new_owner()
    return roll_ami(aws, params, guard, GuardedClock(guard), check_mode, lambda arn: CutoverLock(aws.elbv2, arn, "triton", owner, 900))


def writes(fleet: AmiFleet) -> list[str]:
    return [action for _service, action in fleet.proxy.calls if action.startswith(WRITES) and action != "StartTask"]


def group_versions(fleet: AmiFleet) -> dict[str, str]:
    return {i["InstanceId"]: str(i["LaunchTemplate"]["Version"]) for i in fleet.group()["Instances"]}


def test_check_mode_shows_the_plan_and_writes_nothing(fleet, route):
    fleet.proxy.calls.clear()
    res = run(fleet, fleet.module_params(route.url, gates={"smoke": SMOKE}), check_mode=True)
    assert res["outcome"] == "planned" and res["changed"] and res["decision"] == "rollout"
    assert res["steps"][0].startswith("create launch template triton-gpu version 2 (new) from version 1: image " + AMI_NEW)
    assert any("canary" in s and "joins cluster inference" in s for s in res["steps"])
    assert any("smoke inference" in s and route.url in s for s in res["steps"])
    assert any(
        s.startswith("instance refresh of triton-gpu to version 2 (new): checkpoints [50, 100]") and "DRAINING" in s for s in res["steps"]
    )
    assert res["diff"]["before"] == {"group_version": "1", "default_version": "1", "image": AMI_OLD}
    assert writes(fleet) == [] and res["actions"] == []
    assert fleet.versions() == {"1": (AMI_OLD, True)}


def test_rollout_canary_then_refresh_with_checkpoints(fleet, route):
    before = set(group_versions(fleet))
    res = run(fleet, fleet.module_params(route.url, gates={"smoke": SMOKE}))
    assert res["outcome"] == "rolled_out", res["failure"]
    assert [e["phase"] for e in res["timeline"]] == [
        "canary joined",
        "canary smoke",
        "canary bake",
        "checkpoint 50%",
        "checkpoint 100%",
        "refresh",
    ]
    assert "smoke inference as expected through the test route" in res["timeline"][1]["detail"]
    assert res["expected_gpus"] == 1
    # the canary task went through the test route: registered in green's target group, then taken out
    assert any(a.startswith("run task triton:1 on canary") for a in res["actions"])
    assert any(a.startswith("register 127.0.0.1:") and "green target group" in a for a in res["actions"])
    assert fleet.versions() == {"1": (AMI_OLD, False), "2": (AMI_NEW, True)}
    versions = group_versions(fleet)
    assert set(versions.values()) == {"2"} and not set(versions) & before and fleet.group()["LaunchTemplate"]["Version"] == "2"
    assert set(fleet.running_instances().values()) == {AMI_NEW} and len(fleet.running_instances()) == 2  # the canary is gone
    # ECS drained every old instance before the group terminated it, and the controller saw it
    assert res["drained_instances"] == {i: "DRAINING" for i in before}
    assert res["refresh"]["status"] == "Successful" and res["refresh"]["checkpoints_passed"] == [50, 100]

    fleet.proxy.calls.clear()
    again = run(fleet, fleet.module_params(route.url, gates={"smoke": SMOKE}))
    assert again["outcome"] == "noop" and not again["changed"] and writes(fleet) == []


def test_a_failed_canary_reverts_before_any_refresh(fleet, route):
    fleet.proxy.boots[AMI_NEW] = Boot(gpus=0)  # the new AMI's driver sees no GPU: the ECS agent registers none
    before = group_versions(fleet)
    res = run(fleet, fleet.module_params(route.url))
    assert res["outcome"] == "reverted"
    assert "registered 0 GPUs, its instance type has 1" in res["failure"]
    assert res["revert"]["deleted_version"] == "2" and res["revert"]["refresh_status"] == ""
    assert res["revert_seconds"] > 0
    assert fleet.versions() == {"1": (AMI_OLD, True)}
    assert group_versions(fleet) == before and fleet.proxy.refreshes.get("triton-gpu", []) == []
    assert set(fleet.running_instances().values()) == {AMI_OLD}  # the canary was terminated
    assert [a for a in res["actions"] if "canary" in a][-1].startswith("terminate canary")


def test_an_alarm_at_a_checkpoint_rolls_the_refresh_back(fleet, route):
    before = group_versions(fleet)

    def alarm_once_one_instance_is_new() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if "2" in group_versions(fleet).values():
                fleet.moto.client("cloudwatch").set_alarm_state(AlarmName=ALARM, StateValue="ALARM", StateReason="5xx on the new instances")
                return
            time.sleep(0.1)

    watcher = threading.Thread(target=alarm_once_one_instance_is_new, daemon=True)
    watcher.start()
    res = run(fleet, fleet.module_params(route.url, refresh={"checkpoint_delay_s": 3}))
    watcher.join()
    # the controller's checkpoint gate or AWS's own auto rollback on the same alarm, whichever reads it first
    assert res["outcome"] == "reverted" and ("ALARM" in res["failure"] or "RollbackInProgress" in res["failure"])
    assert res["revert"]["refresh_status"] == "RollbackSuccessful" and res["revert"]["deleted_version"] == "2"
    assert fleet.versions() == {"1": (AMI_OLD, True)}
    versions = group_versions(fleet)
    assert set(versions.values()) == {"1"} and fleet.group()["LaunchTemplate"]["Version"] == "1"
    assert set(fleet.running_instances().values()) == {AMI_OLD} and len(versions) == len(before)


def test_another_change_of_the_application_holds_the_lock(fleet, route):
    fleet.moto.client("elbv2").add_tags(
        ResourceArns=[fleet.listener_arn],
        Tags=[{"Key": LOCK_PREFIX + "othercutover", "Value": f"since=1 expires={int(time.time()) + 600} by=ci"}],
    )
    fleet.proxy.calls.clear()
    with pytest.raises(InputError, match="another cutover of triton is running"):
        run(fleet, fleet.module_params(route.url))
    assert writes(fleet) == []


def test_a_group_on_latest_is_refused_before_any_write(fleet, route):
    fleet.moto.client("autoscaling").update_auto_scaling_group(
        AutoScalingGroupName="triton-gpu", LaunchTemplate={"LaunchTemplateId": fleet.template_id, "Version": "$Latest"}
    )
    fleet.proxy.calls.clear()
    with pytest.raises(InputError, match="a rollout needs a numbered version"):
        run(fleet, fleet.module_params(route.url))
    assert writes(fleet) == []
