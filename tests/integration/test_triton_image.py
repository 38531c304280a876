"""The triton_image role on real Docker and a real tritonserver (the CPU test base standing in for NGC's image).

The role builds its image from the real Dockerfile template, pushes it to the loopback registry, and the image runs:
deep health check, GPU pre-start check, drain on `docker stop` under load, idempotent rebuilds.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness.images import TRITON_CPU_BASE
from tests.harness.triton import write_model
from tests.harness.triton_image import (
    REGISTRY,
    TritonContainer,
    build_image,
    digest_ref,
    infer,
    registry_manifest_digest,
    role_vars,
    stop_under_load,
    task_result,
    world_readable,
)

SMOKE = {
    "triton_image_load_models": ["simple"],
    "triton_image_smoke_model": "simple",
    "triton_image_smoke_request": {"inputs": [{"name": "INPUT0", "shape": [2], "datatype": "FP32", "data": [1.0, 2.0]}]},
    "triton_image_smoke_expected": {"OUTPUT0": [2.0, 3.0]},
}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """The role run four times on one input: check, real, check again, real again."""
    work = tmp_path_factory.mktemp("triton_image")
    repository = f"tti-test/triton-{uuid.uuid4().hex[:8]}"
    settings = role_vars(work / "build", work / "source", repository, **SMOKE)
    runs = {
        "check1": build_image(settings, check=True),
        "run1": build_image(settings),
        "check2": build_image(settings, check=True),
        "run2": build_image(settings),
    }
    for name, run in runs.items():
        assert run.rc == 0, f"{name}: rc={run.rc}\n{run.stdout[-4000:]}\n{run.stderr[-2000:]}"
    revision = subprocess.run(["git", "-C", str(work / "source"), "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    yield {"runs": runs, "settings": settings, "repository": repository, "revision": revision.stdout.strip(), "work": work}
    # drop this module's local tags (the layers stay cached for the next run)
    tags = subprocess.run(
        ["docker", "image", "ls", "--format", "{{.Repository}}:{{.Tag}}", f"{REGISTRY}/{repository}"],
        check=False,
        capture_output=True,
        text=True,
    ).stdout.split()
    if tags:
        subprocess.run(["docker", "image", "rm", *tags], check=False, capture_output=True)


def role_task(name: str) -> str:
    return f"inferops.triton_ecs.triton_image : {name}"


def inspect(ref: str) -> dict:
    out = subprocess.run(["docker", "image", "inspect", ref], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)[0]


def test_first_build_renders_builds_and_pushes_by_digest(built):
    check1, run1 = built["runs"]["check1"], built["runs"]["run1"]
    assert role_task("Report the build a real run would do") in check1.changed_tasks
    assert role_task("Build the image") in run1.changed_tasks
    assert role_task(f"Push {built['revision']}") in run1.changed_tasks

    ref = digest_ref(run1)
    repo = f"{REGISTRY}/{built['repository']}"
    assert re.fullmatch(re.escape(repo) + r"@sha256:[0-9a-f]{64}", ref), ref
    # the digest the registry serves for the git-SHA tag is the recorded one
    assert ref.split("@", 1)[1] == registry_manifest_digest(built["repository"], built["revision"])

    image = inspect(ref)
    labels = image["Config"]["Labels"]
    assert labels["org.opencontainers.image.revision"] == built["revision"]
    assert labels["org.opencontainers.image.version"] == built["revision"][:7]
    assert labels["org.opencontainers.image.source"] == "https://example.invalid/inferops/triton_ecs"
    assert labels["org.opencontainers.image.base.name"] == TRITON_CPU_BASE
    assert image["Config"]["User"] == "1000"
    assert image["Config"]["Entrypoint"] == ["/opt/inferops/bin/triton_entrypoint.py"]

    # inside: uid 1000, no baked models, no assembly stage left, Triton's libraries in the loader cache
    probe = subprocess.run(
        ["docker", "run", "--rm", "--entrypoint", "/bin/sh", ref, "-c",
         "id -u; ls -A /models | wc -l; test -e /staging && echo staging; ldconfig -p | grep -c libtritonserver; ls /opt/inferops/bin"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    lines = probe.stdout.split()
    assert lines[:3] == ["1000", "0", "1"], probe.stdout
    assert set(lines[3:]) == {"_triton_client.py", "triton_drain.py", "triton_entrypoint.py", "triton_healthcheck.py"}


def test_rebuild_without_change_pushes_nothing_and_keeps_the_digest(built):
    run1, check2, run2 = built["runs"]["run1"], built["runs"]["check2"], built["runs"]["run2"]
    assert check2.changed_tasks == []
    assert run2.changed_tasks == []
    assert task_result(run2, "Render the build context and build").get("skipped")  # nothing built: the whole build is skipped
    assert task_result(run2, f"Push {built['revision']}").get("skipped")
    assert digest_ref(run2) == digest_ref(run1)
    assert registry_manifest_digest(built["repository"], built["revision"]) == digest_ref(run1).split("@", 1)[1]


def test_a_changed_input_rebuilds_and_pushes_a_new_digest(built):
    settings = dict(built["settings"], triton_image_drain_quiet_s=0.75, triton_image_extra_tags=["candidate"])
    run = build_image(settings)
    assert run.rc == 0, run.stdout[-3000:]
    assert role_task("Build the image") in run.changed_tasks
    new_ref = digest_ref(run)
    assert new_ref != digest_ref(built["runs"]["run1"])
    assert registry_manifest_digest(built["repository"], "candidate") == new_ref.split("@", 1)[1]
    env = inspect(new_ref)["Config"]["Env"]
    assert "TRITON_DRAIN_QUIET_S=0.75" in env


def test_baked_models_are_in_the_image_and_a_changed_model_rebuilds(built, tmp_path):
    models = tmp_path / "bake"
    write_model(models, "simple", offset=1.0)
    settings = dict(built["settings"], triton_image_bake_models=True, triton_image_models_src=str(models), triton_image_push=False)
    first = build_image(settings)
    assert first.rc == 0, first.stdout[-3000:]
    assert role_task("Build the image") in first.changed_tasks
    ref = task_result(first, "Name the image after its commit")["ansible_facts"]["triton_image_ref"]
    listing = subprocess.run(
        ["docker", "run", "--rm", "--entrypoint", "/bin/sh", ref, "-c", "cd /models && find . -type f | sort; stat -c %u /models"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert listing.stdout.split() == ["./simple/1/model.py", "./simple/config.pbtxt", "1000"]
    assert build_image(settings).changed_tasks == []

    write_model(models, "simple", offset=5.0)  # same files, new content
    changed = build_image(settings)
    assert role_task("Build the image") in changed.changed_tasks


def test_one_lookup_tells_the_base_from_the_earlier_build(built, tmp_path):
    """The base image and the earlier build come from one docker_image_info call; with only one of them in dockerd,
    the role must still tell which one it found (only its own builds carry the fingerprint label)."""
    base = f"inferops-test/base-{uuid.uuid4().hex[:8]}:1"
    subprocess.run(["docker", "image", "tag", TRITON_CPU_BASE, base], check=True)
    repository, tag = base.rsplit(":", 1)
    settings = dict(built["settings"], triton_image_base_repository=repository, triton_image_base_tag=tag, triton_image_push=False)
    try:
        first = build_image(settings)  # the base only: a build
        assert first.rc == 0, first.stdout[-3000:]
        assert role_task("Build the image") in first.changed_tasks
    finally:
        subprocess.run(["docker", "image", "rm", base], check=False, capture_output=True)
    missing_base = build_image(settings)  # the earlier build only: it is not taken for the base
    assert missing_base.rc != 0
    assert f"base image {base} is not in dockerd" in task_result(missing_base, "Fail when the base image is missing")["msg"]


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"triton_image_allow_unpinned_base": False}, "triton_image_base_digest is empty: pin"),
        ({"triton_image_base_digest": "sha256:abc"}, 'triton_image_base_digest is "sha256:abc"'),
        ({"triton_image_drain_timeout_s": 90}, "must fit ECS stopTimeout"),
    ],
)
def test_unusable_settings_are_refused_before_docker(built, overrides, expected):
    run = build_image(dict(built["settings"], **overrides))
    assert run.rc != 0
    failed = task_result(run, "Refuse unusable settings before touching Docker")
    assert failed.get("failed")
    assert expected in failed["msg"]
    assert not [t for t in run.tasks if "Build the image" in t["name"]]


@pytest.mark.parametrize("connection", ["module_defaults", "deprecated_role_variables"])
def test_ecr_repository_is_ensured_with_scan_on_push_and_immutable_tags(built, moto_server, connection):
    """ECR through moto: repository ensured, authorization token fetched, image named after the repository URI.

    The moto endpoint reaches the ECR tasks through the play's module_defaults (as deploy.yml sets them from
    aws_region / aws_endpoint_url; the empty deprecated triton_image_aws_* must not hide them), or through the
    deprecated role variables, which still work. The environment gives credentials only: no AWS_ENDPOINT_URL or
    AWS_REGION to fall back on."""
    if connection == "module_defaults":
        endpoint = {"aws_region": "us-east-1", "aws_endpoint_url": moto_server.endpoint}
    else:
        endpoint = {"triton_image_aws_region": "us-east-1", "triton_image_aws_endpoint_url": moto_server.endpoint}
    settings = dict(built["settings"], triton_image_registry_type="ecr", triton_image_registry="", triton_image_push=False, **endpoint)
    credentials_only = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    first = build_image(settings, env=credentials_only)
    assert first.rc == 0, first.stdout[-3000:]
    assert role_task("Ensure the ECR repository (scan on push, immutable tags)") in first.changed_tasks
    token = task_result(first, "Get an ECR authorization token (valid 12 hours)")
    assert token["censored"]  # no_log: the password never reaches the output
    repo = moto_server.client("ecr").describe_repositories(repositoryNames=[built["repository"]])["repositories"][0]
    assert repo["imageScanningConfiguration"]["scanOnPush"] is True
    assert repo["imageTagMutability"] == "IMMUTABLE"
    local = f"{repo['repositoryUri']}:{built['revision']}"
    try:
        assert inspect(local)["Config"]["Labels"]["org.opencontainers.image.revision"] == built["revision"]
        again = build_image(settings, env=credentials_only)
        assert again.rc == 0
        assert again.changed_tasks == []
    finally:
        subprocess.run(["docker", "image", "rm", local], check=False, capture_output=True)


@pytest.fixture
def container(built, tmp_path: Path) -> Iterator[callable]:
    started: list[TritonContainer] = []

    def start(models: Path, env: dict[str, str] | None = None, shm_mb: int = 256, extra: tuple[str, ...] = ()) -> TritonContainer:
        c = TritonContainer(digest_ref(built["runs"]["run1"]), world_readable(models), env=env, shm_mb=shm_mb, extra_docker_args=extra)
        started.append(c)
        return c.start()

    yield start
    for c in started:
        c.remove()


def fake_nvidia_smi(directory: Path, driver: str, gpus: int) -> Path:
    """A stand-in nvidia-smi that answers the driver-version query like the real one (one line per GPU)."""
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "nvidia-smi"
    script.write_text("#!/bin/sh\n" + "".join(f"echo {driver}\n" for _gpu in range(gpus)))
    script.chmod(0o755)
    return world_readable(directory)


def test_health_check_passes_when_ready_and_names_each_failure(container, tmp_path):
    models = tmp_path / "models"
    write_model(models, "simple", offset=1.0)
    write_model(models, "broken", fail_to_load=True)
    write_model(models, "plus_two", offset=2.0)
    # the pre-start check passes with a GPU that is there and new enough (nvidia-smi stand-in, CUDA 12 image)
    gpu = fake_nvidia_smi(tmp_path / "gpu", "550.54.15", 1)
    c = container(
        models,
        env={"TRITON_LOAD_MODELS": "simple,plus_two", "TRITON_REQUIRE_GPU": "true", "CUDA_VERSION": "12.6.2"},
        extra=("-v", f"{gpu}/nvidia-smi:/usr/local/bin/nvidia-smi:ro"),
    )
    c.wait_ready()

    code, line = c.healthcheck()  # the configuration baked into the image: simple READY, smoke inference 1,2 -> 2,3
    assert (code, line) == (0, "healthy: live, 2 expected model(s) READY, smoke inference on simple ok")

    loaded = subprocess.run(
        ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", f"http://{c.url}/v2/repository/models/broken/load"],
        check=False, capture_output=True, text=True,
    )  # fmt: skip
    assert loaded.stdout == "400"
    code, line = c.healthcheck("--models", "simple,broken")
    assert code == 1
    assert line.startswith("unhealthy: model broken is not READY: UNAVAILABLE")
    assert "fail_to_load" in line
    assert len(line.splitlines()) == 1

    code, line = c.healthcheck("--models", "simple,absent")
    assert (code, line) == (1, "unhealthy: model absent is not in the repository index")

    code, line = c.healthcheck("--models", "simple:2")
    assert (code, line) == (1, "unhealthy: model simple:2 is not in the repository index")

    code, line = c.healthcheck("--smoke-model", "plus_two")
    assert (code, line) == (
        1,
        "unhealthy: smoke inference on plus_two returned the wrong output: OUTPUT0 = [3.0, 4.0], expected [2.0, 3.0]",
    )

    # an idle server stops at once: its counters have been still for longer than the quiet period
    time.sleep(2.5)
    stop_seconds, exit_code = c.stop()
    assert exit_code == 0
    assert "drain done after 0.0s" in c.logs()
    assert stop_seconds < 8


@pytest.mark.parametrize(
    ("env", "shm_mb", "nvidia_smi", "reason"),
    [
        ({"TRITON_REQUIRE_GPU": "true"}, 256, None, "GPU required but nvidia-smi is not present"),
        (
            {"TRITON_REQUIRE_GPU": "true", "CUDA_VERSION": "12.6.2"},
            256,
            ("470.57.02", 1),
            "NVIDIA driver 470.57.02 is older than 525.60.13",
        ),
        ({"TRITON_REQUIRE_GPU": "true", "TRITON_GPU_COUNT": "2"}, 256, ("550.54.15", 1), "1 GPU(s) visible, 2 required"),
        (
            {"TRITON_REQUIRE_GPU": "false", "TRITON_MIN_SHM_MB": "128"},
            64,
            None,
            "/dev/shm is 64 MiB, the python backend needs at least 128 MiB",
        ),
    ],
    ids=["no-gpu", "old-driver", "too-few-gpus", "small-shm"],
)
def test_prestart_check_fails_fast_with_one_line(container, tmp_path, env, shm_mb, nvidia_smi, reason):
    models = tmp_path / "models"
    write_model(models, "simple")
    extra: tuple[str, ...] = ()
    if nvidia_smi:
        gpu = fake_nvidia_smi(tmp_path / "gpu", *nvidia_smi)
        extra = ("-v", f"{gpu}/nvidia-smi:/usr/local/bin/nvidia-smi:ro")
    started = time.monotonic()
    c = container(models, env={"TRITON_LOAD_MODELS": "simple", **env}, shm_mb=shm_mb, extra=extra)
    assert c.wait_exit(30) == 78
    assert time.monotonic() - started < 10
    output = c.logs().strip().splitlines()
    assert len(output) == 1, output
    assert output[0].startswith("triton pre-start check failed: ")
    assert reason in output[0]


def test_docker_stop_under_load_drains_without_failures(container, tmp_path):
    models = tmp_path / "models"
    write_model(models, "slow", delay_ms=200, instances=1)
    c = container(models, env={"TRITON_LOAD_MODELS": "slow", "TRITON_HEALTH_MODELS": "slow", "TRITON_SMOKE_MODEL": ""})
    c.wait_ready()
    run = stop_under_load(c, "slow", clients=4, warmup_s=1.5, lag_s=0.5, stop_timeout_s=60)

    assert len(run.accepted_before_stop()) >= 4
    assert len(run.in_flight_during_stop()) >= 4, "the stop must happen while requests are in flight"
    assert [r.error for r in run.failed_during_stop] == []
    assert run.exit_code == 0
    # the stop ends shortly after the last request (quiet period, model unload, exit), far from the 30 s drain timeout
    assert run.stop_seconds > run.last_completion_after_stop
    assert run.stop_seconds - run.last_completion_after_stop < 5, (run.stop_seconds, run.last_completion_after_stop)
    logs = c.logs()
    assert "drain done after" in logs
    assert "tritonserver exited with 0" in logs


def test_a_request_longer_than_the_quiet_period_still_gets_its_answer(container, tmp_path):
    """Nothing is queued and no counter moves while one 2 s request runs, so the drain calls the server quiet
    mid-request; the model unload that follows waits for the request instead of cutting it off."""
    models = tmp_path / "models"
    write_model(models, "long", delay_ms=2000, instances=1)
    c = container(models, env={"TRITON_LOAD_MODELS": "long", "TRITON_SMOKE_MODEL": ""})
    c.wait_ready()
    answer: list[object] = []
    request = threading.Thread(target=lambda: answer.append(_answer_or_error(c, "long")))
    request.start()
    time.sleep(0.5)  # the request is executing: counters still, nothing queued
    stop_seconds, exit_code = c.stop()
    request.join(30)
    assert answer == [[2.0, 3.0]]
    assert exit_code == 0
    assert stop_seconds < 10


def _answer_or_error(c, model: str) -> object:
    try:
        return infer(c, model, [1.0, 2.0])
    except Exception as exc:  # the assertion shows what went wrong
        return f"{type(exc).__name__}: {exc}"


def test_without_the_drain_the_same_stop_fails_late_requests(container, tmp_path):
    """The control for the test above: with the drain switched off, tritonserver refuses the late connections."""
    models = tmp_path / "models"
    write_model(models, "slow", delay_ms=200, instances=1)
    env = {"TRITON_LOAD_MODELS": "slow", "TRITON_SMOKE_MODEL": "", "TRITON_DRAIN_TIMEOUT_S": "0", "TRITON_DRAIN_UNLOAD": "false"}
    c = container(models, env=env)
    c.wait_ready()
    run = stop_under_load(c, "slow", clients=4, warmup_s=1.5, lag_s=0.5, stop_timeout_s=60)
    assert run.failed_during_stop, "without a drain, requests sent after SIGTERM should be refused"
