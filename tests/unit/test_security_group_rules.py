"""The pure logic of the security_group_rules module and of the preflight's network check (the fleet's rules, what
counts as present - a group reference, all traffic, a CIDR that contains the peer's subnets -, descriptions, bad
input) and their ensure()/preflight_report() flows with the EC2 calls replaced at the client-function boundary
(`_aws/ec2.py`): what a run writes, that report-only and check mode write nothing, a missing group fails first."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import ec2 as _ec2
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import InputError
from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet import preflight_network
from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet import security_group_rules as sgr

ALB, INSTANCE, TASK = "sg-0a1b2c3d4e5f60001", "sg-0a1b2c3d4e5f60002", "sg-0a1b2c3d4e5f60003"
SUBNETS = {"subnet-0a1b2c3d4e5f60001": "10.0.1.0/24", "subnet-0a1b2c3d4e5f60002": "10.0.2.0/24"}
NETWORK: dict[str, Any] = {
    "load_balancer": {"security_groups": [ALB], "subnets": []},
    "instances": {"security_groups": [INSTANCE], "subnets": sorted(SUBNETS)},
    "tasks": {"security_groups": [TASK], "subnets": sorted(SUBNETS)},
    "http_port": 8000,
    "metrics_port": 8002,
}
ALL_EGRESS = [{"IpProtocol": "-1", "IpRanges": [{"CidrIp": "0.0.0.0/0"}], "UserIdGroupPairs": []}]


def params(**changes: Any) -> dict[str, Any]:
    found = {"network": copy.deepcopy(NETWORK), "rules": [], "add_missing": True}
    found.update(changes)
    return found


def tcp(port: int, to_port: int | None = None, group: str | None = None, cidr: str | None = None) -> dict[str, Any]:
    return {
        "IpProtocol": "tcp",
        "FromPort": port,
        "ToPort": to_port or port,
        "UserIdGroupPairs": [{"GroupId": group}] if group else [],
        "IpRanges": [{"CidrIp": cidr}] if cidr else [],
    }


def group(group_id: str, ingress: list | None = None, egress: list | None = None) -> dict[str, Any]:
    """A group as DescribeSecurityGroups returns it; all egress (the AWS default) unless `egress` says otherwise."""
    return {"GroupId": group_id, "IpPermissions": ingress or [], "IpPermissionsEgress": ALL_EGRESS if egress is None else egress}


# The example inventory's groups as documented: the task group admits the ALB on 8000 and nothing else.
AS_DOCUMENTED = {ALB: group(ALB), INSTANCE: group(INSTANCE), TASK: group(TASK, ingress=[tcp(8000, group=ALB)])}


class FakeEc2:
    """The account's groups and subnets behind the `_aws/ec2.py` functions; records every call."""

    def __init__(self, groups: dict[str, dict[str, Any]], subnets: dict[str, str] | None = None) -> None:
        self.groups, self.subnets = copy.deepcopy(groups), subnets or {}
        self.calls: list[tuple[str, Any]] = []

    def install(self, monkeypatch: pytest.MonkeyPatch) -> FakeEc2:
        monkeypatch.setattr(_ec2, "describe_security_groups", self.describe_security_groups)
        monkeypatch.setattr(_ec2, "describe_subnet_cidrs", self.describe_subnet_cidrs)
        monkeypatch.setattr(_ec2, "authorize_security_group_ingress", lambda c, g, p: self.authorize(g, "IpPermissions", p))
        monkeypatch.setattr(_ec2, "authorize_security_group_egress", lambda c, g, p: self.authorize(g, "IpPermissionsEgress", p))
        return self

    def describe_security_groups(self, client: Any, ids: list[str]) -> dict[str, dict[str, Any]]:
        self.calls.append(("describe_security_groups", sorted(ids)))
        return {i: copy.deepcopy(self.groups[i]) for i in ids if i in self.groups}

    def describe_subnet_cidrs(self, client: Any, ids: list[str]) -> dict[str, str]:
        self.calls.append(("describe_subnet_cidrs", sorted(ids)))
        return {i: self.subnets[i] for i in ids if i in self.subnets}

    def authorize(self, group_id: str, key: str, permissions: list[dict[str, Any]]) -> None:
        self.calls.append((f"authorize {key}", (group_id, permissions)))
        self.groups[group_id][key] += permissions

    @property
    def writes(self) -> list[tuple[str, Any]]:
        return [call for call in self.calls if call[0].startswith("authorize")]


