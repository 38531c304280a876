"""The blue/green planner (`_bluegreen/plan.py`): every combination of weights, task definitions and sizes, and each helper."""

from __future__ import annotations

import itertools

import pytest

from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import gates
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.colors import other
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.input import all_input_errors
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.plan import PHASES, PlanError, decide, planned_writes, truncate

NEW = "arn:aws:ecs:us-east-1:123456789012:task-definition/triton:2"
OLD = "arn:aws:ecs:us-east-1:123456789012:task-definition/triton:1"
TGS = {"blue": "arn:tg/blue", "green": "arn:tg/green"}
STEPS = [10, 50, 100]
ALL_PHASES = ["capacity", "standby_up", "gates", "traffic", "drain", "finish"]  # a cutover from its start


def color(name: str, td: str | None, desired: int, healthy: int | None = None, **kw) -> gates.ColorState:
    return gates.ColorState(
        service=f"triton-{name}",
        task_definition=td,
        desired=desired,
        running=kw.pop("running", desired),
        healthy=desired if healthy is None else healthy,
        **kw,
    )


def colors(blue: tuple, green: tuple) -> dict[str, gates.ColorState]:
    return {"blue": color("blue", *blue), "green": color("green", *green)}


WEIGHTS = [
    {"blue": 100, "green": 0},
    {"blue": 0, "green": 100},
    {"blue": 90, "green": 10},
    {"blue": 50, "green": 50},
    {"blue": 10, "green": 90},
]
TDS = [NEW, OLD]
SIZES = [0, 2, 3]


def all_states():
    for weights, blue_td, green_td, blue_n, green_n in itertools.product(WEIGHTS, TDS, TDS, SIZES, SIZES):
        yield weights, colors((blue_td, blue_n), (green_td, green_n))


@pytest.mark.parametrize("scale_down_old", [True, False])
def test_present_plans_are_consistent_for_every_state(scale_down_old):
    """Over every combination: the plan never sends traffic to a colour that does not run the new task definition,
    runs phases in order, ends with the new colour at 100%, and is a no-op only when that is already so."""
    for weights, cs in all_states():
        plan = decide("present", NEW, 2, STEPS, weights, cs, scale_down_old)
        context = (weights, {c: (s.task_definition[-1], s.desired) for c, s in cs.items()})
        assert plan.phases == sorted(plan.phases, key=PHASES.index), context
        if plan.action == "noop":
            live = plan.live
            assert weights[live] == 100 and cs[live].task_definition == NEW and cs[live].desired == 2, context
            assert not (scale_down_old and cs[other(live)].desired > 0), context
            continue
        assert plan.new != plan.old and {plan.new, plan.old} == {"blue", "green"}, context
        if plan.action == "finish":
            assert weights[plan.new] == 100 and plan.phases == ["drain", "finish"] and scale_down_old, context
            continue
        assert plan.action == "cutover", context
        assert "traffic" in plan.phases and "standby_up" in plan.phases and "gates" in plan.phases, context
        # steps only go up from the weight the new colour already has, and end at 100
        start = 0 if plan.restore_first else weights[plan.new]
        assert plan.steps == [s for s in STEPS if s > start], context
        if weights[plan.new] > 0 and not plan.restore_first:
            assert cs[plan.new].task_definition == NEW, context  # resuming: traffic already on a colour with NEW
        if plan.restore_first:
            assert weights[plan.new] > 0 and weights[plan.old] > 0, context
            assert "capacity" in plan.phases, context


def test_every_state_is_covered():
    assert len(list(all_states())) == len(WEIGHTS) * len(TDS) ** 2 * len(SIZES) ** 2


