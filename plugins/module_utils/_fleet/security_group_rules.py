# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The security-group rules the fleet's own paths need, planned against what EC2 shows, added only when asked.

The paths (docs/infrastructure.md, "Network"): the load balancer reaches each task ENI on Triton's HTTP port, and
the model agent on each container instance reaches the task ENIs of its instance on the HTTP and metrics ports. Each
path is two rules: ingress on the task group from the other side's group, and egress on the other side's group to
the task group (an all-traffic egress, the AWS default, already allows it).

A rule counts as present when a permission of the group in that direction allows TCP on the rule's ports (or all
traffic) and its peer is the wanted group (UserIdGroupPairs), or a CIDR that contains every subnet the other side
lives in (0.0.0.0/0 always does; without those subnets' CIDR blocks only 0.0.0.0/0 does). Prefix lists and IPv6
ranges do not count. Rules are only ever added, never removed: the ones the collection adds carry a description
starting with MARK, so a reader (or a cleanup) can tell them from the rules the account had.
"""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import ec2 as _ec2
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import InputError

# The start of the description of every rule the collection adds.
MARK = "inferops.triton_ecs"
SIDES = ("load_balancer", "instances", "tasks")
DIRECTIONS = ("ingress", "egress")
_GROUP = re.compile(r"^sg-[0-9a-f]{8,17}$")
_SUBNET = re.compile(r"^subnet-[0-9a-f]{8,17}$")
# What EC2 accepts in a rule description: up to 255 of a-z A-Z 0-9, spaces and ._-:/()#,@[]+=&;{}!$*
_DESCRIPTION = re.compile(r"^[A-Za-z0-9 ._\-:/()#,@\[\]+=&;{}!$*]*$")
# The option paths of the fleet's groups and subnets, as the module names them in errors (preflight names inventory
# variables instead).
NETWORK_NAMES = {f"{side}.{key}": f"network.{side}.{key}" for side in SIDES for key in ("security_groups", "subnets")}
NETWORK_NAMES.update(http_port="network.http_port", metrics_port="network.metrics_port", grpc_port="network.grpc_port")
_SIDE_WORDS = {"load_balancer": "the load balancer's", "instances": "the container instances'", "tasks": "the tasks'"}


@dataclass(frozen=True)
class Rule:
    """One TCP rule on `group_id`: ingress from, or egress to, a peer group or CIDR, on from_port..to_port."""

    group_id: str
    direction: str
    from_port: int
    to_port: int
    peer_group_id: str = ""
    peer_cidr: str = ""
    # Where the peer group's network interfaces live: a CIDR rule containing all of them counts as present.
    peer_subnets: tuple[str, ...] = ()
    purpose: str = ""

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.group_id, self.direction, self.from_port, self.to_port, self.peer_group_id, self.peer_cidr)

    @property
    def ports(self) -> str:
        return str(self.from_port) if self.from_port == self.to_port else f"{self.from_port}-{self.to_port}"

    @property
    def description(self) -> str:
        return f"{MARK}: {self.purpose}" if self.purpose else MARK

    def __str__(self) -> str:
        way = "from" if self.direction == "ingress" else "to"
        return f"{self.direction} tcp {self.ports} on {self.group_id} {way} {self.peer_group_id or self.peer_cidr}"

    def permission(self, described: bool = True) -> dict[str, Any]:
        """The IpPermissions item that adds this rule."""
        peer: dict[str, str] = {"GroupId": self.peer_group_id} if self.peer_group_id else {"CidrIp": self.peer_cidr}
        if described:
            peer["Description"] = self.description
        key = "UserIdGroupPairs" if self.peer_group_id else "IpRanges"
        return {"IpProtocol": "tcp", "FromPort": self.from_port, "ToPort": self.to_port, key: [peer]}

    def fix(self) -> str:
        """The AWS CLI command that adds this rule."""
        permissions = json.dumps([self.permission(described=False)], separators=(",", ":"))
        return f"aws ec2 authorize-security-group-{self.direction} --group-id {self.group_id} --ip-permissions '{permissions}'"

    def view(self) -> dict[str, Any]:
        """The rule as the module returns it."""
        return {
            "security_group_id": self.group_id,
            "direction": self.direction,
            "protocol": "tcp",
            "from_port": self.from_port,
            "to_port": self.to_port,
            "peer_security_group_id": self.peer_group_id or None,
            "peer_cidr": self.peer_cidr or None,
            "description": self.description,
            "rule": str(self),
        }


# ---------------------------------------------------------------- pure: input


def _port_errors(name: str, value: Any) -> list[str]:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        return [f"{name} is {value!r}: a TCP port, 1-65535"]
    return []


def network_errors(network: dict[str, Any], names: dict[str, str] | None = None) -> list[str]:
    """Every error of the fleet's network input; `names` says how to name each side's groups and subnets ("tasks.subnets"
    -> its option or variable; default the module's options)."""
    names = {**NETWORK_NAMES, **(names or {})}
    errors = []
    for side in SIDES:
        part = network.get(side) or {}
        groups, subnets = part.get("security_groups") or [], part.get("subnets") or []
        groups_name = names[f"{side}.security_groups"]
        if not groups:
            errors.append(
                f"{groups_name} is []: {_SIDE_WORDS[side]} security group(s), sg-...; the load balancer's and the model "
                "agent's paths to the tasks need rules between these groups"
            )
        for index, group in enumerate(groups):
            if not isinstance(group, str) or not _GROUP.match(group):
                errors.append(f"{groups_name}[{index}] is {group!r}: a security group id, sg-...")
        for index, subnet in enumerate(subnets):
            if not isinstance(subnet, str) or not _SUBNET.match(subnet):
                errors.append(f"{names[f'{side}.subnets']}[{index}] is {subnet!r}: a subnet id, subnet-...")
    errors += _port_errors(names["http_port"], network.get("http_port"))
    errors += _port_errors(names["metrics_port"], network.get("metrics_port"))
    if not errors and network["http_port"] == network["metrics_port"]:
        errors.append(f"{names['metrics_port']} is {network['metrics_port']}: Triton's metrics port differs from its HTTP port")
    if network.get("grpc_port") is not None:
        errors += _port_errors(names["grpc_port"], network["grpc_port"])
        if network["grpc_port"] in (network.get("http_port"), network.get("metrics_port")):
            errors.append(f"{names['grpc_port']} is {network['grpc_port']}: Triton's gRPC port differs from its HTTP and metrics ports")
    return errors


def rule_errors(index: int, rule: dict[str, Any]) -> list[str]:
    """Every error of one item of the module's `rules`."""
    name = f"rules[{index}]"
    errors = []
    group = rule.get("security_group_id")
    if not isinstance(group, str) or not _GROUP.match(group):
        errors.append(f"{name}.security_group_id is {group!r}: the id of the group the rule goes on, sg-...")
    if rule.get("direction", "ingress") not in DIRECTIONS:
        errors.append(f"{name}.direction is {rule.get('direction')!r}: ingress or egress")
    peer_group, peer_cidr = rule.get("peer_security_group_id"), rule.get("peer_cidr")
    if bool(peer_group) == bool(peer_cidr):
        errors.append(
            f"{name}: give one of peer_security_group_id (sg-...) or peer_cidr (e.g. 10.0.0.0/16), not {'both' if peer_group else 'neither'}"
        )
    elif peer_group and not _GROUP.match(str(peer_group)):
        errors.append(f"{name}.peer_security_group_id is {peer_group!r}: a security group id, sg-...")
    elif peer_cidr:
        try:
            if ipaddress.ip_network(str(peer_cidr), strict=True).version != 4:
                raise ValueError
        except ValueError:
            errors.append(f"{name}.peer_cidr is {peer_cidr!r}: an IPv4 network such as 10.0.0.0/16 (no host bits set)")
    from_port = rule.get("from_port")
    to_port = rule.get("to_port") if rule.get("to_port") is not None else from_port
    from_errors = _port_errors(f"{name}.from_port", from_port)
    errors += from_errors
    if not from_errors and (_port_errors(f"{name}.to_port", to_port) or to_port < from_port):
        errors.append(f"{name}.to_port is {to_port!r}: the last port of the range, from_port ({from_port}) to 65535")
    purpose = rule.get("description") or ""
    if not _DESCRIPTION.match(purpose) or len(f"{MARK}: {purpose}") > 255:
        errors.append(
            f"{name}.description is {purpose!r}: at most {255 - len(MARK) - 2} of letters, digits, spaces and ._-:/()#,@[]+=&;{{}}!$* "
            f"(the rule's description is '{MARK}: ' and this)"
        )
    return errors


def validate(params: dict[str, Any]) -> list[str]:
    """Every error of the module's input, each naming the option, its value and the fix; [] when it is good."""
    network, rules = params.get("network"), params.get("rules") or []
    if not network and not rules:
        return ["network and rules are both empty: give network (the fleet's groups) or rules (the rules to ensure)"]
    errors = network_errors(network) if network else []
    for index, rule in enumerate(rules):
        errors += rule_errors(index, rule)
    return errors


# ---------------------------------------------------------------- pure: the wanted rules


def fleet_rules(network: dict[str, Any]) -> list[Rule]:
    """The rules of the fleet's paths: load balancer -> tasks on HTTP (and gRPC, when the fleet has a gRPC route);
    container instances (the model agent) -> tasks on HTTP and metrics. Each as ingress on the task group and egress
    on the other side's group."""
    tasks = network["tasks"]
    http, metrics = network["http_port"], network["metrics_port"]
    paths = [("load_balancer", http, "load balancer to Triton HTTP")]
    if network.get("grpc_port") is not None:
        paths.append(("load_balancer", network["grpc_port"], "load balancer to Triton gRPC"))
    paths += [("instances", http, "model agent to Triton HTTP"), ("instances", metrics, "model agent to Triton metrics")]
    rules = []
    for task_group in tasks["security_groups"]:
        for side, port, purpose in paths:
            source = network[side]
            for group in source["security_groups"]:
                rules.append(Rule(task_group, "ingress", port, port, group, "", tuple(source.get("subnets") or ()), purpose))
                rules.append(Rule(group, "egress", port, port, task_group, "", tuple(tasks.get("subnets") or ()), purpose))
    return rules


def given_rules(rules: list[dict[str, Any]]) -> list[Rule]:
    """The module's `rules` option as Rules."""
    found = []
    for rule in rules:
        from_port = rule["from_port"]
        to_port = rule.get("to_port") if rule.get("to_port") is not None else from_port
        found.append(
            Rule(
                rule["security_group_id"],
                rule.get("direction") or "ingress",
                from_port,
                to_port,
                rule.get("peer_security_group_id") or "",
                rule.get("peer_cidr") or "",
                (),
                rule.get("description") or "",
            )
        )
    return found


def wanted(params: dict[str, Any]) -> list[Rule]:
    """Every rule to ensure, each once, in order: the fleet's, then the given ones."""
    rules = (fleet_rules(params["network"]) if params.get("network") else []) + given_rules(params.get("rules") or [])
    unique: dict[tuple[Any, ...], Rule] = {}
    for rule in rules:
        unique.setdefault(rule.key, rule)
    return list(unique.values())


def group_ids(rules: list[Rule]) -> list[str]:
    """The groups the rules go on and name as peers."""
    return sorted({rule.group_id for rule in rules} | {rule.peer_group_id for rule in rules if rule.peer_group_id})


# ---------------------------------------------------------------- pure: what is present


def cidr_contains(cidr: str, networks: list[str]) -> bool:
    """Whether a rule's CIDR contains every one of `networks` (0.0.0.0/0 contains anything, also unknown ones)."""
    try:
        outer = ipaddress.ip_network(cidr, strict=False)
        if outer.prefixlen == 0:
            return True
        return bool(networks) and all(ipaddress.ip_network(n, strict=False).subnet_of(outer) for n in networks)
    except (TypeError, ValueError):  # another IP version, or a value that is no network
        return False


def _permissions(group: dict[str, Any], direction: str) -> list[dict[str, Any]]:
    return group.get("IpPermissions" if direction == "ingress" else "IpPermissionsEgress") or []


def _allows_ports(permission: dict[str, Any], rule: Rule) -> bool:
    protocol = str(permission.get("IpProtocol"))
    if protocol == "-1":
        return True
    if protocol not in ("tcp", "6"):
        return False
    return permission.get("FromPort", 0) <= rule.from_port and rule.to_port <= permission.get("ToPort", 65535)


def peer_networks(rule: Rule, subnet_cidrs: dict[str, str]) -> list[str]:
    """The networks a CIDR rule must contain to count for `rule`: its peer CIDR, or all its peer's subnets (none
    when a subnet's CIDR block is unknown)."""
    if rule.peer_cidr:
        return [rule.peer_cidr]
    if rule.peer_subnets and all(subnet in subnet_cidrs for subnet in rule.peer_subnets):
        return [subnet_cidrs[subnet] for subnet in rule.peer_subnets]
    return []


def is_present(rule: Rule, group: dict[str, Any], subnet_cidrs: dict[str, str]) -> bool:
    """Whether a permission of the group (as DescribeSecurityGroups returns it) already allows the rule's traffic."""
    networks = peer_networks(rule, subnet_cidrs)
    for permission in _permissions(group, rule.direction):
        if not _allows_ports(permission, rule):
            continue
        if rule.peer_group_id and any(pair.get("GroupId") == rule.peer_group_id for pair in permission.get("UserIdGroupPairs") or []):
            return True
        if any(cidr_contains(r.get("CidrIp", ""), networks) for r in permission.get("IpRanges") or []):
            return True
    return False


def subnets_to_read(missing: list[Rule], groups: dict[str, dict[str, Any]]) -> list[str]:
    """The subnets whose CIDR blocks could still show a missing rule present: those of its peer, when its group has a
    CIDR permission that is not 0.0.0.0/0 (the only case a subnet read can change the verdict)."""
    subnets: set[str] = set()
    for rule in missing:
        ranges = [r.get("CidrIp", "") for p in _permissions(groups[rule.group_id], rule.direction) for r in p.get("IpRanges") or []]
        if rule.peer_subnets and any(not cidr.endswith("/0") for cidr in ranges):
            subnets.update(rule.peer_subnets)
    return sorted(subnets)


@dataclass
class RulesPlan:
    """The wanted rules split into those the groups have and those they lack."""

    present: list[Rule] = field(default_factory=list)
    missing: list[Rule] = field(default_factory=list)

    def by_group(self, added: bool) -> dict[str, list[str]]:
        """Each group's wanted rules it has (with `added`, also those added), as the diff shows them."""
        rules = self.present + (self.missing if added else [])
        groups = {rule.group_id for rule in self.present + self.missing}
        return {group: sorted(str(r) for r in rules if r.group_id == group) for group in sorted(groups)}


def plan(rules: list[Rule], groups: dict[str, dict[str, Any]], subnet_cidrs: dict[str, str]) -> RulesPlan:
    found = RulesPlan()
    for rule in rules:
        (found.present if is_present(rule, groups[rule.group_id], subnet_cidrs) else found.missing).append(rule)
    return found


def batches(rules: list[Rule]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """The IpPermissions to authorize, per (group, direction): one call each."""
    found: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for rule in rules:
        found.setdefault((rule.group_id, rule.direction), []).append(rule.permission())
    return found


def origins(params: dict[str, Any], names: dict[str, str] | None = None) -> dict[str, list[str]]:
    """Which options (or, with `names`, variables) name each group id, for the error of a group that does not exist."""
    names = {**NETWORK_NAMES, **(names or {})}
    found: dict[str, list[str]] = {}
    for side in SIDES:
        for index, group in enumerate(((params.get("network") or {}).get(side) or {}).get("security_groups") or []):
            found.setdefault(group, []).append(f"{names[f'{side}.security_groups']}[{index}]")
    for index, rule in enumerate(params.get("rules") or []):
        for key in ("security_group_id", "peer_security_group_id"):
            if rule.get(key):
                found.setdefault(rule[key], []).append(f"rules[{index}].{key}")
    return found


# ---------------------------------------------------------------- reads and writes


def read(ec2: Any, rules: list[Rule], named: dict[str, list[str]]) -> RulesPlan:
    """Reads every group in one call (and, only when it can change the verdict, the peers' subnets in one more) and
    plans; a group that does not exist fails before any write, named with the option that gave it."""
    groups = _ec2.describe_security_groups(ec2, group_ids(rules))
    unknown = [group for group in group_ids(rules) if group not in groups]
    if unknown:
        raise InputError(
            [
                f"{' and '.join(named.get(group) or [group])} is {group!r}: no such security group in this account and "
                "region; give the id of an existing group"
                for group in unknown
            ]
        )
    found = plan(rules, groups, {})
    subnets = subnets_to_read(found.missing, groups)
    if subnets:
        found = plan(rules, groups, _ec2.describe_subnet_cidrs(ec2, subnets))
    return found


def ensure(ec2: Any, params: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    errors = validate(params)
    if errors:
        raise InputError(errors)
    found = read(ec2, wanted(params), origins(params))
    add = bool(params.get("add_missing"))
    if add and not check_mode:
        for (group, direction), permissions in batches(found.missing).items():
            authorize = _ec2.authorize_security_group_ingress if direction == "ingress" else _ec2.authorize_security_group_egress
            authorize(ec2, group, permissions)
    return {
        "changed": add and bool(found.missing),
        "actions": [f"authorize {rule} ({rule.description})" for rule in found.missing] if add else [],
        "present": [rule.view() for rule in found.present],
        "missing": [{**rule.view(), "fix": rule.fix()} for rule in found.missing],
        "diff": {"before": found.by_group(added=False), "after": found.by_group(added=add)},
    }
