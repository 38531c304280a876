"""The release ledger against a moto server (the S3 and EventBridge stand-in, private to the test): modules
release_ledger and release_ledger_info through ansible-playbook, and playbooks/release_history.yml.

An append is checked four times (check mode, real run, check mode again, real run again); S3 itself refuses a second
write to a ledger key (moto implements PutObject's If-None-Match: *); the event reaches an SQS queue through an
EventBridge rule; the info module answers which colour served production, and which release a colour ran, at
several times of the day.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from tests.harness.ansible import REPO_ROOT, run_playbook
from tests.harness.moto import ACCOUNT_ID, MotoServer

PLAYBOOK = Path(__file__).parent / "playbooks" / "release_ledger_modules.yml"
HISTORY = REPO_ROOT / "playbooks" / "release_history.yml"
SUMMARY_TASK = "What served the production route (and the colour asked)"
LEDGER = {"bucket": "ledger-models", "prefix": "models/", "application": "triton"}
BUS = "ops-events"
IMAGE = "127.0.0.1:5000/inferops/triton@sha256:" + "a" * 64
IMAGE_2 = "127.0.0.1:5000/inferops/triton@sha256:" + "b" * 64
TD = f"arn:aws:ecs:us-east-1:{ACCOUNT_ID}:task-definition/triton:{{}}"
SHA = "c" * 64

ENTRIES = [
    {
        "kind": "deploy",
        "release_id": "r-000000000001",
        "image": IMAGE,
        "task_definition": TD.format(1),
        "models": [{"name": "resnet", "version": 1, "sha256": SHA}],
        "ami_id": "ami-0a1b2c3d4e5f6a7b8",
        "color": "green",
        "production_color": "green",
        "verdicts": {"gates": "ok"},
        "started": "2026-12-01T07:55:00Z",
        "ended": "2026-12-01T08:00:00Z",
        "event_bus_name": BUS,
    },
    {
        "kind": "cutover",
        "outcome": "rolled_back",
        "release_id": "r-000000000002",
        "image": IMAGE_2,
        "task_definition": TD.format(2),
        "color": "blue",
        "production_color": "green",
        "verdicts": {"alarms": {"triton-5xx": "ALARM"}},
        "ended": "2026-12-01T09:00:00Z",
    },
    {
        "kind": "cutover",
        "release_id": "r-000000000003",
        "image": IMAGE_2,
        "task_definition": TD.format(3),
        "color": "blue",
        "production_color": "blue",
        "ended": "2026-12-01T10:00:00Z",
        "event_bus_name": BUS,
    },
    {
        "kind": "cutover_rollback",
        "color": "green",
        "production_color": "green",
        "ended": "2026-12-01T11:00:00Z",
        "caller": "arn:aws:iam::123456789012:user/oncall",
    },
    {
        "kind": "model_rollback",
        "release_id": "r-000000000004",
        "models": [{"name": "resnet", "version": 1}],
        "ended": "2026-12-01T12:00:00Z",
    },
]


def ledger_objects(moto: MotoServer) -> dict[str, bytes]:
    s3 = moto.client("s3")
    listed = s3.list_objects_v2(Bucket=LEDGER["bucket"], Prefix="models/ledger/triton/").get("Contents", [])
    return {o["Key"]: s3.get_object(Bucket=LEDGER["bucket"], Key=o["Key"])["Body"].read() for o in listed}


def events_received(moto: MotoServer, queue_url: str) -> list[dict]:
    messages = moto.client("sqs").receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", [])
    return [json.loads(m["Body"]) for m in messages]


@pytest.fixture
def ledger_server(moto_server: MotoServer):
    """The bucket, and an event bus whose rule forwards the collection's events to an SQS queue."""
    moto_server.client("s3").create_bucket(Bucket=LEDGER["bucket"])
    events, sqs = moto_server.client("events"), moto_server.client("sqs")
    events.create_event_bus(Name=BUS)
    queue_url = sqs.create_queue(QueueName="ledger")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events.put_rule(Name="ledger", EventBusName=BUS, EventPattern=json.dumps({"source": ["inferops.triton_ecs"]}))
    events.put_targets(Rule="ledger", EventBusName=BUS, Targets=[{"Id": "queue", "Arn": queue_arn}])
    return moto_server, queue_url


def play(moto: MotoServer, check: bool = False, **extra):
    return run_playbook(PLAYBOOK, extra_vars={"aws_endpoint_url": moto.endpoint, "ledger": LEDGER, **extra}, check=check, diff=True)


def appended(run) -> list[dict]:
    return run.result("Append each entry")["results"]


