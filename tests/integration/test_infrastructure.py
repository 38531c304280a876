"""playbooks/infrastructure.yml and its roles against a moto server: first run creates, re-runs change nothing,
a cutover's weights / task definitions / desired counts survive a re-run, every skip switch skips, bad input
fails before any write. The custom modules' four-step runs are in playbooks/infrastructure_modules.yml."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from tests.harness.ansible import REPO_ROOT, run_playbook
from tests.harness.infrastructure import AMI, APP, CLUSTER, MODEL_HOST_PATH, module_resources, network, packer_manifest
from tests.harness.moto import REGION, MotoServer

PLAYBOOK = REPO_ROOT / "playbooks" / "infrastructure.yml"
PLAYBOOKS = Path(__file__).parent / "playbooks"
# Every task of the roles that writes to AWS, with the switch that skips it.
SKIPPABLE = {
    "ECS cluster with Container Insights, and the log group with its retention": "fleet_cluster_manage",
    # Runs only for a cluster managed elsewhere (the task above converges the log group otherwise).
    "Log group with retention": "fleet_cluster_log_group_manage",
    "Launch template (IMDSv2 required, user data joins the cluster)": "fleet_capacity_manage",
    "Auto Scaling group (desired capacity left to managed scaling)": "fleet_capacity_manage",
    "Capacity provider with managed scaling, attached to the cluster (new instances scale-in protected)": "fleet_capacity_manage",
    "Blue and green services, created when missing": "fleet_services_manage",
    "Cutover-gate alarms (target 5xx, target p99, Triton inference failures, per model) and the GPU-memory alarm (notifies)": (
        "fleet_alarms_manage"
    ),
    "Dashboard of the service": "fleet_alarms_dashboard_manage",
    "Scalable target and policies on the live colour": "fleet_autoscaling_manage",
    "Target groups, health-checked on Triton's readiness, with slow start and the deregistration delay": "fleet_load_balancing_manage",
}


@pytest.fixture(autouse=True)
def aws_managed_policies(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto loads AWS managed policies (the instance role attaches AmazonEC2ContainerServiceforEC2Role) only when asked.
    Autouse, so it is set before the moto_server fixture starts the server."""
    monkeypatch.setenv("MOTO_IAM_LOAD_MANAGED_POLICIES", "true")


def extra_vars(moto: MotoServer, net: dict[str, Any], tmp_path: Path, **overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "aws_region": REGION,
        "aws_endpoint_url": moto.endpoint,
        "fleet_iam_manage": True,
        "fleet_iam_model_bucket": "example-models",
        "fleet_iam_model_prefix": "triton/",
        "fleet_iam_ecr_repository_arns": [f"arn:aws:ecr:{REGION}:123456789012:repository/triton"],
        "fleet_cluster_name": CLUSTER,
        "fleet_cluster_log_retention_days": 14,
        "fleet_capacity_packer_manifest": str(packer_manifest(tmp_path)),
        "fleet_capacity_subnets": net["subnets"],
        "fleet_capacity_security_groups": [net["security_group"]],
        "fleet_load_balancing_vpc_id": net["vpc"],
        "fleet_load_balancing_alb_create": True,
        "fleet_load_balancing_alb_name": "triton",
        "fleet_load_balancing_alb_subnets": net["subnets"],
        "fleet_load_balancing_alb_security_groups": [net["security_group"]],
        "fleet_load_balancing_production": {"port": 80, "protocol": "HTTP"},
        "fleet_load_balancing_test": {"port": 8080, "protocol": "HTTP"},
        "fleet_load_balancing_deregistration_delay_s": 45,
        "fleet_load_balancing_slow_start_s": 90,
        "fleet_services_app_name": APP,
        "fleet_services_task_definition": net["task_definitions"][0],
        "fleet_services_desired_count": 2,
        "fleet_services_subnets": net["subnets"],
        "fleet_services_security_groups": [net["security_group"]],
        "fleet_alarms_app_name": APP,
    }
    values.update(overrides)
    return values


def run(moto: MotoServer, variables: dict[str, Any], **kwargs: Any):
    return run_playbook(PLAYBOOK, extra_vars=variables, env=moto.env(), **kwargs)


