# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The preflight's network check: the security-group rules of the fleet's paths (security_group_rules.py), read before
any write; kept apart from preflight.py's inventory checks."""

from __future__ import annotations

from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import BotoCoreError, ClientError, InputError, error_code
from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet import security_group_rules as _rules


def as_network(raw: dict[str, Any]) -> dict[str, Any]:
    """The network as the security_group_rules module's options would hold it: each side's lists, the ports as
    integers (templated inventory values may arrive as strings), Triton's defaults for missing ports."""
    network: dict[str, Any] = {}
    for side in _rules.SIDES:
        part = raw.get(side) or {}
        network[side] = {"security_groups": list(part.get("security_groups") or []), "subnets": list(part.get("subnets") or [])}
    for key, default in (("http_port", 8000), ("metrics_port", 8002)):
        value = raw.get(key, default)
        network[key] = int(value) if isinstance(value, str) and value.isdigit() else value
    return network


def preflight_report(ec2: Any, spec: dict[str, Any]) -> dict[str, Any]:
    """The preflight's check of the fleet's rules, before any write: {problems, missing}.

    spec: {network (as the module's), manage (the collection adds missing rules later: they are no problem then),
    names ("tasks.security_groups" -> the inventory variable, ..., "manage" -> the switch's variable)}. A group that
    does not exist is always a problem; a missing rule is one only when the collection does not manage them, named
    with the command that adds it and the switch that lets the collection add it."""
    names = spec.get("names") or {}
    network = as_network(spec.get("network") or {})
    errors = _rules.network_errors(network, names)
    if errors:
        return {"problems": errors, "missing": []}
    try:
        found = _rules.read(ec2, _rules.fleet_rules(network), _rules.origins({"network": network}, names))
    except InputError as e:
        return {"problems": e.errors, "missing": []}
    except (BotoCoreError, ClientError) as e:
        return {
            "problems": [
                f"cannot read the security groups ({error_code(e) or e}): the caller needs ec2:DescribeSecurityGroups and "
                "ec2:DescribeSubnets (docs/iam.md)"
            ],
            "missing": [],
        }
    missing = [{**rule.view(), "fix": rule.fix()} for rule in found.missing]
    if spec.get("manage"):
        return {"problems": [], "missing": missing}
    switch = names.get("manage", "add_missing")
    problems = [
        f"security group {rule.group_id} lacks {rule.direction} tcp {rule.ports} {'from' if rule.direction == 'ingress' else 'to'} "
        f"{rule.peer_group_id} ({rule.purpose}): add it ({rule.fix()}), or set {switch}: true so that the collection adds it"
        for rule in found.missing
    ]
    return {"problems": problems, "missing": missing}
