"""Pure logic of the triton_image role's in-image scripts: metrics parsing, quiet detection, versions, index checks."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "roles" / "triton_image" / "files"
sys.path.insert(0, str(SCRIPTS))  # the entrypoint imports triton_drain from its own directory, as in the image
# ... and the drain imports the collection's Triton client, which the image build copies beside it
sys.path.insert(0, str(SCRIPTS.parents[2] / "plugins" / "module_utils"))
drain = importlib.import_module("triton_drain")
entrypoint = importlib.import_module("triton_entrypoint")
health = importlib.import_module("triton_healthcheck")

METRICS = """\
# HELP nv_inference_request_success Number of successful inference requests, all batch sizes
# TYPE nv_inference_request_success counter
nv_inference_request_success{model="a",version="1"} 12
nv_inference_request_success{model="b",version="2"} 3
nv_inference_request_failure{model="a",version="1"} 1
nv_inference_request_failure{model="b",version="2"} 0
# TYPE nv_inference_pending_request_count gauge
nv_inference_pending_request_count{model="a",version="1"} 2
nv_inference_pending_request_count{model="we{ird} \\"name\\", x",version="1"} 1
nv_inference_exec_count{model="a",version="1"} 1.2e+01
nv_cpu_utilization NaN
garbage line without value
"""


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_parse_metrics_sums_label_sets_and_skips_comments_and_junk():
    totals = drain.parse_metrics(METRICS)
    assert totals["nv_inference_request_success"] == 15
    assert totals["nv_inference_request_failure"] == 1
    assert totals["nv_inference_pending_request_count"] == 3  # a label value with braces, quotes and spaces
    assert totals["nv_inference_exec_count"] == 12
    assert "nv_cpu_utilization" not in totals
    assert drain.sample_from(totals) == drain.Sample(pending=3, completed=16)


def test_sample_without_triton_metrics_is_idle():
    assert drain.sample_from(drain.parse_metrics("")) == drain.Sample(0, 0)


def test_tracker_counts_quiet_from_the_sample_that_saw_the_last_change():
    tracker = drain.QuietTracker()
    assert not tracker.is_quiet(10.0, 0.5)  # no sample yet
    tracker.observe(drain.Sample(0, 5), now=1.0)
    tracker.observe(drain.Sample(0, 5), now=2.0)
    assert tracker.quiet_for(2.0) == 1.0
    tracker.observe(drain.Sample(0, 6), now=3.0)  # a completion between 2.0 and 3.0
    assert not tracker.is_quiet(3.4, 0.5)
    assert tracker.is_quiet(3.5, 0.5)
    tracker.observe(drain.Sample(1, 6), now=3.6)  # something queued again: never quiet, whatever the counters say
    assert not tracker.is_quiet(10.0, 0.5)


def test_drain_returns_at_once_when_the_server_has_been_quiet():
    clock = FakeClock()
    tracker = drain.QuietTracker()
    tracker.observe(drain.Sample(0, 40), now=-30.0)  # the watcher saw the last completion 30 s ago
    result = drain.wait_until_quiet(lambda: {drain.SUCCESS: 40}, tracker, 30, 0.5, clock=clock, sleep=clock.sleep)
    assert result.quiet
    assert result.waited_s == 0
    assert clock.sleeps == []


def test_drain_waits_for_the_queue_and_the_counters_to_settle():
    clock = FakeClock()

    # queued work for 0.3 s, completions until 0.6 s, then nothing
    def fetch() -> dict[str, float]:
        t = clock.now
        return {drain.PENDING: 2 if t < 0.3 else 0, drain.SUCCESS: min(int(t * 10), 6)}

    result = drain.wait_until_quiet(fetch, drain.QuietTracker(), 30, 0.5, poll_s=0.1, clock=clock, sleep=clock.sleep)
    assert result.quiet
    assert 1.05 <= result.waited_s <= 1.25  # last change seen at 0.6 s, quiet 0.5 s later
    assert all(s <= 0.1 + 1e-9 for s in clock.sleeps)


def test_drain_gives_up_at_the_timeout_under_steady_traffic():
    clock = FakeClock()
    result = drain.wait_until_quiet(
        lambda: {drain.SUCCESS: clock.now * 100}, drain.QuietTracker(), 2.0, 0.5, clock=clock, sleep=clock.sleep
    )
    assert not result.quiet
    assert result.waited_s == pytest.approx(2.0)
    assert "drain timeout 2s" in result.reason


def test_drain_stops_waiting_when_metrics_stay_unreadable():
    clock = FakeClock()

    def fetch() -> dict[str, float]:
        raise OSError("connection refused")

    result = drain.wait_until_quiet(fetch, drain.QuietTracker(), 30, 0.5, clock=clock, sleep=clock.sleep)
    assert not result.quiet
    assert result.waited_s < 1
    assert "metrics unreadable" in result.reason


def test_models_still_loaded_reads_ready_and_unloading():
    index = [
        {"name": "a", "version": "1", "state": "READY"},
        {"name": "b", "version": "1", "state": "UNLOADING"},
        {"name": "c", "version": "1", "state": "UNAVAILABLE", "reason": "unloaded"},
        {"name": "d"},
    ]
    assert drain.models_still_loaded(index) == ["a", "b"]


@pytest.mark.parametrize(
    ("version", "minimum", "ok"),
    [
        ("535.104.05", "525.60.13", True),
        ("525.60.13", "525.60.13", True),
        ("525.60.9", "525.60.13", False),
        ("470.57.02", "525.60.13", False),
        ("550", "550.0.0", True),
        ("560.35.03-rc1", "560.35", True),
        ("1000.1", "999.999.999", True),
    ],
)
def test_driver_version_comparison_is_numeric(version, minimum, ok):
    assert entrypoint.version_at_least(version, minimum) is ok


def test_not_a_version_is_an_error():
    with pytest.raises(ValueError):
        entrypoint.version_tuple("N/A")


@pytest.mark.parametrize(
    ("env", "minimum"),
    [
        ({"CUDA_VERSION": "12.6.2"}, "525.60.13"),
        ({"CUDA_VERSION": "11.8.0"}, "450.80.02"),
        ({"CUDA_VERSION": "12.6.2", "TRITON_MIN_DRIVER_VERSION": "560.35.03"}, "560.35.03"),
        ({}, ""),
        ({"CUDA_VERSION": "9.0"}, ""),
    ],
)
def test_minimum_driver_comes_from_the_setting_or_the_image_cuda(env, minimum):
    assert entrypoint.min_driver_version(env) == minimum


def test_gpu_check_names_the_count_and_the_driver():
    entrypoint.check_gpus(["550.54.15", "550.54.15"], 2, "525.60.13")
    with pytest.raises(entrypoint.PrestartError, match=r"^1 GPU\(s\) visible, 2 required"):
        entrypoint.check_gpus(["550.54.15"], 2, "525.60.13")
    with pytest.raises(entrypoint.PrestartError, match=r"^NVIDIA driver 470.57.02 is older than 525.60.13"):
        entrypoint.check_gpus(["470.57.02"], 1, "525.60.13")
    entrypoint.check_gpus(["470.57.02"], 1, "")  # no minimum known: count only


def test_nvidia_smi_output_is_one_line_per_gpu():
    assert entrypoint.parse_driver_versions("550.54.15\n550.54.15\n\n") == ["550.54.15", "550.54.15"]
    assert entrypoint.parse_driver_versions("") == []


def test_shm_check():
    entrypoint.check_shm(256 * 1024 * 1024, 128)
    entrypoint.check_shm(1, 0)
    with pytest.raises(entrypoint.PrestartError, match=r"^/dev/shm is 64 MiB, the python backend needs at least 128 MiB"):
        entrypoint.check_shm(64 * 1024 * 1024, 128)


def test_prestart_without_gpu_requirement_does_not_run_nvidia_smi(monkeypatch, tmp_path):
    monkeypatch.setattr(entrypoint, "query_nvidia_smi", lambda: pytest.fail("nvidia-smi must not run"))
    entrypoint.prestart_check({"TRITON_REQUIRE_GPU": "false", "TRITON_MIN_SHM_MB": "0"})
    with pytest.raises(entrypoint.PrestartError, match="is missing"):
        entrypoint.prestart_check({"TRITON_MIN_SHM_MB": "64"}, shm_path=str(tmp_path / "absent"))


def test_prestart_with_gpu_requirement_reports_a_missing_nvidia_smi(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(entrypoint.PrestartError, match=r"^GPU required but nvidia-smi is not present"):
        entrypoint.prestart_check({"TRITON_REQUIRE_GPU": "true"})


def test_server_command_has_explicit_control_models_ports_and_exit_timeout():
    env = {
        "TRITON_LOAD_MODELS": "a, b,,",
        "TRITON_HTTP_PORT": "9000",
        "TRITON_EXIT_TIMEOUT_S": "20",
        "TRITON_EXTRA_ARGS": "--allow-gpu-metrics=false --log-verbose=1",
    }
    cmd = entrypoint.server_command(env, ["--strict-readiness=true"])
    assert cmd[0] == "/opt/tritonserver/bin/tritonserver"
    assert "--model-control-mode=explicit" in cmd
    assert "--model-repository=/models" in cmd
    assert "--http-port=9000" in cmd and "--grpc-port=8001" in cmd and "--metrics-port=8002" in cmd
    assert "--exit-timeout-secs=20" in cmd
    assert "--metrics-interval-ms=250" in cmd
    assert [c for c in cmd if c.startswith("--load-model=")] == ["--load-model=a", "--load-model=b"]
    assert cmd[-3:] == ["--allow-gpu-metrics=false", "--log-verbose=1", "--strict-readiness=true"]


def test_a_task_in_view_mode_serves_its_task_definition_view_and_loads_every_model_in_it(tmp_path, monkeypatch):
    view = tmp_path / ".task-definitions" / "triton-4"
    (view / "resnet50").mkdir(parents=True)
    (view / "bert").mkdir()
    monkeypatch.setattr(entrypoint, "task_view_name", lambda uri: "triton-4" if uri == "http://169.254.170.2/v4/abc" else "")
    env = {"TRITON_MODEL_REPOSITORY": str(tmp_path), "INFEROPS_MODEL_VIEW": "task-definition", "TRITON_LOAD_MODELS": "other"}
    env["ECS_CONTAINER_METADATA_URI_V4"] = "http://169.254.170.2/v4/abc"
    path = entrypoint.model_view(env)
    assert path == str(view)
    cmd = entrypoint.server_command(env, [], path, entrypoint.wait_for_view(path, 0))
    assert f"--model-repository={view}" in cmd
    assert [c for c in cmd if c.startswith("--load-model=")] == ["--load-model=bert", "--load-model=resnet50"]  # not TRITON_LOAD_MODELS
    assert entrypoint.model_view({"INFEROPS_MODEL_VIEW": "triton-9"}) == "/models/.task-definitions/triton-9"  # named directly
    assert entrypoint.model_view({}) is None


def test_a_view_that_never_appears_or_a_task_without_metadata_stops_the_start_with_the_reason(tmp_path):
    clock = FakeClock()
    with pytest.raises(entrypoint.PrestartError, match=r"did not appear within 5s: is the model agent running"):
        entrypoint.wait_for_view(str(tmp_path / "missing"), 5, sleep=clock.sleep, clock=clock)
    assert clock.now >= 5
    with pytest.raises(entrypoint.PrestartError, match="ECS_CONTAINER_METADATA_URI_V4 is unset"):
        entrypoint.model_view({"INFEROPS_MODEL_VIEW": "task-definition"})
    with pytest.raises(entrypoint.PrestartError, match="is not a view name"):
        entrypoint.model_view({"INFEROPS_MODEL_VIEW": "../other"})


def test_expected_models_parse_names_and_versions():
    assert health.parse_expected(" a, b:2 ,, ") == [("a", ""), ("b", "2")]


def test_index_check_names_missing_failed_and_unloaded_models():
    index = [
        {"name": "ok", "version": "1", "state": "READY"},
        {"name": "broken", "version": "1", "state": "UNAVAILABLE", "reason": "load failed: boom"},
        {"name": "idle"},
        {"name": "multi", "version": "1", "state": "UNAVAILABLE", "reason": "unloaded"},
        {"name": "multi", "version": "2", "state": "READY"},
    ]
    assert health.check_index(index, [("ok", ""), ("multi", ""), ("multi", "2")]) == []
    assert health.check_index(index, [("broken", ""), ("absent", ""), ("idle", ""), ("multi", "1"), ("ok", "3")]) == [
        "model broken is not READY: UNAVAILABLE (load failed: boom)",
        "model absent is not in the repository index",
        "model idle is not READY: NOT LOADED",
        "model multi:1 is not READY: UNAVAILABLE (unloaded)",
        "model ok:3 is not in the repository index",
    ]


def test_output_comparison_with_tolerance_and_shapes():
    response = {"outputs": [{"name": "OUTPUT0", "datatype": "FP32", "shape": [2], "data": [2.0000001, 3.0]}]}
    assert health.compare_outputs(response, {"OUTPUT0": [2.0, 3.0]}) == []
    assert health.compare_outputs(response, {"OUTPUT0": [[2.0], [3.0]]}) == []  # nested expectation, same values
    assert health.compare_outputs(response, {"OUTPUT0": [2.0, 4.0]}) == ["OUTPUT0 = [2.0000001, 3.0], expected [2.0, 4.0]"]
    assert health.compare_outputs(response, {"OUTPUT0": [2.0]}) == ["OUTPUT0 = [2.0000001, 3.0], expected [2.0]"]
    assert health.compare_outputs(response, {"OUTPUT1": [1]}) == ["output OUTPUT1 missing (got ['OUTPUT0'])"]
    text = {"outputs": [{"name": "LABEL", "data": ["cat"]}]}
    assert health.compare_outputs(text, {"LABEL": ["cat"]}) == []
    assert health.compare_outputs(text, {"LABEL": ["dog"]}) == ['LABEL = ["cat"], expected ["dog"]']


def test_health_check_reports_an_unreachable_server_in_one_line(capsys):
    code = health.main(["--url", "http://127.0.0.1:9", "--models", "a"], env={})
    line = capsys.readouterr().out
    assert code == 1
    assert line.startswith("unhealthy: http://127.0.0.1:9/v2/health/live:")
    assert line.count("\n") == 1


def test_health_check_refuses_a_bad_smoke_configuration(capsys):
    code = health.main([], env={"TRITON_SMOKE_MODEL": "m", "TRITON_SMOKE_REQUEST": "{not json", "TRITON_SMOKE_EXPECTED": "{}"})
    assert code == 1
    assert capsys.readouterr().out.startswith("unhealthy: bad smoke inference configuration:")


def test_health_output_is_one_bounded_line():
    reason = "model broken is not READY: UNAVAILABLE (Internal: RuntimeError: boom\n\nAt:\n  model.py(19): initialize\n)"
    assert health.one_line(reason) == "model broken is not READY: UNAVAILABLE (Internal: RuntimeError: boom At: model.py(19): initialize )"
    assert len(health.one_line("x " * 1000)) == 400


# ---------------------------------------------------------------- the metrics sidecar's target, by colour


@pytest.fixture
def task_metadata_endpoint():
    """A loopback stand-in for ECS_CONTAINER_METADATA_URI_V4: `/task` answers the given task's metadata."""
    import http.server
    import json
    import threading

    answers: dict[str, object] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            answers["reads"] = int(answers.get("reads", 0)) + 1
            body = json.dumps(answers["task"]).encode()
            self.send_response(200 if self.path.endswith("/task") else 404)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    entrypoint._TASK_METADATA.clear()
    yield answers, f"http://127.0.0.1:{server.server_address[1]}/v4/abc"
    server.shutdown()
    entrypoint._TASK_METADATA.clear()