# ---------------------------------------------------------------- the wanted rules


def test_the_fleet_needs_the_load_balancer_and_the_model_agent_paths_both_ways():
    rules = {str(rule): rule for rule in sgr.fleet_rules(NETWORK)}
    assert sorted(rules) == sorted(
        [
            f"ingress tcp 8000 on {TASK} from {ALB}",
            f"egress tcp 8000 on {ALB} to {TASK}",
            f"ingress tcp 8000 on {TASK} from {INSTANCE}",
            f"egress tcp 8000 on {INSTANCE} to {TASK}",
            f"ingress tcp 8002 on {TASK} from {INSTANCE}",
            f"egress tcp 8002 on {INSTANCE} to {TASK}",
        ]
    )
    # each rule knows where its peer lives: the instances' subnets for the tasks' ingress, the tasks' for egress
    assert rules[f"ingress tcp 8002 on {TASK} from {INSTANCE}"].peer_subnets == tuple(sorted(SUBNETS))
    assert rules[f"egress tcp 8000 on {ALB} to {TASK}"].peer_subnets == tuple(sorted(SUBNETS))
    assert rules[f"ingress tcp 8000 on {TASK} from {ALB}"].peer_subnets == ()


def test_a_grpc_route_adds_the_load_balancer_path_to_tritons_grpc_port():
    network = {**copy.deepcopy(NETWORK), "grpc_port": 8001}
    assert sgr.network_errors(network) == []
    added = {str(rule) for rule in sgr.fleet_rules(network)} - {str(rule) for rule in sgr.fleet_rules(NETWORK)}
    assert added == {f"ingress tcp 8001 on {TASK} from {ALB}", f"egress tcp 8001 on {ALB} to {TASK}"}
    errors = sgr.validate(params(network={**copy.deepcopy(NETWORK), "grpc_port": 8002}))
    assert "network.grpc_port is 8002: Triton's gRPC port differs from its HTTP and metrics ports" in errors


def test_every_added_rule_says_it_is_the_collections():
    for rule in sgr.fleet_rules(NETWORK):
        assert rule.description.startswith("inferops.triton_ecs: ")
        (pair,) = rule.permission()["UserIdGroupPairs"]
        assert pair["Description"] == rule.description and len(rule.description) <= 255
    assert sgr.Rule(TASK, "ingress", 9000, 9000, peer_cidr="10.9.0.0/16").description == "inferops.triton_ecs"


def test_a_group_in_several_roles_gets_each_rule_once():
    shared = params(network={**NETWORK, "instances": {"security_groups": [ALB], "subnets": []}})
    rules = sgr.wanted(shared)
    assert len({rule.key for rule in rules}) == len(rules)
    assert f"ingress tcp 8002 on {TASK} from {ALB}" in {str(r) for r in rules}


def test_given_rules_take_a_port_range_and_a_cidr():
    (rule,) = sgr.wanted(
        params(network=None, rules=[{"security_group_id": ALB, "peer_cidr": "10.20.0.0/16", "from_port": 8443, "to_port": 8444}])
    )
    assert str(rule) == f"ingress tcp 8443-8444 on {ALB} from 10.20.0.0/16"
    assert rule.permission(described=False) == {
        "IpProtocol": "tcp",
        "FromPort": 8443,
        "ToPort": 8444,
        "IpRanges": [{"CidrIp": "10.20.0.0/16"}],
    }


def test_the_fix_is_the_cli_command_that_adds_the_rule():
    rule = sgr.Rule(TASK, "ingress", 8002, 8002, INSTANCE)
    command, permissions = rule.fix().split(" --ip-permissions ")
    assert command == f"aws ec2 authorize-security-group-ingress --group-id {TASK}"
    assert json.loads(permissions.strip("'")) == [
        {"IpProtocol": "tcp", "FromPort": 8002, "ToPort": 8002, "UserIdGroupPairs": [{"GroupId": INSTANCE}]}
    ]
    assert sgr.Rule(ALB, "egress", 8000, 8000, TASK).fix().startswith("aws ec2 authorize-security-group-egress --group-id")


