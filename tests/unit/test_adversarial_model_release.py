"""Adversarial model releases (issue 28, classes "model releases race", "one broken canary.json stops every new
instance", "false success" on the controller's side, "model_release busy-loops on poll_interval_s: 0" and "model_release
crashes on some bad configs").

Stand-ins: an in-memory S3 (tests/unit/test_model_release.py `FakeS3`) answering GetObject, PutObject and DeleteObject
with S3's conditional-write semantics (If-Match on the ETag, If-None-Match: *, 412 PreconditionFailed), where a hook
lets another writer act at an exact point of a run; ECS's container instances mocked at the client boundary. The
property-style cases draw their inputs from a seeded random generator (the same cases on every run).
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import time

import pytest

from ansible_collections.inferops.triton_ecs.plugins.module_utils._models import records_lock, rollout
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.convergence import RolloutError
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.release import (
    ReleaseError,
    parse_record,
    release_key,
    render_release,
)
from tests.unit.test_model_release import APP, CREATED, FakeECS, FakeS3, params, status

TD = "arn:aws:ecs:eu-west-1:111111111111:task-definition/triton:3"
TD_NEW = "arn:aws:ecs:eu-west-1:111111111111:task-definition/triton:4"
IMAGE = "registry.example/triton@sha256:" + "a" * 64
LOCK = "p/releases/triton/lock.json"


class HookedS3(FakeS3):
    """FakeS3 whose `before_lock` runs once, just before the first write of the records' lock: another writer acts there."""

    def __init__(self) -> None:
        super().__init__()
        self.before_lock = None

    def put_object(self, aws_retry, Bucket, Key, Body, **kw):
        if Key == LOCK and self.before_lock is not None:
            hook, self.before_lock = self.before_lock, None
            hook()
        return super().put_object(aws_retry, Bucket, Key, Body, **kw)


def record(release_id: str, models: dict[str, int], task_definition: str | None = TD, instances=None) -> dict:
    made = rollout.make_release(APP, models, release_id, CREATED, image=IMAGE, task_definition=task_definition)
    return dict(made, instances=instances) if instances else made


def put(s3: FakeS3, name: str, value) -> None:
    s3.objects[release_key("p", APP, name)] = value if isinstance(value, bytes) else render_release(value)


def world(s3: FakeS3, state: str) -> dict:
    """Records in which `state` has something to write, and the parameters of that run."""
    for model, version in (("m", 1), ("m", 2), ("m", 3)):
        s3.objects[f"p/{model}/{version}.manifest.json"] = b"{}"
    put(s3, "current", record("r-cur", {"m": 2}))
    put(s3, "previous", record("r-prev", {"m": 1}))
    if state in ("canary_absent", "rolled_back"):
        put(s3, "canary", record("r-can", {"m": 3}, instances=["i-a"]))
    if state in ("standby_promoted", "standby_absent", "cutover_reverted"):
        put(s3, "standby", record("r-stb", {"m": 3}, TD_NEW))
    return {
        "canary": params("canary", models=[{"name": "m", "version": 3}], instances=["i-a"]),
        "promoted": params("promoted", models=[{"name": "m", "version": 3}]),
        "standby": params("standby", models=[{"name": "m", "version": 3}], image=IMAGE, task_definition=TD_NEW),
    }.get(state, params(state))


WRITING_STATES = [
    "canary",
    "promoted",
    "canary_absent",
    "rolled_back",
    "standby",
    "standby_promoted",
    "standby_absent",
    "cutover_reverted",
]


@pytest.fixture
def s3() -> HookedS3:
    return HookedS3()


ECS = FakeECS(["i-a", "i-b"])


# ---------------------------------------------------------------- class: model releases race


@pytest.mark.parametrize("state", WRITING_STATES)
def test_adversarial_model_release_a_run_that_loses_the_race_fails_loudly_and_writes_nothing(s3, state):
    """Stand-in: in-memory S3 with conditional writes. Another model release rewrites previous.json between this run's
    plan and its lock: the run fails naming the record, having written nothing; run again, it plans on what is there."""
    run_params = world(s3, state)
    racer = record("r-racer", {"m": 1}, instances=None)
    s3.before_lock = lambda: put(s3, "previous", racer)
    writes = list(s3.writes)
    with pytest.raises(ReleaseError, match=r"previous.json changed while this run planned .* this run wrote nothing; run it again"):
        rollout.run(s3, ECS, run_params, False, CREATED)
    assert s3.writes == writes
    assert LOCK not in s3.objects  # released on the way out
    assert json.loads(s3.objects[release_key("p", APP, "previous")])["release_id"] == "r-racer"
    again = rollout.run(s3, ECS, run_params, False, CREATED)
    assert again["changed"] is True and LOCK not in s3.objects


