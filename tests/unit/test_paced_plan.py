"""The capacity-paced cutover's planning: `_bluegreen/paced.py` (batches from the desired counts), `plan.decide` in
capacity_paced mode, its planned writes, and the placement of one batch (`placement.batch_verdict`)."""

from __future__ import annotations

import itertools

import pytest

from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import gates, paced, placement
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.input import all_input_errors, input_warnings
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.plan import Plan, PlanError, planned_writes, truncate
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.plan import decide as decide_plan

NEW = "arn:aws:ecs:us-east-1:123456789012:task-definition/triton:2"
OLD = "arn:aws:ecs:us-east-1:123456789012:task-definition/triton:1"


def colors(blue: tuple, green: tuple) -> dict[str, gates.ColorState]:
    return {
        name: gates.ColorState(service=f"triton-{name}", task_definition=td, desired=n, running=n, healthy=n)
        for name, (td, n) in (("blue", blue), ("green", green))
    }


def decide(weights: dict[str, int], blue: tuple, green: tuple, state: str = "present", full: int = 4) -> Plan:
    return decide_plan(state, NEW, full, [100], weights, colors(blue, green), True, mode="capacity_paced")


# ---------------------------------------------------------------- paced.py


def test_a_fresh_start_runs_one_batch_per_k_tasks_with_proportional_weights():
    batches = paced.schedule(4, 1, 0, 4)
    assert [(b.index, b.total, b.grow_to, b.shrink_to, b.weight) for b in batches] == [
        (1, 4, 1, 3, 25),
        (2, 4, 2, 2, 50),
        (3, 4, 3, 1, 75),
        (4, 4, 4, 0, 100),
    ]


def test_an_uneven_batch_ends_with_a_smaller_one():
    assert [(b.grow_to, b.shrink_to) for b in paced.schedule(5, 2, 0, 5)] == [(2, 3), (4, 1), (5, 0)]


def test_a_batch_larger_than_the_full_count_is_clamped_to_it():
    assert paced.clamp(10, 4) == 4
    assert [(b.grow_to, b.shrink_to, b.weight) for b in paced.schedule(4, 10, 0, 4)] == [(4, 0, 100)]


def test_resume_mid_batch_after_the_grow_goes_on_with_the_weights_and_the_shrink():
    batch = paced.next_batch(4, 1, 2, 3)  # killed after batch 2 grew the new colour
    assert (batch.index, batch.grow_to, batch.shrink_to, batch.weight) == (2, 2, 2, 50)


def test_resume_after_the_shrink_starts_the_next_batch():
    batch = paced.next_batch(4, 1, 2, 2)
    assert (batch.index, batch.grow_to, batch.shrink_to) == (3, 3, 1)


def test_resume_at_weight_0_with_some_new_tasks_weights_them_first():
    batch = paced.next_batch(4, 1, 1, 4)
    assert (batch.grow_to, batch.shrink_to, batch.weight) == (1, 3, 25)


def test_a_state_over_the_invariant_is_never_grown():
    batch = paced.next_batch(4, 1, 2, 4)  # 6 tasks wanted: more than 4 + 1
    assert (batch.grow_to, batch.shrink_to) == (2, 2)


def test_done_is_no_batch():
    assert paced.next_batch(4, 1, 4, 0) is None
    assert paced.schedule(4, 2, 4, 0) == []


@pytest.mark.parametrize(("full", "k", "new", "old"), list(itertools.product([1, 3, 4, 7], [1, 2, 3, 8], [0, 1, 2, 4], [0, 2, 4, 7])))
def test_the_two_colours_never_want_more_than_the_full_count_plus_a_batch(full, k, new, old):
    start = new + old
    batches = paced.schedule(full, k, new, old)
    shrinking = old
    for batch in batches:
        assert batch.grow_to + shrinking <= max(full + paced.clamp(k, full), start)
        assert batch.grow_to + batch.shrink_to == full or batch.grow_to > full  # after the shrink: the full count
        shrinking = batch.shrink_to
    assert paced.peak(full, k, new, old) <= max(full + paced.clamp(k, full), start)
    if full >= 1:
        last = batches[-1] if batches else None
        assert last is None or (last.grow_to, last.shrink_to, last.weight) == (full, 0, 100)


def test_weights_are_proportional_between_1_and_99_until_the_last_batch():
    assert paced.weight(1, 300) == 1
    assert paced.weight(299, 300) == 99
    assert paced.weight(300, 300) == 100
    assert paced.weight(0, 4) == 0


def test_the_default_batch_is_what_one_spare_instance_holds():
    assert paced.default_batch_size([0, 2, 1], [8]) == 2
    assert paced.default_batch_size([0, 0], [8]) == 8  # one new p5 of the group
    assert paced.default_batch_size([], []) == 1


