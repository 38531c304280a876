"""The pure functions of the infrastructure modules: validation, drift and plans, and the ensure() flows with the
AWS client replaced at the client-function boundary (what each would write, and that bad input writes nothing)."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import InputError
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import listener_actions, listeners, services
from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet import capacity_provider as capacity
from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet import cloudwatch_dashboard as dashboard
from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet import ecs_cluster as cluster
from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet import target_group_attributes as tga
from tests.unit.one_page_listings import OnePageListings

TG = {
    "blue": "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/b/1",
    "green": "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/g/2",
}
ASG = "arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:0000:autoScalingGroupName/gpu"


def forward(weights: dict[str, int]) -> list[dict[str, Any]]:
    return [listener_actions.build_forward_action(TG, weights)]


# ---------------------------------------------------------------- ecs_cluster


def test_cluster_plan_creates_updates_or_leaves() -> None:
    params = {"name": "inference", "container_insights": "enabled"}
    assert cluster.plan(None, params) == ["create"]
    assert cluster.plan({"settings": []}, params) == ["update_settings"]  # AWS omits the setting when never set: disabled
    assert cluster.plan({"settings": [{"name": "containerInsights", "value": "enabled"}]}, params) == []
    assert (
        cluster.plan({"settings": [{"name": "containerInsights", "value": "disabled"}]}, {**params, "container_insights": "disabled"}) == []
    )


def test_cluster_validate_names_the_field() -> None:
    errors = cluster.validate({"name": "bad name", "container_insights": "on", "tags": {"team": 1}})
    assert len(errors) == 3
    assert errors[0].startswith("name 'bad name'") and "container_insights 'on'" in errors[1] and "tags.team" in errors[2]


class FakeEcsCluster:
    def __init__(self, existing: dict[str, Any] | None) -> None:
        self.existing = existing
        self.writes: list[str] = []

    def describe_clusters(self, **kwargs: Any) -> dict[str, Any]:
        return {"clusters": [self.existing] if self.existing else []}

    def create_cluster(self, **kwargs: Any) -> dict[str, Any]:
        self.writes.append("create_cluster")
        return {
            "cluster": {"clusterArn": "arn:c", "clusterName": kwargs["clusterName"], "settings": kwargs["settings"], "status": "ACTIVE"}
        }

    def update_cluster(self, **kwargs: Any) -> dict[str, Any]:
        self.writes.append("update_cluster")
        return {"cluster": {**(self.existing or {}), "settings": kwargs["settings"]}}


class FakeLogs(OnePageListings):
    """CloudWatch Logs with at most one log group."""

    def __init__(self, existing: dict[str, Any] | None = None, tags: dict[str, str] | None = None) -> None:
        self.existing, self.tags = existing, dict(tags or {})
        self.writes: list[tuple[str, Any]] = []

    def describe_log_groups(self, **kwargs: Any) -> dict[str, Any]:
        return {"logGroups": [self.existing] if self.existing else []}

    def list_tags_for_resource(self, **kwargs: Any) -> dict[str, Any]:
        assert not kwargs["resourceArn"].endswith(":*")  # the tagging calls take the ARN without it
        return {"tags": self.tags}

    def create_log_group(self, **kwargs: Any) -> None:
        self.writes.append(("create_log_group", kwargs.get("tags")))

    def put_retention_policy(self, **kwargs: Any) -> None:
        self.writes.append(("put_retention_policy", kwargs["retentionInDays"]))

    def tag_resource(self, **kwargs: Any) -> None:
        self.writes.append(("tag_resource", kwargs["tags"]))


ACTIVE_CLUSTER = {
    "clusterArn": "arn:c",
    "clusterName": "inference",
    "status": "ACTIVE",
    "settings": [{"name": "containerInsights", "value": "enabled"}],
}
LOG_GROUP = {"logGroupName": "/ecs/triton", "arn": "arn:aws:logs:us-east-1:123456789012:log-group:/ecs/triton:*", "retentionInDays": 30}


@pytest.mark.parametrize("check_mode", [True, False])
def test_cluster_ensure_check_mode_writes_nothing(check_mode: bool) -> None:
    ecs, logs = FakeEcsCluster(None), FakeLogs()
    params = {
        "name": "inference",
        "container_insights": "enabled",
        "tags": {"team": "ml"},
        "log_group": {"name": "/ecs/triton", "retention_days": 30},
    }
    result = cluster.ensure(ecs, logs, params, check_mode)
    assert result["changed"] and result["actions"] == ["create", "create_log_group", "set_retention"]
    assert ecs.writes == ([] if check_mode else ["create_cluster"])
    assert logs.writes == ([] if check_mode else [("create_log_group", {"team": "ml"}), ("put_retention_policy", 30)])
    log_group = {"name": "/ecs/triton", "retention_days": 30, "tags": {"team": "ml"}}
    assert result["diff"]["after"] == {"name": "inference", "container_insights": "enabled", "tags": {"team": "ml"}, "log_group": log_group}
    assert result["diff"]["before"] == {"log_group": {}}


def test_cluster_log_group_converges_retention_and_adds_tags_keeping_others() -> None:
    ecs = FakeEcsCluster({**ACTIVE_CLUSTER, "tags": [{"key": "team", "value": "ml"}]})  # the cluster is tagged already
    logs = FakeLogs({**LOG_GROUP, "retentionInDays": 7}, tags={"owner": "ops"})
    params = {
        "name": "inference",
        "container_insights": "enabled",
        "log_group": {"name": "/ecs/triton", "retention_days": 30},
        "tags": {"team": "ml"},
    }
    result = cluster.ensure(ecs, logs, params, False)
    assert "set_retention" in result["actions"] and "tag_log_group" in result["actions"]
    assert logs.writes == [("put_retention_policy", 30), ("tag_resource", {"team": "ml"})]  # owner is kept
    assert result["log_group"]["tags"] == {"owner": "ops", "team": "ml"}


def test_cluster_log_group_in_place_is_no_write() -> None:
    ecs = FakeEcsCluster(ACTIVE_CLUSTER)
    logs = FakeLogs(LOG_GROUP, tags={"team": "ml"})
    params = {"name": "inference", "container_insights": "enabled", "log_group": {"name": "/ecs/triton", "retention_days": 30}}
    result = cluster.ensure(ecs, logs, params, False)
    assert not result["changed"] and result["actions"] == [] and logs.writes == []
    assert result["diff"]["before"] == result["diff"]["after"]


def test_cluster_without_log_group_leaves_log_groups_alone() -> None:
    ecs, logs = FakeEcsCluster(None), FakeLogs()
    result = cluster.ensure(ecs, logs, {"name": "inference", "container_insights": "enabled"}, False)
    assert result["actions"] == ["create"] and "log_group" not in result and logs.writes == []


def test_cluster_ensure_bad_input_writes_nothing() -> None:
    ecs, logs = FakeEcsCluster(None), FakeLogs()
    with pytest.raises(InputError) as failed:
        cluster.ensure(
            ecs,
            logs,
            {"name": "inference", "container_insights": "enabled", "log_group": {"name": "/ecs/triton", "retention_days": 10}},
            False,
        )
    assert "log_group.retention_days 10" in str(failed.value) and "14" in str(failed.value)
    assert ecs.writes == [] and logs.writes == []


# ---------------------------------------------------------------- ecs_capacity_provider


def provider_params(**overrides: Any) -> dict[str, Any]:
    params = {
        "name": "triton-gpu",
        "cluster": "inference",
        "auto_scaling_group_arn": ASG,
        "managed_scaling": {"enabled": True, "target_capacity": 100, "instance_warmup_period_s": 300},
        "managed_termination_protection": True,
        "default_strategy": {"weight": 1, "base": 0},
        "tags": {},
    }
    params.update(overrides)
    return params


def test_capacity_validate() -> None:
    assert capacity.validate(provider_params()) == []
    errors = capacity.validate(
        provider_params(
            name="ecs-gpu",
            auto_scaling_group_arn="gpu",
            managed_scaling={"enabled": False, "target_capacity": 0, "minimum_scaling_step_size": 5, "maximum_scaling_step_size": 2},
        )
    )
    joined = "; ".join(errors)
    for fragment in (
        "reserves names",
        "auto_scaling_group_arn 'gpu'",
        "target_capacity is 0",
        "swap them",
        "managed_termination_protection needs",
    ):
        assert fragment in joined


def test_capacity_drift_compares_only_asked_fields_and_refuses_another_asg() -> None:
    current = {
        "autoScalingGroupProvider": {
            "autoScalingGroupArn": ASG,
            "managedScaling": {"status": "ENABLED", "targetCapacity": 100, "instanceWarmupPeriod": 300, "maximumScalingStepSize": 10000},
            "managedTerminationProtection": "ENABLED",
        }
    }
    assert capacity.provider_drift(current, provider_params()) == []
    assert capacity.provider_drift(current, provider_params(managed_termination_protection=False)) == ["managedTerminationProtection"]
    with pytest.raises(InputError, match="cannot change it"):
        capacity.provider_drift(current, provider_params(auto_scaling_group_arn=ASG.replace("/gpu", "/other")))


def test_capacity_cluster_plan_keeps_other_providers() -> None:
    attached = {
        "capacityProviders": ["FARGATE", "triton-gpu"],
        "defaultCapacityProviderStrategy": [{"capacityProvider": "triton-gpu", "weight": 1, "base": 0}],
    }
    assert capacity.cluster_plan(attached, provider_params()) is None
    providers, strategy = capacity.cluster_plan(
        {"capacityProviders": ["FARGATE"], "defaultCapacityProviderStrategy": []}, provider_params()
    )
    assert providers == ["FARGATE", "triton-gpu"] and strategy == [{"capacityProvider": "triton-gpu", "weight": 1, "base": 0}]
    # Without default_strategy the cluster's own default strategy is kept as it is.
    providers, strategy = capacity.cluster_plan(
        {"capacityProviders": [], "defaultCapacityProviderStrategy": []}, provider_params(default_strategy=None)
    )
    assert providers == ["triton-gpu"] and strategy == []


# ---------------------------------------------------------------- target_group_attributes


def test_target_group_attribute_changes() -> None:
    current = {"slow_start.duration_seconds": "0", "deregistration_delay.timeout_seconds": "300", "stickiness.enabled": "false"}
    assert tga.changes(current, {"slow_start.duration_seconds": 60, "stickiness.enabled": False}) == {"slow_start.duration_seconds": "60"}
    assert tga.changes(current, {"deregistration_delay.timeout_seconds": "300"}) == {}
    with pytest.raises(InputError, match=r"no_such\.key"):
        tga.changes(current, {"no_such.key": 1})


@pytest.mark.parametrize(
    ("attributes", "fragment"),
    [
        ({"slow_start.duration_seconds": 10}, "0 (off) or 30-900"),
        ({"slow_start.duration_seconds": 901}, "0 (off) or 30-900"),
        ({"deregistration_delay.timeout_seconds": 4000}, "between 0 and 3600"),
        ({"deregistration_delay.timeout_seconds": "soon"}, "number of seconds"),
        ({"Bad Key": 1}, "dotted lower-case"),
        ({}, "attributes is empty"),
    ],
)
def test_target_group_attribute_validation(attributes: dict[str, Any], fragment: str) -> None:
    errors = tga.validate({"target_group_arn": TG["blue"], "attributes": attributes})
    assert any(fragment in e for e in errors), errors


def test_target_group_attribute_valid_values_pass() -> None:
    assert (
        tga.validate(
            {"target_group_arn": TG["blue"], "attributes": {"slow_start.duration_seconds": 0, "deregistration_delay.timeout_seconds": 45}}
        )
        == []
    )


# ---------------------------------------------------------------- cloudwatch_dashboard


def test_dashboard_body_compares_as_json() -> None:
    body = {"widgets": [{"type": "text", "properties": {"markdown": "x"}}]}
    assert dashboard.canonical(dashboard.body_of('{"widgets":[{"properties":{"markdown":"x"},"type":"text"}]}')) == dashboard.canonical(
        body
    )
    with pytest.raises(InputError, match="not valid JSON"):
        dashboard.body_of("{widgets")
    assert dashboard.validate({"name": "d", "body": {"widgets": [{"x": 0}]}}) == [
        "body.widgets[0] has no type: give metric, text, log, alarm or explorer"
    ]
    assert dashboard.validate({"name": "d", "state": "absent"}) == []


# ---------------------------------------------------------------- bluegreen_listeners


def listener_params(**overrides: Any) -> dict[str, Any]:
    params = {
        "load_balancer_arn": "arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/app/a/1",
        "target_groups": TG,
        "initial_live_color": "blue",
        "production": {"port": 80, "protocol": "HTTP", "certificate_arn": None, "ssl_policy": None, "rule": None},
        "test": {"port": 8080, "protocol": "HTTP", "certificate_arn": None, "ssl_policy": None},
        "tags": {},
    }
    params.update(overrides)
    return params


def test_listeners_plan_creates_with_initial_weights() -> None:
    steps = listeners.plan({"production_listener": None, "test_listener": None}, listener_params(initial_live_color="green"))
    assert [(step[0], step[1]) for step in steps] == [("create_listener", "production"), ("create_listener", "test")]
    production, test = steps[0][2], steps[1][2]
    assert listener_actions.weights_if_ours(production["DefaultActions"], TG) == {"blue": 0, "green": 100}
    assert listener_actions.weights_if_ours(test["DefaultActions"], TG) == {"blue": 100, "green": 0}  # the standby colour


def test_listeners_production_url_is_the_load_balancer_dns_name_and_port() -> None:
    load_balancer = {"DNSName": "internal-triton-1.elb.example"}
    assert listeners.production_url(load_balancer, {"port": 80, "protocol": "HTTP"}) == "http://internal-triton-1.elb.example:80"
    assert listeners.production_url(load_balancer, {"port": 443, "protocol": "HTTPS"}) == "https://internal-triton-1.elb.example:443"


def test_production_url_of_a_host_header_rule_on_a_shared_listener_is_the_rule_host() -> None:
    """The DNS name reaches the shared listener's default action, not the rule (inventories/example's production)."""
    load_balancer = {"DNSName": "internal-shared-1.elb.example"}
    rule = {"priority": 100, "conditions": [{"Field": "host-header", "Values": ["triton.internal.example.com"]}]}
    production = {"port": 443, "protocol": "HTTPS", "rule": rule}
    assert listeners.production_url(load_balancer, production) == "https://triton.internal.example.com:443"
    by_path = {"priority": 7, "conditions": [{"Field": "path-pattern", "PathPatternConfig": {"Values": ["/triton/*"]}}]}
    assert listeners.production_url(load_balancer, {**production, "rule": by_path}) == "https://internal-shared-1.elb.example:443/triton/"


def test_listeners_plan_leaves_weights_set_by_a_cutover() -> None:
    observed = {
        "production_listener": {"Port": 80, "Protocol": "HTTP", "DefaultActions": forward({"blue": 0, "green": 100})},
        "test_listener": {"Port": 8080, "Protocol": "HTTP", "DefaultActions": [{"Type": "forward", "TargetGroupArn": TG["blue"]}]},
    }
    assert listeners.plan(observed, listener_params()) == []


def test_listeners_plan_refuses_a_listener_forwarding_elsewhere() -> None:
    other = [{"Type": "forward", "TargetGroupArn": "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/other/3"}]
    observed = {"production_listener": {"Port": 80, "Protocol": "HTTP", "DefaultActions": other}, "test_listener": None}
    with pytest.raises(InputError, match=r"give production\.rule"):
        listeners.plan(observed, listener_params())


def test_listeners_rule_conditions_priority_and_collisions() -> None:
    rule = {"priority": 10, "conditions": [{"Field": "path-pattern", "Values": ["/v2/*"]}]}
    params = listener_params(
        production={"port": 443, "protocol": "HTTPS", "certificate_arn": "arn:cert", "ssl_policy": None, "rule": rule}, test=None
    )
    shared = {
        "Port": 443,
        "Protocol": "HTTPS",
        "Certificates": [{"CertificateArn": "arn:cert"}],
        "DefaultActions": [listeners.NOT_FOUND_RESPONSE],
    }
    ours = {
        "RuleArn": "arn:rule",
        "Priority": "10",
        "Conditions": [{"Field": "path-pattern", "PathPatternConfig": {"Values": ["/v2/*"]}, "Values": ["/v2/*"]}],
    }
    ours["Actions"] = forward({"blue": 30, "green": 70})
    assert listeners.plan({"production_listener": shared, "production_rules": [ours]}, params) == []
    moved = dict(rule, priority=20, conditions=[{"Field": "host-header", "Values": ["triton.example.com"]}])
    steps = listeners.plan(
        {"production_listener": shared, "production_rules": [ours]}, dict(params, production=dict(params["production"], rule=moved))
    )
    assert [step[0] for step in steps] == ["modify_rule", "set_rule_priority"]
    taken = {"RuleArn": "arn:someone", "Priority": "10", "Conditions": [], "Actions": [listeners.NOT_FOUND_RESPONSE]}
    with pytest.raises(InputError, match="priority 10 is taken"):
        listeners.plan({"production_listener": shared, "production_rules": [taken]}, params)


def test_listeners_certificate_drift_keeps_actions() -> None:
    spec = {"port": 443, "protocol": "HTTPS", "certificate_arn": "arn:new", "ssl_policy": None}
    drift = listeners.listener_drift({"Protocol": "HTTPS", "Certificates": [{"CertificateArn": "arn:old"}]}, spec)
    assert drift == {"Certificates": [{"CertificateArn": "arn:new"}], "Protocol": "HTTPS"}
    assert "DefaultActions" not in drift


def test_listeners_validate() -> None:
    errors = listeners.validate(
        listener_params(target_groups={"blue": TG["blue"], "green": TG["blue"]}, test={"port": 80, "protocol": "HTTPS"})
    )
    joined = "; ".join(errors)
    assert "same ARN" in joined and "test.port 80 is the production port" in joined and "test.certificate_arn is missing" in joined


# ---------------------------------------------------------------- bluegreen_services


def service_params(**overrides: Any) -> dict[str, Any]:
    params = {
        "cluster": "inference",
        "name": "triton",
        "task_definition": "triton:1",
        "initial_live_color": "blue",
        "desired_count": 2,
        "target_groups": TG,
        "container_name": "triton",
        "container_port": 8000,
        "subnets": ["subnet-1", "subnet-2"],
        "security_groups": ["sg-1"],
        "assign_public_ip": False,
        "health_check_grace_period_s": 600,
        "capacity_provider_strategy": [{"capacity_provider": "triton-gpu", "weight": 1, "base": 0}],
        "placement_constraints": [{"type": "memberOf", "expression": "attribute:ecs.instance-type =~ g5.*"}],
        "placement_strategy": [],
        "settings_update": "report",
        "tags": {},
    }
    params.update(overrides)
    return params


def test_services_create_arguments() -> None:
    blue = services.create_arguments(service_params(), "blue", "arn:td:1")
    green = services.create_arguments(service_params(), "green", "arn:td:1")
    assert (blue["desiredCount"], green["desiredCount"]) == (2, 0)
    assert green["loadBalancers"] == [{"targetGroupArn": TG["green"], "containerName": "triton", "containerPort": 8000}]
    assert blue["capacityProviderStrategy"] == [{"capacityProvider": "triton-gpu", "weight": 1, "base": 0}] and "launchType" not in blue
    assert blue["healthCheckGracePeriodSeconds"] == 600
    assert services.create_arguments(service_params(capacity_provider_strategy=[]), "blue", "x")["launchType"] == "EC2"


GRPC_TG = {
    c: f"arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/triton-grpc-{c}/{i}" for i, c in enumerate(("blue", "green"))
}


def test_services_register_in_the_grpc_target_groups_on_tritons_grpc_port() -> None:
    asked = service_params(grpc={"target_groups": GRPC_TG, "container_port": 8001})
    assert services.validate(asked) == []
    assert services.create_arguments(asked, "green", "arn:td:1")["loadBalancers"] == [
        {"targetGroupArn": TG["green"], "containerName": "triton", "containerPort": 8000},
        {"targetGroupArn": GRPC_TG["green"], "containerName": "triton", "containerPort": 8001},
    ]
    attached = described("blue", loadBalancers=services.load_balancers(asked, "blue")[::-1])  # order does not matter
    assert services.drift(attached, asked, "blue") == {}
    assert services.drift(described("blue"), asked, "blue") == {"loadBalancers": services.load_balancers(asked, "blue")}


def test_services_grpc_errors_name_the_option_and_the_fix() -> None:
    errors = services.validate(service_params(grpc={"target_groups": {"blue": TG["blue"], "green": "x"}, "container_port": 8000}))
    assert "grpc.target_groups.green 'x': give the ARN of the green target group" in errors
    assert any(e.startswith("grpc.target_groups ['" + TG["blue"] + "'] are HTTP target groups of target_groups") for e in errors)
    assert "grpc.container_port is 8000: Triton's gRPC port in the container, e.g. 8001, not the HTTP port" in errors


def described(color: str, **overrides: Any) -> dict[str, Any]:
    service = {
        "serviceName": f"triton-{color}",
        "serviceArn": f"arn:aws:ecs:us-east-1:123456789012:service/inference/triton-{color}",
        "tags": [{"key": "inferops:color", "value": color}],
        "status": "ACTIVE",
        "taskDefinition": "arn:td:7",
        "desiredCount": 5,
        "healthCheckGracePeriodSeconds": 600,
        "networkConfiguration": {
            "awsvpcConfiguration": {"subnets": ["subnet-2", "subnet-1"], "securityGroups": ["sg-1"], "assignPublicIp": "DISABLED"}
        },
        "capacityProviderStrategy": [{"capacityProvider": "triton-gpu", "weight": 1, "base": 0}],
        "placementConstraints": [{"type": "memberOf", "expression": "attribute:ecs.instance-type =~ g5.*"}],
        "placementStrategy": [],
        "loadBalancers": [{"targetGroupArn": TG[color], "containerName": "triton", "containerPort": 8000}],
    }
    service.update(overrides)
    return service


def test_services_drift_never_looks_at_task_definition_or_count() -> None:
    assert services.drift(described("green"), service_params(), "green") == {}
    drift = services.drift(described("blue", healthCheckGracePeriodSeconds=60, placementConstraints=[]), service_params(), "blue")
    assert sorted(drift) == ["healthCheckGracePeriodSeconds", "placementConstraints"]


def test_services_drift_skips_fields_the_api_leaves_out() -> None:
    bare = {k: v for k, v in described("blue").items() if k in ("serviceName", "loadBalancers", "networkConfiguration")}
    assert services.drift(bare, service_params(), "blue") == {}


class FakeEcsServices:
    def __init__(self, existing: dict[str, dict[str, Any]]) -> None:
        self.existing = existing
        self.writes: list[tuple[str, dict[str, Any]]] = []

    def describe_clusters(self, **kwargs: Any) -> dict[str, Any]:
        return {"clusters": [{"clusterName": "inference", "status": "ACTIVE"}]}

    def describe_services(self, **kwargs: Any) -> dict[str, Any]:
        return {"services": [self.existing[n] for n in kwargs["services"] if n in self.existing]}

    def describe_task_definition(self, **kwargs: Any) -> dict[str, Any]:
        container = {"name": "triton", "portMappings": [{"containerPort": 8000}]}
        return {"taskDefinition": {"taskDefinitionArn": "arn:td:1", "networkMode": "awsvpc", "containerDefinitions": [container]}}

    def create_service(self, **kwargs: Any) -> dict[str, Any]:
        self.writes.append(("create_service", kwargs))
        return {
            "service": {
                "serviceName": kwargs["serviceName"],
                "taskDefinition": kwargs["taskDefinition"],
                "desiredCount": kwargs["desiredCount"],
            }
        }

    def update_service(self, **kwargs: Any) -> dict[str, Any]:
        self.writes.append(("update_service", kwargs))
        return {"service": {**self.existing[kwargs["service"]], **kwargs}}


def test_services_ensure_after_a_cutover_writes_nothing() -> None:
    ecs = FakeEcsServices(
        {"triton-blue": described("blue", desiredCount=0), "triton-green": described("green", taskDefinition="arn:td:9", desiredCount=3)}
    )
    result = services.ensure(ecs, service_params(), check_mode=False)
    assert not result["changed"] and ecs.writes == []
    assert result["task_definitions"] == {"blue": "arn:td:7", "green": "arn:td:9"} and result["desired_counts"] == {"blue": 0, "green": 3}


def test_services_ensure_creates_only_the_missing_colour() -> None:
    ecs = FakeEcsServices({"triton-blue": described("blue")})
    result = services.ensure(ecs, service_params(), check_mode=False)
    assert result["actions"] == ["create triton-green"]
    assert [(op, kwargs["serviceName"], kwargs["desiredCount"]) for op, kwargs in ecs.writes] == [("create_service", "triton-green", 0)]


def test_services_missing_without_a_task_definition_are_reported_and_left_to_deploy_yml() -> None:
    """infrastructure.yml on a fresh account: no task definition yet, so nothing is written and the missing services
    are named; with missing=create (the default) the error names the role variable and deploy.yml."""
    ecs = FakeEcsServices({"triton-blue": described("blue")})
    params = {**service_params(), "task_definition": None}
    result = services.ensure(ecs, {**params, "missing": "report"}, check_mode=False)
    assert not result["changed"] and ecs.writes == [] and result["missing"] == ["triton-green"]
    assert result["task_definitions"] == {"blue": "arn:td:7", "green": None}
    with pytest.raises(InputError, match=r"fleet_services_task_definition; deploy\.yml passes the revision it registers"):
        services.ensure(ecs, params, check_mode=False)


def test_services_ensure_reports_redeploying_drift_unless_asked() -> None:
    ecs = FakeEcsServices({"triton-blue": described("blue"), "triton-green": described("green")})
    moved = service_params(subnets=["subnet-3"])
    result = services.ensure(ecs, moved, check_mode=False)
    assert not result["changed"] and len(result["settings_held"]) == 2 and ecs.writes == []
    result = services.ensure(ecs, dict(moved, settings_update="apply"), check_mode=False)
    assert result["changed"] and [write[0] for write in ecs.writes] == ["update_service", "update_service"]
    assert all("taskDefinition" not in write[1] and "desiredCount" not in write[1] for write in ecs.writes)


def test_services_validate_and_task_definition_fit() -> None:
    errors = services.validate(service_params(desired_count=-1, subnets=[], placement_constraints=[{"type": "memberOf"}]))
    joined = "; ".join(errors)
    assert "desired_count is -1" in joined and "subnets is empty" in joined and "memberOf needs a cluster query" in joined
    bridge = {"taskDefinitionArn": "arn:td:1", "networkMode": "bridge", "containerDefinitions": [{"name": "triton", "portMappings": []}]}
    errors = services.validate_task_definition(bridge, service_params())
    assert "network mode bridge" in errors[0] and "container_port 8000 is not mapped" in errors[1]


def test_tags_may_not_take_the_keys_the_modules_own() -> None:
    assert any(e.startswith("tags.inferops:color: ") for e in services.validate(service_params(tags={"inferops:color": "red"})))
    lock_key = {"inferops:cutover-lock:me": "x"}
    assert any(e.startswith("tags.inferops:cutover-lock:me: ") for e in listeners.validate(listener_params(tags=lock_key)))
    assert any(
        e.startswith("tags.aws:owner: ")
        for e in cluster.validate({"name": "inference", "container_insights": "enabled", "tags": {"aws:owner": "x"}})
    )


def test_a_colour_service_carries_its_colour_tag_and_omitted_tags_stay_omitted() -> None:
    assert services.wanted_tags({"team": 1}, "green") == {"team": "1", "inferops:color": "green"}
    assert services.wanted_tags(None, "green") is None
    assert services.create_arguments(service_params(tags=None), "blue", "x")["tags"] == [{"key": "inferops:color", "value": "blue"}]
