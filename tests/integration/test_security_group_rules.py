"""The network the design needs, against a moto server: the preflight names each missing rule before any write, and
inferops.triton_ecs.security_group_rules adds them (check mode, real run, check mode again, real run again).

Stand-in: a private moto server (tests/conftest.py `moto_server`) holding a VPC, two private subnets and the three
groups of inventories/example as it was documented before the fix - the task group admitting only the ALB's group on
8000, the instance group with no ingress and AWS's default all-traffic egress. moto stores the rules and answers
DescribeSecurityGroups with them; it evaluates no security group (no packet is filtered), so what is proven is which
rules exist and which calls were made (its request recorder), not that traffic flows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.harness.ansible import REPO_ROOT, run_playbook
from tests.harness.aws_calls import start_recording, writes
from tests.harness.moto import ACCOUNT_ID, MotoServer

PLAYBOOK = Path(__file__).parent / "playbooks" / "security_group_rules_module.yml"
ROLE_PLAYBOOK = Path(__file__).parent / "playbooks" / "security_group_rules_role.yml"
ROLE_TASK = "inferops.triton_ecs.fleet_services : Security-group rules of the load balancer's and the model agent's paths to the tasks, added where missing"
TASK = "Security group rules"
PREFLIGHT_TASK = "Preflight - placeholders, required settings, account"


def example_network(moto: MotoServer) -> dict[str, Any]:
    """The example's network in moto: VPC, two subnets, ALB / task / instance groups; the task group admits the ALB."""
    ec2 = moto.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=cidr, AvailabilityZone=zone)["Subnet"]["SubnetId"]
        for cidr, zone in (("10.0.1.0/24", "us-east-1a"), ("10.0.2.0/24", "us-east-1b"))
    ]
    groups = {
        part: ec2.create_security_group(GroupName=f"triton-{part}", Description=f"Triton {part}", VpcId=vpc)["GroupId"]
        for part in ("alb", "tasks", "instances")
    }
    ec2.authorize_security_group_ingress(
        GroupId=groups["tasks"],
        IpPermissions=[{"IpProtocol": "tcp", "FromPort": 8000, "ToPort": 8000, "UserIdGroupPairs": [{"GroupId": groups["alb"]}]}],
    )
    return {"vpc": vpc, "subnets": subnets, "groups": groups}


def module_network(net: dict[str, Any]) -> dict[str, Any]:
    groups, subnets = net["groups"], net["subnets"]
    return {
        "load_balancer": {"security_groups": [groups["alb"]]},
        "instances": {"security_groups": [groups["instances"]], "subnets": subnets},
        "tasks": {"security_groups": [groups["tasks"]], "subnets": subnets},
    }


def run_module(moto: MotoServer, net: dict[str, Any], check: bool = False, **extra: Any) -> tuple[dict[str, Any], list[str]]:
    start_recording(moto)
    extra_vars = {"aws_endpoint_url": moto.endpoint, "sgr_network": module_network(net), **{f"sgr_{k}": v for k, v in extra.items()}}
    run = run_playbook(PLAYBOOK, extra_vars=extra_vars, check=check, diff=True)
    return run.result(TASK), writes(moto)


