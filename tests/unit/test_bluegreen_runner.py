"""The blue/green runner over fake AWS clients and a fake clock: phases, rollback, drain (its endpoints given or found
through ECS), check mode, waits.

The fakes answer the boto3 calls the thin client files make (`_aws/ecs.py`, `_aws/elbv2.py`, `_aws/cloudwatch.py`)
with AWS-shaped payloads; time is simulated, so a 300 s bake takes no time and the told waits can be asserted.
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar

import pytest
from botocore.exceptions import ClientError

from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import listener_actions
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.clock import Clock
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.cutover_state import Clients
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.plan import PlanError
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.runner import Runner
from ansible_collections.inferops.triton_ecs.plugins.module_utils._triton_client import TritonError
from tests.unit.one_page_listings import OnePageListings

TD1 = "arn:aws:ecs:us-east-1:123456789012:task-definition/triton:1"
TD2 = "arn:aws:ecs:us-east-1:123456789012:task-definition/triton:2"
TGS = {"blue": "arn:tg/blue", "green": "arn:tg/green"}
LISTENER = "arn:listener/prod"


class FakeClock(Clock):
    def __init__(self) -> None:
        super().__init__()
        self.now = 1000.0
        self.hooks: list = []  # (at, callable): run once when the clock passes `at`

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(seconds, 0)
        for hook in list(self.hooks):
            if self.now >= hook[0]:
                self.hooks.remove(hook)
                hook[1]()


class FakeAws(OnePageListings):
    """ECS, ELBv2 and CloudWatch in memory; `calls` records every write."""

    def __init__(self) -> None:
        self.services = {
            "triton-blue": {"serviceName": "triton-blue", "status": "ACTIVE", "taskDefinition": TD1, "desiredCount": 2, "runningCount": 2},
            "triton-green": {
                "serviceName": "triton-green",
                "status": "ACTIVE",
                "taskDefinition": TD1,
                "desiredCount": 0,
                "runningCount": 0,
            },
        }
        for color in ("blue", "green"):
            self.services[f"triton-{color}"].update(
                pendingCount=0,
                deployments=[{"status": "PRIMARY", "rolloutState": "COMPLETED"}],
                loadBalancers=[{"targetGroupArn": TGS[color]}],
            )
        self.weights = {"blue": 100, "green": 0}
        self.alarms = {"5xx": "OK"}
        self.gpus_free = 0
        self.managed_scaling = True
        self.tasks: list[dict] = []  # DescribeTasks-shaped; none by default (the drain then finds no endpoint)
        self.calls: list[tuple] = []

    # ECS
    def describe_services(self, aws_retry: bool, cluster: str, services: list[str]) -> dict:
        return {"services": [copy.deepcopy(self.services[s]) for s in services if s in self.services]}

    def describe_task_definition(self, aws_retry: bool, taskDefinition: str, include: list) -> dict:
        rev = taskDefinition.rsplit(":", 1)[-1]
        if rev not in ("1", "2"):
            from botocore.exceptions import ClientError

            raise ClientError(
                {"Error": {"Code": "ClientException", "Message": "Unable to describe task definition."}}, "DescribeTaskDefinition"
            )
        return {
            "taskDefinition": {
                "taskDefinitionArn": TD1[:-1] + rev,
                "status": "ACTIVE",
                "containerDefinitions": [{"resourceRequirements": [{"type": "GPU", "value": "1"}]}],
            }
        }

    def update_service(self, aws_retry: bool, cluster: str, service: str, desiredCount: int, taskDefinition: str | None = None) -> dict:
        self.calls.append(("update_service", service, desiredCount, taskDefinition))
        svc = self.services[service]
        svc["desiredCount"] = svc["runningCount"] = desiredCount
        if taskDefinition:
            svc["taskDefinition"] = taskDefinition
        return {"service": svc}

    def list_tasks(self, aws_retry: bool, cluster: str, serviceName: str, desiredStatus: str) -> dict:
        return {
            "taskArns": [t["taskArn"] for t in self.tasks if t["group"] == f"service:{serviceName}" and t["desiredStatus"] == desiredStatus]
        }

    def describe_tasks(self, aws_retry: bool, cluster: str, tasks: list) -> dict:
        return {"tasks": [copy.deepcopy(t) for t in self.tasks if t["taskArn"] in tasks]}

    def list_container_instances(self, aws_retry: bool, cluster: str, status: str) -> dict:
        return {"containerInstanceArns": ["arn:ci/1"] if self.gpus_free else []}

    def describe_container_instances(self, aws_retry: bool, cluster: str, containerInstances: list) -> dict:
        gpus = [f"GPU-{i}" for i in range(self.gpus_free)]
        return {
            "containerInstances": [
                {"status": "ACTIVE", "remainingResources": [{"name": "GPU", "type": "STRINGSET", "stringSetValue": gpus}]}
            ]
        }

    def describe_clusters(self, aws_retry: bool, clusters: list) -> dict:
        return {"clusters": [{"status": "ACTIVE", "capacityProviders": ["gpu"] if self.managed_scaling else []}]}

    def describe_capacity_providers(self, aws_retry: bool, capacityProviders: list) -> dict:
        return {
            "capacityProviders": [
                {
                    "name": "gpu",
                    "status": "ACTIVE",
                    "autoScalingGroupProvider": {
                        "autoScalingGroupArn": "arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:0:autoScalingGroupName/gpu",
                        "managedScaling": {"status": "ENABLED"},
                    },
                }
            ]
        }

    # Auto Scaling and EC2: a group of 1-GPU instances with room for 4 more (the capacity phase's headroom)
    def describe_auto_scaling_groups(self, aws_retry: bool, AutoScalingGroupNames: list) -> dict:
        group = {"AutoScalingGroupName": "gpu", "MaxSize": 4, "DesiredCapacity": 0, "Instances": []}
        return {"AutoScalingGroups": [dict(group, LaunchTemplate={"LaunchTemplateName": "gpu", "Version": "$Default"})]}

    def describe_launch_template_versions(self, aws_retry: bool, LaunchTemplateName: str, Versions: list) -> dict:
        return {"LaunchTemplateVersions": [{"LaunchTemplateData": {"InstanceType": "g5.xlarge"}}]}

    def describe_instance_types(self, aws_retry: bool, InstanceTypes: list) -> dict:
        g5 = {
            "InstanceType": "g5.xlarge",
            "GpuInfo": {"Gpus": [{"Count": 1}]},
            "VCpuInfo": {"DefaultVCpus": 4},
            "MemoryInfo": {"SizeInMiB": 16384},
        }
        return {"InstanceTypes": [g5]}

    # ELBv2
    def describe_target_groups(self, aws_retry: bool, TargetGroupArns: list) -> dict:
        return {"TargetGroups": [{"TargetGroupArn": TargetGroupArns[0]}]}

    def describe_target_health(self, aws_retry: bool, TargetGroupArn: str) -> dict:
        color = "blue" if TargetGroupArn == TGS["blue"] else "green"
        n = self.services[f"triton-{color}"]["runningCount"]
        return {"TargetHealthDescriptions": [{"Target": {"Id": f"10.0.0.{i}"}, "TargetHealth": {"State": "healthy"}} for i in range(n)]}

    def describe_listeners(self, aws_retry: bool, ListenerArns: list) -> dict:
        groups = [{"TargetGroupArn": TGS[c], "Weight": w} for c, w in self.weights.items()]
        return {
            "Listeners": [{"ListenerArn": LISTENER, "DefaultActions": [{"Type": "forward", "ForwardConfig": {"TargetGroups": groups}}]}]
        }

    def modify_listener(self, aws_retry: bool, ListenerArn: str, DefaultActions: list) -> dict:
        self.calls.append(("modify_listener",))
        self.weights = listener_actions.read_percent_weights(DefaultActions, TGS)
        return {"Listeners": [{}]}

    # CloudWatch
    def describe_alarms(self, aws_retry: bool, AlarmNames: list, AlarmTypes: list) -> dict:
        return {"MetricAlarms": [{"AlarmName": n, "StateValue": self.alarms[n]} for n in AlarmNames if n in self.alarms]}


class FakeTriton:
    metrics_by_url: ClassVar[dict[str, list[dict]]] = {}

    def __init__(self, url: str, timeout_s: float) -> None:
        self.url = url

    def metrics(self, url: str) -> dict:
        samples = FakeTriton.metrics_by_url[url]
        return samples.pop(0) if len(samples) > 1 else samples[0]


def params(**kw: Any) -> dict[str, Any]:
    base = {
        "state": "present",
        "cluster": "inference",
        "name": "triton",
        "task_definition": "triton:2",
        "desired_count": 2,
        "target_groups": dict(TGS),
        "listener_arn": LISTENER,
        "listener_rule_arn": None,
        "test_listener_arn": None,
        "test_route_url": None,
        "test_route_urls": None,
        "traffic_steps": [10, 50, 100],
        "bake_time_s": 300,
        "watch_interval_s": 5,
        "alarm_names": ["5xx"],
        "gates": {"expected_models": [], "smoke": None, "timeout_s": 60, "interval_s": 2, "request_timeout_s": 5},
        "drain": {"timeout_s": 300, "quiet_period_s": 10, "metrics_urls": None, "metrics_port": 8002, "wait_deregistration": False},
        "old_color": "scale_down",
        "termination_wait_s": 0,
        "timeouts": {"standby_up_s": 900, "poll_interval_s": 5},
        "stop_after": None,
    }
    base.update(kw)
    return base


def runner(aws: FakeAws, clock: FakeClock | None = None, check_mode: bool = False, **kw: Any) -> Runner:
    return Runner(params(**kw), Clients(aws, aws, aws, aws, aws), check_mode=check_mode, clock=clock or FakeClock(), triton=FakeTriton)


def test_full_cutover_counts_only_the_told_waits():
    aws, clock = FakeAws(), FakeClock()
    result = runner(aws, clock).run()
    assert result["failed_reason"] == "" and result["weights"] == {"blue": 0, "green": 100}
    assert aws.services["triton-green"]["taskDefinition"] == TD2 and aws.services["triton-blue"]["desiredCount"] == 0
    assert result["told_waits_s"] == pytest.approx(3 * 300 + 10)  # three bakes and the drain's quiet period
    assert [c[0] for c in aws.calls] == ["update_service", "modify_listener", "modify_listener", "modify_listener", "update_service"]


def test_alarm_during_bake_rolls_back_in_one_listener_call():
    aws, clock = FakeAws(), FakeClock()
    clock.hooks.append((clock.now + 100, lambda: aws.alarms.update({"5xx": "ALARM"})))
    result = runner(aws, clock).run()
    assert "alarm 5xx is ALARM" in result["failed_reason"]
    assert aws.weights == {"blue": 100, "green": 0}
    # modify_listener for the 10% step, then exactly one to restore; then the standby is scaled down
    assert [c[0] for c in aws.calls] == ["update_service", "modify_listener", "modify_listener", "update_service"]
    assert aws.calls[-1] == ("update_service", "triton-green", 0, None)
    assert result["rollback"]["to_color"] == "blue" and result["rollback"]["seconds"] == 0
    assert clock.told_waits_s == pytest.approx(100)  # detected at the first check after the alarm, not after 300 s


def test_standby_that_never_serves_times_out_and_rolls_back():
    aws, clock = FakeAws(), FakeClock()
    original = aws.update_service

    def no_tasks(**kw):  # ECS accepts the update but never starts a task
        out = original(**kw)
        aws.services[kw["service"]]["runningCount"] = 0
        return out

    aws.update_service = no_tasks
    result = runner(aws, clock, timeouts={"standby_up_s": 30, "poll_interval_s": 5}).run()
    assert "standby: green not serving 2 tasks after 30 s" in result["failed_reason"]
    assert aws.weights == {"blue": 100, "green": 0} and aws.services["triton-green"]["desiredCount"] == 0


def test_check_mode_writes_nothing_and_lists_the_writes():
    aws = FakeAws()
    result = runner(aws, check_mode=True).run()
    assert aws.calls == [] and result["planned"] and result["changed"]
    assert result["actions"][0] == f"update service triton-green: task definition {TD2}, 2 tasks"


def test_capacity_without_gpus_or_managed_scaling_fails_before_writing():
    aws = FakeAws()
    aws.managed_scaling = False
    with pytest.raises(PlanError, match=r"2 task\(s\) of 1 GPU"):
        runner(aws).run()
    assert aws.calls == []
    aws.gpus_free = 2
    assert runner(aws).run()["failed_reason"] == ""


def test_check_mode_fails_on_capacity_as_the_real_run_does():
    """The dry run predicts the real run: a standby that cannot be placed fails both, with the same message."""
    aws = FakeAws()
    aws.managed_scaling = False
    with pytest.raises(PlanError) as real:
        runner(aws).run()
    with pytest.raises(PlanError) as check:
        runner(aws, check_mode=True).run()
    assert check.value.errors == real.value.errors and "cannot place the standby colour" in str(check.value)
    assert aws.calls == []


def test_missing_task_definition_and_alarm_fail_before_writing():
    aws = FakeAws()
    with pytest.raises(PlanError) as err:
        runner(aws, task_definition="triton:9", alarm_names=["nope"]).run()
    assert any("triton:9 does not exist" in e for e in err.value.errors)
    assert any("alarm nope does not exist" in e for e in err.value.errors)
    assert aws.calls == []


def test_drain_waits_until_the_old_colour_is_quiet():
    aws, clock = FakeAws(), FakeClock()
    busy = {"nv_inference_pending_request_count": 1.0, "nv_inference_request_success": 1.0}
    idle = {"nv_inference_pending_request_count": 0.0, "nv_inference_request_success": 2.0}
    FakeTriton.metrics_by_url = {"http://blue:8002/metrics": [busy] * 8 + [idle]}
    drain = {"timeout_s": 60, "quiet_period_s": 3, "metrics_urls": {"blue": ["http://blue:8002/metrics"]}, "wait_deregistration": False}
    result = runner(aws, clock, bake_time_s=0, drain=drain).run()
    entry = next(e for e in result["timeline"] if e["phase"] == "drain")
    assert entry["outcome"] == "ok"
    # queued work in the samples up to 3.5 s, a request finishing at 4.0 s, then 3 s with no activity
    assert entry["duration_s"] == pytest.approx(4.0 + 3)


def test_drain_gives_up_at_its_timeout_and_scales_down_anyway():
    aws, clock = FakeAws(), FakeClock()
    counter = iter(range(10_000))
    FakeTriton.metrics_by_url = {}

    class Busy(FakeTriton):
        def metrics(self, url: str) -> dict:
            return {"nv_inference_pending_request_count": 0.0, "nv_inference_request_success": float(next(counter))}

    drain = {"timeout_s": 20, "quiet_period_s": 3, "metrics_urls": {"blue": ["http://blue:8002/metrics"]}, "wait_deregistration": False}
    run = Runner(params(bake_time_s=0, drain=drain), Clients(aws, aws, aws, aws, aws), clock=clock, triton=Busy)
    result = run.run()
    entry = next(e for e in result["timeline"] if e["phase"] == "drain")
    assert entry["outcome"] == "timed_out" and entry["duration_s"] == pytest.approx(20, abs=0.6)
    assert aws.services["triton-blue"]["desiredCount"] == 0


def test_termination_wait_keeps_the_old_colour_and_an_alarm_rolls_back_to_it():
    aws, clock = FakeAws(), FakeClock()
    clock.hooks.append((clock.now + 200, lambda: aws.alarms.update({"5xx": "ALARM"})))
    result = runner(aws, clock, bake_time_s=0, drain={**params()["drain"], "quiet_period_s": 0}, termination_wait_s=600).run()
    assert "termination wait" in result["failed_reason"]
    assert aws.weights == {"blue": 100, "green": 0}
    assert aws.services["triton-blue"]["desiredCount"] == 2 and aws.services["triton-green"]["desiredCount"] == 0


def test_rerun_after_the_cutover_is_a_noop_with_read_calls_only():
    aws = FakeAws()
    runner(aws, bake_time_s=0).run()
    aws.calls.clear()
    result = runner(aws, bake_time_s=0).run()
    assert result["decision"] == "noop" and not result["changed"] and aws.calls == []


# ---------------------------------------------------------------- the drain's endpoints found through ECS

BUSY = {"nv_inference_pending_request_count": 1.0, "nv_inference_request_success": 1.0}
IDLE = {"nv_inference_pending_request_count": 0.0, "nv_inference_request_success": 2.0}


def awsvpc_task(task_id: str, address: str, service: str = "triton-blue", last: str = "RUNNING", desired: str = "RUNNING") -> dict:
    """A task as DescribeTasks answers it for an awsvpc service: its network interface's address in its attachment."""
    eni = {"name": "privateIPv4Address", "value": address}
    return {
        "taskArn": f"arn:aws:ecs:us-east-1:123456789012:task/inference/{task_id}",
        "group": f"service:{service}",
        "lastStatus": last,
        "desiredStatus": desired,
        "attachments": [{"type": "ElasticNetworkInterface", "status": "ATTACHED", "details": [eni]}],
    }