@pytest.mark.parametrize("state", WRITING_STATES)
def test_adversarial_model_release_a_held_lock_stops_every_writing_state_before_any_write(s3, state):
    """Stand-in: in-memory S3. A live lock of another run: the run fails naming its holder and the fix, no record
    written, the other run's lock untouched; with break_lock it takes the lock over, writes, and releases it."""
    run_params = world(s3, state)
    held = records_lock.render_lock("other", "ops@controller-2 pid 7", "promoted", time.time())
    s3.objects[LOCK] = held
    with pytest.raises(
        ReleaseError, match=r"another model release of triton is writing its release records: state='promoted' by ops@controller-2"
    ):
        rollout.run(s3, ECS, run_params, False, CREATED)
    assert s3.writes == [] and s3.objects[LOCK] == held
    assert rollout.run(s3, ECS, run_params, True, CREATED)["changed"] is True  # check mode takes no lock
    done = rollout.run(s3, ECS, dict(run_params, break_lock=True), False, CREATED)
    assert done["changed"] is True and s3.writes and LOCK not in s3.objects


@pytest.mark.parametrize(
    "lock",
    [
        records_lock.render_lock("dead", "ops@gone pid 1", "canary", time.time() - 3600),
        b"{half a lock",
        b'{"since": "yesterday", "expires": true}',
    ],
    ids=["expired", "not-json", "bad-fields"],
)
def test_adversarial_model_release_a_dead_or_unreadable_lock_is_taken_over(s3, lock):
    """Stand-in: in-memory S3. A lock whose run died (expired), or one that cannot be read, blocks nobody."""
    run_params = world(s3, "rolled_back")
    s3.objects[LOCK] = lock
    assert rollout.run(s3, ECS, run_params, False, CREATED)["changed"] is True
    assert LOCK not in s3.objects


class LostAnswerS3(FakeS3):
    """FakeS3 where the first PUT of `key` is written but its answer is lost: botocore retries it, and S3 refuses the
    retry with 412 (the object that PUT wrote exists now, with another ETag than the condition names)."""

    def __init__(self, key: str) -> None:
        super().__init__()
        self.key = key
        self.lost = False

    def put_object(self, aws_retry, Bucket, Key, Body, **kw):
        if Key == self.key and not self.lost:
            self.lost = True
            super().put_object(aws_retry, Bucket, Key, Body, **kw)
            return super().put_object(aws_retry, Bucket, Key, Body, **kw)  # the retry: 412
        return super().put_object(aws_retry, Bucket, Key, Body, **kw)


@pytest.mark.parametrize("key", [LOCK, release_key("p", APP, "previous"), release_key("p", APP, "current")])
def test_adversarial_model_release_a_write_whose_answer_was_lost_is_still_this_runs(key):
    """Stand-in: in-memory S3 losing the answer of one PUT (the lock's create, or a record's conditional write; the
    retried PUT gets 412 on the object it wrote itself). The run recognises its own lock (its owner token) and its own
    record (the body it wrote), finishes the promotion and releases the lock; it never reports a race it did not lose."""
    s3 = LostAnswerS3(key)
    result = rollout.run(s3, ECS, world(s3, "promoted"), False, CREATED)
    assert s3.lost and result["changed"] is True
    assert [(m["name"], m["version"]) for m in json.loads(s3.objects[release_key("p", APP, "current")])["models"]] == [("m", 3)]
    assert LOCK not in s3.objects


@pytest.mark.parametrize(("first", "second"), [("promoted", "rolled_back"), ("rolled_back", "promoted")])
def test_adversarial_model_release_an_emergency_rollback_racing_a_promote_never_both_succeed(s3, first, second):
    """Stand-in: in-memory S3. The second run starts while the first takes its lock (the worst moment): exactly one
    succeeds; the other fails naming the first's state and wrote nothing. No write is silently lost."""
    world(s3, "rolled_back")
    run_first = params("promoted", models=[{"name": "m", "version": 3}]) if first == "promoted" else params("rolled_back")
    run_second = params("promoted", models=[{"name": "m", "version": 3}]) if second == "promoted" else params("rolled_back")
    outcome: dict[str, str] = {}

    def race() -> None:
        s3.before_lock = None
        try:
            rollout.run(s3, ECS, run_second, False, CREATED)
            outcome["second"] = "ok"
        except ReleaseError as err:
            outcome["second"] = str(err)

    # The second run plans and reaches its lock while the first holds it.
    original = records_lock.RecordsLock.acquire

    def acquire_then_race(self):
        original(self)
        if self.state == first and "second" not in outcome:
            race()

    records_lock.RecordsLock.acquire = acquire_then_race
    try:
        rollout.run(s3, ECS, run_first, False, CREATED)
    finally:
        records_lock.RecordsLock.acquire = original
    assert f"state='{first}'" in outcome["second"] and "This run wrote nothing" in outcome["second"], outcome
    current = json.loads(s3.objects[release_key("p", APP, "current")])
    assert current["release_id"] == ("r-prev" if first == "rolled_back" else rollout.run(s3, ECS, run_first, True, CREATED)["release_id"])