def run_preflight(moto: MotoServer, net: dict[str, Any], manage: bool) -> tuple[Any, list[str]]:
    """playbooks/preflight.yml with a complete, real-shaped inventory (as extra vars) on the moto account."""
    groups = net["groups"]
    extra_vars = {
        "aws_endpoint_url": moto.endpoint,
        "aws_access_key": "testing",  # moto's placeholder credentials
        "aws_secret_key": "testing",
        "aws_region": "us-east-1",
        "aws_account_id": ACCOUNT_ID,
        "task_definition_family": "triton",
        "task_definition_memory": 14336,  # fits g5.xlarge (16 GiB); the preflight reads the instance type
        "fleet_cluster_name": "inference",
        "fleet_load_balancing_vpc_id": net["vpc"],
        "fleet_load_balancing_alb_security_groups": [groups["alb"]],
        "fleet_capacity_subnets": net["subnets"],
        "fleet_capacity_security_groups": [groups["instances"]],
        # an AMI the account can launch (no Packer manifest here); the preflight reads that it exists
        "fleet_capacity_ami_id": moto.client("ec2").describe_images(Owners=["amazon"])["Images"][0]["ImageId"],
        "fleet_services_subnets": net["subnets"],
        "fleet_services_security_groups": [groups["tasks"]],
        "fleet_services_security_group_rules_manage": manage,
        "deploy_build_image": False,
        "deploy_metrics_sidecar": False,
        "bluegreen_cutover_test_route_url": "https://10.0.1.10:8443",
    }
    start_recording(moto)
    run = run_playbook(REPO_ROOT / "playbooks" / "preflight.yml", extra_vars=extra_vars)
    return run, writes(moto)


def ingress_of(moto: MotoServer, group: str) -> list[tuple[int, str, str]]:
    (found,) = moto.client("ec2").describe_security_groups(GroupIds=[group])["SecurityGroups"]
    return sorted(
        (p["FromPort"], pair["GroupId"], pair.get("Description", "")) for p in found["IpPermissions"] for pair in p["UserIdGroupPairs"]
    )


def test_preflight_names_the_missing_rules_then_the_module_adds_them_once(moto_server: MotoServer) -> None:
    net = example_network(moto_server)
    alb, tasks, instances = net["groups"]["alb"], net["groups"]["tasks"], net["groups"]["instances"]

    run, written = run_preflight(moto_server, net, manage=False)
    assert run.rc != 0 and run.failed_tasks == [PREFLIGHT_TASK] and written == []
    result = run.result(PREFLIGHT_TASK)
    assert result["security_group_rules"]["checked"] is True
    assert sorted(m["rule"] for m in result["security_group_rules"]["missing"]) == [
        f"ingress tcp 8000 on {tasks} from {instances}",
        f"ingress tcp 8002 on {tasks} from {instances}",
    ]
    network_problems = [p for p in result["problems"] if p.startswith("security group ")]
    assert len(network_problems) == 2 and len(result["problems"]) == 2, result["problems"]
    for port in (8000, 8002):
        assert any(
            f"lacks ingress tcp {port} from {instances}" in p
            and f"aws ec2 authorize-security-group-ingress --group-id {tasks}" in p
            and "fleet_services_security_group_rules_manage: true" in p
            for p in network_problems
        )

    # With the collection adding them, the missing rules are no problem; the groups exist, so the preflight passes.
    run, written = run_preflight(moto_server, net, manage=True)
    assert run.rc == 0 and written == [], run.stdout[-2000:]
    assert "2 rules for role fleet_services to add" in run.result("Preflight passed")["msg"]

    planned, written = run_module(moto_server, net, check=True)
    assert planned["changed"] is True and written == []
    assert planned["actions"] == [
        f"authorize ingress tcp 8000 on {tasks} from {instances} (inferops.triton_ecs: model agent to Triton HTTP)",
        f"authorize ingress tcp 8002 on {tasks} from {instances} (inferops.triton_ecs: model agent to Triton metrics)",
    ]
    assert planned["diff"]["before"][tasks] == [f"ingress tcp 8000 on {tasks} from {alb}"]
    assert len(planned["diff"]["after"][tasks]) == 3
    assert ingress_of(moto_server, tasks) == [(8000, alb, "")]

    added, written = run_module(moto_server, net)
    assert added["changed"] is True and added["actions"] == planned["actions"]
    assert written == ["AuthorizeSecurityGroupIngress"]  # both rules of the task group in one call
    assert ingress_of(moto_server, tasks) == sorted(
        [
            (8000, alb, ""),  # the account's own rule, untouched
            (8000, instances, "inferops.triton_ecs: model agent to Triton HTTP"),
            (8002, instances, "inferops.triton_ecs: model agent to Triton metrics"),
        ]
    )

    for check in (True, False):
        again, written = run_module(moto_server, net, check=check)
        assert again["changed"] is False and again["actions"] == [] and again["missing"] == [] and written == []
        assert len(again["present"]) == 6

    run, written = run_preflight(moto_server, net, manage=False)
    assert run.rc == 0 and written == [], run.stdout[-2000:]
    assert "the security-group rules of the fleet's paths in place" in run.result("Preflight passed")["msg"]


