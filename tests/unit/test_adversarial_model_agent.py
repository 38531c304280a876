"""Adversarial inputs to the model agent (issue 28, classes "false success: the agent reports failed when the ECS
agent's introspection is down for one poll", "one broken canary.json stops every new instance from hydrating" on the
agent's side, and "the agent crashes on some bad configs").

Stand-ins: an in-memory S3 answering HeadObject/GetObject/PutObject from a dict (the release records and the status
object), the ECS agent's introspection API as a function that fails a chosen number of times, a monotonic clock the
test moves; the host path is a real temporary directory. The config cases are property-style: drawn from a seeded
random generator, the same on every run.
"""

from __future__ import annotations

import io
import json
import random

import pytest
from botocore.exceptions import ClientError

from ansible_collections.inferops.triton_ecs.plugins.module_utils._models import agent, agent_config
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.release import release_key, render_release, status_key

APP = "triton"
INSTANCE = "i-0aaa"


class RecordStore:
    """S3 as the agent sees it: release records to read, its status object to write."""

    def __init__(self, objects: dict[str, bytes] | None = None) -> None:
        self.objects = dict(objects or {})

    def head_object(self, Bucket, Key, **_):
        if Key not in self.objects:
            raise ClientError({"Error": {"Code": "404"}}, "HeadObject")
        return {"ETag": f'"{hash(self.objects[Key])}"'}

    def get_object(self, Bucket, Key, **_):
        return {"Body": io.BytesIO(self.objects[Key])}

    def put_object(self, Bucket, Key, Body, **_):
        self.objects[Key] = Body

    def status(self) -> dict:
        return json.loads(self.objects[status_key("p", APP, INSTANCE)])


def make_agent(tmp_path, store: RecordStore, monkeypatch, listing) -> agent.ModelAgent:
    config = agent_config.parse_config(
        json.dumps({"bucket": "b", "prefix": "p", "application": APP, "region": "eu-west-1", "host_path": str(tmp_path)}).encode(), "c"
    )
    monkeypatch.setattr(agent, "instance_metadata", lambda _config: {"container_instance_arn": "arn:ci", "cluster": "fleet"})
    monkeypatch.setattr(agent, "http_request", listing)
    monkeypatch.setattr(agent.time, "sleep", lambda _s: None)
    return agent.ModelAgent(config, agent.BotocoreRetryingClient(store), {"instance_id": INSTANCE})


class Introspection:
    """GET /v1/tasks: an empty listing, except while `down` says the ECS agent is restarting."""

    def __init__(self) -> None:
        self.down = False
        self.calls = 0

    def __call__(self, url, *_a, **_kw) -> bytes:
        self.calls += 1
        if self.down:
            raise ConnectionRefusedError(111, "Connection refused")
        return json.dumps({"Tasks": []}).encode()


def test_adversarial_model_agent_an_introspection_outage_of_one_poll_is_retried_not_judged(tmp_path, monkeypatch):
    """Stand-ins: in-memory S3, a failing introspection API, a moved clock. The ECS agent restarts for one poll: the
    pass asks three times, then writes the last status again (state kept, `transient` naming the outage), never
    `failed`; back up, `transient` clears. Down longer than the grace: failed, naming the outage and the fix."""
    store = RecordStore()
    introspection = Introspection()
    clock = {"now": 1000.0}
    monkeypatch.setattr(agent.time, "monotonic", lambda: clock["now"])
    model_agent = make_agent(tmp_path, store, monkeypatch, introspection)
    assert model_agent.reconcile()["state"] == "applied"

    introspection.down = True
    during = model_agent.reconcile()
    assert introspection.calls == 1 + agent.INTROSPECTION_ATTEMPTS
    assert (during["state"], during["last_error"]) == ("applied", None) and "did not answer" in during["transient"]
    assert store.status()["state"] == "applied" and store.status()["transient"]

    introspection.down = False
    after = model_agent.reconcile()
    assert (after["state"], after["transient"]) == ("applied", None)

    introspection.down = True
    model_agent.reconcile()
    clock["now"] += agent.introspection_grace_s(model_agent.config)
    judged = model_agent.reconcile()
    assert judged["state"] == "failed" and "check ecs.service" in judged["last_error"]


BROKEN_CANARIES = {
    "not-json": b"{",
    "schema-7": json.dumps({"schema": 7, "application": APP, "instances": ["i-0bbb"]}).encode(),
    "bad-model-lists-other-instance": json.dumps(
        {"schema": 2, "application": APP, "release_id": "r-c", "created": "t", "models": [{"name": ""}], "instances": ["i-0bbb"]}
    ).encode(),
    "bad-model-lists-this-instance": json.dumps(
        {"schema": 2, "application": APP, "release_id": "r-c", "created": "t", "models": [{"name": ""}], "instances": [INSTANCE]}
    ).encode(),
}