class SilentTriton(FakeTriton):
    """FakeTriton, where a URL mapped to None does not answer (a controller with no reach into the VPC)."""

    sampled: ClassVar[list[str]] = []

    def metrics(self, url: str) -> dict:
        SilentTriton.sampled.append(url)
        if FakeTriton.metrics_by_url.get(url) is None:
            raise TritonError(f"cannot reach Triton at {url}: timed out")
        return super().metrics(url)


def drain_run(aws: FakeAws, clock: FakeClock, check_mode: bool = False, **drain: Any) -> dict:
    SilentTriton.sampled = []
    options = {"timeout_s": 60, "quiet_period_s": 3, "metrics_urls": None, "metrics_port": 8002, "wait_deregistration": False, **drain}
    run = Runner(
        params(bake_time_s=0, drain=options), Clients(aws, aws, aws, aws, aws), check_mode=check_mode, clock=clock, triton=SilentTriton
    )
    return run.run()


def drain_entry(result: dict) -> dict:
    return next(e for e in result["timeline"] if e["phase"] == "drain")


def blue_fleet(aws: FakeAws) -> list[str]:
    """Two RUNNING blue tasks, a blue task being stopped, a stopped one and a green task: the drain watches the first two."""
    aws.tasks = [
        awsvpc_task("b1", "10.0.1.11"),
        awsvpc_task("b2", "10.0.2.12"),
        awsvpc_task("b3", "10.0.1.13", desired="STOPPED"),
        awsvpc_task("b4", "10.0.2.14", last="STOPPED", desired="STOPPED"),
        awsvpc_task("g1", "10.0.1.21", service="triton-green"),
    ]
    return ["http://10.0.1.11:8002/metrics", "http://10.0.2.12:8002/metrics"]


