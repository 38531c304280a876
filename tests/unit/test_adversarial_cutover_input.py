"""Adversarial input for the bluegreen module and plans for the emergency rollback (issue 12, class 1: cutovers).

Stand-ins: none for the input checks (pure functions over the module's parameters, as Ansible hands them over
after its own type conversion); AWS-shaped colour states for the emergency rollback's decision; fake ECS/ELBv2
clients (in memory, AWS-shaped payloads) for the runner's checks before each write.
"""

from __future__ import annotations

import copy

import pytest

from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import gates
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import rollback as rb
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.application import Application, Route
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.cutover_state import Clients
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.guard import StateChanged
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.input import RANGES, all_input_errors
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.plan import PlanError
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.runner import Runner
from tests.unit.test_bluegreen_runner import TD2, FakeAws, FakeClock
from tests.unit.test_bluegreen_runner import params as runner_params

TGS = {
    "blue": "arn:aws:elasticloadbalancing:us-east-1:1:targetgroup/b/1",
    "green": "arn:aws:elasticloadbalancing:us-east-1:1:targetgroup/g/2",
}


def good_params(**overrides):
    params = {
        "state": "present",
        "cluster": "inference",
        "name": "triton",
        "task_definition": "triton:2",
        "desired_count": 2,
        "target_groups": dict(TGS),
        "listener_arn": "arn:aws:elasticloadbalancing:us-east-1:1:listener/app/a/1/2",
        "traffic_steps": [10, 50, 100],
        "bake_time_s": 0,
        "watch_interval_s": 5,
        "termination_wait_s": 0,
        "alarm_names": [],
        "gates": {"timeout_s": 60, "interval_s": 2, "request_timeout_s": 5, "expected_models": [], "smoke": None},
        "drain": {"timeout_s": 300, "quiet_period_s": 10, "metrics_urls": None, "metrics_port": 8002, "wait_deregistration": False},
        "timeouts": {"standby_up_s": 900, "poll_interval_s": 5},
        "lock_ttl_s": 600,
        "lock_owner": None,
    }
    for key, value in overrides.items():
        if "." in key:
            group, sub = key.split(".")
            params[group] = dict(params[group], **{sub: value})
        else:
            params[key] = value
    return params


SMOKE = {
    "model": "simple",
    "inputs": [{"name": "INPUT0", "shape": [2], "datatype": "FP32", "data": [1.0, 2.0]}],
    "expected_outputs": [{"name": "OUTPUT0", "data": [2.0, 3.0]}],
}

# Every range's minimum - 1 and maximum + 1, and a string where a number is expected.
RANGE_CASES = [(name, low - 1, f"{name} is {low - 1}") for name, (low, _high) in RANGES.items()] + [
    (name, high + 1, f"{name} is {high + 1}") for name, (_low, high) in RANGES.items()
]
SHAPE_CASES = [
    (
        "drain.metrics_urls",
        {"blue": "http://10.0.1.10:8002/metrics"},
        "drain.metrics_urls.blue is 'http://10.0.1.10:8002/metrics': give a list",
    ),
    ("drain.metrics_urls", {"green": ["ftp://x/metrics"]}, "drain.metrics_urls.green[0] is 'ftp://x/metrics'"),
    ("drain.metrics_urls", {"green": [8002]}, "drain.metrics_urls.green[0] is 8002"),
    ("test_route_url", "triton-test:8080", "test_route_url is 'triton-test:8080'"),
    ("test_route_url", "http://host with space", "test_route_url is 'http://host with space'"),
    ("test_route_urls", {"blue": ["http://a"]}, "test_route_urls.blue is ['http://a']"),
    ("gates.smoke", "simple", "gates.smoke is 'simple'"),
    ("gates.smoke", dict(SMOKE, inputs="INPUT0"), "gates.smoke.inputs is 'INPUT0'"),
    ("gates.smoke", dict(SMOKE, inputs=[]), "gates.smoke.inputs is []"),
    (
        "gates.smoke",
        dict(SMOKE, inputs=[{"name": "INPUT0", "shape": "2", "datatype": "FP32", "data": [1.0]}]),
        "gates.smoke.inputs[0].shape is '2'",
    ),
    (
        "gates.smoke",
        dict(SMOKE, inputs=[{"name": "INPUT0", "shape": [2], "datatype": "float", "data": [1.0]}]),
        "gates.smoke.inputs[0].datatype is 'float'",
    ),
    (
        "gates.smoke",
        dict(SMOKE, inputs=[{"name": "INPUT0", "shape": [2], "datatype": "FP32", "data": 1.0}]),
        "gates.smoke.inputs[0].data is 1.0",
    ),
    ("gates.smoke", dict(SMOKE, inputs=["INPUT0"]), "gates.smoke.inputs[0] is 'INPUT0'"),
    ("gates.smoke", dict(SMOKE, expected_outputs={"OUTPUT0": [2.0]}), "gates.smoke.expected_outputs is {'OUTPUT0': [2.0]}"),
    (
        "gates.smoke",
        dict(SMOKE, expected_outputs=[{"name": "OUTPUT0", "data": ["2.0"]}]),
        "gates.smoke.expected_outputs[0].data is ['2.0']",
    ),
    ("gates.smoke", dict(SMOKE, tolerance="0.1"), "gates.smoke.tolerance is '0.1'"),
    ("gates.smoke", dict(SMOKE, tolerance=-1), "gates.smoke.tolerance is -1"),
    ("gates.smoke", dict(SMOKE, model=["simple"]), "gates.smoke.model is ['simple']"),
    ("gates.smoke", dict(SMOKE, version=True), "gates.smoke.version is True"),
    ("gates.expected_versions", {"resnet50": 0}, "gates.expected_versions.resnet50 is 0"),
    ("gates.expected_versions", {"resnet50": "latest"}, "gates.expected_versions.resnet50 is 'latest'"),
    ("gates.expected_versions", {"resnet50": True}, "gates.expected_versions.resnet50 is True"),
    ("traffic_steps", [*range(1, 21), 100], "traffic_steps has 21 steps"),
    ("alarm_names", [""], "alarm_names[0] is ''"),
    ("alarm_names", ["x" * 256], "alarm_names[0] is"),
    ("lock_owner", "Deploy Run 1", "lock_owner is 'Deploy Run 1'"),
    ("lock_owner", "a" * 65, "lock_owner is"),
    ("watch_interval_s", True, "watch_interval_s is True"),
]


