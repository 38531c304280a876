"""Release rollout logic of module model_release: ids, plans, verdicts, laggard messages and the wait.

Pure functions, plus `run` against an in-memory S3 and ECS mocked at the client boundary (no network); and the
fleet_capacity user data that writes the model agent's configuration, run by bash with stand-ins.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from botocore.exceptions import ClientError

from ansible_collections.inferops.triton_ecs.plugins.module_utils._models import convergence, rollout
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.agent_config import parse_config
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.release import ReleaseError, build_release
from tests.unit.one_page_listings import OnePageListings

APP = "triton"
CREATED = "2026-11-30T12:00:00Z"


def release(models: dict[str, int], release_id: str | None = None) -> dict:
    return rollout.make_release(APP, models, release_id, CREATED)


def status(instance_id, release_id, state="applied", applied=True, failures=0, last_error=None) -> dict:
    return {
        "schema": 1,
        "application": APP,
        "instance_id": instance_id,
        "release_id": release_id,
        "state": state,
        "applied": applied,
        "inference_failures": {"task-1": {"m": failures}},
        "last_error": last_error,
    }


def etag_of(body: bytes) -> str:
    return '"' + hashlib.md5(body).hexdigest() + '"'  # S3's ETag of a single-part object


class FakeS3(OnePageListings):
    """The S3 calls the rollout makes, over a dict, with S3's conditional writes (If-Match, If-None-Match: *, 412);
    records each write."""

    def __init__(self):
        self.objects: dict[str, bytes] = {}
        self.writes: list[tuple[str, str]] = []  # the records' writes (the lock's are in lock_writes)
        self.lock_writes: list[tuple[str, str]] = []

    def list_objects_v2(self, aws_retry, Bucket, Prefix, Delimiter, **_kw):
        keys = sorted(k for k in self.objects if k.startswith(Prefix) and Delimiter not in k[len(Prefix) :])
        return {"Contents": [{"Key": k} for k in keys], "IsTruncated": False}

    def get_object(self, aws_retry, Bucket, Key):
        if Key not in self.objects:
            raise ClientError({"Error": {"Code": "NoSuchKey", "Message": "missing"}}, "GetObject")
        return {"Body": io.BytesIO(self.objects[Key]), "ETag": etag_of(self.objects[Key])}

    def _precondition(self, Key, IfMatch=None, IfNoneMatch=None):
        if (IfNoneMatch == "*" and Key in self.objects) or (IfMatch and etag_of(self.objects.get(Key, b"\0gone")) != IfMatch):
            raise ClientError(
                {"Error": {"Code": "PreconditionFailed", "Message": "At least one of the pre-conditions failed"}}, "PutObject"
            )

    def put_object(self, aws_retry, Bucket, Key, Body, IfMatch=None, IfNoneMatch=None, **_kw):
        self._precondition(Key, IfMatch, IfNoneMatch)
        (self.lock_writes if Key.endswith("/lock.json") else self.writes).append(("put", Key))
        self.objects[Key] = Body
        return {"ETag": etag_of(Body)}

    def delete_object(self, aws_retry, Bucket, Key, IfMatch=None):
        self._precondition(Key, IfMatch)
        (self.lock_writes if Key.endswith("/lock.json") else self.writes).append(("delete", Key))
        self.objects.pop(Key, None)


class FakeECS(OnePageListings):
    def __init__(self, instance_ids):
        self.instance_ids = instance_ids

    def list_container_instances(self, aws_retry, cluster, status, **_kw):
        return {"containerInstanceArns": [f"arn:ci/{i}" for i in self.instance_ids]}

    def describe_container_instances(self, aws_retry, cluster, containerInstances):
        return {"containerInstances": [{"ec2InstanceId": arn.split("/")[-1]} for arn in containerInstances]}


def params(state, **kw):
    base = dict(
        state=state,
        bucket="b",
        prefix="p",
        application=APP,
        models=None,
        release_id=None,
        cluster="c",
        instances=[],
        timeout_s=5,
        poll_interval_s=1,
        bake_s=0,
        inference_failures_before=None,
    )
    return {**base, **kw}


@pytest.fixture
def s3():
    fake = FakeS3()
    for name, version in (("m", 1), ("m", 2), ("n", 7)):
        fake.objects[f"p/{name}/{version}.manifest.json"] = b"{}"
    return fake


def test_release_id_is_derived_from_the_content_and_stable():
    assert rollout.release_id_for({"m": 2, "n": 7}) == rollout.release_id_for({"n": 7, "m": 2})
    assert rollout.release_id_for({"m": 2}) != rollout.release_id_for({"m": 3})
    assert release({"m": 2})["release_id"].startswith("r-") and release({"m": 2}, "v1.0")["release_id"] == "v1.0"
    with pytest.raises(ReleaseError, match=r"release_id='bad id/' must be 1-128 characters"):
        release({"m": 2}, "bad id/")


@pytest.mark.parametrize(
    ("models", "message"),
    [
        ([], "models is empty"),
        ([{"version": 2}], r"models\[0\]=\{'version': 2\} must be a mapping with name"),
        ([{"name": "../x"}], r"models\[0\] \(../x\): model='../x' is not a usable model directory name"),
        ([{"name": "m", "version": "007"}], r"models\[0\] \(m\): version='007' is not a positive integer"),
        ([{"name": "m"}, {"name": "m", "version": 1}], r"models\[1\]: model m is listed twice"),
    ],
)
def test_requested_models_name_the_entry_and_the_fix(models, message):
    with pytest.raises(ReleaseError, match=message):
        rollout.requested_models(models)


def test_versions_resolve_latest_and_refuse_unpublished():
    requested = rollout.requested_models([{"name": "m"}, {"name": "n", "version": 7}])
    assert rollout.resolve_versions(requested, {"m": [1, 2], "n": [7]}) == {"m": 2, "n": 7}
    with pytest.raises(ReleaseError, match=r"models\[0\] \(m\): version=3 has no manifest in S3 \(published: \[1, 2\]\)"):
        rollout.resolve_versions([("m", "3")], {"m": [1, 2]})
    with pytest.raises(ReleaseError, match=r"models\[0\] \(x\): no published version"):
        rollout.resolve_versions([("x", "latest")], {"x": []})


def test_plans_for_canary_promote_abort_and_rollback():
    old, new = release({"m": 1}), release({"m": 2})
    records = {"current": old, "previous": None, "canary": None}
    canary = rollout.plan_canary(records, new, ["i-b", "i-a"])
    assert [(op, name, rec["instances"]) for op, name, rec in canary] == [("put", "canary", ["i-a", "i-b"])]
    after_canary = rollout.records_after(records, canary)
    assert rollout.plan_canary(after_canary, new, ["i-a", "i-b"]) == []
    assert rollout.plan_canary(records, old, ["i-a"]) == []  # already current: nothing to canary

    promote = rollout.plan_promote(after_canary, new)
    assert rollout.describe_actions(promote) == [
        f"write previous.json ({old['release_id']})",
        f"write current.json ({new['release_id']})",
        "delete canary.json",
    ]
    promoted = rollout.records_after(after_canary, promote)
    assert rollout.plan_promote(promoted, new) == []
    assert rollout.plan_canary_removal(after_canary) == [("delete", "canary", None)]
    assert rollout.plan_canary_removal(promoted) == []

    rollback = rollout.plan_rollback(promoted)
    assert rollout.describe_actions(rollback) == [f"write current.json ({old['release_id']})"]
    assert rollout.plan_rollback(rollout.records_after(promoted, rollback)) == []
    with pytest.raises(ReleaseError, match=r"there is no previous\.json to roll back to"):
        rollout.plan_rollback(records)


def test_a_release_id_names_one_content():
    records = {"current": release({"m": 1}, "v1"), "previous": None, "canary": None}
    with pytest.raises(ReleaseError, match=r"release_id='v1' is already current.json with models \{'m': 1\}, not \{'m': 2\}"):
        rollout.check_id_reuse(records, release({"m": 2}, "v1"))
    rollout.check_id_reuse(records, release({"m": 1}, "v1"))


def test_a_deploy_re_run_resolves_the_release_production_serves():
    """deploy.yml resolves its release before registering the task definition (state=resolved names none); after the
    first deploy, current.json names the revision that runs it, and the same content is the same release."""
    image = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/triton@sha256:" + "1" * 64
    td = "arn:aws:ecs:eu-west-1:123456789012:task-definition/triton:1"
    served = rollout.make_release(APP, {"m": 1}, None, CREATED, {"m": "ab" * 32}, image, td)
    records = {"current": served, "previous": None, "canary": None, "standby": None}
    resolved = rollout.make_release(APP, {"m": 1}, None, CREATED, {"m": "ab" * 32}, image)
    assert resolved["release_id"] == served["release_id"]
    rollout.check_id_reuse(records, resolved)
    other_td = rollout.make_release(APP, {"m": 1}, None, CREATED, {"m": "ab" * 32}, image, td.replace(":1", ":2"))
    with pytest.raises(ReleaseError, match="a release id names one content"):
        rollout.check_id_reuse(records, other_td)


def test_verdicts_for_the_fleet_and_the_canary():
    wanted = release({"m": 2})
    rid = wanted["release_id"]
    assert convergence.instance_verdict("i-a", status("i-a", rid), wanted)["ok"]
    missing = convergence.instance_verdict("i-a", None, wanted)
    assert not missing["ok"] and not missing["failed"] and missing["reason"].startswith("no status object yet")
    behind = convergence.instance_verdict("i-a", status("i-a", "r-old", state="applying", applied=False, last_error="S3 timeout"), wanted)
    assert behind["reason"] == f"reports release r-old (state applying), not yet {rid}; last_error: S3 timeout"
    failed = convergence.instance_verdict("i-a", status("i-a", rid, state="failed", applied=False, last_error="load m 2: bad"), wanted)
    assert failed["failed"] and failed["reason"] == f"failed to apply {rid}: load m 2: bad"
    # The canary check: no error, no new inference failures.
    assert convergence.instance_verdict("i-a", status("i-a", rid, failures=3), wanted, failures_before=3)["ok"]
    rose = convergence.instance_verdict("i-a", status("i-a", rid, failures=5), wanted, failures_before=3)
    assert rose["failed"] and rose["reason"] == "inference failures rose from 3 to 5"
    errored = convergence.instance_verdict("i-a", status("i-a", rid, last_error="smoke inference failed"), wanted, failures_before=0)
    assert errored["failed"] and "smoke inference failed" in errored["reason"]
    # No release at all: the agent reports release_id null, applied.
    assert convergence.instance_verdict("i-a", status("i-a", None), None)["ok"]


def test_laggard_message_names_each_instance_and_where_to_look():
    wanted = release({"m": 2})
    verdicts = [
        convergence.instance_verdict("i-a", status("i-a", wanted["release_id"]), wanted),
        convergence.instance_verdict("i-b", None, wanted),
    ]
    message = convergence.laggard_message(verdicts, 120, "s3://b/p/status/triton/")
    assert message == (
        "1 of 2 instances did not report their release applied within 120 s: i-b: no status object yet (its model agent has "
        "not reported). Status objects: s3://b/p/status/triton/<instance-id>.json; see docs/runbook.md, section 'Stuck hydration'"
    )


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def test_wait_times_out_naming_laggards_and_returns_once_all_applied():
    wanted = release({"m": 2})
    clock = Clock()
    answers = iter(
        [[convergence.instance_verdict("i-a", None, wanted)]] * 3
        + [[convergence.instance_verdict("i-a", status("i-a", wanted["release_id"]), wanted)]]
    )
    verdicts, waited = convergence.wait_converged(lambda: next(answers), 10, 2, clock=clock, sleep=clock.sleep)
    assert verdicts[0]["ok"] and waited == 6

    clock = Clock()
    with pytest.raises(
        convergence.RolloutError, match=r"1 of 1 instances did not report their release applied within 10 s: i-a: no status"
    ) as err:
        convergence.wait_converged(lambda: [convergence.instance_verdict("i-a", None, wanted)], 10, 3, clock=clock, sleep=clock.sleep)
    assert err.value.verdicts[0]["instance_id"] == "i-a" and clock.now == 10


def test_wait_fails_at_once_on_a_failed_instance_and_bakes_before_returning():
    wanted = release({"m": 2})
    rid = wanted["release_id"]
    clock = Clock()
    failed = [convergence.instance_verdict("i-a", status("i-a", rid, state="failed", applied=False, last_error="boom"), wanted)]
    with pytest.raises(convergence.RolloutError, match=r"1 of 1 instances failed the release: i-a: failed to apply .*: boom"):
        convergence.wait_converged(lambda: failed, 100, 5, clock=clock, sleep=clock.sleep)
    assert clock.now == 0

    clock = Clock()
    good = [convergence.instance_verdict("i-a", status("i-a", rid), wanted, failures_before=0)]
    _verdicts, waited = convergence.wait_converged(lambda: good, 100, 5, bake_s=12, clock=clock, sleep=clock.sleep)
    assert waited == 12


def test_run_canary_checks_manifests_before_any_write(s3):
    ecs = FakeECS(["i-b", "i-a"])
    with pytest.raises(ReleaseError, match=r"models\[1\] \(n\): version=8 has no manifest"):
        rollout.run(s3, ecs, params("canary", models=[{"name": "m"}, {"name": "n", "version": 8}]), False, CREATED)
    with pytest.raises(ReleaseError, match=r"instances\[0\]='i-zz' is not an ACTIVE container instance of cluster c"):
        rollout.run(s3, ecs, params("canary", models=[{"name": "m"}], instances=["i-zz"]), False, CREATED)
    with pytest.raises(ReleaseError, match=r"instances\[0\]: instance id 'web-1' is not an EC2 instance id"):
        rollout.run(s3, ecs, params("canary", models=[{"name": "m"}], instances=["web-1"]), False, CREATED)
    assert s3.writes == []


def test_check_mode_counts_the_versions_this_run_would_publish(s3):
    ecs = FakeECS(["i-a"])
    planned = rollout.run(s3, ecs, params("canary", models=[{"name": "m"}], publishing=[{"model": "m", "version": 3}]), True, CREATED)
    assert planned["release"]["models"] == [{"name": "m", "version": 3}] and s3.writes == []
    with pytest.raises(ReleaseError, match=r"version=3 has no manifest"):
        rollout.run(
            s3, ecs, params("canary", models=[{"name": "m", "version": 3}], publishing=[{"model": "m", "version": 3}]), False, CREATED
        )


def test_run_four_steps_canary_then_promote_then_rollback(s3):
    ecs = FakeECS(["i-b", "i-a"])
    s3.objects["p/status/triton/i-a.json"] = json.dumps(status("i-a", None, failures=4)).encode()
    canary = params("canary", models=[{"name": "m"}, {"name": "n", "version": 7}])
    planned = rollout.run(s3, ecs, canary, True, CREATED)
    assert planned["changed"] and planned["canary_instances"] == ["i-a"] and s3.writes == []
    assert planned["inference_failures_before"] == {"i-a": 4}
    done = rollout.run(s3, ecs, canary, False, CREATED)
    assert done["actions"] == [f"write canary.json ({done['release_id']})"]
    pinned = done["records"]["canary"]["models"][0]
    assert (pinned["name"], pinned["version"]) == ("m", 2)
    assert pinned["sha256"] == hashlib.sha256(s3.objects["p/m/2.manifest.json"]).hexdigest()  # the manifest the release pins
    assert rollout.run(s3, ecs, canary, True, CREATED)["changed"] is False
    assert rollout.run(s3, ecs, canary, False, "2026-12-01T00:00:00Z")["changed"] is False  # another time, same release

    promote = params("promoted", models=canary["models"])
    assert rollout.run(s3, ecs, promote, False, CREATED)["actions"] == [f"write current.json ({done['release_id']})", "delete canary.json"]
    assert rollout.run(s3, ecs, promote, False, CREATED)["changed"] is False
    second = rollout.run(s3, ecs, params("promoted", models=[{"name": "m", "version": 1}]), False, CREATED)
    assert second["actions"][0] == f"write previous.json ({done['release_id']})"

    writes = len(s3.writes)
    rolled = rollout.run(s3, ecs, params("rolled_back", cluster=None), False, CREATED)
    assert rolled["release_id"] == done["release_id"] and rolled["diff"]["before"]["current"]["release_id"] == second["release_id"]
    assert rollout.run(s3, ecs, params("rolled_back", cluster=None), False, CREATED)["changed"] is False
    assert len(s3.writes) == writes + 1


def test_run_converged_waits_on_every_active_instance(s3):
    ecs = FakeECS(["i-a", "i-b"])
    promoted = rollout.run(s3, ecs, params("promoted", models=[{"name": "m"}]), False, CREATED)
    rid = promoted["release_id"]
    s3.objects["p/status/triton/i-a.json"] = json.dumps(status("i-a", rid)).encode()
    checked = rollout.run(s3, ecs, params("converged"), True, CREATED)
    assert checked["converged"] is False and [v["ok"] for v in checked["instances"]] == [True, False]
    with pytest.raises(convergence.RolloutError, match=r"1 of 2 instances did not report .*: i-b: no status object yet"):
        rollout.run(s3, ecs, params("converged", timeout_s=0), False, CREATED)
    s3.objects["p/status/triton/i-b.json"] = json.dumps(status("i-b", rid)).encode()
    assert rollout.run(s3, ecs, params("converged"), False, CREATED)["converged"] is True
    with pytest.raises(convergence.RolloutError, match=r"i-gone: is no longer an ACTIVE container instance"):
        rollout.run(s3, ecs, params("converged", instances=["i-gone"]), False, CREATED)


def test_build_release_refuses_a_canary_without_instances():
    with pytest.raises(ReleaseError, match="a canary record lists at least one instance id"):
        build_release(APP, "r-1", [{"name": "m", "version": 1}], CREATED, instances=[])


def render_user_data(**variables) -> str:
    """roles/fleet_capacity's user data rendered by Ansible's templar with the role defaults and `variables`."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    role = Path(__file__).resolve().parents[2] / "roles" / "fleet_capacity"
    # Role defaults are templates to Ansible (they may name other roles' variables); these tests' values are plain.
    defaults = {
        k: trust_as_template(v) if isinstance(v, str) else v
        for k, v in yaml.safe_load((role / "defaults" / "main.yml").read_text()).items()
    }
    values = {**defaults, **variables}
    return Templar(loader=DataLoader(), variables=values).template(trust_as_template((role / "templates" / "user_data.sh.j2").read_text()))