def test_report_only_writes_nothing_and_a_restricted_egress_is_added(moto_server: MotoServer) -> None:
    net = example_network(moto_server)
    alb, tasks = net["groups"]["alb"], net["groups"]["tasks"]
    ec2 = moto_server.client("ec2")
    # The ALB's egress restricted to 443: it can no longer reach the tasks.
    everything = [{"IpProtocol": "-1", "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}]
    ec2.revoke_security_group_egress(GroupId=alb, IpPermissions=everything)
    ec2.authorize_security_group_egress(
        GroupId=alb, IpPermissions=[{"IpProtocol": "tcp", "FromPort": 443, "ToPort": 443, "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}]
    )

    reported, written = run_module(moto_server, net, add_missing=False)
    assert reported["changed"] is False and reported["actions"] == [] and written == []
    egress = [m for m in reported["missing"] if m["direction"] == "egress"]
    assert [m["rule"] for m in egress] == [f"egress tcp 8000 on {alb} to {tasks}"]
    assert egress[0]["fix"].startswith(f"aws ec2 authorize-security-group-egress --group-id {alb} --ip-permissions")

    added, written = run_module(moto_server, net)
    assert added["changed"] is True and sorted(written) == ["AuthorizeSecurityGroupEgress", "AuthorizeSecurityGroupIngress"]
    (found,) = ec2.describe_security_groups(GroupIds=[alb])["SecurityGroups"]
    assert {(p["FromPort"], tuple(pair["GroupId"] for pair in p["UserIdGroupPairs"])) for p in found["IpPermissionsEgress"]} == {
        (443, ()),
        (8000, (tasks,)),
    }


def test_a_group_that_does_not_exist_fails_before_any_write(moto_server: MotoServer) -> None:
    net = example_network(moto_server)
    instances = net["groups"]["instances"]
    moto_server.client("ec2").delete_security_group(GroupId=instances)
    failed, written = run_module(moto_server, net)
    assert failed["failed"] is True and written == []
    assert f"network.instances.security_groups[0] is '{instances}': no such security group" in failed["msg"]


def test_role_fleet_services_adds_the_rules_between_the_groups_the_other_roles_use(moto_server: MotoServer) -> None:
    net = example_network(moto_server)
    groups = net["groups"]
    extra_vars = {
        "aws_endpoint_url": moto_server.endpoint,
        "fleet_load_balancing_alb_security_groups": [groups["alb"]],
        "fleet_capacity_security_groups": [groups["instances"]],
        "fleet_capacity_subnets": net["subnets"],
        "fleet_services_security_groups": [groups["tasks"]],
        "fleet_services_subnets": net["subnets"],
    }
    for changed, expected_writes in ((True, ["AuthorizeSecurityGroupIngress"]), (False, [])):
        start_recording(moto_server)
        run = run_playbook(ROLE_PLAYBOOK, extra_vars=extra_vars)
        assert run.rc == 0, run.stdout[-2000:]
        assert run.result(ROLE_TASK)["changed"] is changed and writes(moto_server) == expected_writes
    assert [rule[:2] for rule in ingress_of(moto_server, groups["tasks"])] == sorted(
        [(8000, groups["alb"]), (8000, groups["instances"]), (8002, groups["instances"])]
    )