def test_rollback_from_the_middle_is_the_same_walk_with_the_colours_swapped():
    # batch 2 failed after its grow: green 2, blue 3 -> blue grows back as green shrinks
    assert [(b.grow_to, b.shrink_to, b.weight) for b in paced.schedule(4, 1, 3, 2)] == [(3, 1, 75), (4, 0, 100)]


# ---------------------------------------------------------------- decide, capacity_paced


def test_a_fresh_start_plans_capacity_batches_finish():
    plan = decide({"blue": 100, "green": 0}, (OLD, 4), (OLD, 0))
    assert (plan.action, plan.phases, plan.new, plan.old, plan.mode) == (
        "cutover",
        ["capacity", "batches", "finish"],
        "green",
        "blue",
        "capacity_paced",
    )


def test_split_traffic_with_one_colour_on_the_release_resumes():
    plan = decide({"blue": 50, "green": 50}, (OLD, 3), (NEW, 2))
    assert plan.action == "cutover" and plan.new == "green" and plan.reason.startswith("resuming a capacity-paced cutover")


def test_new_tasks_at_weight_0_resume():
    plan = decide({"blue": 100, "green": 0}, (OLD, 4), (NEW, 1))
    assert plan.action == "cutover" and "at weight 0" in plan.reason


def test_split_traffic_with_neither_colour_on_the_release_is_refused():
    with pytest.raises(PlanError, match="half done"):
        decide({"blue": 50, "green": 50}, (OLD, 2), (OLD, 2))


def test_the_last_shrink_left_over_is_a_finish_and_done_is_a_noop():
    assert decide({"blue": 0, "green": 100}, (OLD, 1), (NEW, 4)).action == "finish"
    assert decide({"blue": 0, "green": 100}, (OLD, 0), (NEW, 4)).action == "noop"


def test_a_paced_rollback_plan_carries_the_mode():
    plan = decide({"blue": 75, "green": 25}, (OLD, 3), (NEW, 1), state="rolled_back")
    assert (plan.action, plan.mode, plan.old) == ("rollback", "capacity_paced", "blue")


def test_stop_after_capacity_runs_the_read_only_check_only():
    plan = decide({"blue": 100, "green": 0}, (OLD, 4), (OLD, 0))
    assert truncate(plan, "capacity") == ["capacity"]
    assert truncate(plan, "batches") == ["capacity", "batches"]
    assert truncate(plan, "finish") == ["capacity", "batches", "finish"]


def test_planned_writes_list_every_batch():
    plan = decide({"blue": 100, "green": 0}, (OLD, 4), (OLD, 0))
    cs = colors((OLD, 4), (OLD, 0))
    writes = planned_writes(plan, plan.phases, cs, NEW, 4, {"blue": 100, "green": 0}, True, batch_size=2)
    assert writes == [
        f"batch 1/2: update service triton-green: task definition {NEW}, 2 tasks",
        "batch 1/2: set production weights green=50 blue=50",
        "batch 1/2: update service triton-blue: 2 tasks",
        "batch 2/2: update service triton-green: 4 tasks",
        "batch 2/2: set production weights green=100 blue=0",
        "batch 2/2: update service triton-blue: 0 tasks",
    ]


def test_planned_rollback_writes_go_back_batch_by_batch():
    plan = decide({"blue": 50, "green": 50}, (OLD, 2), (NEW, 2), state="rolled_back")
    writes = planned_writes(plan, ["rollback"], colors((OLD, 2), (NEW, 2)), NEW, 4, {"blue": 50, "green": 50}, True, batch_size=1)
    assert writes[:3] == [
        "rollback batch 3/4: update service triton-blue: 3 tasks",
        "rollback batch 3/4: set production weights blue=75 green=25",
        "rollback batch 3/4: update service triton-green: 1 tasks",
    ]
    assert writes[-1] == "rollback batch 4/4: update service triton-green: 0 tasks"


# ---------------------------------------------------------------- input


def _params(**kw):
    base = {"state": "present", "desired_count": 4, "traffic_steps": [100], "target_groups": {"blue": "arn:b", "green": "arn:g"}}
    return {**base, **kw}


def test_a_batch_below_1_is_refused_with_the_field_and_the_fix():
    errors = all_input_errors(_params(mode="capacity_paced", batch_size=0))
    assert any(e.startswith("batch_size is 0") and "leave batch_size out" in e for e in errors)


def test_a_batch_size_in_blue_green_mode_is_ignored_with_a_warning():
    assert all_input_errors(_params(mode="blue_green", batch_size=2)) == []
    assert "ignored with mode blue_green" in input_warnings(_params(mode="blue_green", batch_size=2))[0]