@pytest.mark.parametrize("region", ["eu-west-1", ""])
def test_fleet_capacity_user_data_writes_a_config_the_model_agent_accepts(tmp_path, region):
    """Stand-ins: /etc under a temporary directory, and a `curl` on PATH answering IMDSv2's token and region."""
    script = render_user_data(
        fleet_capacity_model_agent_bucket="example-triton-models",
        fleet_capacity_model_agent_prefix="models/",
        fleet_capacity_model_agent_region=region,
        fleet_capacity_model_agent_settings={"keep_versions": 3},
        fleet_capacity_model_host_path="/mnt/nvme/models",  # as model_host_path.yml publishes it (the AMI's)
    ).replace("/etc/", f"{tmp_path}/etc/")
    (tmp_path / "etc" / "ecs").mkdir(parents=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_curl = bin_dir / "curl"
    fake_curl.write_text('#!/bin/sh\ncase "$*" in *api/token*) echo token ;; *placement/region*) echo us-east-2 ;; *) exit 22 ;; esac\n')
    fake_curl.chmod(0o755)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}"}
    subprocess.run(["bash", "-c", script], check=True, env=env)
    config = parse_config((tmp_path / "etc" / "inferops" / "model-agent.json").read_bytes(), "model-agent.json")
    assert (config["bucket"], config["prefix"], config["application"], config["cluster"]) == (
        "example-triton-models",
        "models/",
        "triton",
        "inference",
    )
    assert config["region"] == (region or "us-east-2") and config["keep_versions"] == 3 and config["poll_interval_s"] == 30
    assert config["host_path"] == "/mnt/nvme/models"  # the one model host path, not the agent's own default
    assert "ECS_CLUSTER=inference" in (tmp_path / "etc" / "ecs" / "ecs.config").read_text()