def test_the_metrics_target_carries_the_tasks_service_and_colour(tmp_path, task_metadata_endpoint):
    import json

    answers, uri = task_metadata_endpoint
    answers["task"] = {"Family": "triton", "Revision": "7", "ServiceName": "triton-green", "Cluster": "inference"}
    target = tmp_path / "metrics" / "triton.json"
    env = {"INFEROPS_METRICS_TARGET_FILE": str(target), "ECS_CONTAINER_METADATA_URI_V4": uri, "TRITON_METRICS_PORT": "9002"}
    env["INFEROPS_MODEL_VIEW"] = "task-definition"
    assert entrypoint.publish_metrics_target(env) == {"Service": "triton-green", "Color": "green"}
    assert json.loads(target.read_text()) == [{"targets": ["localhost:9002"], "labels": {"Service": "triton-green", "Color": "green"}}]
    assert oct(target.stat().st_mode & 0o777) == "0o644" and not (tmp_path / "metrics" / "triton.json.tmp").exists()
    (tmp_path / ".task-definitions" / "triton-7" / "simple").mkdir(parents=True)
    env["TRITON_MODEL_REPOSITORY"] = str(tmp_path)
    assert entrypoint.model_view(env) == str(tmp_path / ".task-definitions" / "triton-7")
    assert answers["reads"] == 1  # one read of the metadata serves the target and the model view