def test_appends_are_immutable_idempotent_and_answer_what_served_when(ledger_server):
    moto, queue_url = ledger_server

    checked = play(moto, check=True, ledger_entries=ENTRIES)
    assert checked.rc == 0, checked.stdout[-3000:]
    assert [r["changed"] for r in appended(checked)] == [True] * len(ENTRIES)
    assert ledger_objects(moto) == {} and events_received(moto, queue_url) == []
    planned = {r["key"]: r["entry"] for r in appended(checked)}

    written = play(moto, ledger_entries=ENTRIES)
    assert written.rc == 0, written.stdout[-3000:]
    results = appended(written)
    assert [r["changed"] for r in results] == [True] * len(ENTRIES)
    objects = ledger_objects(moto)
    assert {k: json.loads(v) for k, v in objects.items()} == planned  # check mode said exactly what was written
    assert list(objects) == [r["key"] for r in results]  # the listing is in time order
    assert results[0]["diff"] == {"before": {}, "after": results[0]["entry"]}
    # the caller comes from STS unless given
    assert results[0]["entry"]["caller"].startswith(f"arn:aws:sts::{ACCOUNT_ID}:") and results[3]["entry"]["caller"].endswith(
        ":user/oncall"
    )
    # one event per entry written with event_bus_name, carrying the key and the entry
    received = events_received(moto, queue_url)
    assert sorted(e["detail"]["key"] for e in received) == sorted([results[0]["key"], results[2]["key"]])
    assert {(e["source"], e["detail-type"]) for e in received} == {("inferops.triton_ecs", "Triton release ledger entry")}
    assert all(r["event_id"] for r in (results[0], results[2]))

    again_checked = play(moto, check=True, ledger_entries=ENTRIES)
    again = play(moto, ledger_entries=ENTRIES)
    for run in (again_checked, again):
        assert run.rc == 0 and run.changed_tasks == [], run.stdout[-3000:]
        assert all(r["already_written"] for r in appended(run))
    assert ledger_objects(moto) == objects and events_received(moto, queue_url) == []

    # S3 itself refuses a second write to a ledger key, from any writer
    first_key = results[0]["key"]
    with pytest.raises(ClientError) as refused:
        moto.client("s3").put_object(Bucket=LEDGER["bucket"], Key=first_key, Body=b"{}", IfNoneMatch="*")
    assert refused.value.response["Error"]["Code"] == "PreconditionFailed"
    # and the module refuses another entry under a key it would name, leaving the object alone
    moto.client("s3").delete_object(Bucket=LEDGER["bucket"], Key=first_key)
    moto.client("s3").put_object(Bucket=LEDGER["bucket"], Key=first_key, Body=b"not the entry")
    clash = play(moto, ledger_entries=ENTRIES[:1])
    assert clash.rc != 0
    assert "already holds another entry; ledger entries are never rewritten" in appended(clash)[0]["msg"]
    assert ledger_objects(moto)[first_key] == b"not the entry"
    moto.client("s3").delete_object(Bucket=LEDGER["bucket"], Key=first_key)
    moto.client("s3").put_object(Bucket=LEDGER["bucket"], Key=first_key, Body=objects[first_key])

    questions = [
        {"at": "2026-12-01T07:00:00Z"},
        {"at": "2026-12-01T08:30:00Z"},
        {"at": "2026-12-01T09:30:00Z"},
        {"at": "2026-12-01T09:30:00Z", "color": "blue"},
        {"at": "2026-12-01T10:30:00Z"},
        {"at": "2026-12-01T11:30:00Z"},
        {"at": "2026-12-01T11:30:00Z", "color": "blue"},
        {"at": "2026-12-01T12:30:00Z", "since": "2026-12-01T09:00:00Z"},
    ]
    asked = play(moto, ledger_questions=questions)
    assert asked.rc == 0, asked.stdout[-3000:]
    answers = [r["answer"] for r in asked.result("Ask the ledger")["results"]]
    summary = [(a["color"], a["production_color"], a["release_id"], a["task_definition"]) for a in answers]
    assert summary == [
        (None, None, None, None),  # before the first entry
        ("green", "green", "r-000000000001", TD.format(1)),
        ("green", "green", "r-000000000001", TD.format(1)),  # the rolled-back cutover moved nothing
        ("blue", "green", None, None),  # ... not even blue's release
        ("blue", "blue", "r-000000000003", TD.format(3)),
        ("green", "green", "r-000000000001", TD.format(1)),  # the emergency rollback: production back on green
        ("blue", "green", "r-000000000003", TD.format(3)),  # blue still has what it ran
        ("green", "green", "r-000000000004", TD.format(1)),  # the model rollback reached green; its image stays
    ]
    assert answers[5]["production_entry_key"] == results[3]["key"] and answers[1]["entry_key"] == results[0]["key"]
    assert answers[7]["models"] == [{"name": "resnet", "version": 1, "sha256": None}] and answers[7]["image"] == IMAGE
    window = asked.result("Ask the ledger")["results"][7]["entries"]
    assert [(e["kind"], e["outcome"], e["key"]) for e in window] == [
        (r["entry"]["kind"], r["entry"]["outcome"], r["key"]) for r in results[1:]
    ]
    assert asked.changed_tasks == []

    bad = play(moto, ledger_questions=[{"at": "10:00"}])
    assert bad.rc != 0 and "at='10:00' is not an ISO-8601 UTC time: write it as 2026-12-01T10:00:00Z" in bad.stdout


