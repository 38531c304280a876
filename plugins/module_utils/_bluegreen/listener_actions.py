# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""A blue/green listener's actions and weights: the one place that finds the forward action in a listener's (or
rule's) actions, builds one from the colours' target groups, reads its weights, and rewrites them.

Pure functions over the ELBv2 action shape (`Type`, `TargetGroupArn` or `ForwardConfig.TargetGroups`).
"""

from __future__ import annotations

from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.colors import COLORS, other
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.plan import PlanError

# A forward entry without a Weight gets AWS's default, 1; the only target group of a forward gets all traffic, 100.
DEFAULT_WEIGHT = 1
ONLY_TARGET_WEIGHT = 100


def forward_entries(action: dict[str, Any]) -> list[dict[str, Any]]:
    """A forward action's target groups; the plain single-target form counts as weight 100."""
    return (action.get("ForwardConfig") or {}).get("TargetGroups") or [
        {"TargetGroupArn": action.get("TargetGroupArn"), "Weight": ONLY_TARGET_WEIGHT}
    ]


def entry_weight(entry: dict[str, Any], entries: list[dict[str, Any]]) -> int:
    """The weight of one of a forward's `entries`, with the default above when AWS gave none."""
    return int(entry.get("Weight", ONLY_TARGET_WEIGHT if len(entries) == 1 else DEFAULT_WEIGHT))


def find_forward_action(actions: list[dict[str, Any]]) -> dict[str, Any]:
    """The one forward action among a listener's (or rule's) actions; PlanError when there is not exactly one."""
    forwards = [a for a in actions if a.get("Type") == "forward"]
    if len(forwards) != 1:
        raise PlanError(
            f"the production listener has {len(forwards)} forward actions: it needs exactly one, forwarding to both colours' target groups"
        )
    return forwards[0]


def build_forward_action(tgs: dict[str, str], weights: dict[str, int]) -> dict[str, Any]:
    """A forward action to both colours' target groups (`tgs`) at these weights."""
    return {"Type": "forward", "ForwardConfig": {"TargetGroups": [{"TargetGroupArn": tgs[c], "Weight": weights[c]} for c in COLORS]}}


def initial_weights(live: str) -> dict[str, int]:
    return {live: 100, other(live): 0}


# ---------------------------------------------------------------- reading the weights


def read_weights(actions: list[dict[str, Any]], tgs: dict[str, str]) -> dict[str, int]:
    """{blue: w, green: w} of the one forward action; PlanError when there is not exactly one forward action or
    it forwards to a target group that is neither colour's. The plain single-target form counts as 100/0."""
    entries = forward_entries(find_forward_action(actions))
    by_arn = {arn: color for color, arn in tgs.items()}
    weights = dict.fromkeys(COLORS, 0)
    for entry in entries:
        arn = entry.get("TargetGroupArn")
        if arn not in by_arn:
            raise PlanError(
                f"the production listener forwards to target group {arn}, which is neither target_groups.blue nor target_groups.green: "
                "point the listener (or rule) at the two colours' target groups"
            )
        weights[by_arn[arn]] = entry_weight(entry, entries)
    return weights


def read_percent_weights(actions: list[dict[str, Any]], tgs: dict[str, str]) -> dict[str, int]:
    """The weights as `read_weights` reads them, which a cutover moves as percentages: PlanError unless they sum to 100."""
    weights = read_weights(actions, tgs)
    if sum(weights.values()) != 100:
        raise PlanError(
            f"the production listener's weights blue={weights['blue']} green={weights['green']} do not sum to 100: "
            "set them as percentages (e.g. 100 and 0) before the cutover"
        )
    return weights


def weights_if_ours(actions: list[dict[str, Any]], tgs: dict[str, str]) -> dict[str, int] | None:
    """The weights as `read_weights` reads them; None when the actions do not forward to the colours only."""
    try:
        return read_weights(actions, tgs)
    except PlanError:
        return None


# ---------------------------------------------------------------- rewriting and describing


def actions_with_weights(actions: list[dict[str, Any]], tgs: dict[str, str], weights: dict[str, int]) -> list[dict[str, Any]]:
    """The listener's actions with the forward action rewritten to these weights; other fields kept as they are."""
    out: list[dict[str, Any]] = []
    for action in actions:
        if action.get("Type") != "forward":
            out.append(action)
            continue
        new = {k: v for k, v in action.items() if k != "TargetGroupArn"}
        config = dict(new.get("ForwardConfig") or {})
        config["TargetGroups"] = [{"TargetGroupArn": tgs[c], "Weight": weights[c]} for c in COLORS]
        new["ForwardConfig"] = config
        out.append(new)
    return out


def single_forward(actions: list[dict[str, Any]], target_group_arn: str) -> list[dict[str, Any]]:
    """A test listener's actions forwarding everything to one target group."""
    out = [a for a in actions if a.get("Type") != "forward"]
    order = min((a.get("Order", 1) for a in actions if a.get("Type") == "forward"), default=None)
    forward: dict[str, Any] = {"Type": "forward", "ForwardConfig": {"TargetGroups": [{"TargetGroupArn": target_group_arn, "Weight": 100}]}}
    if order is not None and any("Order" in a for a in actions):
        forward["Order"] = order
    return [*out, forward]


def forwards_only_to(actions: list[dict[str, Any]], target_group_arn: str) -> bool:
    try:
        entries = forward_entries(find_forward_action(actions))
    except PlanError:
        return False
    live = [e["TargetGroupArn"] for e in entries if entry_weight(e, entries) > 0]
    return live == [target_group_arn]


def describe_forward(actions: list[dict[str, Any]]) -> str:
    parts = []
    for action in actions:
        if action.get("Type") == "forward":
            entries = forward_entries(action)
            parts.append("forward to " + ", ".join(str(e.get("TargetGroupArn")) for e in entries))
        else:
            parts.append(str(action.get("Type")))
    return "; ".join(parts) or "no action"
