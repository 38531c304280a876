"""Verify: AWS (the scenario's moto server) shows green live at 100% with revision 2 and blue scaled down."""

from __future__ import annotations


def test_the_moto_server_listens(host, aws):
    assert host.socket(f"tcp://127.0.0.1:{aws['port']}").is_listening


def test_green_takes_all_production_traffic(aws, aws_client):
    listener = aws_client("elbv2").describe_listeners(ListenerArns=[aws["listener_arn"]])["Listeners"][0]
    groups = listener["DefaultActions"][0]["ForwardConfig"]["TargetGroups"]
    weights = {g["TargetGroupArn"]: g["Weight"] for g in groups}
    assert weights == {aws["target_groups"]["green"]: 100, aws["target_groups"]["blue"]: 0}


def test_green_runs_revision_2_and_blue_is_scaled_down(aws, aws_client):
    services = aws_client("ecs").describe_services(cluster="inference", services=["triton-blue", "triton-green"])["services"]
    by_name = {s["serviceName"]: s for s in services}
    assert by_name["triton-green"]["taskDefinition"] == aws["task_definitions"][1]
    assert by_name["triton-green"]["desiredCount"] == 2
    assert by_name["triton-blue"]["desiredCount"] == 0


def test_the_test_listener_points_at_green(aws, aws_client):
    listener = aws_client("elbv2").describe_listeners(ListenerArns=[aws["test_listener_arn"]])["Listeners"][0]
    live = [g["TargetGroupArn"] for g in listener["DefaultActions"][0]["ForwardConfig"]["TargetGroups"] if g["Weight"]]
    assert live == [aws["target_groups"]["green"]]