def listener_weights(moto: MotoServer, listener_arn: str, tgs: dict[str, str]) -> dict[str, int]:
    action = moto.client("elbv2").describe_listeners(ListenerArns=[listener_arn])["Listeners"][0]["DefaultActions"][0]
    by_arn = {arn: color for color, arn in tgs.items()}
    weights = dict.fromkeys(tgs, 0)
    weights.update({by_arn[e["TargetGroupArn"]]: e["Weight"] for e in action["ForwardConfig"]["TargetGroups"]})
    return weights


def task_results(result, task: str) -> list[dict[str, Any]]:
    """Per-host results of a role task, named without its role prefix ("<role> : <task>" in the json callback)."""
    return [h for t in result.tasks if t["name"] == task or t["name"].endswith(f" : {task}") for h in t["hosts"].values()]


def task_result(result, task: str) -> dict[str, Any]:
    found = task_results(result, task)
    assert len(found) == 1, f"{task}: {len(found)} results"
    return found[0]


def was_skipped(result, task: str) -> bool:
    """Every host (and every loop item) of the task was skipped; a task that did not appear at all is not."""
    hosts = task_results(result, task)
    return bool(hosts) and all(h.get("skipped") or (h.get("results") and all(i.get("skipped") for i in h["results"])) for h in hosts)


def published(result) -> dict[str, Any]:
    return task_result(result, "What the cutover needs")["msg"]


def move_autoscaling(moto: MotoServer, old: str, new: str) -> None:
    """What the bluegreen module does at finish: the scalable target and its policies from `old` to `new`."""
    aas = moto.client("application-autoscaling")
    ids = {c: f"service/{CLUSTER}/{APP}-{c}" for c in (old, new)}
    scope = {"ServiceNamespace": "ecs", "ScalableDimension": "ecs:service:DesiredCount"}
    target = aas.describe_scalable_targets(ResourceIds=[ids[old]], **scope)["ScalableTargets"][0]
    aas.register_scalable_target(ResourceId=ids[new], MinCapacity=target["MinCapacity"], MaxCapacity=target["MaxCapacity"], **scope)
    for policy in aas.describe_scaling_policies(ResourceId=ids[old], **scope)["ScalingPolicies"]:
        config = json.loads(json.dumps(policy["TargetTrackingScalingPolicyConfiguration"]).replace(f'"{APP}-{old}"', f'"{APP}-{new}"'))
        aas.put_scaling_policy(
            PolicyName=policy["PolicyName"], ResourceId=ids[new], PolicyType=policy["PolicyType"],
            TargetTrackingScalingPolicyConfiguration=config, **scope,
        )  # fmt: skip
    aas.deregister_scalable_target(ResourceId=ids[old], **scope)