@pytest.mark.parametrize(
    ("weights", "cs", "action", "new", "phases", "steps"),
    [
        # blue live with OLD, green idle: full cutover to green
        (WEIGHTS[0], colors((OLD, 2), (OLD, 0)), "cutover", "green", ALL_PHASES, STEPS),
        # green live with OLD: full cutover back to blue
        (WEIGHTS[1], colors((OLD, 0), (OLD, 2)), "cutover", "blue", ALL_PHASES, STEPS),
        # interrupted after standby_up: green already runs NEW at 0%, the plan starts again from capacity (no-ops)
        (WEIGHTS[0], colors((OLD, 2), (NEW, 2)), "cutover", "green", ALL_PHASES, STEPS),
        # interrupted at 10%: continue from 50
        (WEIGHTS[2], colors((OLD, 2), (NEW, 2)), "cutover", "green", ["standby_up", "gates", "traffic", "drain", "finish"], [50, 100]),
        # interrupted at 50%
        (WEIGHTS[3], colors((OLD, 2), (NEW, 2)), "cutover", "green", ["standby_up", "gates", "traffic", "drain", "finish"], [100]),
        # interrupted after the last step, before the old colour was scaled down
        (WEIGHTS[1], colors((OLD, 2), (NEW, 2)), "finish", "green", ["drain", "finish"], []),
        # done
        (WEIGHTS[1], colors((OLD, 0), (NEW, 2)), "noop", None, [], []),
        # live runs NEW but at another size: a cutover to the other colour with the new size
        (WEIGHTS[1], colors((OLD, 0), (NEW, 3)), "cutover", "blue", ALL_PHASES, STEPS),
    ],
)
def test_present_examples(weights, cs, action, new, phases, steps):
    plan = decide("present", NEW, 2, STEPS, weights, cs, True)
    assert (plan.action, plan.new, plan.phases, plan.steps) == (action, new, phases, steps)


def test_split_traffic_with_no_colour_on_the_new_definition_restores_the_larger_share_first():
    plan = decide("present", NEW, 2, STEPS, {"blue": 90, "green": 10}, colors((OLD, 2), (OLD, 2)), True)
    assert (plan.restore_first, plan.old, plan.new, plan.steps) == (True, "blue", "green", STEPS)
    writes = planned_writes(plan, plan.phases, colors((OLD, 2), (OLD, 2)), NEW, 2, {"blue": 90, "green": 10}, True)
    assert writes[0] == "set production weights blue=100 green=0"


def test_keep_old_colour_is_a_noop_once_live():
    plan = decide("present", NEW, 2, STEPS, WEIGHTS[1], colors((OLD, 2), (NEW, 2)), False)
    assert plan.action == "noop"


# ---------------------------------------------------------------- rollback


def test_rollback_during_a_cutover_goes_back_to_the_colour_without_the_new_definition():
    plan = decide("rolled_back", NEW, 2, STEPS, {"blue": 50, "green": 50}, colors((OLD, 2), (NEW, 2)), True)
    assert (plan.action, plan.old, plan.new) == ("rollback", "blue", "green")


def test_rollback_after_the_cutover_needs_the_old_colour_still_up():
    plan = decide("rolled_back", NEW, 2, STEPS, WEIGHTS[1], colors((OLD, 2), (NEW, 2)), True)
    assert (plan.action, plan.old) == ("rollback", "blue")
    with pytest.raises(PlanError, match="scaled down to 0"):
        decide("rolled_back", NEW, 2, STEPS, WEIGHTS[1], colors((OLD, 0), (NEW, 2)), True)


def test_rollback_refuses_an_old_colour_that_is_not_healthy():
    with pytest.raises(PlanError, match="healthy targets"):
        decide("rolled_back", NEW, 2, STEPS, WEIGHTS[1], colors((OLD, 2, 0), (NEW, 2)), True)


def test_rollback_is_idempotent():
    after = colors((OLD, 2), (NEW, 0))
    assert decide("rolled_back", NEW, 2, STEPS, WEIGHTS[0], after, True).action == "noop"
    # traffic is back but the new colour still runs: only the scale-down remains
    plan = decide("rolled_back", NEW, 2, STEPS, WEIGHTS[0], colors((OLD, 2), (NEW, 2)), True)
    assert plan.action == "rollback"
    assert planned_writes(plan, plan.phases, colors((OLD, 2), (NEW, 2)), NEW, 2, WEIGHTS[0], True) == [
        "update service triton-green: 0 tasks"
    ]