# ---------------------------------------------------------------- what counts as present

RULE = sgr.Rule(TASK, "ingress", 8002, 8002, INSTANCE, "", tuple(sorted(SUBNETS)))


@pytest.mark.parametrize(
    ("ingress", "subnet_cidrs", "present"),
    [
        ([tcp(8002, group=INSTANCE)], {}, True),
        ([tcp(8000, 8010, group=INSTANCE)], {}, True),  # a range holding the port
        ([{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": INSTANCE}]}], {}, True),  # all traffic
        ([{"IpProtocol": "6", "FromPort": 8002, "ToPort": 8002, "UserIdGroupPairs": [{"GroupId": INSTANCE}]}], {}, True),
        ([tcp(8000, group=INSTANCE)], {}, False),  # another port
        ([tcp(8002, group=ALB)], {}, False),  # another group
        ([{"IpProtocol": "udp", "FromPort": 8002, "ToPort": 8002, "UserIdGroupPairs": [{"GroupId": INSTANCE}]}], {}, False),
        ([tcp(8002, cidr="0.0.0.0/0")], {}, True),  # the whole internet covers any subnet, known or not
        ([tcp(8002, cidr="10.0.0.0/16")], SUBNETS, True),  # the VPC's CIDR holds both instance subnets
        ([tcp(8002, cidr="10.0.0.0/16")], {}, False),  # without the subnets' CIDR blocks it cannot be shown
        ([tcp(8002, cidr="10.0.1.0/24")], SUBNETS, False),  # holds one instance subnet of two
        ([tcp(8002, cidr="10.0.0.0/16")], {"subnet-0a1b2c3d4e5f60001": "10.0.1.0/24"}, False),  # one subnet unknown
        ([tcp(8002, cidr="192.168.0.0/16")], SUBNETS, False),
    ],
)
def test_what_counts_as_present(ingress, subnet_cidrs, present):
    assert sgr.is_present(RULE, group(TASK, ingress=ingress), subnet_cidrs) is present


def test_egress_is_read_from_the_egress_permissions():
    rule = sgr.Rule(ALB, "egress", 8000, 8000, TASK)
    assert sgr.is_present(rule, group(ALB), {}) is True  # the AWS default: all traffic to 0.0.0.0/0
    assert sgr.is_present(rule, group(ALB, egress=[tcp(443, cidr="0.0.0.0/0")]), {}) is False
    assert sgr.is_present(rule, group(ALB, egress=[tcp(8000, group=TASK)], ingress=[tcp(8000, group=TASK)]), {}) is True
    assert sgr.is_present(rule, group(ALB, egress=[], ingress=[tcp(8000, group=TASK)]), {}) is False


def test_cidr_contains():
    assert sgr.cidr_contains("0.0.0.0/0", [])
    assert sgr.cidr_contains("10.0.0.0/8", ["10.1.0.0/16", "10.2.3.0/24"])
    assert not sgr.cidr_contains("10.0.0.0/8", [])
    assert not sgr.cidr_contains("10.1.0.0/16", ["10.1.0.0/16", "10.2.0.0/16"])
    assert not sgr.cidr_contains("not-a-network", ["10.1.0.0/16"])
    assert not sgr.cidr_contains("10.0.0.0/8", ["2001:db8::/64"])


def test_subnets_are_read_only_when_a_narrower_cidr_could_cover_a_missing_rule():
    groups = {TASK: group(TASK, ingress=[tcp(8002, cidr="10.0.0.0/16")]), INSTANCE: group(INSTANCE)}
    assert sgr.subnets_to_read([RULE], groups) == sorted(SUBNETS)
    assert sgr.subnets_to_read([RULE], {TASK: group(TASK, ingress=[tcp(8002, cidr="0.0.0.0/0")])}) == []
    assert sgr.subnets_to_read([RULE], {TASK: group(TASK)}) == []


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"network": None}, "network and rules are both empty"),
        ({"network": {**NETWORK, "tasks": {"security_groups": [], "subnets": []}}}, "network.tasks.security_groups is []"),
        (
            {"network": {**NETWORK, "load_balancer": {"security_groups": ["alb"], "subnets": []}}},
            "network.load_balancer.security_groups[0] is 'alb'",
        ),
        (
            {"network": {**NETWORK, "instances": {"security_groups": [INSTANCE], "subnets": ["10.0.1.0/24"]}}},
            "network.instances.subnets[0] is '10.0.1.0/24'",
        ),
        ({"network": {**NETWORK, "metrics_port": 8000}}, "network.metrics_port is 8000"),
        ({"network": {**NETWORK, "http_port": 0}}, "network.http_port is 0"),
        ({"rules": [{"security_group_id": "sg-x", "peer_cidr": "10.0.0.0/8", "from_port": 1}]}, "rules[0].security_group_id is 'sg-x'"),
        ({"rules": [{"security_group_id": ALB, "from_port": 1}]}, "rules[0]: give one of peer_security_group_id"),
        ({"rules": [{"security_group_id": ALB, "peer_cidr": "10.0.0.1/8", "from_port": 1}]}, "rules[0].peer_cidr is '10.0.0.1/8'"),
        ({"rules": [{"security_group_id": ALB, "peer_cidr": "10.0.0.0/8", "from_port": 9, "to_port": 8}]}, "rules[0].to_port is 8"),
        ({"rules": [{"security_group_id": ALB, "peer_cidr": "10.0.0.0/8", "from_port": 70000}]}, "rules[0].from_port is 70000"),
        (
            {"rules": [{"security_group_id": ALB, "peer_cidr": "10.0.0.0/8", "from_port": 1, "description": "a -> b"}]},
            "rules[0].description is 'a -> b'",
        ),
        (
            {"rules": [{"security_group_id": ALB, "peer_cidr": "10.0.0.0/8", "from_port": 1, "description": "x" * 240}]},
            "rules[0].description is",
        ),
    ],
)
def test_bad_input_names_the_field_and_writes_nothing(monkeypatch, change, expected):
    fake = FakeEc2(AS_DOCUMENTED).install(monkeypatch)
    with pytest.raises(InputError) as raised:
        sgr.ensure(None, params(**change), check_mode=False)
    assert any(error.startswith(expected) for error in raised.value.errors), raised.value.errors
    assert fake.calls == []


