"""Model releases racing for real (issue 28, class "model releases race").

Stand-in: a moto server for S3 behind the S3-shaped proxy (tests/harness/s3_proxy.py), which honours S3's conditional
writes (If-None-Match: *, If-Match, conditional DeleteObject) as S3 does; two controllers are two threads running
model_release's own code (`rollout.run`) released at the same instant by a barrier. No ECS is needed for these states.
"""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import s3 as _s3
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.module import retrying_client
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models import rollout
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.release import (
    RECORD_NAMES,
    ReleaseError,
    release_key,
    render_release,
)

APP = "triton"
TD = "arn:aws:ecs:eu-west-1:111111111111:task-definition/triton:3"


def params(state: str, **extra) -> dict:
    base = {
        "state": state,
        "bucket": "",
        "prefix": "p",
        "application": APP,
        "models": None,
        "release_id": None,
        "cluster": None,
        "instances": [],
        "timeout_s": 0,
        "poll_interval_s": 1,
        "bake_s": 0,
        "inference_failures_before": None,
    }
    return {**base, **extra}


@pytest.mark.parametrize("round_", range(6))
def test_adversarial_model_release_racing_controllers_never_lose_a_write_silently(s3_moto_server, round_):
    """Stand-in: moto server S3 behind the S3-shaped proxy, two threads. An emergency rollback and a promotion start
        together: each either succeeds or fails naming the race (lock held, records changed), and what S3 holds at the
        end is exactly what the last successful run reported; when both succeed, the second planned on what the first wrote
    (they were serialised: no success whose write was overwritten)."""
    raw = s3_moto_server.client("s3")
    bucket = f"race-{uuid.uuid4().hex[:8]}"
    raw.create_bucket(Bucket=bucket)
    s3 = retrying_client(raw)
    for version in (1, 2, 3):
        raw.put_object(Bucket=bucket, Key=f"p/m/{version}.manifest.json", Body=b"{}")
    for name, rid, version in (("current", "r-cur", 2), ("previous", "r-prev", 1)):
        record = rollout.make_release(APP, {"m": version}, rid, "2026-01-01T00:00:00Z", image="img@sha256:" + "b" * 64, task_definition=TD)
        raw.put_object(Bucket=bucket, Key=release_key("p", APP, name), Body=render_release(record))
    runs = [params("promoted", bucket=bucket, models=[{"name": "m", "version": 3}]), params("rolled_back", bucket=bucket)]
    if round_ % 2:
        runs.reverse()
    barrier = threading.Barrier(2)
    outcomes: list[tuple[float, str, object]] = []
    guard = threading.Lock()

    def controller(run_params: dict) -> None:
        barrier.wait()
        try:
            result = rollout.run(s3, None, run_params, False, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
            outcome: object = result
        except ReleaseError as err:
            outcome = err
        with guard:
            outcomes.append((time.monotonic(), run_params["state"], outcome))

    threads = [threading.Thread(target=controller, args=(run_params,)) for run_params in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(outcomes) == 2
    successes = [o for o in sorted(outcomes, key=lambda o: o[0]) if isinstance(o[2], dict)]
    for _when, _state, outcome in outcomes:
        if isinstance(outcome, ReleaseError):
            assert "another model release" in str(outcome) or "changed while this run" in str(outcome), outcome
            assert "wrote nothing" in str(outcome) or "written before it" in str(outcome), outcome
    assert successes, outcomes

    def ids(records: dict) -> dict:
        return {name: (records.get(name) or {}).get("release_id") for name in RECORD_NAMES}

    if len(successes) == 2:  # both succeeded: they ran one after the other, the second planned on the first's result
        assert ids(successes[1][2]["diff"]["before"]) == ids(successes[0][2]["records"]), outcomes
    reported = successes[-1][2]["records"]
    for name in RECORD_NAMES:
        stored = _s3.get_bytes(s3, bucket, release_key("p", APP, name))
        held = json.loads(stored)["release_id"] if stored else None
        assert held == (reported[name]["release_id"] if reported[name] else None), (name, outcomes)
    assert _s3.get_bytes(s3, bucket, "p/releases/triton/lock.json") is None
