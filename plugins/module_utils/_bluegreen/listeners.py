# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The production listener (or listener rule) and the test listener of a blue/green application on an ALB.

Created when missing, with the initial weights: the live colour 100, the other 0; the test listener forwards to
the standby colour. Once they exist their forward actions belong to the bluegreen module, which moves the
weights at every cutover: this module never rewrites an existing forward action. It converges only what
bluegreen does not touch (a listener's protocol, certificate and TLS policy; a rule's conditions and priority),
and refuses, before any write, a listener or rule that forwards to anything but the two colours' target groups.
"""

from __future__ import annotations

import re
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import elbv2 as _elbv2
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import InputError
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.colors import (
    COLORS,
    live_color,
    other,
    target_group_arn_errors,
)
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.listener_actions import (
    build_forward_action,
    describe_forward,
    initial_weights,
    weights_if_ours,
)
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.lock import LOCK_PREFIX, RECORD_KEY
from ansible_collections.inferops.triton_ecs.plugins.module_utils._tags import TagPlan, as_strings, key_errors
from ansible_collections.inferops.triton_ecs.plugins.module_utils._tags import plan as plan_tags

PROTOCOLS = ("HTTP", "HTTPS")
# Condition field -> the *Config key that carries its values in the API.
_CONDITION_CONFIG = {
    "path-pattern": "PathPatternConfig",
    "host-header": "HostHeaderConfig",
    "http-request-method": "HttpRequestMethodConfig",
    "source-ip": "SourceIpConfig",
    "http-header": "HttpHeaderConfig",
    "query-string": "QueryStringConfig",
}
NOT_FOUND_RESPONSE = {
    "Type": "fixed-response",
    "FixedResponseConfig": {"StatusCode": "404", "ContentType": "text/plain", "MessageBody": "no route"},
}


# ---------------------------------------------------------------- input


def _validate_listener(errors: list[str], option: str, spec: dict[str, Any]) -> None:
    port = spec.get("port")
    if port is None or not 1 <= port <= 65535:
        errors.append(f"{option}.port is {port}: give the listener port, 1-65535 (e.g. 443)")
    if spec.get("protocol") not in PROTOCOLS:
        errors.append(f"{option}.protocol is {spec.get('protocol')!r}: an ALB listener is HTTP or HTTPS")
    if spec.get("protocol") == "HTTPS" and not spec.get("certificate_arn"):
        errors.append(f"{option}.certificate_arn is missing: an HTTPS listener needs an ACM certificate ARN")
    if spec.get("protocol") == "HTTP" and (spec.get("certificate_arn") or spec.get("ssl_policy")):
        errors.append(f"{option}: certificate_arn and ssl_policy apply to HTTPS only; set protocol: HTTPS or drop them")


def validate(params: dict[str, Any]) -> list[str]:
    errors: list[str] = []
    if not (params.get("load_balancer_arn") or "").startswith("arn:"):
        errors.append(f"load_balancer_arn {params.get('load_balancer_arn')!r}: give the ALB's ARN")
    errors += target_group_arn_errors(params.get("target_groups") or {})
    if params.get("initial_live_color", "blue") not in COLORS:
        errors.append(f"initial_live_color {params.get('initial_live_color')!r}: blue or green")
    production = params.get("production") or {}
    _validate_listener(errors, "production", production)
    rule = production.get("rule")
    if rule:
        priority = rule.get("priority")
        if priority is None or not 1 <= priority <= 50000:
            errors.append(f"production.rule.priority is {priority}: give a free rule priority, 1-50000")
        conditions = rule.get("conditions") or []
        if not conditions:
            errors.append("production.rule.conditions is empty: give at least one, e.g. [{Field: path-pattern, Values: ['/v2/*']}]")
        for i, condition in enumerate(conditions):
            if condition.get("Field") not in _CONDITION_CONFIG:
                errors.append(
                    f"production.rule.conditions[{i}].Field is {condition.get('Field')!r}: use one of {', '.join(_CONDITION_CONFIG)}"
                )
    test = params.get("test")
    if test:
        _validate_listener(errors, "test", test)
        if test.get("port") == production.get("port"):
            errors.append(f"test.port {test.get('port')} is the production port: the test listener needs a port of its own, e.g. 8443")
    return errors + key_errors(params.get("tags"), reserved=CUTOVER_TAGS)


# ---------------------------------------------------------------- listener and rule settings


def listener_settings(spec: dict[str, Any]) -> dict[str, Any]:
    """The create_listener / modify_listener fields this module owns (never DefaultActions of an existing listener)."""
    out: dict[str, Any] = {"Protocol": spec["protocol"]}
    if spec["protocol"] == "HTTPS":
        out["Certificates"] = [{"CertificateArn": spec["certificate_arn"]}]
        if spec.get("ssl_policy"):
            out["SslPolicy"] = spec["ssl_policy"]
    return out


def listener_drift(listener: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """modify_listener fields whose value differs from `spec` ({} when none)."""
    wanted = listener_settings(spec)
    drift: dict[str, Any] = {}
    if listener.get("Protocol") != wanted["Protocol"]:
        drift["Protocol"] = wanted["Protocol"]
    if "Certificates" in wanted:
        have = [c.get("CertificateArn") for c in listener.get("Certificates") or [] if c.get("IsDefault", True)]
        if have[:1] != [spec["certificate_arn"]]:
            drift["Certificates"] = wanted["Certificates"]
    if "SslPolicy" in wanted and listener.get("SslPolicy") != wanted["SslPolicy"]:
        drift["SslPolicy"] = wanted["SslPolicy"]
    if drift and "Protocol" not in drift:
        drift["Protocol"] = wanted["Protocol"]
    return drift


def canonical_conditions(conditions: list[dict[str, Any]]) -> list[tuple]:
    """Conditions in one comparable form, whether given as Values or as the field's *Config (AWS returns both)."""
    out = []
    for condition in conditions:
        field = condition.get("Field")
        config = condition.get(_CONDITION_CONFIG.get(field, ""), {}) or {}
        if field == "http-header":
            values = tuple(sorted(config.get("Values") or []))
            out.append((field, config.get("HttpHeaderName", "").lower(), values))
        elif field == "query-string":
            pairs = tuple(sorted((p.get("Key") or "", p.get("Value") or "") for p in config.get("Values") or []))
            out.append((field, "", pairs))
        else:
            values = tuple(sorted(config.get("Values") or condition.get("Values") or []))
            out.append((field, "", values))
    return sorted(out)


