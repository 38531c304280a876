"""The load-balancer route stand-in's pure parts (tests/harness/alb.py): action parsing, target choice, weighted picks."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.harness.alb import SmoothWeightedPicker, forward_weights, routable_targets

BLUE, GREEN = "arn:tg/blue", "arn:tg/green"


def picks(picker: SmoothWeightedPicker, weights: list[tuple[str, int]], n: int) -> list[str | None]:
    return [picker.pick(weights) for _pick in range(n)]


@pytest.mark.parametrize(
    ("weights", "n", "expected"),
    [
        ([(BLUE, 100), (GREEN, 0)], 20, {BLUE: 20}),
        ([(BLUE, 0), (GREEN, 100)], 20, {GREEN: 20}),
        ([(BLUE, 50), (GREEN, 50)], 20, {BLUE: 10, GREEN: 10}),
        ([(BLUE, 90), (GREEN, 10)], 10, {BLUE: 9, GREEN: 1}),
        ([(BLUE, 1), (GREEN, 3)], 8, {BLUE: 2, GREEN: 6}),
    ],
    ids=["100/0", "0/100", "50/50", "90/10", "1/3"],
)
def test_smooth_weighted_picks_are_exact_over_one_cycle(weights, n, expected):
    assert Counter(picks(SmoothWeightedPicker(), weights, n)) == expected


def test_smooth_weighted_picks_spread_the_small_group_out():
    sequence = picks(SmoothWeightedPicker(), [(BLUE, 50), (GREEN, 50)], 6)
    assert sequence in ([BLUE, GREEN] * 3, [GREEN, BLUE] * 3)
    eighty_twenty = picks(SmoothWeightedPicker(), [(BLUE, 80), (GREEN, 20)], 10)
    green_at = [i for i, arn in enumerate(eighty_twenty) if arn == GREEN]
    assert len(green_at) == 2 and green_at[1] - green_at[0] == 5


def test_new_weights_start_a_new_cycle():
    picker = SmoothWeightedPicker()
    picks(picker, [(BLUE, 90), (GREEN, 10)], 3)  # blue's score is ahead
    assert Counter(picks(picker, [(BLUE, 10), (GREEN, 90)], 10)) == {BLUE: 1, GREEN: 9}


def test_no_weight_no_pick():
    assert SmoothWeightedPicker().pick([(BLUE, 0), (GREEN, 0)]) is None
    assert SmoothWeightedPicker().pick([]) is None


def test_forward_weights_from_listener_and_rule_actions():
    weighted = {
        "Type": "forward",
        "Order": 2,
        "ForwardConfig": {"TargetGroups": [{"TargetGroupArn": BLUE, "Weight": 90}, {"TargetGroupArn": GREEN, "Weight": 10}]},
    }
    authenticate = {"Type": "authenticate-oidc", "Order": 1}
    assert forward_weights([weighted, authenticate]) == [(BLUE, 90), (GREEN, 10)]
    assert forward_weights([{"Type": "forward", "TargetGroupArn": GREEN}]) == [(GREEN, 1)]
    assert forward_weights([{"Type": "fixed-response", "FixedResponseConfig": {"StatusCode": "503"}}]) == []


def test_routable_targets_are_the_healthy_ones_else_all_but_draining():
    def target(ip: str, state: str, port: int | None = 8000) -> dict:
        return {"Target": {"Id": ip, **({"Port": port} if port else {})}, "TargetHealth": {"State": state}}

    mixed = [target("10.0.0.2", "unhealthy"), target("10.0.0.1", "healthy"), target("10.0.0.3", "healthy", None)]
    assert routable_targets(mixed, 8080) == [("10.0.0.1", 8000), ("10.0.0.3", 8080)]
    none_healthy = [target("10.0.0.2", "unhealthy"), target("10.0.0.4", "draining"), target("10.0.0.5", "initial")]
    assert routable_targets(none_healthy, 8000) == [("10.0.0.2", 8000), ("10.0.0.5", 8000)]
    assert routable_targets([], 8000) == []