def test_drain_watches_the_old_colours_running_tasks_found_through_ecs():
    aws, clock = FakeAws(), FakeClock()
    urls = blue_fleet(aws)
    FakeTriton.metrics_by_url = {urls[0]: [BUSY] * 8 + [IDLE], urls[1]: [IDLE]}
    result = drain_run(aws, clock)
    entry = drain_entry(result)
    assert entry["outcome"] == "ok" and entry["detail"] == "blue quiet for 3 s on 2 endpoint(s) found through ECS"
    assert entry["duration_s"] == pytest.approx(4.0 + 3)  # as with metrics_urls: busy up to 3.5 s, then 3 s quiet
    assert result["drain_watch"] == {"color": "blue", "source": "ecs_tasks", "urls": urls, "not_watched": []}
    assert set(SilentTriton.sampled) == set(urls)


def test_drain_with_no_reach_to_any_task_waits_the_quiet_period_not_its_timeout():
    aws, clock = FakeAws(), FakeClock()
    urls = blue_fleet(aws)
    FakeTriton.metrics_by_url = {}
    result = drain_run(aws, clock, timeout_s=600, quiet_period_s=10)
    entry = drain_entry(result)
    assert entry["outcome"] == "ok"
    assert entry["detail"] == "no reach to 2 task endpoints of blue from the controller: waited the quiet period of 10 s"
    assert entry["duration_s"] == pytest.approx(10) and result["told_waits_s"] == pytest.approx(10)
    assert result["drain_watch"]["not_watched"] == [f"{u} did not answer from the controller" for u in urls]
    assert aws.services["triton-blue"]["desiredCount"] == 0