def find_rule(rules: list[dict[str, Any]], tgs: dict[str, str], priority: int) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(our rule - the one forwarding to the colours only, the rule holding `priority`)."""
    ours = next((r for r in rules if not r.get("IsDefault") and weights_if_ours(r.get("Actions") or [], tgs) is not None), None)
    at_priority = next((r for r in rules if not r.get("IsDefault") and str(r.get("Priority")) == str(priority)), None)
    return ours, at_priority


# ---------------------------------------------------------------- the plan


def plan(observed: dict[str, Any], params: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """Steps (operation, which listener, arguments) from what the ALB shows; raises InputError before any write.

    `observed`: production_listener, production_rules (of that listener), test_listener - each None/[] when missing.
    """
    tgs = params["target_groups"]
    live = params.get("initial_live_color") or "blue"
    production = params["production"]
    rule = production.get("rule")
    steps: list[tuple[str, str, dict[str, Any]]] = []
    errors: list[str] = []

    listener = observed.get("production_listener")
    if listener is None:
        default = NOT_FOUND_RESPONSE if rule else build_forward_action(tgs, initial_weights(live))
        steps.append(
            ("create_listener", "production", {"Port": production["port"], **listener_settings(production), "DefaultActions": [default]})
        )
    else:
        if not rule and weights_if_ours(listener.get("DefaultActions") or [], tgs) is None:
            errors.append(
                f"the listener on port {production['port']} ({describe_forward(listener.get('DefaultActions') or [])}) does not forward to the "
                "blue and green target groups only: give production.rule to add a rule to it, or use another production.port"
            )
        drift = listener_drift(listener, production)
        if drift:
            steps.append(("modify_listener", "production", drift))
    if rule:
        ours, at_priority = find_rule(observed.get("production_rules") or [], tgs, rule["priority"])
        if ours is None:
            if at_priority is not None:
                errors.append(
                    f"production.rule.priority {rule['priority']} is taken by rule {at_priority.get('RuleArn')} "
                    f"({describe_forward(at_priority.get('Actions') or [])}): pick a free priority"
                )
            steps.append(
                (
                    "create_rule",
                    "production",
                    {
                        "Priority": rule["priority"],
                        "Conditions": rule["conditions"],
                        "Actions": [build_forward_action(tgs, initial_weights(live))],
                    },
                )
            )
        else:
            if canonical_conditions(ours.get("Conditions") or []) != canonical_conditions(rule["conditions"]):
                steps.append(("modify_rule", "production", {"RuleArn": ours["RuleArn"], "Conditions": rule["conditions"]}))
            if str(ours.get("Priority")) != str(rule["priority"]):
                if at_priority is not None:
                    errors.append(
                        f"production.rule.priority {rule['priority']} is taken by rule {at_priority.get('RuleArn')}: pick a free priority"
                    )
                steps.append(("set_rule_priority", "production", {"RuleArn": ours["RuleArn"], "Priority": rule["priority"]}))

    test = params.get("test")
    if test:
        test_listener = observed.get("test_listener")
        if test_listener is None:
            standby = initial_weights(other(live))
            steps.append(
                (
                    "create_listener",
                    "test",
                    {"Port": test["port"], **listener_settings(test), "DefaultActions": [build_forward_action(tgs, standby)]},
                )
            )
        else:
            if weights_if_ours(test_listener.get("DefaultActions") or [], tgs) is None:
                errors.append(
                    f"the listener on test port {test['port']} ({describe_forward(test_listener.get('DefaultActions') or [])}) does not forward to "
                    "the blue and green target groups only: use another test.port"
                )
            drift = listener_drift(test_listener, test)
            if drift:
                steps.append(("modify_listener", "test", drift))
    if errors:
        raise InputError(errors)
    return steps


# ---------------------------------------------------------------- the module's run


def _snapshot(observed: dict[str, Any], tgs: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    listener = observed.get("production_listener")
    if listener:
        out["production_listener"] = {"port": listener.get("Port"), "protocol": listener.get("Protocol")}
        out["production_weights"] = weights_if_ours(listener.get("DefaultActions") or [], tgs)
    ours = observed.get("production_rule")
    if ours:
        out["production_rule"] = {"priority": ours.get("Priority"), "conditions": canonical_conditions(ours.get("Conditions") or [])}
        out["production_weights"] = weights_if_ours(ours.get("Actions") or [], tgs)
    test = observed.get("test_listener")
    if test:
        out["test_listener"] = {
            "port": test.get("Port"),
            "protocol": test.get("Protocol"),
            "weights": weights_if_ours(test.get("DefaultActions") or [], tgs),
        }
    return out


def production_url(load_balancer: dict[str, Any], production: dict[str, Any]) -> str:
    """Where clients reach production: the listener's protocol and port on the load balancer's DNS name or, for a rule
    on a shared listener, on the rule's host header (the DNS name alone reaches the listener's default action), with
    the rule's path pattern up to its first wildcard."""
    conditions = (production.get("rule") or {}).get("conditions") or []

    def values(field: str, config: str) -> list[str]:
        found = []
        for condition in conditions:
            if condition.get("Field") == field:
                found += condition.get("Values") or (condition.get(config) or {}).get("Values") or []
        return found

    hosts = [h for h in values("host-header", "HostHeaderConfig") if "*" not in h and "?" not in h]
    paths = values("path-pattern", "PathPatternConfig")
    host = hosts[0] if hosts else load_balancer["DNSName"]
    path = re.split(r"[*?]", paths[0], maxsplit=1)[0] if paths else ""
    return f"{production.get('protocol', 'HTTPS').lower()}://{host}:{production['port']}{path}"


