"""Staged model releases from the controller, end to end: playbooks/sync_models.yml and rollback_models.yml on their default
(agent) path, module model_release.

Stand-ins: a moto server for S3 and ECS (moto EC2 instances registered as the cluster's container instances); two
simulated container instances (tests/harness/model_agent.py), each running the real model agent as a process against
moto S3, a stand-in ECS introspection endpoint and IMDSv2, and one real tritonserver task. Versions of model `m`
answer OUTPUT0 = INPUT0 + <version>, so an inference says which version served it. The controller never reaches an
instance: it only writes release records and reads status objects.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.harness.ansible import REPO_ROOT, run_playbook
from tests.harness.fleet import APP, BUCKET, CLUSTER, MODEL, PREFIX, SimulatedFleet
from tests.harness.moto import REGION

SYNC = REPO_ROOT / "playbooks" / "sync_models.yml"
ROLLBACK = REPO_ROOT / "playbooks" / "rollback_models.yml"
RELEASE_TASKS = "model_repository : "


def extra(fleet: SimulatedFleet, version: int, **more) -> dict:
    """The playbooks' variables: the release of model m at `version`, quick polls and timeouts for the test."""
    return {
        "model_repository_bucket": BUCKET,
        "model_repository_prefix": PREFIX,
        "model_repository_application": APP,
        "model_repository_cluster": CLUSTER,
        "model_repository_models": [{"name": MODEL, "version": version}],
        "model_repository_aws_endpoint_url": fleet.moto.endpoint,
        "model_repository_aws_region": REGION,
        "model_repository_canary_bake_s": 1,
        "model_repository_rollout_timeout_s": 60,
        "model_repository_rollout_poll_s": 1,
        **more,
    }


def play(fleet: SimulatedFleet, playbook: Path, variables: dict, check: bool = False):
    return run_playbook(playbook, variables, check=check, env=fleet.moto.env())


@pytest.fixture
def fleet(tmp_path, moto_server):
    started = SimulatedFleet(tmp_path, moto_server, size=2)  # canary first, then the other one
    yield started
    started.stop()


def why(run) -> str:
    """The messages of the tasks that failed (the json callback's stdout is too long to read)."""
    return "\n".join(f"{t['name']}: {h.get('msg')}" for t in run.tasks for h in t["hosts"].values() if h.get("failed")) + run.stderr[-2000:]


def result(run, task: str) -> dict:
    """The one result of the role task whose name is `task` (the callback prefixes the role's name)."""
    found = [h for t in run.tasks if t["name"].endswith(RELEASE_TASKS + task) for h in t["hosts"].values()]
    assert len(found) == 1, f"{len(found)} results of {task!r}: {[t['name'] for t in run.tasks]}"
    return found[0]


def short(names: list[str]) -> list[str]:
    return [name.split(RELEASE_TASKS)[-1] for name in names]