# ---------------------------------------------------------------- ensure


def test_adds_only_the_missing_rules_one_call_per_group_and_direction_then_changes_nothing(monkeypatch):
    groups = {**AS_DOCUMENTED, INSTANCE: group(INSTANCE, egress=[tcp(443, cidr="0.0.0.0/0")])}  # egress restricted
    fake = FakeEc2(groups).install(monkeypatch)
    result = sgr.ensure(None, params(), check_mode=False)
    assert result["changed"] is True
    assert [r["rule"] for r in result["present"]] == [f"ingress tcp 8000 on {TASK} from {ALB}", f"egress tcp 8000 on {ALB} to {TASK}"]
    assert sorted(r["rule"] for r in result["missing"]) == sorted(
        [
            f"ingress tcp 8000 on {TASK} from {INSTANCE}",
            f"ingress tcp 8002 on {TASK} from {INSTANCE}",
            f"egress tcp 8000 on {INSTANCE} to {TASK}",
            f"egress tcp 8002 on {INSTANCE} to {TASK}",
        ]
    )
    assert [(name, args[0], [p["FromPort"] for p in args[1]]) for name, args in fake.writes] == [
        ("authorize IpPermissions", TASK, [8000, 8002]),
        ("authorize IpPermissionsEgress", INSTANCE, [8000, 8002]),
    ]
    assert result["actions"][0] == f"authorize ingress tcp 8000 on {TASK} from {INSTANCE} (inferops.triton_ecs: model agent to Triton HTTP)"
    assert result["diff"]["after"][TASK] == sorted(
        [
            f"ingress tcp 8000 on {TASK} from {ALB}",
            f"ingress tcp 8000 on {TASK} from {INSTANCE}",
            f"ingress tcp 8002 on {TASK} from {INSTANCE}",
        ]
    )
    assert result["diff"]["before"][TASK] == [f"ingress tcp 8000 on {TASK} from {ALB}"]

    fake.calls.clear()
    again = sgr.ensure(None, params(), check_mode=False)
    assert again["changed"] is False and again["missing"] == [] and again["actions"] == []
    assert fake.calls == [("describe_security_groups", [ALB, INSTANCE, TASK])]  # one read, no write