def test_drain_watches_the_task_endpoints_that_answer():
    aws, clock = FakeAws(), FakeClock()
    urls = blue_fleet(aws)
    FakeTriton.metrics_by_url = {urls[1]: [BUSY] * 4 + [IDLE]}  # urls[0] does not answer
    result = drain_run(aws, clock)
    entry = drain_entry(result)
    assert entry["outcome"] == "ok" and entry["duration_s"] == pytest.approx(2.0 + 3)
    assert (
        entry["detail"]
        == f"blue quiet for 3 s on 1 endpoint(s) found through ECS; not watched: {urls[0]} did not answer from the controller"
    )
    assert result["drain_watch"]["urls"] == [urls[1]]


def test_a_task_endpoint_that_stops_answering_later_is_not_proof_of_quiet():
    aws, clock = FakeAws(), FakeClock()
    urls = blue_fleet(aws)
    FakeTriton.metrics_by_url = {urls[0]: [IDLE], urls[1]: [IDLE]}
    clock.hooks.append((clock.now + 1, lambda: FakeTriton.metrics_by_url.update({urls[1]: None})))
    entry = drain_entry(drain_run(aws, clock, timeout_s=20))
    assert entry["outcome"] == "timed_out" and entry["duration_s"] == pytest.approx(20, abs=0.6)


