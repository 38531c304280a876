"""The pure parts of the collection's one Triton client: the Prometheus parser, "quiet", the repository index.
No server: text and dicts in, values out (tests/integration/test_triton_client.py talks to a real tritonserver)."""

from __future__ import annotations

from ansible_collections.inferops.triton_ecs.plugins.module_utils._triton_client import (
    FAILURE,
    Sample,
    TritonError,
    is_quiet,
    metric_lines,
    ready_versions,
    sample_from,
    sum_by_label,
    sum_metrics,
    unready_models,
    version_problems,
    zero_inputs,
)

METRICS = """# HELP nv_inference_pending_request_count Instantaneous number of pending requests
# TYPE nv_inference_pending_request_count gauge
nv_inference_pending_request_count{model="a",version="1"} 2
nv_inference_pending_request_count{model="b",version="1"} 1
nv_inference_request_success{model="a",version="1"} 10
nv_inference_request_failure{model="a",reason="OTHER",version="1"} 3
garbage line
nv_weird{model="a"} not-a-number
"""

INDEX = [
    {"name": "a", "version": "1", "state": "UNAVAILABLE", "reason": "unloaded"},
    {"name": "a", "version": "2", "state": "READY", "reason": ""},
    {"name": "a", "version": "10", "state": "READY", "reason": ""},
    {"name": "b", "version": "1", "state": "UNAVAILABLE", "reason": "load failed: boom"},
    {"name": "c"},
]


def test_sum_metrics_adds_label_sets_and_skips_noise():
    totals = sum_metrics(METRICS)
    assert totals["nv_inference_pending_request_count"] == 3
    assert totals["nv_inference_request_success"] == 10
    assert totals["nv_inference_request_failure"] == 3
    assert "nv_weird" not in totals


def test_ready_versions_sorted_numerically():
    assert ready_versions(INDEX, "a") == ["2", "10"]
    assert ready_versions(INDEX, "b") == []


def test_a_colour_must_serve_exactly_its_release_s_versions():
    assert version_problems([{"name": "a", "version": "2", "state": "READY"}], {"a": 2}) == []
    problems = version_problems(INDEX, {"a": 2, "b": 1, "missing": 3})
    assert problems[0].startswith("model a must serve exactly version 2 (its release's), serves [2, 10]")
    assert problems[1].startswith("model b must serve exactly version 1 (its release's), serves none (version 1 UNAVAILABLE")
    assert problems[2] == "model missing must serve exactly version 3 (its release's), serves none (not in the repository index)"


def test_unready_models_names_state_and_reason():
    problems = unready_models(INDEX, ["a", "b", "c", "missing"])
    assert problems == [
        "model b is not READY (version 1 UNAVAILABLE: load failed: boom)",
        "model c is not READY (version ? UNKNOWN)",
        "model missing is not in the repository index",
    ]


# Label values as Triton writes them: a model name may hold braces, commas, spaces and (escaped) quotes.
QUOTED = r"""nv_inference_request_failure{model="ens}emble",reason="OTHER",version="1"} 2
nv_inference_request_failure{model="ens}emble",reason="BACKEND",version="2"} 3
nv_inference_request_failure{model="say \"hi\", {now}",version="1"} 4 1700000000000
nv_inference_pending_request_count{model="ens}emble",version="1"} 1
nv_inference_request_success{model="a\\b",version="1"} 7
broken{model="never closed} 9
nv_gpu_utilization{gpu_uuid="GPU-1"} NaN
"""


def test_a_label_value_with_a_closing_brace_is_not_dropped():
    totals = sum_metrics(QUOTED)
    assert totals[FAILURE] == 9
    assert totals["nv_inference_pending_request_count"] == 1
    assert "broken" not in totals  # a quoted value that never closes is not a metric line
    assert "nv_gpu_utilization" not in totals  # NaN is no value


def test_label_values_are_unescaped_and_summed_per_label():
    labels = [line[1] for line in metric_lines(QUOTED)]
    assert labels[2] == {"model": 'say "hi", {now}', "version": "1"}
    assert labels[4] == {"model": "a\\b", "version": "1"}
    assert sum_by_label(QUOTED, FAILURE, "model") == {"ens}emble": 5, 'say "hi", {now}': 4}


def test_quiet_needs_an_empty_queue_and_still_counters():
    idle = sample_from(sum_metrics("nv_inference_request_success 5\nnv_inference_request_failure 1"))
    assert idle == Sample(pending=0, completed=6)
    assert is_quiet(idle, idle)
    assert not is_quiet(idle, Sample(pending=1, completed=6))  # queued, not yet executing
    assert not is_quiet(idle, Sample(pending=0, completed=7))  # one finished in between


def test_a_triton_error_is_an_oserror_like_urllib_s():
    err = TritonError("POST /v2/repository/models/a/load returned 400: failed", 400, "failed")
    assert isinstance(err, OSError)
    assert (err.status, err.reason) == (400, "failed")


def test_zero_inputs_follow_the_metadata_with_variable_dimensions_as_one():
    metadata = {
        "inputs": [
            {"name": "INPUT0", "datatype": "FP32", "shape": [-1, 3]},
            {"name": "TEXT", "datatype": "BYTES", "shape": [1]},
            {"name": "MASK", "datatype": "BOOL", "shape": [2]},
        ]
    }
    assert zero_inputs(metadata) == [
        {"name": "INPUT0", "datatype": "FP32", "shape": [1, 3], "data": [0, 0, 0]},
        {"name": "TEXT", "datatype": "BYTES", "shape": [1], "data": [""]},
        {"name": "MASK", "datatype": "BOOL", "shape": [2], "data": [False, False]},
    ]
