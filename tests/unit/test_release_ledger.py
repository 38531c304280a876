"""The release ledger: entry schema and validation, key names, the replay query ("which release served colour X /
the production route at T"), and the append against an in-memory S3 mocked at the client boundary (no network)."""

from __future__ import annotations

import itertools
import json

import pytest
from botocore.exceptions import ClientError

from ansible_collections.inferops.triton_ecs.plugins.module_utils._ledger import history, store
from ansible_collections.inferops.triton_ecs.plugins.module_utils._ledger.entry import (
    LedgerError,
    build_entry,
    entry_key,
    parse_entry,
    parse_time,
    render,
    time_bound_key,
)

APP = "triton"
PREFIX = "models/"
CALLER = "arn:aws:sts::123456789012:assumed-role/deployer/ci"
IMAGE = "registry.example/triton@sha256:" + "a" * 64
IMAGE_2 = "registry.example/triton@sha256:" + "b" * 64
TD = "arn:aws:ecs:eu-west-1:123456789012:task-definition/triton:{}"
SHA = "c" * 64


def entry(kind: str, ended: str, **fields) -> dict:
    return build_entry({"application": APP, "kind": kind, "ended": ended, "caller": CALLER, **fields})


def keyed(*entries: dict) -> list[tuple[str, dict]]:
    """(key, entry) pairs in key order, as a listing of the ledger gives them."""
    return sorted((entry_key(PREFIX, APP, e), e) for e in entries)


def at(moment: str):
    return parse_time(moment, "at")


# ---------------------------------------------------------------- schema and keys


def test_an_entry_carries_every_field_of_schema_1_with_unknowns_null():
    e = entry(
        "model_release", "2026-12-01T10:00:00Z", release_id="r-0a1b2c3d4e5f", models=[{"name": "resnet", "version": 4, "sha256": SHA}]
    )
    assert e == {
        "schema": 1,
        "kind": "model_release",
        "application": APP,
        "release_id": "r-0a1b2c3d4e5f",
        "image": None,
        "task_definition": None,
        "models": [{"name": "resnet", "version": 4, "sha256": SHA}],
        "ami_id": None,
        "caller": CALLER,
        "color": None,
        "production_color": None,
        "verdicts": {},
        "started": None,
        "ended": "2026-12-01T10:00:00.000Z",
        "outcome": "succeeded",
        "detail": "",
    }
    assert parse_entry(render(e), APP, "s3://b/k") == e


def test_times_are_stored_in_one_form_and_must_be_utc():
    e = entry("cutover", "2026-12-01T10:00:00.123456+00:00", color="green", started="2026-12-01T09:59:00Z")
    assert (e["started"], e["ended"]) == ("2026-12-01T09:59:00.000Z", "2026-12-01T10:00:00.123Z")
    with pytest.raises(
        LedgerError, match=r"ended='2026-12-01T10:00:00\+02:00' is not an ISO-8601 UTC time: write it as 2026-12-01T10:00:00Z"
    ):
        entry("cutover", "2026-12-01T10:00:00+02:00", color="green")
    with pytest.raises(LedgerError, match="is not a calendar time"):
        entry("cutover", "2026-02-30T10:00:00Z", color="green")
    with pytest.raises(LedgerError, match=r"started='2026-12-01T11:00:00\.000Z' is after ended"):
        entry("cutover", "2026-12-01T10:00:00Z", color="green", started="2026-12-01T11:00:00Z")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"kind": "deploy", "color": None}, "color is null: a deploy entry names the colour it concerns"),
        ({"kind": "cutover_rollback", "color": "blue"}, "production_color is null: a cutover_rollback that did not fail"),
        ({"kind": "promote"}, "kind='promote' must be one of deploy, cutover, cutover_rollback, model_release, model_rollback"),
        ({"outcome": "ok"}, "outcome='ok' must be one of succeeded, failed, rolled_back"),
        ({"color": "red"}, "color='red' must be blue, green or null"),
        ({"caller": "deployer"}, "caller='deployer' must be the ARN of the AWS caller"),
        ({"release_id": "bad id"}, "release_id='bad id' must be 1-128 characters"),
        ({"image": "triton@sha256:abc"}, "image='triton@sha256:abc' must be the image the tasks run, repository@sha256:<64 hex>"),
        ({"task_definition": "triton:3"}, "task_definition='triton:3' must be a task definition revision's ARN"),
        ({"ami_id": "ubuntu"}, "ami_id='ubuntu' must be an AMI id"),
        ({"models": [{"name": "m", "version": 0, "sha256": None}]}, r"models\[0\]: version=0 is not a positive integer"),
        ({"models": [{"name": "m", "version": 1, "sha256": "XYZ"}]}, r"models\[0\].sha256='XYZ' must be the manifest object's SHA-256"),
        (
            {"models": [{"name": "m", "version": 1, "sha256": None}, {"name": "m", "version": 2, "sha256": None}]},
            "model 'm' is listed twice",
        ),
        ({"application": "my app"}, "application='my app' is not an ECS service family name"),
    ],
)
def test_bad_input_names_the_field_and_the_fix(fields, message):
    params = {"application": APP, "kind": "model_release", "ended": "2026-12-01T10:00:00Z", "caller": CALLER, **fields}
    with pytest.raises(LedgerError, match=message):
        build_entry(params)


