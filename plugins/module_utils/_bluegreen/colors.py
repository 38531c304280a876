# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The words of a blue/green application: its two colours, which one is live, and what each colour's service is called.

Every part that speaks of colours (the cutover, the emergency rollback, autoscaling, the listeners, the target
groups, the release ledger) takes them from here. Pure; imports nothing of the collection.
"""

from __future__ import annotations

COLORS = ("blue", "green")
# The target_groups option of bluegreen, bluegreen_autoscaling, bluegreen_listeners and bluegreen_services.
TARGET_GROUPS_OPTION = dict(type="dict", required=True, options={color: dict(type="str", required=True) for color in COLORS})


def other(color: str) -> str:
    return "green" if color == "blue" else "blue"


def live_color(weights: dict[str, int]) -> str:
    """The colour with the larger production weight (blue on a tie)."""
    return "blue" if weights.get("blue", 0) >= weights.get("green", 0) else "green"


def is_split(weights: dict[str, int]) -> bool:
    """Whether both colours have production traffic (a cutover in its traffic steps, or one stopped there)."""
    return all(weights.get(color, 0) > 0 for color in COLORS)


def service_names(name: str) -> dict[str, str]:
    """{colour: ECS service name} of the application `name`: `<name>-blue` and `<name>-green`."""
    return {color: f"{name}-{color}" for color in COLORS}


def target_group_arn_errors(tgs: dict[str, str]) -> list[str]:
    """The target_groups option: an ARN for each colour, and not the same one for both."""
    errors = [
        f"target_groups.{c} {tgs.get(c)!r}: give the ARN of the {c} target group"
        for c in COLORS
        if not (tgs.get(c) or "").startswith("arn:")
    ]
    if tgs.get("blue") and tgs.get("blue") == tgs.get("green"):
        errors.append("target_groups.blue and target_groups.green are the same ARN: each colour needs its own target group")
    return errors