def test_staged_rollout_failed_canary_and_rollback(fleet):
    first = play(fleet, SYNC, extra(fleet, 1, model_repository_publish=[fleet.version_source(1)]))
    assert first.rc == 0, why(first) + fleet.agent_logs()
    assert fleet.serving() == [1.0, 1.0]
    release_1 = fleet.record("current")["release_id"]
    canary = result(first, "Write the canary release record (every model version must be published first)")
    assert canary["canary_instances"] == fleet.instance_ids[:1] and canary["changed"]
    converged = result(first, "Wait for every ACTIVE container instance to apply the release")
    assert [(v["instance_id"], v["release_id"], v["ok"]) for v in converged["instances"]] == [
        (i, release_1, True) for i in fleet.instance_ids
    ]

    # The same release again: nothing written, every step reports no change.
    again = play(fleet, SYNC, extra(fleet, 1))
    assert again.rc == 0 and again.changed_tasks == [], again.changed_tasks

    # Check mode plans release 2 and writes nothing.
    planned = play(fleet, SYNC, extra(fleet, 2, model_repository_publish=[fleet.version_source(2)]), check=True)
    assert planned.rc == 0, why(planned)
    assert fleet.record("canary") is None and fleet.record("current")["release_id"] == release_1

    second = play(fleet, SYNC, extra(fleet, 2, model_repository_publish=[fleet.version_source(2)]))
    assert second.rc == 0, why(second)
    assert fleet.serving() == [2.0, 2.0]
    release_2 = fleet.record("current")["release_id"]
    assert fleet.record("previous")["release_id"] == release_1 and fleet.record("canary") is None

    # Version 3 fails to load: the canary reports it failed, the canary record goes, both instances keep 2.
    broken = play(fleet, SYNC, extra(fleet, 3, model_repository_publish=[fleet.version_source(3, broken=True)]))
    assert broken.rc != 0
    failure = result(broken, "Fail the release with the canary's reason")["msg"]
    assert f"failed and was removed; the fleet is back on release {release_2}" in failure
    assert f"{fleet.instance_ids[0]}: failed to apply" in failure and "broken on purpose" in failure
    assert fleet.record("canary") is None and fleet.record("current")["release_id"] == release_2
    assert fleet.serving() == [2.0, 2.0]

    # Rollback: current <- previous (release 1) on every instance; a second run changes nothing.
    rolled = play(fleet, ROLLBACK, extra(fleet, 1))
    assert rolled.rc == 0, why(rolled)
    assert fleet.serving() == [1.0, 1.0] and fleet.record("current")["release_id"] == release_1
    assert short(rolled.changed_tasks) == [
        "Put the previous release back (current.json <- previous.json, canary.json removed)",
        "Release ledger | record the model_rollback",
    ]
    twice = play(fleet, ROLLBACK, extra(fleet, 1))
    assert twice.rc == 0 and twice.changed_tasks == []

    # The release ledger has one entry per release that moved the fleet: 1 and 2 released, back to 1 (the failed
    # canary of 3 and the runs that changed nothing appended none).
    ledger = [json.loads(body) for body in fleet.ledger_entries()]
    assert [(e["kind"], e["release_id"], [m["version"] for m in e["models"]], e["color"]) for e in ledger] == [
        ("model_release", release_1, [1], None),
        ("model_release", release_2, [2], None),
        ("model_rollback", release_1, [1], None),
    ]
    assert [v["instance_id"] for v in ledger[0]["verdicts"]["instances"]] == fleet.instance_ids


def test_timeout_names_the_laggard_and_bad_input_writes_nothing(fleet):
    first = play(fleet, SYNC, extra(fleet, 1, model_repository_publish=[fleet.version_source(1), fleet.version_source(2)]))
    assert first.rc == 0, why(first)
    release_1 = fleet.record("current")["release_id"]

    # The second instance's agent is down: the canary (first instance) passes, the fleet times out naming the
    # laggard, release 1 is put back and the fleet (the laggard never left it) converges on it.
    laggard = fleet.instance_ids[1]
    fleet.instances[1].stop_agent()
    stuck = play(fleet, SYNC, extra(fleet, 2, model_repository_rollout_timeout_s=8))
    assert stuck.rc != 0
    message = result(stuck, "Fail the release with the laggards")["msg"]
    assert "the previous release was put back and the fleet converged on it" in message
    assert f"1 of 2 instances did not report their release applied within 8 s: {laggard}: reports release {release_1}" in message
    assert fleet.record("current")["release_id"] == release_1
    assert fleet.serving() == [1.0, 1.0]

    # Bad input fails before any write: a version without a manifest, a release id that is not one.
    before = fleet.records()
    missing = play(fleet, SYNC, extra(fleet, 9))
    assert missing.rc != 0
    assert "models[0] (m): version=9 has no manifest in S3 (published: [1, 2])" in missing.stdout
    bad_id = play(fleet, SYNC, extra(fleet, 2, model_repository_release_id="bad id"))
    assert bad_id.rc != 0 and "release_id='bad id' must be 1-128 characters" in bad_id.stdout
    assert fleet.records() == before