def observe(elbv2: Any, params: dict[str, Any]) -> dict[str, Any]:
    listeners = _elbv2.describe_listeners(elbv2, params["load_balancer_arn"])
    by_port = {int(listener["Port"]): listener for listener in listeners}
    production = by_port.get(params["production"]["port"])
    observed: dict[str, Any] = {"production_listener": production, "production_rules": [], "production_rule": None, "test_listener": None}
    rule = params["production"].get("rule")
    if production and rule:
        observed["production_rules"] = _elbv2.describe_rules(elbv2, production["ListenerArn"])
        observed["production_rule"] = find_rule(observed["production_rules"], params["target_groups"], rule["priority"])[0]
    if params.get("test"):
        observed["test_listener"] = by_port.get(params["test"]["port"])
    return observed


# The cutover lock and record live in these tags of the production listener or rule: never purged, never written here.
CUTOVER_TAGS = (LOCK_PREFIX, RECORD_KEY)


def tag_plans(elbv2: Any, params: dict[str, Any], before: dict[str, Any]) -> dict[str, TagPlan]:
    """Tags to converge on the existing resources that hold this application's forwards: the production rule (a
    listener shared through rules keeps its own tags) or listener, and the test listener. New ones get the tags at creation."""
    if params.get("tags") is None:
        return {}
    if params["production"].get("rule"):
        holders = {"rule": (before["production_rule"] or {}).get("RuleArn")}
    else:
        holders = {"production": (before["production_listener"] or {}).get("ListenerArn")}
    holders["test"] = (before["test_listener"] or {}).get("ListenerArn")
    existing = {which: arn for which, arn in holders.items() if arn}
    current = _elbv2.describe_tags(elbv2, list(existing.values())) if existing else {}
    return {
        which: plan_tags(current.get(arn), params["tags"], params.get("purge_tags", True), CUTOVER_TAGS) for which, arn in existing.items()
    }