def test_adversarial_model_release_a_writer_outside_the_lock_mid_plan_stops_the_run_naming_what_it_wrote(s3):
    """Stand-in: in-memory S3. A writer that takes no lock (an older collection) deletes canary.json between the
    promote's two writes: the conditional delete fails, the run names the record and what it had written."""
    run_params = world(s3, "promoted")
    put(s3, "canary", record("r-can", {"m": 3}, instances=["i-a"]))
    original = s3.put_object

    def put_then_interfere(aws_retry, Bucket, Key, Body, **kw):
        answer = original(aws_retry, Bucket, Key, Body, **kw)
        if Key.endswith("/current.json"):
            s3.objects.pop(release_key("p", APP, "canary"), None)
        return answer

    s3.put_object = put_then_interfere
    with pytest.raises(
        ReleaseError, match=r"canary.json changed while this run wrote .* before 'delete canary.json' \(written before it: write"
    ):
        rollout.run(s3, ECS, run_params, False, CREATED)


# ---------------------------------------------------------------- class: a broken record stops every instance


BROKEN = {
    "not-json": b"{this is not json",
    "empty": b"",
    "json-array": b"[1, 2]",
    "invalid-utf8": b"\xff\xfe{",
    "schema-9": json.dumps({"schema": 9, "application": APP}).encode(),
    "other-application": render_release(dict(record("r-x", {"m": 1}), application="other")),
    "model-name-is-a-list": json.dumps(dict(record("r-x", {"m": 1}), models=[{"name": ["m"], "version": 1}])).encode(),
    "version-is-a-string": json.dumps(dict(record("r-x", {"m": 1}), models=[{"name": "m", "version": "2"}])).encode(),
    "truncated": render_release(record("r-x", {"m": 1}))[:40],
    "instances-not-ids": json.dumps(dict(record("r-x", {"m": 1}), instances=["web-1"])).encode(),
}


@pytest.mark.parametrize("broken", list(BROKEN.values()), ids=list(BROKEN))
def test_adversarial_model_release_a_broken_canary_is_removed_by_the_documented_recovery(s3, broken):
    """Stand-in: in-memory S3. canary_absent and rolled_back remove a broken canary.json; converged fails only the
    instances it may list (all of them when its list is unreadable), naming the recovery."""
    world(s3, "rolled_back")
    put(s3, "canary", broken)
    checked = rollout.run(s3, ECS, params("converged", timeout_s=0), True, CREATED)
    assert "canary" in checked["broken_records"]
    failed = {v["instance_id"] for v in checked["instances"] if v["failed"]}
    assert failed == {"i-a", "i-b"}  # none of these records lists instances that can be read
    assert all("canary_absent" in v["reason"] for v in checked["instances"] if v["failed"])
    removed = rollout.run(s3, ECS, params("canary_absent"), False, CREATED)
    assert removed["actions"] == ["delete canary.json"] and release_key("p", APP, "canary") not in s3.objects
    put(s3, "canary", broken)
    rolled = rollout.run(s3, ECS, params("rolled_back"), False, CREATED)
    assert rolled["actions"] == ["delete canary.json", "write current.json (r-prev)"]


def test_adversarial_model_release_a_broken_canary_that_lists_other_instances_concerns_only_them(s3):
    """Stand-in: in-memory S3. A canary with a bad model entry but a readable list naming i-a: i-b is judged on
    current.json as if no canary existed; i-a fails naming canary.json."""
    world(s3, "rolled_back")
    put(s3, "canary", json.dumps(dict(record("r-x", {"m": 1}, instances=["i-a"]), models="all")).encode())
    s3.objects["p/status/triton/i-b.json"] = json.dumps(status("i-b", "r-cur")).encode()
    verdicts = {v["instance_id"]: v for v in rollout.run(s3, ECS, params("converged", timeout_s=0), True, CREATED)["instances"]}
    assert verdicts["i-b"]["ok"] is True
    assert verdicts["i-a"]["failed"] is True and "canary.json" in verdicts["i-a"]["reason"]


