"""Listener actions and weights (`_bluegreen/listener_actions.py`): finding the forward action, building one, reading
its weights with one default, rewriting them. Pure functions over ELBv2 action dicts; no stand-in needed."""

from __future__ import annotations

import pytest

from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import listener_actions as la
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.plan import PlanError

TGS = {"blue": "arn:tg/blue", "green": "arn:tg/green"}


def forward(*entries: dict) -> list[dict]:
    return [{"Type": "forward", "ForwardConfig": {"TargetGroups": list(entries)}}]


def test_weights_from_a_weighted_forward_and_from_a_plain_forward():
    weighted = [
        {
            "Type": "forward",
            "ForwardConfig": {
                "TargetGroups": [{"TargetGroupArn": TGS["blue"], "Weight": 90}, {"TargetGroupArn": TGS["green"], "Weight": 10}]
            },
        }
    ]
    assert la.read_percent_weights(weighted, TGS) == {"blue": 90, "green": 10}
    assert la.read_percent_weights([{"Type": "forward", "TargetGroupArn": TGS["green"]}], TGS) == {"blue": 0, "green": 100}


def test_weights_not_summing_to_100_and_foreign_target_groups_are_refused():
    odd = [
        {
            "Type": "forward",
            "ForwardConfig": {
                "TargetGroups": [{"TargetGroupArn": TGS["blue"], "Weight": 1}, {"TargetGroupArn": TGS["green"], "Weight": 1}]
            },
        }
    ]
    with pytest.raises(PlanError, match="do not sum to 100"):
        la.read_percent_weights(odd, TGS)
    with pytest.raises(PlanError, match=r"neither target_groups\.blue"):
        la.read_percent_weights([{"Type": "forward", "TargetGroupArn": "arn:tg/other"}], TGS)
    with pytest.raises(PlanError, match="exactly one"):
        la.read_percent_weights([{"Type": "fixed-response"}], TGS)


def test_actions_with_weights_keeps_other_fields():
    actions = [
        {"Type": "authenticate-oidc", "Order": 1},
        {
            "Type": "forward",
            "Order": 2,
            "TargetGroupArn": TGS["blue"],
            "ForwardConfig": {"TargetGroupStickinessConfig": {"Enabled": False}},
        },
    ]
    out = la.actions_with_weights(actions, TGS, {"blue": 10, "green": 90})
    assert out[0] == actions[0]
    assert out[1]["Order"] == 2 and "TargetGroupArn" not in out[1]
    assert out[1]["ForwardConfig"]["TargetGroupStickinessConfig"] == {"Enabled": False}
    assert la.read_percent_weights(out, TGS) == {"blue": 10, "green": 90}


def test_single_forward_for_the_test_listener():
    out = la.single_forward([{"Type": "forward", "TargetGroupArn": TGS["blue"]}], TGS["green"])
    assert la.forwards_only_to(out, TGS["green"]) and not la.forwards_only_to(out, TGS["blue"])


def test_find_returns_the_one_forward_and_refuses_none_or_two():
    actions = [{"Type": "authenticate-oidc", "Order": 1}, {"Type": "forward", "Order": 2, "TargetGroupArn": TGS["blue"]}]
    assert la.find_forward_action(actions) is actions[1]
    with pytest.raises(PlanError, match="has 0 forward actions"):
        la.find_forward_action([{"Type": "fixed-response"}])
    with pytest.raises(PlanError, match="has 2 forward actions"):
        la.find_forward_action(actions + actions[1:])


def test_build_forwards_to_both_colours_at_the_weights_and_reads_back():
    built = la.build_forward_action(TGS, la.initial_weights("green"))
    assert built == {
        "Type": "forward",
        "ForwardConfig": {"TargetGroups": [{"TargetGroupArn": TGS["blue"], "Weight": 0}, {"TargetGroupArn": TGS["green"], "Weight": 100}]},
    }
    assert la.read_weights([built], TGS) == {"blue": 0, "green": 100}


def test_a_missing_weight_is_aws_default_1_or_100_for_the_only_target_group():
    assert la.read_weights(forward({"TargetGroupArn": TGS["green"]}), TGS) == {"blue": 0, "green": 100}
    assert la.read_weights(forward({"TargetGroupArn": TGS["blue"]}, {"TargetGroupArn": TGS["green"]}), TGS) == {"blue": 1, "green": 1}
    # the same default wherever the weights are read
    only_green = forward({"TargetGroupArn": TGS["green"]})
    assert la.weights_if_ours(only_green, TGS) == la.read_percent_weights(only_green, TGS) == {"blue": 0, "green": 100}
    assert la.forwards_only_to(only_green, TGS["green"])


def test_weights_if_ours_is_none_for_a_forward_elsewhere_and_keeps_odd_sums():
    assert la.weights_if_ours(forward({"TargetGroupArn": "arn:tg/other", "Weight": 100}), TGS) is None
    assert la.weights_if_ours([{"Type": "fixed-response"}], TGS) is None
    odd = forward({"TargetGroupArn": TGS["blue"], "Weight": 3}, {"TargetGroupArn": TGS["green"], "Weight": 1})
    assert la.weights_if_ours(odd, TGS) == {"blue": 3, "green": 1}  # ours; only a cutover needs percentages


def test_describe_forward_names_each_action():
    actions = [{"Type": "authenticate-oidc"}, *forward({"TargetGroupArn": TGS["blue"]}, {"TargetGroupArn": TGS["green"]})]
    assert la.describe_forward(actions) == f"authenticate-oidc; forward to {TGS['blue']}, {TGS['green']}"
    assert la.describe_forward([]) == "no action"