def test_keeping_the_old_colour_is_refused_in_capacity_paced_mode():
    assert any(
        "old_color is keep with mode capacity_paced" in e for e in all_input_errors(_params(mode="capacity_paced", old_color="keep"))
    )


# ---------------------------------------------------------------- placement of one batch

GPU_TASK = placement.Resources(1, 4096, 15000)
G5 = placement.Resources(1, 4096, 15564)


def test_one_batch_on_the_free_registered_instance():
    verdict = placement.batch_verdict(GPU_TASK, 1, 1, 4, {"i-spare": G5, "i-full": placement.Resources()}, [], "c")
    assert verdict.ok and verdict.on_registered == 1 and verdict.spare_instances == 0


def test_one_batch_on_one_new_instance_of_the_group():
    room = placement.Headroom("gpu", "g5.xlarge", 5, 4, G5)
    verdict = placement.batch_verdict(GPU_TASK, 1, 1, 4, {}, [room], "c")
    assert verdict.ok and verdict.on_new == 1 and verdict.spare_instances == 1


def test_no_spare_names_the_numbers_and_the_fixes():
    room = placement.Headroom("gpu", "p5.48xlarge", 4, 4, placement.Resources(8, 196608, 2000000))
    verdict = placement.batch_verdict(placement.Resources(8, 4096, 15000), 1, 1, 4, {"i-1": placement.Resources(0, 100, 100)}, [room], "c")
    assert not verdict.ok
    assert "1 registered instance(s) with 0 free GPU(s) take 0" in verdict.why
    assert "Auto Scaling group gpu at 4 of max 4" in verdict.why
    assert "raise the max size of Auto Scaling group gpu by 1 to 5" in verdict.why
    assert "mode blue_green would need room for 4 task(s) beside the live colour: 4 more" in verdict.why


def test_a_full_reservation_caps_the_group_headroom():
    room = placement.Headroom(
        "gpu", "p5.48xlarge", 8, 4, placement.Resources(8, 196608, 2000000), reserved=0, reservation="cr-0123456789abcdef0"
    )
    assert room.instances == 0
    verdict = placement.batch_verdict(placement.Resources(8, 4096, 15000), 1, 1, 4, {}, [room], "c")
    assert not verdict.ok and "capacity reservation cr-0123456789abcdef0 has 0 free" in verdict.why
    assert "free 1 instance(s) in capacity reservation cr-0123456789abcdef0" in verdict.why


# ---------------------------------------------------------------- the runner over fake AWS (tests/unit/test_bluegreen_runner.py's fakes)


def test_the_runner_changes_colour_batch_by_batch_and_bakes_each_batch():
    from tests.unit.test_bluegreen_runner import FakeAws, FakeClock, runner

    aws, clock = FakeAws(), FakeClock()
    result = runner(aws, clock, mode="capacity_paced", batch_size=None).run()
    assert result["failed_reason"] == "" and result["weights"] == {"blue": 0, "green": 100}
    assert [c for c in aws.calls if c[0] == "update_service"] == [
        ("update_service", "triton-green", 1, NEW),
        ("update_service", "triton-blue", 1, None),
        ("update_service", "triton-green", 2, None),
        ("update_service", "triton-blue", 0, None),
    ]
    assert [b["weights"]["green"] for b in result["batches"]] == [50, 100]
    assert result["capacity_plan"]["batch_size"] == 1 and result["told_waits_s"] == pytest.approx(2 * 300)


def test_a_rollback_batch_whose_old_colour_never_comes_back_stops_with_traffic_where_it_is():
    from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.cutover_phases import RollbackStalled
    from tests.unit.test_bluegreen_runner import FakeAws, FakeClock, runner

    aws, clock = FakeAws(), FakeClock()
    original = aws.update_service

    def blue_never_grows(**kw):  # blue's new tasks never start (no GPU left for them)
        running = aws.services["triton-blue"]["runningCount"]
        out = original(**kw)
        if kw["service"] == "triton-blue" and kw["desiredCount"] > running:
            aws.services["triton-blue"]["runningCount"] = running
        return out

    aws.update_service = blue_never_grows
    clock.hooks.append((clock.now + 400, lambda: aws.alarms.update({"5xx": "ALARM"})))  # during batch 2's bake (green 100%)
    with pytest.raises(RollbackStalled, match=r"rollback batch 2/2 .* stopped"):
        runner(aws, clock, mode="capacity_paced", batch_size=1, timeouts={"standby_up_s": 30, "poll_interval_s": 5}).run()
    # the first rollback batch moved half back (blue 1 of 2, green 1); blue's growth stalled: no flip onto one task
    assert aws.weights == {"blue": 50, "green": 50}
    assert (aws.services["triton-blue"]["desiredCount"], aws.services["triton-green"]["desiredCount"]) == (2, 1)