def test_metrics_urls_for_the_old_colour_win_over_the_tasks_found_through_ecs():
    aws, clock = FakeAws(), FakeClock()
    blue_fleet(aws)
    listed: list[str] = []
    original = aws.list_tasks
    aws.list_tasks = lambda **kw: listed.append(kw["serviceName"]) or original(**kw)
    FakeTriton.metrics_by_url = {"http://blue-0.internal:8002/metrics": [IDLE]}
    result = drain_run(aws, clock, metrics_urls={"blue": ["http://blue-0.internal:8002/metrics"]})
    entry = drain_entry(result)
    assert entry["detail"] == "blue quiet for 3 s on 1 endpoint(s) of drain.metrics_urls"
    assert result["drain_watch"]["source"] == "metrics_urls" and listed == []
    assert SilentTriton.sampled and set(SilentTriton.sampled) == {"http://blue-0.internal:8002/metrics"}


def test_no_running_task_found_waits_the_quiet_period_and_names_the_tasks_left_out():
    aws, clock = FakeAws(), FakeClock()
    aws.tasks = [
        {**awsvpc_task("br", ""), "attachments": [], "containers": [{"networkBindings": [{"containerPort": 8002, "hostPort": 32768}]}]}
    ]
    entry = drain_entry(drain_run(aws, clock, quiet_period_s=5))
    assert entry["outcome"] == "ok" and entry["duration_s"] == pytest.approx(5)
    assert entry["detail"].startswith(
        "no RUNNING task endpoint of blue found through ECS: waited the quiet period of 5 s; not watched: task br uses bridge"
    )