def test_fleet_capacity_user_data_without_a_bucket_writes_no_agent_config():
    assert "model-agent.json" not in render_user_data()


# ---------------------------------------------------------------- one release per colour (deploy.yml's records)

TD_OLD = "arn:aws:ecs:eu-west-1:111111111111:task-definition/triton:3"
TD_NEW = "arn:aws:ecs:eu-west-1:111111111111:task-definition/triton:4"
IMAGE = "registry.example/triton@sha256:" + "a" * 64


def test_the_release_id_covers_image_models_and_manifest_digests():
    base = rollout.release_id_for({"m": 2}, {"m": "1" * 64}, IMAGE)
    assert base == rollout.release_id_for({"m": 2}, {"m": "1" * 64}, IMAGE)
    assert base != rollout.release_id_for({"m": 2}, {"m": "2" * 64}, IMAGE)  # same version number, other content
    assert base != rollout.release_id_for({"m": 2}, {"m": "1" * 64}, IMAGE.replace("a", "b"))  # another image


def test_a_cutover_brings_its_release_up_as_standby_then_promotes_it(s3):
    ecs = FakeECS(["i-a"])
    first = rollout.run(
        s3, ecs, params("standby", models=[{"name": "m", "version": 1}], image=IMAGE, task_definition=TD_OLD), False, CREATED
    )
    rollout.run(s3, ecs, params("standby_promoted"), False, CREATED)
    resolved = rollout.run(s3, ecs, params("resolved", models=[{"name": "m", "version": 2}], image=IMAGE), False, CREATED)
    assert resolved["changed"] is False and s3.writes[-1] == ("delete", "p/releases/triton/standby.json")
    standby = params("standby", models=[{"name": "m", "version": 2}], image=IMAGE, task_definition=TD_NEW)
    written = rollout.run(s3, ecs, standby, False, CREATED)
    assert written["release_id"] == resolved["release_id"]  # what the task definition carries is what the record names
    assert written["actions"] == [f"write standby.json ({written['release_id']})"]
    assert written["records"]["standby"]["task_definition"] == TD_NEW and written["records"]["standby"]["image"] == IMAGE
    assert rollout.run(s3, ecs, standby, False, CREATED)["changed"] is False
    with pytest.raises(ReleaseError, match=r"standby.json .* is in flight: a cutover is bringing it up"):
        rollout.run(s3, ecs, params("canary", models=[{"name": "m", "version": 1}]), False, CREATED)
    promoted = rollout.run(s3, ecs, params("standby_promoted"), False, CREATED)
    assert promoted["actions"] == [
        f"write previous.json ({first['release_id']})",
        f"write current.json ({written['release_id']})",
        "delete standby.json",
    ]
    assert rollout.run(s3, ecs, params("standby_promoted"), False, CREATED)["changed"] is False
    # the same deploy again: production already serves it, nothing to bring up
    assert rollout.run(s3, ecs, standby, False, CREATED)["changed"] is False