@pytest.mark.parametrize("name", list(BROKEN_CANARIES))
def test_adversarial_model_agent_a_broken_canary_never_stops_the_other_records(tmp_path, monkeypatch, name):
    """Stand-ins: in-memory S3, introspection answering no task. A broken canary.json: the agent still reads
    current.json as its target (no exception, no failed pass); the status names the canary only when it may list
    this instance (its list unreadable, or naming it), with the recovery."""
    current = {"schema": 2, "application": APP, "release_id": "r-cur", "created": "t", "models": []}
    store = RecordStore({release_key("p", APP, "current"): render_release(current), release_key("p", APP, "canary"): BROKEN_CANARIES[name]})
    model_agent = make_agent(tmp_path, store, monkeypatch, Introspection())
    status = model_agent.reconcile()
    assert (status["release_id"], status["state"]) == ("r-cur", "applied")
    concerns = name in ("not-json", "bad-model-lists-this-instance")
    assert ("canary" in status["record_errors"]) is concerns
    if concerns:
        assert "canary_absent" in status["record_errors"]["canary"]
    hydrated = model_agent.hydrate()
    assert hydrated["release_id"] == "r-cur"


BROKEN_OTHERS = {
    # (the broken record, the valid records beside it, the target the agent must still apply, the recovery it names)
    "standby-not-json": ("standby", b"{", {"current": "r-cur"}, "r-cur", "standby_absent"),
    "standby-schema-7": (
        "standby",
        json.dumps({"schema": 7, "application": APP}).encode(),
        {"current": "r-cur"},
        "r-cur",
        "standby_absent",
    ),
    "previous-not-json": ("previous", b"\xff", {"current": "r-cur"}, "r-cur", "next promotion"),
    "previous-other-application": (
        "previous",
        json.dumps({"schema": 2, "application": "other", "release_id": "r-o", "created": "t", "models": []}).encode(),
        {"current": "r-cur"},
        "r-cur",
        "next promotion",
    ),
    "current-not-json-canary-lists-this-instance": ("current", b"[", {"canary": "r-can"}, "r-can", "rolled_back"),
}


@pytest.mark.parametrize("case", list(BROKEN_OTHERS))
def test_adversarial_model_agent_a_broken_standby_previous_or_current_never_stops_the_other_records(tmp_path, monkeypatch, case):
    """Stand-ins: in-memory S3, introspection answering no task. The agent reads four records: a broken standby.json,
    previous.json or current.json counts as absent, the valid records are still applied (at boot and while serving,
    no exception, no failed pass), and the status names the broken record with its recovery; a broken current.json is
    the instance's last_error too (every task outside another record's binding serves it)."""
    name, raw, valid, target, recovery_hint = BROKEN_OTHERS[case]
    objects = {release_key("p", APP, name): raw}
    for record_name, release_id in valid.items():
        record = {"schema": 2, "application": APP, "release_id": release_id, "created": "t", "models": []}
        if record_name == "canary":
            record["instances"] = [INSTANCE]
        objects[release_key("p", APP, record_name)] = render_release(record)
    model_agent = make_agent(tmp_path, RecordStore(objects), monkeypatch, Introspection())
    assert model_agent.hydrate()["release_id"] == target
    status = model_agent.reconcile()
    assert (status["release_id"], status["state"]) == (target, "applied")
    assert list(status["record_errors"]) == [name] and recovery_hint in status["record_errors"][name]
    assert (name == "current") is bool(status["last_error"] and name in status["last_error"])


def test_adversarial_model_agent_bad_configs_are_named_never_a_crash():
    """Property: 500 configs with one to four keys set to hostile values (wrong types, NaN, infinities, huge numbers,
    relative paths, unknown keys): parse_config returns a config whose every key has its documented type and range, or
    raises ConfigError naming a key; never another exception."""
    rng = random.Random(2801)
    hostile = [
        None,
        True,
        0,
        -1,
        1,
        2**63,
        1.5,
        float("nan"),
        float("inf"),
        "",
        "x",
        "relative/path",
        "/abs",
        "ftp://h",
        "http://h",
        [],
        {},
        ["a"],
        "\u0000",
        65536,
    ]
    keys = [*agent_config.DEFAULTS, *agent_config.REQUIRED, "unknown_key"]
    for _case in range(500):
        given = {"bucket": "b", "application": APP, "region": "eu-west-1"}
        for key in rng.sample(keys, rng.randint(1, 4)):
            given[key] = rng.choice(hostile)
        try:
            raw = json.dumps(given).encode()
        except ValueError:
            continue
        try:
            config = agent_config.parse_config(raw, "/etc/inferops/model-agent.json")
        except agent_config.ConfigError as err:
            assert "/etc/inferops/model-agent.json" in str(err)
            continue
        for key, largest in agent_config._INTEGERS.items():
            assert isinstance(config[key], int) and not isinstance(config[key], bool) and 1 <= config[key] <= largest
        assert 0 <= config["boot_retry_delay_s"] <= 3600
        assert isinstance(config["prefix"], str) and config["host_path"].startswith("/")
        assert config["introspection_url"].startswith("http")