def test_rollback_with_split_traffic_and_both_colours_on_the_definition_is_refused():
    with pytest.raises(PlanError, match="cannot tell"):
        decide("rolled_back", NEW, 2, STEPS, WEIGHTS[3], colors((NEW, 2), (NEW, 2)), True)


def test_rolled_back_over_every_state_never_moves_traffic_to_the_new_definition():
    for weights, cs in all_states():
        try:
            plan = decide("rolled_back", NEW, 2, STEPS, weights, cs, True)
        except PlanError:
            continue
        if plan.action == "rollback":
            assert cs[plan.old].task_definition != NEW or cs[plan.new].task_definition == NEW
            assert cs[plan.new].task_definition == NEW
            assert cs[plan.old].desired > 0


# ---------------------------------------------------------------- truncation and writes


def test_stop_after_truncates_phases():
    plan = decide("present", NEW, 2, STEPS, WEIGHTS[0], colors((OLD, 2), (OLD, 0)), True)
    assert truncate(plan, "discover") == []
    assert truncate(plan, "standby_up") == ["capacity", "standby_up"]
    assert truncate(plan, None) == plan.phases


def test_planned_writes_of_a_full_cutover():
    cs = colors((OLD, 2), (OLD, 0))
    plan = decide("present", NEW, 2, STEPS, WEIGHTS[0], cs, True)
    assert planned_writes(plan, plan.phases, cs, NEW, 2, WEIGHTS[0], True) == [
        f"update service triton-green: task definition {NEW}, 2 tasks",
        "set production weights green=10 blue=90",
        "set production weights green=50 blue=50",
        "set production weights green=100 blue=0",
        "update service triton-blue: 0 tasks",
    ]
    assert "update service triton-blue: 0 tasks" not in planned_writes(plan, plan.phases, cs, NEW, 2, WEIGHTS[0], False)


# ---------------------------------------------------------------- input


def params(**kw):
    base = {"traffic_steps": STEPS, "bake_time_s": 0, "desired_count": 2, "target_groups": dict(TGS), "state": "present"}
    base.update(kw)
    return base


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"traffic_steps": [10, 50]}, "the last step must be 100"),
        ({"traffic_steps": [50, 10, 100]}, "increase strictly"),
        ({"traffic_steps": [0, 100]}, "between 1 and 100"),
        ({"traffic_steps": [10, 150]}, "between 1 and 100"),
        ({"traffic_steps": []}, "traffic_steps is empty"),
        ({"bake_time_s": -1}, "bake_time_s is -1"),
        ({"termination_wait_s": -5}, "termination_wait_s is -5"),
        ({"desired_count": 0}, "desired_count is 0"),
        ({"target_groups": {"blue": "arn:tg/x", "green": "arn:tg/x"}}, "same ARN"),
        ({"drain": {"timeout_s": -1}}, "drain.timeout_s is -1"),
        ({"test_route_urls": {"red": "http://x"}}, "test_route_urls has key 'red'"),
        ({"gates": {"smoke": {"inputs": []}}}, "gates.smoke needs model"),
    ],
)
def test_bad_input_is_named(override, message):
    errors = all_input_errors(params(**override))
    assert any(message in e for e in errors), errors


def test_good_input_has_no_errors():
    assert all_input_errors(params()) == []


# ---------------------------------------------------------------- services and health


def service(desired=2, running=2, pending=0, td=NEW, deployments=None):
    return {
        "serviceName": "triton-green",
        "taskDefinition": td,
        "desiredCount": desired,
        "runningCount": running,
        "pendingCount": pending,
        "deployments": deployments if deployments is not None else [{"status": "PRIMARY", "rolloutState": "COMPLETED"}],
        "loadBalancers": [{"targetGroupArn": TGS["green"]}],
    }