def ensure(elbv2: Any, params: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    errors = validate(params)
    if errors:
        raise InputError(errors)
    tgs = params["target_groups"]
    load_balancer = _elbv2.describe_load_balancer(elbv2, params["load_balancer_arn"])
    if load_balancer is None:
        raise InputError(f"load_balancer_arn {params['load_balancer_arn']}: no such load balancer; create it first or set it right")
    missing = [arn for arn, found in _elbv2.describe_target_groups(elbv2, [tgs[c] for c in COLORS]).items() if found is None]
    if missing:
        raise InputError(f"target_groups: {', '.join(missing)} do not exist; create them first (role fleet_load_balancing)")
    before = observe(elbv2, params)
    steps = plan(before, params)
    tags = params.get("tags") or {}
    arns = {
        "production": (before["production_listener"] or {}).get("ListenerArn"),
        "test": (before["test_listener"] or {}).get("ListenerArn"),
        "rule": (before["production_rule"] or {}).get("RuleArn"),
    }
    if not check_mode:
        for operation, which, fields in steps:
            if operation == "create_listener":
                arns[which] = _elbv2.create_listener(elbv2, params["load_balancer_arn"], fields, tags)["ListenerArn"]
            elif operation == "modify_listener":
                _elbv2.modify_listener(elbv2, arns[which], fields)
            elif operation == "create_rule":
                arns["rule"] = _elbv2.create_rule(elbv2, arns["production"], fields, tags)["RuleArn"]
            elif operation == "modify_rule":
                _elbv2.modify_rule(elbv2, fields["RuleArn"], {"Conditions": fields["Conditions"]})
            elif operation == "set_rule_priority":
                _elbv2.set_rule_priority(elbv2, fields["RuleArn"], fields["Priority"])
    tags_to_converge = tag_plans(elbv2, params, before)
    changed_tags = [which for which, tag_plan in tags_to_converge.items() if tag_plan.changed]
    if not check_mode:
        for which in changed_tags:
            if tags_to_converge[which].to_remove:
                _elbv2.remove_tags(elbv2, arns[which], tags_to_converge[which].to_remove)
            if tags_to_converge[which].to_set:
                _elbv2.add_tags(elbv2, arns[which], tags_to_converge[which].to_set)
    after = observe(elbv2, params) if steps and not check_mode else before
    snapshot_after = _snapshot(after, tgs)
    if check_mode and steps:
        live = params.get("initial_live_color") or "blue"
        snapshot_after.setdefault("production_weights", initial_weights(live))
    weights = snapshot_after.get("production_weights") or initial_weights(params.get("initial_live_color") or "blue")
    tags_after = {which: tag_plan.after for which, tag_plan in tags_to_converge.items()}
    if params.get("tags") is not None:  # what this run created carries the tags asked
        created = {
            "rule" if operation == "create_rule" else which for operation, which, _fields in steps if operation.startswith("create_")
        }
        tags_after.update(dict.fromkeys(created, as_strings(params["tags"])))
    return {
        "changed": bool(steps or changed_tags),
        "actions": [f"{step[0]} {step[1]}" for step in steps] + [f"update_tags {which}" for which in changed_tags],
        "production_listener_arn": arns["production"],
        "production_rule_arn": arns["rule"] if params["production"].get("rule") else None,
        "test_listener_arn": arns["test"],
        "production_url": production_url(load_balancer, params["production"]),
        "weights": weights,
        "live_color": live_color(weights),
        "tags": tags_after,
        "diff": {
            "before": {**_snapshot(before, tgs), "tags": {which: tag_plan.before for which, tag_plan in tags_to_converge.items()}},
            "after": {**snapshot_after, "tags": tags_after},
        },
    }