def test_a_model_only_release_stays_on_the_colour_that_serves(s3):
    ecs = FakeECS(["i-a"])
    rollout.run(s3, ecs, params("standby", models=[{"name": "m", "version": 1}], image=IMAGE, task_definition=TD_OLD), False, CREATED)
    rollout.run(s3, ecs, params("standby_promoted"), False, CREATED)
    canary = rollout.run(s3, ecs, params("canary", models=[{"name": "m", "version": 2}]), False, CREATED)
    assert canary["release"]["task_definition"] == TD_OLD and canary["release"]["image"] == IMAGE


def test_the_emergency_rollback_takes_the_records_back_to_the_previous_colour(s3):
    ecs = FakeECS(["i-a"])
    one = rollout.run(s3, ecs, params("standby", models=[{"name": "m", "version": 1}], image=IMAGE, task_definition=TD_OLD), False, CREATED)
    rollout.run(s3, ecs, params("standby_promoted"), False, CREATED)
    two = rollout.run(s3, ecs, params("standby", models=[{"name": "m", "version": 2}], image=IMAGE, task_definition=TD_NEW), False, CREATED)
    # rolled back mid-cutover: only the standby's record goes
    assert rollout.run(s3, ecs, params("cutover_reverted"), False, CREATED)["actions"] == ["delete standby.json"]
    rollout.run(s3, ecs, params("standby", models=[{"name": "m", "version": 2}], image=IMAGE, task_definition=TD_NEW), False, CREATED)
    rollout.run(s3, ecs, params("standby_promoted"), False, CREATED)
    # rolled back after it: production's record is the old colour's again, and the new one stays the way forward
    reverted = rollout.run(s3, ecs, params("cutover_reverted"), False, CREATED)
    assert reverted["actions"] == [f"write previous.json ({two['release_id']})", f"write current.json ({one['release_id']})"]
    assert reverted["release_id"] == one["release_id"]
    # a model rollback may not cross colours
    with pytest.raises(ReleaseError, match=r"previous.json .* is the previous colour's release.*rollback_traffic.yml"):
        rollout.run(s3, ecs, params("rolled_back", cluster=None), False, CREATED)


def test_the_fleet_wait_on_the_standby_release_reads_each_instance_entry_for_it(s3):
    ecs = FakeECS(["i-a"])
    with pytest.raises(ReleaseError, match=r"there is no standby\.json"):
        rollout.run(s3, ecs, params("converged", release="standby"), False, CREATED)
    written = rollout.run(
        s3, ecs, params("standby", models=[{"name": "m", "version": 2}], image=IMAGE, task_definition=TD_NEW), False, CREATED
    )
    rid = written["release_id"]
    agent_status = dict(status("i-a", "r-live"), releases={rid: {"applied": True, "errors": []}})
    s3.objects["p/status/triton/i-a.json"] = json.dumps(agent_status).encode()
    assert rollout.run(s3, ecs, params("converged", release="standby"), False, CREATED)["converged"] is True
    agent_status["releases"][rid] = {"applied": False, "errors": ["task t: model m version 2 failed to load or answer: boom"]}
    s3.objects["p/status/triton/i-a.json"] = json.dumps(agent_status).encode()
    with pytest.raises(convergence.RolloutError, match=r"i-a: failed to apply .*boom"):
        rollout.run(s3, ecs, params("converged", release="standby"), False, CREATED)