def health(*states):
    return [{"Target": {"Id": f"10.0.0.{i}"}, "TargetHealth": {"State": s}} for i, s in enumerate(states)]


@pytest.mark.parametrize(
    ("svc", "targets", "problem"),
    [
        (service(), health("healthy", "healthy"), None),
        (service(td=OLD), health("healthy", "healthy"), "runs " + OLD),
        (service(running=1, pending=1), health("healthy"), "runs 1 of 2 tasks"),
        (service(), health("healthy", "initial"), "1 healthy targets of 2"),
        (service(), health("healthy", "healthy", "unhealthy"), "1 targets not healthy"),
        (service(), health(), "0 healthy targets of 2"),
        (
            service(deployments=[{"status": "PRIMARY", "rolloutState": "IN_PROGRESS"}, {"status": "ACTIVE"}]),
            health("healthy", "healthy"),
            "2 deployments",
        ),
        (service(deployments=[{"status": "PRIMARY", "rolloutState": "FAILED"}]), health("healthy", "healthy"), "deployment is FAILED"),
        # a draining target of an earlier task does not block: it is leaving
        (service(), health("healthy", "healthy", "draining"), None),
    ],
)
def test_serving_problems(svc, targets, problem):
    problems = gates.serving_problems(gates.color_state(svc, targets), NEW, 2)
    if problem is None:
        assert problems == []
    else:
        assert any(problem in p for p in problems), problems


# ---------------------------------------------------------------- capacity, alarms, smoke, drain


def test_managed_scaling_providers():
    """Which capacity providers the capacity phase asks for Auto Scaling headroom (placement: test_placement.py)."""
    providers = [
        {"name": "a", "status": "ACTIVE", "autoScalingGroupProvider": {"managedScaling": {"status": "ENABLED"}}},
        {"name": "b", "status": "ACTIVE", "autoScalingGroupProvider": {"managedScaling": {"status": "DISABLED"}}},
    ]
    assert gates.managed_scaling_providers(providers) == ["a"]


def test_alarms():
    alarms = [{"AlarmName": "a", "StateValue": "ALARM", "StateReason": "5xx"}, {"AlarmName": "b", "StateValue": "INSUFFICIENT_DATA"}]
    assert gates.alarm_problems(alarms, ["a", "b"]) == ["alarm a is ALARM: 5xx"]
    assert gates.missing_alarms(alarms, ["a", "c"]) == ["c"]


def test_smoke_problems():
    outputs = [{"name": "OUTPUT0", "data": [2.0, 3.0]}]
    assert gates.smoke_problems(outputs, [{"name": "OUTPUT0", "data": [2.0, 3.0]}], 0.0) == []
    assert gates.smoke_problems(outputs, [{"name": "OUTPUT0", "data": [2.0, 3.5]}], 0.6) == []
    assert "expected [2.0, 4.0]" in gates.smoke_problems(outputs, [{"name": "OUTPUT0", "data": [2.0, 4.0]}], 0.1)[0]
    assert "no output OUTPUT1" in gates.smoke_problems(outputs, [{"name": "OUTPUT1", "data": [1]}], 0.0)[0]


def test_quiet_needs_no_queue_and_no_finished_work():
    idle = {"nv_inference_pending_request_count": 0.0, "nv_inference_request_success": 5.0}
    busy = {"nv_inference_pending_request_count": 2.0, "nv_inference_request_success": 5.0}
    moved = {"nv_inference_pending_request_count": 0.0, "nv_inference_request_success": 6.0}
    assert gates.is_quiet([idle], [idle])
    assert not gates.is_quiet([idle], [busy])
    assert not gates.is_quiet([idle], [moved])
    assert not gates.is_quiet([idle], [idle, idle])