def test_bad_input_fails_before_any_write(ledger_server):
    moto, queue_url = ledger_server
    no_color = {k: v for k, v in ENTRIES[2].items() if k != "color"}
    run = play(moto, ledger_entries=[no_color])
    assert run.rc != 0 and "color is null: a cutover entry names the colour it concerns" in appended(run)[0]["msg"]
    run = play(moto, ledger_entries=[{**ENTRIES[0], "image": "triton@sha256:short"}])
    assert run.rc != 0 and "image='triton@sha256:short' must be the image the tasks run" in appended(run)[0]["msg"]
    assert ledger_objects(moto) == {} and events_received(moto, queue_url) == []


def test_release_history_playbook_says_what_served_at_a_time(ledger_server):
    moto, _queue = ledger_server
    assert play(moto, ledger_entries=ENTRIES).rc == 0
    inventory = {
        "aws_region": "us-east-1",
        "aws_endpoint_url": moto.endpoint,
        "aws_access_key": "testing",
        "aws_secret_key": "testing",
        "fleet_iam_model_bucket": LEDGER["bucket"],
        "fleet_iam_model_prefix": LEDGER["prefix"],
        "fleet_services_app_name": LEDGER["application"],
    }
    run = run_playbook(HISTORY, extra_vars={**inventory, "at": "2026-12-01T10:30:00Z"})
    assert run.rc == 0, run.stdout[-3000:]
    lines = run.result(f"{SUMMARY_TASK} at 2026-12-01T10:30:00.000Z")["msg"]
    assert lines[:4] == [
        "production route at 2026-12-01T10:30:00.000Z: blue (since 2026-12-01T10:00:00.000Z)",
        "blue: release r-000000000003 (since 2026-12-01T10:00:00.000Z)",
        f"  image: {IMAGE_2}",
        f"  task definition: {TD.format(3)}",
    ]
    colored = run_playbook(
        HISTORY, extra_vars={**inventory, "at": "2026-12-01T10:30:00Z", "color": "green", "since": "2026-12-01T08:00:00Z"}
    )
    assert colored.rc == 0, colored.stdout[-3000:]
    lines = colored.result(f"{SUMMARY_TASK} at 2026-12-01T10:30:00.000Z")["msg"]
    assert lines[1] == "green: release r-000000000001 (since 2026-12-01T08:00:00.000Z)"
    assert "  models: resnet v1" in lines
    assert lines[-3:] == [
        f"2026-12-01T08:00:00.000Z  deploy succeeded on green: release r-000000000001 by arn:aws:sts::{ACCOUNT_ID}:user/moto",
        f"2026-12-01T09:00:00.000Z  cutover rolled_back on blue: release r-000000000002 by arn:aws:sts::{ACCOUNT_ID}:user/moto",
        f"2026-12-01T10:00:00.000Z  cutover succeeded on blue: release r-000000000003 by arn:aws:sts::{ACCOUNT_ID}:user/moto",
    ]


def test_the_flows_tasks_file_records_turns_off_and_says_when_it_has_no_bucket(ledger_server):
    moto, _queue = ledger_server
    tasks = Path(__file__).parent / "playbooks" / "ledger_entry_tasks.yml"
    base = {"aws_endpoint_url": moto.endpoint, "flow_bucket": LEDGER["bucket"]}

    recorded = run_playbook(tasks, base)
    assert recorded.rc == 0, recorded.stdout[-3000:]
    written = recorded.result("Release ledger | record the model_rollback")
    assert written["changed"] and written["entry"]["models"] == [{"name": "resnet", "version": 1, "sha256": None}]
    assert (written["entry"]["color"], written["entry"]["ami_id"], written["entry"]["kind"]) == (None, None, "model_rollback")
    assert list(ledger_objects(moto)) == [written["key"]]

    off = run_playbook(tasks, {**base, "release_ledger": False})
    assert off.rc == 0 and off.result("Release ledger | record the model_rollback").get("skipped")
    nowhere = run_playbook(tasks, {**base, "flow_bucket": ""})
    assert nowhere.rc == 0
    assert (
        "is not in the release ledger"
        in nowhere.result("Release ledger | not recorded, no bucket (set release_ledger_bucket, or release_ledger false)")["msg"]
    )
    assert len(ledger_objects(moto)) == 1