@pytest.mark.parametrize(("option", "value", "message"), RANGE_CASES + SHAPE_CASES, ids=lambda v: str(v)[:40])
def test_adversarial_bad_input_named_before_any_write(option, value, message):
    """Stand-in: none (the module's parameters after Ansible's own conversion). Each value that would only fail
    after traffic moved - a string for a list of URLs, a zero interval, an hour-long request timeout - is named with
    its option, its value and the fix, one message per option."""
    errors = all_input_errors(good_params(**{option: value}))
    assert any(message in e for e in errors), errors
    assert len([e for e in errors if e.split(" ", 1)[0].split("[")[0].startswith(option.split(".")[0])]) >= 1
    assert all_input_errors(good_params()) == []
    assert all_input_errors(good_params(**{"gates.smoke": SMOKE, "drain.metrics_urls": {"blue": ["http://10.0.1.10:8002/metrics"]}})) == []


# ---------------------------------------------------------------- emergency rollback decision


def state(service, desired, td="triton:1", healthy=None):
    healthy = desired if healthy is None else healthy
    return gates.ColorState(service=service, task_definition=td, desired=desired, running=desired, healthy=healthy)


def app(weights, blue, green, record=None):
    a = Application("inference", "triton", Route({"blue": "arn:tg/blue", "green": "arn:tg/green"}, "arn:listener"))
    a.http.weights, a.record = weights, record or {}
    a.colors = {"blue": state("triton-blue", *blue), "green": state("triton-green", *green)}
    return a


REC = {"from": "blue", "to": "green", "task_definition": "triton:2"}


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        (app({"blue": 90, "green": 10}, (2,), (2,), REC), ("rollback", "blue", True, True)),  # mid-cutover
        (app({"blue": 0, "green": 100}, (2,), (2,), REC), ("rollback", "blue", True, True)),  # old colour kept
        (app({"blue": 100, "green": 0}, (2,), (2,), REC), ("rollback", "blue", False, True)),  # weights back, green still up
        (app({"blue": 100, "green": 0}, (2,), (0,), REC), ("noop", "blue", False, False)),  # already rolled back
        (app({"blue": 0, "green": 100}, (2,), (2,)), ("rollback", "blue", True, True)),  # no record, other colour up
        (app({"blue": 0, "green": 100}, (0,), (2,), REC), "scaled to 0"),  # nothing to go back to
        (app({"blue": 0, "green": 100}, (2, "triton:1", 1), (2,), REC), "not serving"),  # old colour unhealthy
        (app({"blue": 50, "green": 50}, (2,), (2,)), "no cutover is recorded"),  # split, no record
    ],
)
def test_adversarial_emergency_rollback_decision(case, expected):
    """Stand-in: AWS-shaped colour states. Traffic only ever moves to a colour that runs with every target
    healthy; otherwise nothing is written and the error says what to do."""
    if isinstance(expected, str):
        with pytest.raises(PlanError, match=expected):
            rb.decide(case, scale_down_new=True)
        return
    plan = rb.decide(case, scale_down_new=True)
    assert (plan.action, plan.to_color, plan.set_weights, plan.scale_down) == expected


# ---------------------------------------------------------------- the runner never acts on a stale view


def _someone_rolls_back(aws: FakeAws) -> None:
    aws.weights = {"blue": 100, "green": 0}


def _someone_deploys(aws: FakeAws) -> None:
    aws.services["triton-green"]["taskDefinition"] = TD2[:-1] + "1"


def _someone_splits(aws: FakeAws) -> None:
    aws.weights = {"blue": 50, "green": 50}


@pytest.mark.parametrize(
    ("change", "at_s"), [(_someone_rolls_back, 15), (_someone_deploys, 15), (_someone_splits, 5), (_someone_rolls_back, 45)]
)
def test_adversarial_runner_stops_when_aws_changed_under_it(change, at_s):
    """Stand-in: fake ECS/ELBv2 in memory, simulated clock. Another actor changes the weights or a service during
    the bake or the termination wait: the runner's next write sees it and stops without writing - it never moves
    traffic it does not own, and never scales a colour that has traffic to 0."""
    aws = FakeAws()
    aws.gpus_free = 4  # the standby's GPUs are free: the capacity phase passes without a scale-out
    clock = FakeClock()
    params = runner_params(traffic_steps=[10, 100], bake_time_s=20, termination_wait_s=30, watch_interval_s=1)
    runner = Runner(params, Clients(aws, aws, aws), clock=clock)
    clock.hooks.append((clock.now + at_s, lambda: change(aws)))
    before_writes = None

    def remember() -> None:
        nonlocal before_writes
        before_writes = copy.deepcopy(aws.calls)

    clock.hooks.append((clock.now + at_s + 0.001, remember))
    with pytest.raises(StateChanged):
        runner.run()
    assert aws.calls == before_writes  # nothing written after the change
    if aws.weights["blue"] > 0:
        assert aws.services["triton-blue"]["desiredCount"] > 0