def test_first_run_creates_rerun_and_cutover_change_nothing(moto_server: MotoServer, tmp_path: Path) -> None:
    net = network(moto_server)
    variables = extra_vars(moto_server, net, tmp_path)

    first = run(moto_server, variables)
    assert first.rc == 0, first.stdout[-4000:] + first.stderr[-2000:]
    out = published(first)
    tgs = out["target_groups"]

    ecs, elbv2, ec2 = moto_server.client("ecs"), moto_server.client("elbv2"), moto_server.client("ec2")
    cluster = ecs.describe_clusters(clusters=[CLUSTER], include=["SETTINGS"])["clusters"][0]
    assert {"name": "containerInsights", "value": "enabled"} in cluster["settings"]
    assert cluster["capacityProviders"] == ["triton-gpu"]
    assert cluster["defaultCapacityProviderStrategy"][0]["capacityProvider"] == "triton-gpu"
    groups = moto_server.client("logs").describe_log_groups(logGroupNamePrefix="/ecs/triton")["logGroups"]
    # the Triton log group and the metrics sidecar's, both with the retention (the CloudWatch agent would set none)
    assert [(g["logGroupName"], g.get("retentionInDays")) for g in groups] == [("/ecs/triton", 14), ("/ecs/triton/metrics", 14)]

    provider = ecs.describe_capacity_providers(capacityProviders=["triton-gpu"])["capacityProviders"][0]["autoScalingGroupProvider"]
    assert provider["managedScaling"]["status"] == "ENABLED" and provider["managedTerminationProtection"] == "ENABLED"
    asg = moto_server.client("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=["triton-gpu"])["AutoScalingGroups"][0]
    assert provider["autoScalingGroupArn"] == asg["AutoScalingGroupARN"]
    assert asg["NewInstancesProtectedFromScaleIn"] is True
    version = ec2.describe_launch_template_versions(LaunchTemplateName="triton-gpu", Versions=["$Latest"])["LaunchTemplateVersions"][0]
    data = version["LaunchTemplateData"]
    assert data["ImageId"] == AMI  # the us-east-1 AMI of the manifest's last build
    assert data["MetadataOptions"]["HttpTokens"] == "required"
    user_data = base64.b64decode(data["UserData"]).decode()
    assert "ECS_CLUSTER=inference" in user_data.splitlines()
    # The agent hydrates the model host path the AMI was baked with, read from the manifest (custom_data).
    assert f'"host_path": "{MODEL_HOST_PATH}"' in user_data
    profile = data["IamInstanceProfile"]
    assert profile.get("Name") == "triton-ecs-instance" or profile.get("Arn", "").endswith(":instance-profile/triton-ecs-instance")

    for color in ("blue", "green"):
        attributes = {a["Key"]: a["Value"] for a in elbv2.describe_target_group_attributes(TargetGroupArn=tgs[color])["Attributes"]}
        assert attributes["deregistration_delay.timeout_seconds"] == "45"
        assert attributes["slow_start.duration_seconds"] == "90"
        group = elbv2.describe_target_groups(TargetGroupArns=[tgs[color]])["TargetGroups"][0]
        assert (group["HealthCheckPath"], group["TargetType"], group["Port"]) == ("/v2/health/ready", "ip", 8000)
    assert listener_weights(moto_server, out["production_listener_arn"], tgs) == {"blue": 100, "green": 0}
    assert listener_weights(moto_server, out["test_listener_arn"], tgs) == {"blue": 0, "green": 100}

    services = {s["serviceName"]: s for s in ecs.describe_services(cluster=CLUSTER, services=[f"{APP}-blue", f"{APP}-green"])["services"]}
    assert services[f"{APP}-blue"]["desiredCount"] == 2 and services[f"{APP}-green"]["desiredCount"] == 0
    assert services[f"{APP}-green"]["loadBalancers"][0]["targetGroupArn"] == tgs["green"]
    assert services[f"{APP}-blue"]["networkConfiguration"]["awsvpcConfiguration"]["assignPublicIp"] == "DISABLED"

    alarms = moto_server.client("cloudwatch").describe_alarms(AlarmNamePrefix=APP)["MetricAlarms"]
    assert sorted(a["AlarmName"] for a in alarms) == sorted([*out["alarm_names"], f"{APP}-gpu-memory"])  # not a gate
    assert len(out["alarm_names"]) == 5
    p99 = next(a for a in alarms if a["AlarmName"] == f"{APP}-green-p99-latency")
    assert p99["ExtendedStatistic"] == "p99"
    assert {d["Name"]: d["Value"] for d in p99["Dimensions"]}["TargetGroup"] == tgs["green"].split(":")[-1]
    body = json.loads(moto_server.client("cloudwatch").get_dashboard(DashboardName=APP)["DashboardBody"])
    assert any(w["type"] == "alarm" for w in body["widgets"])
    iam = moto_server.client("iam")
    task_policy = iam.get_role_policy(RoleName="triton-task", PolicyName="triton-model-read")["PolicyDocument"]
    by_sid = {statement["Sid"]: statement for statement in task_policy["Statement"]}
    assert by_sid["ReadModels"]["Action"] == "s3:GetObject"
    assert by_sid["ReadModels"]["Resource"] == "arn:aws:s3:::example-models/triton/*"  # the model prefix only, read-only
    assert by_sid["ListModelPrefix"]["Condition"]["StringLike"]["s3:prefix"] == ["triton/", "triton/*"]
    assert (
        iam.get_instance_profile(InstanceProfileName="triton-ecs-instance")["InstanceProfile"]["Roles"][0]["RoleName"]
        == "triton-ecs-instance"
    )

    second = run(moto_server, variables)
    assert second.rc == 0, second.stderr[-2000:]
    assert second.changed_tasks == []

    # A cutover by the bluegreen module: green live at 100 with the next revision and 3 tasks, blue scaled to 0.
    elbv2.modify_listener(
        ListenerArn=out["production_listener_arn"],
        DefaultActions=[
            {
                "Type": "forward",
                "ForwardConfig": {
                    "TargetGroups": [{"TargetGroupArn": tgs["blue"], "Weight": 0}, {"TargetGroupArn": tgs["green"], "Weight": 100}]
                },
            }
        ],
    )
    elbv2.modify_listener(
        ListenerArn=out["test_listener_arn"],
        DefaultActions=[{"Type": "forward", "ForwardConfig": {"TargetGroups": [{"TargetGroupArn": tgs["blue"], "Weight": 100}]}}],
    )
    ecs.update_service(cluster=CLUSTER, service=f"{APP}-green", taskDefinition=net["task_definitions"][1], desiredCount=3)
    ecs.update_service(cluster=CLUSTER, service=f"{APP}-blue", desiredCount=0)
    moto_server.client("autoscaling").set_desired_capacity(AutoScalingGroupName="triton-gpu", DesiredCapacity=2)  # managed scaling's choice
    move_autoscaling(moto_server, "blue", "green")  # as bluegreen (autoscaling: true) does at finish

    third = run(moto_server, variables)
    assert third.rc == 0, third.stderr[-2000:]
    assert third.changed_tasks == []
    assert listener_weights(moto_server, out["production_listener_arn"], tgs) == {"blue": 0, "green": 100}
    assert listener_weights(moto_server, out["test_listener_arn"], tgs) == {"blue": 100, "green": 0}
    services = {s["serviceName"]: s for s in ecs.describe_services(cluster=CLUSTER, services=[f"{APP}-blue", f"{APP}-green"])["services"]}
    assert (services[f"{APP}-green"]["taskDefinition"], services[f"{APP}-green"]["desiredCount"]) == (net["task_definitions"][1], 3)
    assert services[f"{APP}-blue"]["desiredCount"] == 0
    asg = moto_server.client("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=["triton-gpu"])["AutoScalingGroups"][0]
    assert asg["DesiredCapacity"] == 2
    assert task_result(third, "Production and test listeners, created with the initial weights")["live_color"] == "green"

    # Everything managed elsewhere: nothing is written, every write task is skipped, the same ARNs are published.
    switches = {switch: False for switch in set(SKIPPABLE.values()) | {"fleet_iam_manage", "fleet_load_balancing_listeners_manage"}}
    fourth = run(moto_server, {**variables, **switches, "fleet_load_balancing_alb_create": False})
    assert fourth.rc == 0, fourth.stderr[-2000:]
    assert fourth.changed_tasks == []
    for task in SKIPPABLE:
        assert was_skipped(fourth, task), task
    again = published(fourth)
    # The roles, looked up by name (iam_roles_info), publish the ARNs the managed run created.
    roles = ("fleet_iam_execution_role_arn", "fleet_iam_task_role_arn")
    managed, looked_up = (task_result(r, "Publish the role ARNs")["ansible_facts"] for r in (first, fourth))
    assert [looked_up[k] for k in roles] == [managed[k] for k in roles]
    assert all(looked_up[k].startswith("arn:aws:iam::") for k in roles), looked_up
    assert fourth.deprecations == []
    assert {k: again[k] for k in ("target_groups", "production_listener_arn", "test_listener_arn")} == {
        k: out[k] for k in ("target_groups", "production_listener_arn", "test_listener_arn")
    }


def test_skip_switches_leave_their_parts_alone(moto_server: MotoServer, tmp_path: Path) -> None:
    """Every write switch off on a fresh account (the load balancing ones are exercised off in the test above), but
    the log group's: the cluster managed elsewhere, its log group here."""
    net = network(moto_server)
    ecs = moto_server.client("ecs")
    # What another tool (e.g. Terraform) manages instead: a cluster whose Container Insights is off.
    ecs.create_cluster(clusterName=CLUSTER, settings=[{"name": "containerInsights", "value": "disabled"}])
    switches = {
        s: False for s in set(SKIPPABLE.values()) if not s.startswith("fleet_load_balancing") and s != "fleet_cluster_log_group_manage"
    }
    result = run(moto_server, extra_vars(moto_server, net, tmp_path, fleet_iam_manage=False, **switches))
    assert result.rc == 0, result.stdout[-3000:] + result.stderr[-2000:]
    for task, switch in SKIPPABLE.items():
        assert was_skipped(result, task) == (switch in switches), task
    cloudwatch, iam = moto_server.client("cloudwatch"), moto_server.client("iam")
    left_alone = {
        "fleet_cluster_manage": ecs.describe_clusters(clusters=[CLUSTER], include=["SETTINGS"])["clusters"][0]["settings"][0]["value"]
        == "disabled",
        "fleet_capacity_manage": ecs.describe_capacity_providers(capacityProviders=["triton-gpu"])["capacityProviders"] == []
        and moto_server.client("autoscaling").describe_auto_scaling_groups()["AutoScalingGroups"] == []
        and moto_server.client("ec2").describe_launch_templates()["LaunchTemplates"] == [],
        "fleet_services_manage": ecs.list_services(cluster=CLUSTER)["serviceArns"] == [],
        "fleet_alarms_manage": cloudwatch.describe_alarms()["MetricAlarms"] == [],
        "fleet_alarms_dashboard_manage": cloudwatch.list_dashboards()["DashboardEntries"] == [],
        "fleet_iam_manage": [r["RoleName"] for r in iam.list_roles()["Roles"] if r["RoleName"].startswith("triton")] == [],
        "fleet_autoscaling_manage": moto_server.client("application-autoscaling").describe_scalable_targets(ServiceNamespace="ecs")[
            "ScalableTargets"
        ]
        == [],
    }
    assert sorted(left_alone) == sorted([*switches, "fleet_iam_manage"])
    assert [s for s, ok in left_alone.items() if not ok] == []
    log_groups = moto_server.client("logs").describe_log_groups(logGroupNamePrefix="/ecs/triton")["logGroups"]
    assert [(g["logGroupName"], g["retentionInDays"]) for g in log_groups] == [("/ecs/triton", 14), ("/ecs/triton/metrics", 14)]
    # The load balancing still ran, and the ARNs are published for deploy.yml either way.
    assert published(result)["alarm_names"] == [
        f"{APP}-blue-target-5xx",
        f"{APP}-blue-p99-latency",
        f"{APP}-green-target-5xx",
        f"{APP}-green-p99-latency",
        f"{APP}-inference-failures",
    ]


def test_a_new_ami_waits_for_its_gated_rollout(moto_server: MotoServer, tmp_path: Path) -> None:
    """A fleet whose launch template runs the Packer manifest's AMI is run again naming another AMI: the template keeps
    the live one (playbooks/roll_ami.yml rolls the new one out) unless fleet_capacity_ami_direct_update is true."""
    net = network(moto_server)
    off = {s: False for s in ("fleet_services_manage", "fleet_alarms_manage", "fleet_alarms_dashboard_manage", "fleet_autoscaling_manage")}
    variables = extra_vars(moto_server, net, tmp_path, **off)
    ec2 = moto_server.client("ec2")

    def default_image() -> str:
        versions = ec2.describe_launch_template_versions(LaunchTemplateName="triton-gpu", Versions=["$Default"])
        return versions["LaunchTemplateVersions"][0]["LaunchTemplateData"]["ImageId"]

    first = run(moto_server, variables)
    assert first.rc == 0, first.stdout[-3000:] + first.stderr[-2000:]
    assert default_image() == AMI

    # An AMI named by id (not from the manifest) comes with its model host path, as the role asks.
    newer = {"fleet_capacity_ami_id": "ami-0fedcba9876543210", "fleet_capacity_model_host_path": MODEL_HOST_PATH}
    kept = run(moto_server, {**variables, **newer})
    assert kept.rc == 0, kept.stdout[-3000:] + kept.stderr[-2000:]
    assert default_image() == AMI
    assert not task_result(kept, "Launch template (IMDSv2 required, user data joins the cluster)").get("changed")
    assert newer["fleet_capacity_ami_id"] in task_result(kept, "A new AMI waits for its gated rollout")["msg"]

    direct = run(moto_server, {**variables, **newer, "fleet_capacity_ami_direct_update": True})
    assert direct.rc == 0, direct.stdout[-3000:] + direct.stderr[-2000:]
    assert default_image() == newer["fleet_capacity_ami_id"]
    assert was_skipped(direct, "A new AMI waits for its gated rollout")


def test_modules_four_steps_and_bad_input(moto_server: MotoServer) -> None:
    variables = module_resources(moto_server, "mod")
    elbv2, autoscaling = moto_server.client("elbv2"), moto_server.client("autoscaling")
    alb, tgs = variables["alb_arn"], variables["tgs"]
    not_found = {"Type": "fixed-response", "FixedResponseConfig": {"StatusCode": "404"}}
    shared = elbv2.create_listener(LoadBalancerArn=alb, Protocol="HTTP", Port=80, DefaultActions=[not_found])["Listeners"][0]["ListenerArn"]
    variables["shared_listener_arn"] = shared
    result = run_playbook(PLAYBOOKS / "infrastructure_modules.yml", extra_vars=variables, env=moto_server.env())
    assert result.rc == 0, f"{result.failed_tasks}\n{result.stdout[-4000:]}"

    # The four steps left AWS as the last run says.
    log_groups = moto_server.client("logs").describe_log_groups(logGroupNamePrefix="/ecs/modules")["logGroups"]
    assert [(g["logGroupName"], g["retentionInDays"]) for g in log_groups] == [("/ecs/modules", 7)]  # ecs_cluster's log_group
    assert (
        autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["mod"])["AutoScalingGroups"][0]["NewInstancesProtectedFromScaleIn"]
        is True
    )
    rules = [r for r in elbv2.describe_rules(ListenerArn=shared)["Rules"] if not r["IsDefault"]]
    assert [(r["Priority"], r["Actions"][0]["ForwardConfig"]["TargetGroups"][0]["Weight"]) for r in rules] == [("10", 100)]
    assert elbv2.describe_listeners(ListenerArns=[shared])["Listeners"][0]["DefaultActions"][0]["Type"] == "fixed-response"

    # Bad input wrote nothing.
    ecs, cloudwatch = moto_server.client("ecs"), moto_server.client("cloudwatch")
    assert [c.split("/")[-1] for c in ecs.list_clusters()["clusterArns"]] == ["modules"]
    assert ecs.describe_capacity_providers(capacityProviders=["gpu-bad", "ecs-gpu"])["capacityProviders"] == []
    attributes = {a["Key"]: a["Value"] for a in elbv2.describe_target_group_attributes(TargetGroupArn=tgs["green"])["Attributes"]}
    assert attributes["slow_start.duration_seconds"] == "0"
    assert [d["DashboardName"] for d in cloudwatch.list_dashboards()["DashboardEntries"]] == ["modules"]
    assert sorted(listener["Port"] for listener in elbv2.describe_listeners(LoadBalancerArn=alb)["Listeners"]) == [80, 8080]
    assert sorted(arn.split("/")[-1] for arn in ecs.list_services(cluster="modules")["serviceArns"]) == ["modapp-blue", "modapp-green"]


def test_capacity_without_an_ami_for_the_region_fails_before_writing(moto_server: MotoServer, tmp_path: Path) -> None:
    net = network(moto_server)
    off = {
        s: False
        for s in ("fleet_cluster_log_group_manage", "fleet_services_manage", "fleet_alarms_manage", "fleet_alarms_dashboard_manage")
    }
    # The manifest's last build has AMIs for us-west-2 and us-east-1 only.
    result = run(moto_server, extra_vars(moto_server, net, tmp_path, fleet_iam_manage=False, fleet_capacity_region="ap-south-1", **off))
    assert result.rc != 0
    check = task_result(result, "Check the AMI")
    assert check.get("failed") and "ap-south-1" in check["msg"] and "fleet_capacity_ami_id" in check["msg"]
    ec2 = moto_server.client("ec2")
    assert ec2.describe_launch_templates()["LaunchTemplates"] == []
    assert moto_server.client("autoscaling").describe_auto_scaling_groups()["AutoScalingGroups"] == []