def test_an_entry_read_back_is_checked_against_its_application_and_schema():
    e = entry("model_rollback", "2026-12-01T10:00:00Z")
    with pytest.raises(LedgerError, match="application='triton', expected 'other'"):
        parse_entry(render(e), "other", "s3://b/k")
    with pytest.raises(LedgerError, match="s3://b/k: unknown fields \\['extra'\\]"):
        parse_entry(json.dumps({**e, "extra": 1}).encode(), APP, "s3://b/k")
    with pytest.raises(LedgerError, match="s3://b/k is not JSON"):
        parse_entry(b"{", APP, "s3://b/k")


def test_keys_sort_by_end_time_and_name_kind_and_content():
    early = entry("deploy", "2026-12-01T09:00:00Z", color="blue")
    late = entry("model_release", "2026-12-01T10:00:00.5Z")
    early_key = entry_key(PREFIX, APP, early)
    assert early_key.startswith("models/ledger/triton/2026/12/01/20261201T090000.000Z-deploy-") and early_key.endswith(".json")
    assert len(early_key.rsplit("-", 1)[1]) == len("01234567.json")
    assert early_key < entry_key(PREFIX, APP, late)
    assert entry_key(PREFIX, APP, early) == early_key  # the same entry names the same key
    assert entry_key(PREFIX, APP, {**early, "detail": "x"}) != early_key
    # the bound of a time sorts after every key that ended at it, before every later one
    bound = time_bound_key(PREFIX, APP, at("2026-12-01T09:00:00Z"))
    assert early_key < bound < entry_key(PREFIX, APP, entry("deploy", "2026-12-01T09:00:00.001Z", color="blue"))


# ---------------------------------------------------------------- the replay query

# A day of the ledger: green deployed (r1), a model release fleet-wide (r2), a cutover to blue with r3 whose canary
# alarm rolled it back, an emergency rollback back to green after a good cutover to blue (r4), a failed deploy, and
# a model rollback.
DAY = [
    entry(
        "deploy",
        "2026-12-01T08:00:00Z",
        release_id="r-000000000001",
        image=IMAGE,
        task_definition=TD.format(1),
        models=[{"name": "m", "version": 1, "sha256": SHA}],
        ami_id="ami-0a1b2c3d4e5f6a7b8",
        color="green",
        production_color="green",
        started="2026-12-01T07:50:00Z",
    ),
    entry("model_release", "2026-12-01T09:00:00Z", release_id="r-000000000002", models=[{"name": "m", "version": 2, "sha256": SHA}]),
    entry(
        "deploy",
        "2026-12-01T10:00:00Z",
        release_id="r-000000000003",
        image=IMAGE_2,
        task_definition=TD.format(2),
        color="blue",
        production_color="green",
        outcome="rolled_back",
        verdicts={"alarms": {"triton-5xx": "ALARM"}},
    ),
    entry(
        "cutover",
        "2026-12-01T11:00:00Z",
        release_id="r-000000000004",
        image=IMAGE_2,
        task_definition=TD.format(3),
        color="blue",
        production_color="blue",
    ),
    entry("cutover_rollback", "2026-12-01T11:30:00Z", color="green", production_color="green", detail="5xx after the bake"),
    entry(
        "deploy",
        "2026-12-01T12:00:00Z",
        release_id="r-000000000005",
        task_definition=TD.format(4),
        color="blue",
        production_color="blue",
        outcome="failed",
    ),
    entry("model_rollback", "2026-12-01T13:00:00Z", release_id="r-000000000001", models=[{"name": "m", "version": 1, "sha256": SHA}]),
]


def ask(moment: str, color: str | None = None, entries: list[dict] | None = None) -> dict:
    return history.answer_for(history.replay(keyed(*(DAY if entries is None else entries)), at(moment)), color)


def test_before_the_first_entry_nothing_is_known():
    answer = ask("2026-12-01T07:00:00Z")
    assert answer["production_color"] is None and answer["color"] is None and answer["release_id"] is None


