"""A failed boot hydration marks the instance Unhealthy in its Auto Scaling group (plugins/module_utils/_models/
instance_health.py). Stand-in: a fake Auto Scaling client at the client boundary (the calls and answers botocore
would give); the agent's boot with its hydration failing on a fake S3 that refuses every read."""

from __future__ import annotations

import json
import re

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from ansible_collections.inferops.triton_ecs.plugins.module_utils._models import agent, agent_config, instance_health

INSTANCE = "i-0abc1234567890def"
GROUP = "triton-gpu"


class FakeAutoScaling:
    """DescribeAutoScalingInstances and SetInstanceHealth as botocore returns or raises them."""

    def __init__(self, groups: dict[str, str], refuse: dict[str, Exception] | None = None) -> None:
        self.groups = groups  # instance id -> group name
        self.refuse = refuse or {}
        self.health: dict[str, str] = {}
        self.calls: list[tuple[str, dict]] = []

    def describe_auto_scaling_instances(self, **kwargs):
        self.calls.append(("DescribeAutoScalingInstances", kwargs))
        if "describe" in self.refuse:
            raise self.refuse["describe"]
        return {
            "AutoScalingInstances": [
                {"InstanceId": i, "AutoScalingGroupName": self.groups[i], "HealthStatus": "HEALTHY", "LifecycleState": "InService"}
                for i in kwargs["InstanceIds"]
                if i in self.groups
            ]
        }

    def set_instance_health(self, **kwargs):
        self.calls.append(("SetInstanceHealth", kwargs))
        if "set" in self.refuse:
            raise self.refuse["set"]
        self.health[kwargs["InstanceId"]] = kwargs["HealthStatus"]
        return {}


def denied(operation: str) -> ClientError:
    return ClientError({"Error": {"Code": "AccessDenied", "Message": "not authorized"}}, operation)


def config(**values) -> dict:
    return agent_config.parse_config(json.dumps({"bucket": "b", "application": "triton", "region": "eu-west-1", **values}).encode(), "c")


def test_an_instance_of_a_group_is_marked_unhealthy_without_waiting_for_the_grace_period():
    autoscaling = FakeAutoScaling({INSTANCE: GROUP})
    outcome = instance_health.mark_unhealthy(autoscaling, INSTANCE)
    assert outcome.startswith(f"marked {INSTANCE} Unhealthy in Auto Scaling group {GROUP}, which replaces it")
    assert autoscaling.calls == [
        ("DescribeAutoScalingInstances", {"InstanceIds": [INSTANCE]}),
        ("SetInstanceHealth", {"InstanceId": INSTANCE, "HealthStatus": "Unhealthy", "ShouldRespectGracePeriod": False}),
    ]
    assert autoscaling.health == {INSTANCE: "Unhealthy"}


def test_an_instance_in_no_group_is_left_alone_and_said_so():
    autoscaling = FakeAutoScaling({"i-other": GROUP})
    outcome = instance_health.mark_unhealthy(autoscaling, INSTANCE)
    assert outcome.startswith(f"{INSTANCE} is in no Auto Scaling group: not marked Unhealthy, ECS stays stopped")
    assert [name for name, _kwargs in autoscaling.calls] == ["DescribeAutoScalingInstances"]


@pytest.mark.parametrize(
    ("refuse", "message"),
    [
        (
            {"describe": denied("DescribeAutoScalingInstances")},
            r"could not find the Auto Scaling group .*AccessDenied.*DescribeAutoScalingInstances",
        ),
        ({"describe": EndpointConnectionError(endpoint_url="https://autoscaling.eu-west-1.amazonaws.com/")}, r"Could not connect"),
        (
            {"set": denied("SetInstanceHealth")},
            rf"could not mark {INSTANCE} Unhealthy in Auto Scaling group {GROUP} \(AccessDenied.*SetInstanceHealth",
        ),
    ],
)
def test_a_refused_call_never_raises_and_names_the_permission(refuse, message):
    autoscaling = FakeAutoScaling({INSTANCE: GROUP}, refuse)
    outcome = instance_health.mark_unhealthy(autoscaling, INSTANCE)
    assert "ECS stays stopped" in outcome
    assert re.search(message, outcome), outcome
    assert autoscaling.health == {}


def test_the_switch_turns_the_marking_off_without_a_call():
    autoscaling = FakeAutoScaling({INSTANCE: GROUP})
    outcome = instance_health.after_failed_boot(config(mark_unhealthy_on_failed_boot=False), INSTANCE, autoscaling)
    assert "mark_unhealthy_on_failed_boot is false" in outcome
    assert autoscaling.calls == []


def test_the_config_marks_by_default_and_refuses_a_non_boolean_switch():
    defaults = config()
    assert defaults["mark_unhealthy_on_failed_boot"] is True
    assert defaults["autoscaling_endpoint_url"] is None  # AWS's regional endpoint
    with pytest.raises(agent_config.ConfigError, match=r"mark_unhealthy_on_failed_boot='yes'; expected true or false"):
        config(mark_unhealthy_on_failed_boot="yes")


class RefusingS3:
    """Every read refused, as S3 answers a role without s3:GetObject."""

    def head_object(self, **_):
        raise ClientError({"Error": {"Code": "403", "Message": "Forbidden"}}, "HeadObject")

    def put_object(self, **kwargs):
        self.status = json.loads(kwargs["Body"])
        return {}


def boot(monkeypatch, autoscaling: FakeAutoScaling, **values) -> tuple[int, RefusingS3]:
    monkeypatch.setattr(instance_health, "autoscaling_client", lambda _config: autoscaling)
    s3 = RefusingS3()
    model_agent = agent.ModelAgent(
        config(boot_attempts=2, boot_retry_delay_s=0, **values), agent.BotocoreRetryingClient(s3), {"instance_id": INSTANCE}
    )
    return model_agent.boot(), s3


def test_the_last_failed_boot_attempt_marks_the_instance_and_the_status_says_why(monkeypatch):
    autoscaling = FakeAutoScaling({INSTANCE: GROUP})
    code, s3 = boot(monkeypatch, autoscaling)
    assert code == 1  # ECS stays stopped
    assert autoscaling.health == {INSTANCE: "Unhealthy"}
    assert [name for name, _kwargs in autoscaling.calls].count("SetInstanceHealth") == 1  # once, after the last attempt
    assert s3.status["state"] == "failed"
    assert s3.status["last_error"].startswith("boot hydration attempt 2/2 failed")
    assert f"marked {INSTANCE} Unhealthy in Auto Scaling group {GROUP}" in s3.status["last_error"]


def test_a_failed_boot_with_the_switch_off_leaves_the_group_alone(monkeypatch):
    autoscaling = FakeAutoScaling({INSTANCE: GROUP})
    code, s3 = boot(monkeypatch, autoscaling, mark_unhealthy_on_failed_boot=False)
    assert code == 1
    assert autoscaling.calls == []
    assert "mark_unhealthy_on_failed_boot is false" in s3.status["last_error"]