@pytest.mark.parametrize(
    ("task", "labels"),
    [
        ({"ServiceName": "triton-blue"}, {"Service": "triton-blue", "Color": "blue"}),
        ({"ServiceName": "batch-scorer"}, {"Service": "batch-scorer"}),  # not a colour service: no Color
        ({"Family": "triton"}, {}),  # a task of no service (RunTask), or an ECS agent older than 1.63.1
    ],
)
def test_metrics_labels_come_from_the_service_name(task, labels):
    assert entrypoint.metrics_labels(task) == labels


def test_without_metadata_the_target_is_still_written_without_a_colour(tmp_path, capsys):
    target = tmp_path / "triton.json"
    env = {"INFEROPS_METRICS_TARGET_FILE": str(target), "ECS_CONTAINER_METADATA_URI_V4": "http://127.0.0.1:9/v4/none"}
    entrypoint._TASK_METADATA.clear()
    assert entrypoint.publish_metrics_target(env) == {}
    assert target.exists() and "published without a colour" in capsys.readouterr().err
    assert entrypoint.publish_metrics_target({}) is None  # off: nothing written
    env["INFEROPS_METRICS_TARGET_FILE"] = str(tmp_path / "file" / "under" / "a-file")
    (tmp_path / "file").write_text("")
    assert entrypoint.publish_metrics_target(env) is None and "could not write the metrics target" in capsys.readouterr().err