def test_production_and_each_colour_through_the_day():
    assert (ask("2026-12-01T08:30:00Z")["color"], ask("2026-12-01T08:30:00Z")["release_id"]) == ("green", "r-000000000001")
    # the fleet-wide model release: green keeps its image and task definition, its models and release id move
    at_9 = ask("2026-12-01T09:00:00Z")
    assert (at_9["release_id"], at_9["image"], at_9["task_definition"], at_9["models"][0]["version"]) == (
        "r-000000000002",
        IMAGE,
        TD.format(1),
        2,
    )
    # the rolled-back deploy to blue: production stayed on green, blue's release did not move (r3 did not stay)
    at_10 = ask("2026-12-01T10:15:00Z")
    assert (at_10["production_color"], at_10["release_id"]) == ("green", "r-000000000002")
    assert ask("2026-12-01T10:15:00Z", "blue")["release_id"] == "r-000000000002"  # the model release reached blue too
    assert ask("2026-12-01T10:15:00Z", "blue")["image"] is None  # no entry ever gave blue an image by then
    # the good cutover to blue
    at_11 = ask("2026-12-01T11:00:00Z")
    assert (at_11["color"], at_11["release_id"], at_11["task_definition"], at_11["serves_production"]) == (
        "blue",
        "r-000000000004",
        TD.format(3),
        True,
    )
    # the emergency rollback: production back on green, which still runs what it ran
    at_1145 = ask("2026-12-01T11:45:00Z")
    assert (at_1145["color"], at_1145["release_id"], at_1145["task_definition"]) == ("green", "r-000000000002", TD.format(1))
    assert ask("2026-12-01T11:45:00Z", "blue")["release_id"] == "r-000000000004"
    assert ask("2026-12-01T11:45:00Z", "blue")["serves_production"] is False
    # the failed deploy moved nothing
    assert ask("2026-12-01T12:30:00Z") == {**ask("2026-12-01T11:45:00Z")}
    # the model rollback, fleet-wide: green on version 1 with release r1 again, blue's image unchanged
    at_13 = ask("2026-12-01T13:00:00Z")
    assert (at_13["color"], at_13["release_id"], at_13["models"][0]["version"], at_13["image"]) == ("green", "r-000000000001", 1, IMAGE)
    assert ask("2026-12-01T13:00:00Z", "blue")["image"] == IMAGE_2
    assert at_13["ami_id"] == "ami-0a1b2c3d4e5f6a7b8"


def test_the_answer_names_the_entries_it_comes_from():
    keys = [pair[0] for pair in keyed(*DAY)]
    at_1145 = ask("2026-12-01T11:45:00Z")
    assert at_1145["production_entry_key"] == keys[4] and at_1145["production_since"] == "2026-12-01T11:30:00.000Z"
    assert at_1145["entry_key"] == keys[1]  # green's release was last set by the model release


def test_an_entry_takes_effect_when_it_ended():
    assert ask("2026-12-01T10:59:59.999Z")["color"] == "green"
    assert ask("2026-12-01T11:00:00Z")["color"] == "blue"


def test_reading_newest_first_stops_once_everything_is_known_and_agrees_with_the_replay():
    pairs = keyed(*DAY)
    read = []

    def newest_first():
        for key, e in reversed(pairs):
            read.append(key)
            yield key, e

    resolved = history.resolve(newest_first(), at("2026-12-01T13:30:00Z"))
    assert resolved == {**history.replay(pairs, at("2026-12-01T13:30:00Z")), "entries_read": resolved["entries_read"]}
    # every field of both colours, production and the AMI are known once the first deploy is read: nothing older
    assert read == [pair[0] for pair in reversed(pairs)] and resolved["entries_read"] == len(DAY)
    older = entry("deploy", "2026-11-30T08:00:00Z", release_id="r-00000000000a", image=IMAGE, task_definition=TD.format(9), color="green")
    read.clear()
    pairs = keyed(older, *DAY)
    history.resolve(newest_first(), at("2026-12-01T13:30:00Z"))
    assert entry_key(PREFIX, APP, older) not in read


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
def test_the_answer_depends_on_the_times_not_on_the_order_entries_were_appended(order):
    three = [DAY[0], DAY[3], DAY[4]]
    shuffled = [three[i] for i in order]
    assert ask("2026-12-01T12:00:00Z", entries=shuffled) == ask("2026-12-01T12:00:00Z", entries=three)