@pytest.mark.parametrize(
    "broken", [BROKEN["not-json"], BROKEN["schema-9"], BROKEN["model-name-is-a-list"]], ids=["not-json", "schema", "name"]
)
def test_adversarial_model_release_broken_standby_and_previous_affect_only_what_needs_them(s3, broken):
    """Stand-in: in-memory S3. standby.json broken: standby_absent removes it, standby_promoted and a canary refuse
    naming it and the recovery. previous.json broken: rolled_back refuses naming it, the next promotion replaces it.
    current.json broken: rolled_back replaces it with previous.json."""
    world(s3, "standby_absent")
    put(s3, "standby", broken)
    for refused in (params("standby_promoted"), params("canary", models=[{"name": "m", "version": 3}], instances=["i-a"])):
        with pytest.raises(ReleaseError, match=r"standby.json"):
            rollout.run(s3, ECS, refused, False, CREATED)
    with pytest.raises(ReleaseError, match=r"standby_absent"):
        rollout.run(s3, ECS, params("converged", release="standby"), False, CREATED)
    assert s3.writes == []
    assert rollout.run(s3, ECS, params("standby_absent"), False, CREATED)["actions"] == ["delete standby.json"]

    put(s3, "previous", broken)
    with pytest.raises(ReleaseError, match=r"previous.json.*there is no release to roll back to; replace it with the next promotion"):
        rollout.run(s3, ECS, params("rolled_back"), False, CREATED)
    promoted = rollout.run(s3, ECS, params("promoted", models=[{"name": "m", "version": 3}]), False, CREATED)
    assert promoted["actions"][0] == "write previous.json (r-cur)"

    put(s3, "current", broken)
    rolled = rollout.run(s3, ECS, params("rolled_back"), False, CREATED)
    assert rolled["actions"] == ["write current.json (r-cur)"]


def test_adversarial_model_release_parse_record_never_raises_on_any_mutation():
    """Property: 500 random mutations of a valid record (fields removed, retyped, truncated bytes): parse_record
    returns a valid record or a broken one naming the record, never an exception."""
    rng = random.Random(28)
    valid = record("r-ok", {"m": 1, "n": 2}, instances=["i-a"])
    odd_values = [None, True, 0, -1, 2**70, 1.5, "", "x" * 300, [], {}, [None], {"a": []}, "../../etc", "i-", ["m"], float("nan")]
    for _case in range(500):
        mutated = json.loads(render_release(valid))
        for _change in range(rng.randint(1, 3)):
            target = (
                mutated
                if rng.random() < 0.6 or not mutated.get("models")
                else rng.choice(mutated["models"])
                if isinstance(mutated.get("models"), list) and mutated["models"] and isinstance(mutated["models"][0], dict)
                else mutated
            )
            if not isinstance(target, dict):
                target = mutated
            key = rng.choice([*target.keys(), "extra"]) if target else "extra"
            if rng.random() < 0.2:
                target.pop(key, None)
            else:
                target[key] = rng.choice(odd_values)
        raw = json.dumps(mutated).encode()
        if rng.random() < 0.2:
            raw = raw[: rng.randint(0, len(raw))]
        parsed, broken = parse_record(raw, APP, "s3://b/p/releases/triton/canary.json")
        assert (parsed is None) != (broken is None)
        if broken is not None:
            assert "canary.json" in broken["error"] and (
                broken["instances"] is None or all(i.startswith("i-") for i in broken["instances"])
            )


# ---------------------------------------------------------------- class: false success (the controller's side)


def test_adversarial_model_release_a_status_naming_another_instance_is_no_proof(s3):
    """Stand-in: in-memory S3. i-b's status object is a copy of i-a's (applied): i-b is not converged, and the reason
    says the object names another instance."""
    world(s3, "promoted")
    s3.objects["p/status/triton/i-a.json"] = json.dumps(status("i-a", "r-cur")).encode()
    s3.objects["p/status/triton/i-b.json"] = s3.objects["p/status/triton/i-a.json"]
    verdicts = {v["instance_id"]: v for v in rollout.run(s3, ECS, params("converged", timeout_s=0), True, CREATED)["instances"]}
    assert verdicts["i-a"]["ok"] is True
    assert verdicts["i-b"]["ok"] is False and "names instance i-a, not i-b" in verdicts["i-b"]["reason"]


