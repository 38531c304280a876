"""Verify: the scenario's moto server holds the fleet the playbook promises, in the state a first deploy needs."""

from __future__ import annotations

import base64


def test_the_moto_server_listens(host, aws):
    assert host.socket(f"tcp://127.0.0.1:{aws['port']}").is_listening


def test_cluster_has_container_insights_and_the_gpu_capacity_provider(aws_client):
    cluster = aws_client("ecs").describe_clusters(clusters=["inference"], include=["SETTINGS"])["clusters"][0]
    assert {"name": "containerInsights", "value": "enabled"} in cluster["settings"]
    assert cluster["capacityProviders"] == ["triton-gpu"]


def test_capacity_provider_scales_the_scale_in_protected_group(aws_client):
    provider = aws_client("ecs").describe_capacity_providers(capacityProviders=["triton-gpu"])["capacityProviders"][0]
    asg_provider = provider["autoScalingGroupProvider"]
    assert asg_provider["managedScaling"]["status"] == "ENABLED"
    assert asg_provider["managedTerminationProtection"] == "ENABLED"
    group = aws_client("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=["triton-gpu"])["AutoScalingGroups"][0]
    assert group["NewInstancesProtectedFromScaleIn"] is True


def test_launch_template_requires_imdsv2_and_joins_the_cluster(aws_client):
    data = aws_client("ec2").describe_launch_template_versions(LaunchTemplateName="triton-gpu", Versions=["$Latest"])[
        "LaunchTemplateVersions"
    ][0]["LaunchTemplateData"]
    assert data["MetadataOptions"]["HttpTokens"] == "required"
    assert data["ImageId"] == "ami-0123456789abcdef0"
    assert "ECS_CLUSTER=inference" in base64.b64decode(data["UserData"]).decode()


def test_production_forwards_to_blue_and_test_to_green(aws_client):
    elbv2 = aws_client("elbv2")
    lb = elbv2.describe_load_balancers(Names=["triton"])["LoadBalancers"][0]
    listeners = {li["Port"]: li for li in elbv2.describe_listeners(LoadBalancerArn=lb["LoadBalancerArn"])["Listeners"]}
    groups = {
        tg["TargetGroupName"]: tg["TargetGroupArn"]
        for tg in elbv2.describe_target_groups(Names=["triton-blue", "triton-green"])["TargetGroups"]
    }
    production = {e["TargetGroupArn"]: e["Weight"] for e in listeners[80]["DefaultActions"][0]["ForwardConfig"]["TargetGroups"]}
    assert production == {groups["triton-blue"]: 100, groups["triton-green"]: 0}
    test = {e["TargetGroupArn"]: e["Weight"] for e in listeners[8080]["DefaultActions"][0]["ForwardConfig"]["TargetGroups"]}
    assert test.get(groups["triton-green"]) == 100 and not test.get(groups["triton-blue"])


def test_services_blue_live_green_standby(aws_client):
    services = aws_client("ecs").describe_services(cluster="inference", services=["triton-blue", "triton-green"])["services"]
    counts = {s["serviceName"]: s["desiredCount"] for s in services}
    assert counts == {"triton-blue": 2, "triton-green": 0}


def test_cutover_gate_alarms_and_dashboard(aws_client):
    cloudwatch = aws_client("cloudwatch")
    names = sorted(a["AlarmName"] for a in cloudwatch.describe_alarms(AlarmNamePrefix="triton-")["MetricAlarms"])
    assert names == sorted(
        [
            "triton-blue-target-5xx",
            "triton-green-target-5xx",
            "triton-blue-p99-latency",
            "triton-green-p99-latency",
            "triton-inference-failures",
            "triton-gpu-memory",
        ]
    )
    assert [d["DashboardName"] for d in cloudwatch.list_dashboards()["DashboardEntries"]] == ["triton"]


def test_live_colour_scales_on_requests_per_task(aws_client):
    """fleet_autoscaling: blue (live, 2 tasks) has the scalable target and the target-tracking policy; green none."""
    autoscaling = aws_client("application-autoscaling")
    ids = ["service/inference/triton-blue", "service/inference/triton-green"]
    targets = autoscaling.describe_scalable_targets(ServiceNamespace="ecs", ResourceIds=ids)["ScalableTargets"]
    assert [(t["ResourceId"], t["MinCapacity"], t["MaxCapacity"]) for t in targets] == [(ids[0], 2, 4)]
    policies = autoscaling.describe_scaling_policies(ServiceNamespace="ecs", ResourceId=ids[0])["ScalingPolicies"]
    [policy] = [p for p in policies if p["ResourceId"] == ids[0]]
    config = policy["TargetTrackingScalingPolicyConfiguration"]
    assert policy["PolicyName"] == "triton-target-tracking" and config["TargetValue"] == 600
    metrics = {m["Id"]: m for m in config["CustomizedMetricSpecification"]["Metrics"]}
    assert metrics["signal"]["MetricStat"]["Metric"]["MetricName"] == "nv_inference_request_success"
    assert {"Name": "ServiceName", "Value": "triton-blue"} in metrics["divisor"]["MetricStat"]["Metric"]["Dimensions"]


def test_task_roles_trust_only_this_accounts_ecs_tasks(aws_client):
    """The confused-deputy conditions fleet_iam writes: the task role names the account and its ECS ARNs, the instance role none."""
    iam = aws_client("iam")
    account = aws_client("sts").get_caller_identity()["Account"]
    task = iam.get_role(RoleName="triton-task")["Role"]["AssumeRolePolicyDocument"]["Statement"][0]
    assert task["Condition"]["StringEquals"] == {"aws:SourceAccount": account}
    assert task["Condition"]["ArnLike"] == {"aws:SourceArn": f"arn:aws:ecs:*:{account}:*"}
    execution = iam.get_role(RoleName="triton-task-execution")["Role"]["AssumeRolePolicyDocument"]["Statement"][0]
    assert execution["Condition"] == {"StringEquals": {"aws:SourceAccount": account}}
    instance = iam.get_role(RoleName="triton-ecs-instance")["Role"]["AssumeRolePolicyDocument"]["Statement"][0]
    assert "Condition" not in instance