def test_a_window_lists_the_entries_in_time_order():
    pairs = keyed(*DAY)
    listed = history.window(pairs, at("2026-12-01T10:00:00Z"), at("2026-12-01T11:30:00Z"))
    assert [(e["kind"], e["outcome"]) for e in listed] == [
        ("deploy", "rolled_back"),
        ("cutover", "succeeded"),
        ("cutover_rollback", "succeeded"),
    ]
    assert listed[0]["key"] == pairs[2][0]


# ---------------------------------------------------------------- the append (S3 mocked at the client boundary)


class FakeS3:
    """get_object and a conditional put_object over a dict, refusing a put where the key exists (If-None-Match: *)."""

    def __init__(self):
        self.objects: dict[str, bytes] = {}
        self.puts: list[str] = []

    def get_object(self, aws_retry, Bucket, Key):
        if Key not in self.objects:
            raise ClientError({"Error": {"Code": "NoSuchKey"}}, "GetObject")
        body = self.objects[Key]
        return {"Body": type("Body", (), {"read": lambda self: body})()}

    def put_object(self, aws_retry, Bucket, Key, Body, ChecksumAlgorithm, IfNoneMatch):
        assert IfNoneMatch == "*"
        self.puts.append(Key)
        if Key in self.objects:
            raise ClientError({"Error": {"Code": "PreconditionFailed"}}, "PutObject")
        self.objects[Key] = Body


PARAMS = {"bucket": "b", "prefix": PREFIX, "application": APP, "event_bus_name": None}


def test_append_writes_once_and_a_retried_append_changes_nothing():
    s3 = FakeS3()
    e = DAY[0]
    first = store.append(s3, None, PARAMS, e, check_mode=False)
    assert first["changed"] and s3.objects[first["key"]] == render(e) and first["url"] == f"s3://b/{first['key']}"
    again = store.append(s3, None, PARAMS, e, check_mode=False)
    assert not again["changed"] and again["already_written"] and s3.puts == [first["key"]]


def test_check_mode_writes_nothing():
    s3 = FakeS3()
    planned = store.append(s3, None, PARAMS, DAY[1], check_mode=True)
    assert planned["changed"] and planned["entry"] == DAY[1] and s3.objects == {} and s3.puts == []


def test_another_entry_under_a_taken_key_is_refused_and_left_alone():
    s3 = FakeS3()
    key = entry_key(PREFIX, APP, DAY[0])
    s3.objects[key] = b"someone else's bytes"
    with pytest.raises(LedgerError, match="already holds another entry; ledger entries are never rewritten"):
        store.append(s3, None, PARAMS, DAY[0], check_mode=False)
    assert s3.objects[key] == b"someone else's bytes" and s3.puts == []


def test_a_write_racing_another_is_refused_by_s3_not_overwritten():
    """Between the read and the conditional write another writer took the key: S3 answers 412 and keeps theirs."""
    s3 = FakeS3()
    key = entry_key(PREFIX, APP, DAY[0])
    real_get = s3.get_object
    calls = []

    def get_then_race(aws_retry, Bucket, Key):
        calls.append(Key)
        if len(calls) == 1:
            s3.objects[key] = b"the other writer's bytes"
            raise ClientError({"Error": {"Code": "NoSuchKey"}}, "GetObject")
        return real_get(aws_retry, Bucket, Key)

    s3.get_object = get_then_race
    with pytest.raises(LedgerError, match="already holds another entry"):
        store.append(s3, None, PARAMS, DAY[0], check_mode=False)
    assert s3.objects[key] == b"the other writer's bytes" and s3.puts == [key]


def test_the_summary_reads_as_sentences():
    resolved = history.replay(keyed(*DAY), at("2026-12-01T11:45:00Z"))
    window = history.window(keyed(*DAY), at("2026-12-01T11:30:00Z"), at("2026-12-01T11:45:00Z"))
    lines = history.describe("2026-12-01T11:45:00.000Z", history.answer_for(resolved, "blue"), window)
    assert lines == [
        "production route at 2026-12-01T11:45:00.000Z: green (since 2026-12-01T11:30:00.000Z)",
        "blue: release r-000000000004 (since 2026-12-01T11:00:00.000Z)",
        f"  image: {IMAGE_2}",
        f"  task definition: {TD.format(3)}",
        "  models: m v2",
        "  AMI: ami-0a1b2c3d4e5f6a7b8",
        f"  from entry: {keyed(*DAY)[3][0]}",
        f"2026-12-01T11:30:00.000Z  cutover_rollback succeeded on green: release - by {CALLER}",
    ]
    empty = history.describe("2026-12-01T07:00:00.000Z", history.answer_for(history.replay([], at("2026-12-01T07:00:00Z")), None))
    assert empty == ["production route at 2026-12-01T07:00:00.000Z: unknown: no ledger entry before then moved it"]