def test_check_mode_and_report_only_write_nothing(monkeypatch):
    fake = FakeEc2(AS_DOCUMENTED).install(monkeypatch)
    planned = sgr.ensure(None, params(), check_mode=True)
    assert planned["changed"] is True and len(planned["actions"]) == 2 and fake.writes == []
    reported = sgr.ensure(None, params(add_missing=False), check_mode=False)
    assert reported["changed"] is False and reported["actions"] == [] and fake.writes == []
    assert [m["rule"] for m in reported["missing"]] == [m["rule"] for m in planned["missing"]]
    assert all(m["fix"].startswith("aws ec2 authorize-security-group-ingress") for m in reported["missing"])
    assert reported["diff"]["before"] == reported["diff"]["after"]


def test_a_cidr_rule_over_the_instance_subnets_counts_after_one_subnet_read(monkeypatch):
    groups = {**AS_DOCUMENTED, TASK: group(TASK, ingress=[tcp(8000, group=ALB), tcp(8000, 8002, cidr="10.0.0.0/16")])}
    fake = FakeEc2(groups, SUBNETS).install(monkeypatch)
    result = sgr.ensure(None, params(), check_mode=False)
    assert result["changed"] is False and result["missing"] == []
    assert fake.calls == [("describe_security_groups", [ALB, INSTANCE, TASK]), ("describe_subnet_cidrs", sorted(SUBNETS))]


def test_a_group_that_does_not_exist_fails_before_any_write(monkeypatch):
    fake = FakeEc2({ALB: group(ALB), TASK: group(TASK)}).install(monkeypatch)
    with pytest.raises(InputError) as raised:
        sgr.ensure(None, params(), check_mode=False)
    assert raised.value.errors == [
        f"network.instances.security_groups[0] is '{INSTANCE}': no such security group in this account and region; "
        "give the id of an existing group"
    ]
    assert fake.writes == []


# ---------------------------------------------------------------- the preflight's check

NAMES = {
    "load_balancer.security_groups": "fleet_load_balancing_alb_security_groups",
    "instances.security_groups": "fleet_capacity_security_groups",
    "tasks.security_groups": "fleet_services_security_groups",
    "manage": "fleet_services_security_group_rules_manage",
}


def test_preflight_names_each_missing_rule_with_its_fix_when_managed_elsewhere(monkeypatch):
    fake = FakeEc2(AS_DOCUMENTED).install(monkeypatch)
    report = preflight_network.preflight_report(None, {"network": NETWORK, "manage": False, "names": NAMES})
    assert len(report["problems"]) == 2 == len(report["missing"])
    problem = report["problems"][0]
    assert problem.startswith(f"security group {TASK} lacks ingress tcp 8000 from {INSTANCE} (model agent to Triton HTTP): add it (aws ec2")
    assert problem.endswith("or set fleet_services_security_group_rules_manage: true so that the collection adds it")
    assert fake.writes == []


def test_preflight_leaves_missing_rules_to_the_collection_when_it_manages_them(monkeypatch):
    FakeEc2(AS_DOCUMENTED).install(monkeypatch)
    report = preflight_network.preflight_report(None, {"network": NETWORK, "manage": True, "names": NAMES})
    assert report["problems"] == [] and len(report["missing"]) == 2


def test_preflight_names_the_variable_of_a_missing_or_empty_group(monkeypatch):
    FakeEc2({ALB: group(ALB), TASK: group(TASK)}).install(monkeypatch)
    report = preflight_network.preflight_report(None, {"network": NETWORK, "manage": True, "names": NAMES})
    assert report["problems"] == [
        f"fleet_capacity_security_groups[0] is '{INSTANCE}': no such security group in this account and region; give the id of an existing group"
    ]
    empty = {**NETWORK, "load_balancer": {"security_groups": [], "subnets": []}}
    report = preflight_network.preflight_report(None, {"network": empty, "manage": False, "names": NAMES})
    assert report["problems"][0].startswith("fleet_load_balancing_alb_security_groups is []: the load balancer's security group(s)")