def test_a_quiet_period_of_0_looks_nothing_up():
    aws, clock = FakeAws(), FakeClock()
    blue_fleet(aws)
    aws.list_tasks = None  # a call would fail
    result = drain_run(aws, clock, quiet_period_s=0)
    assert drain_entry(result)["detail"] == "no metrics URL for blue: waited the quiet period of 0 s"
    assert result["drain_watch"] == {"color": "blue", "source": "none", "urls": [], "not_watched": []}


def test_check_mode_says_what_the_drain_would_watch_without_sampling():
    aws, clock = FakeAws(), FakeClock()
    urls = blue_fleet(aws)
    result = drain_run(aws, clock, check_mode=True)
    assert aws.calls == [] and result["planned"]
    assert result["drain_watch"] == {"color": "blue", "source": "ecs_tasks", "urls": urls, "not_watched": []}
    assert SilentTriton.sampled == []
    # nothing to drain (the old colour kept at full size): nothing looked up
    run = Runner(params(old_color="keep"), Clients(aws, aws, aws, aws, aws), check_mode=True, clock=clock, triton=SilentTriton)
    assert run.run()["drain_watch"] == {}


def test_a_task_lookup_the_controller_may_not_make_leaves_the_quiet_period_and_names_the_fix():
    aws, clock = FakeAws(), FakeClock()
    blue_fleet(aws)

    def denied(**kw):
        raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "not authorized"}}, "ListTasks")

    aws.list_tasks = denied
    result = drain_run(aws, clock, quiet_period_s=5)
    entry = drain_entry(result)
    assert entry["outcome"] == "ok" and entry["duration_s"] == pytest.approx(5)
    assert entry["detail"] == (
        "no RUNNING task endpoint of blue found through ECS: waited the quiet period of 5 s; not watched: the tasks of "
        "triton-blue could not be read (AccessDeniedException): grant ecs:ListTasks and ecs:DescribeTasks (docs/iam.md) "
        "or give drain.metrics_urls"
    )
    assert aws.services["triton-blue"]["desiredCount"] == 0