def test_adversarial_model_release_a_cluster_with_no_instances_never_converges(s3):
    """Stand-in: in-memory S3, ECS with no container instance. Check mode says converged: false; the wait times out
    saying the cluster has none (no instance is no proof)."""
    world(s3, "rolled_back")
    empty = FakeECS([])
    checked = rollout.run(s3, empty, params("converged", timeout_s=0), True, CREATED)
    assert checked["converged"] is False and "has no ACTIVE container instance" in checked["instances"][0]["reason"]
    with pytest.raises(RolloutError, match=r"cluster c has no ACTIVE container instance: no model agent can report the release"):
        rollout.run(s3, empty, params("converged", timeout_s=0), False, CREATED)


# ---------------------------------------------------------------- classes: busy loop, bad configs (property-style)


class NoCalls:
    """An AWS client that must not be called: a bad input fails before the first call."""

    def __getattr__(self, name):
        raise AssertionError(f"AWS call {name} made before the input was checked")


def test_adversarial_model_release_wait_numbers_are_bounded_before_any_call():
    """Property: 400 random (timeout_s, poll_interval_s, bake_s): accepted exactly when each is a finite number in its
    bounds and bake_s <= timeout_s; otherwise a ReleaseError naming the field, before any AWS call. poll_interval_s=0
    (the busy loop) is among them."""
    rng = random.Random(280)
    pool = [0, 0.0, -1, 1, 5, 0.05, 0.1, 3600, 3601, 86400, 86401, 10**12, True, False, float("nan"), float("inf"), "5", None]
    cases = [(600, 0, 0)] + [tuple(rng.choice(pool) for _field in range(3)) for _case in range(400)]
    for timeout_s, poll_interval_s, bake_s in cases:
        given = params("converged", timeout_s=timeout_s, poll_interval_s=poll_interval_s, bake_s=bake_s)
        numbers = {"timeout_s": (timeout_s, 0, 86400), "poll_interval_s": (poll_interval_s, 0.1, 3600), "bake_s": (bake_s, 0, 86400)}
        good = all(
            not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) and low <= v <= high
            for v, low, high in numbers.values()
        )
        good = good and bake_s <= timeout_s
        if good:
            assert rollout.check_params(given)["poll_interval_s"] >= 0.1
            continue
        with pytest.raises(ReleaseError, match=r"(timeout_s|poll_interval_s|bake_s)="):
            rollout.run(NoCalls(), NoCalls(), given, False, CREATED)


def test_adversarial_model_release_any_bad_parameter_is_named_never_a_crash(s3):
    """Property: 600 runs with random hostile values in every parameter the argument spec passes through (models,
    instances, publishing, inference_failures_before, release_id, image, task_definition, cluster, state): each
    ends in a result or a ReleaseError/RolloutError, never another exception."""
    rng = random.Random(2828)
    world(s3, "rolled_back")
    values = [
        None,
        "",
        "x",
        "../../x",
        "i-a",
        "i-zz",
        "latest",
        "007",
        0,
        -3,
        2**40,
        True,
        1.5,
        [],
        {},
        [None],
        [{}],
        ["i-a", "i-a"],
        [{"name": "m"}],
        [{"name": "m", "version": "latest"}],
        [{"name": ["m"]}],
        [{"model": "m", "version": "x"}],
        [{"model": "m", "version": 3}],
        {"i-a": "x"},
        {"i-a": -1},
        {"web": 1},
        {"i-a": 2},
        "arn:aws:ecs:eu-west-1:111111111111:task-definition/triton:0",
        TD,
    ]
    fields = ["models", "instances", "publishing", "inference_failures_before", "release_id", "image", "task_definition"]
    for _case in range(600):
        state = rng.choice(rollout.STATES)
        given = params(state, timeout_s=0, **{field: rng.choice(values) for field in rng.sample(fields, rng.randint(1, len(fields)))})
        for name in ("instances", "publishing"):
            if not isinstance(given.get(name), list):
                given[name] = []  # the argument spec makes these lists
        if given.get("inference_failures_before") is not None and not isinstance(given["inference_failures_before"], dict):
            given["inference_failures_before"] = None  # ... and this a dict
        for name in ("models",):
            if given.get(name) is not None and not isinstance(given[name], list):
                given[name] = None
        for name in ("release_id", "image", "task_definition"):
            if given.get(name) is not None:
                given[name] = str(given[name])
        given["instances"] = [str(i) for i in given["instances"]]
        with contextlib.suppress(ReleaseError, RolloutError):  # a named error is the wanted outcome; anything else fails
            rollout.run(s3, ECS, given, rng.random() < 0.5, CREATED)
        s3.objects.pop(LOCK, None)
