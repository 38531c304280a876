from __future__ import annotations

from ansible_collections.inferops.triton_ecs.plugins.module_utils._triton_client import (
    ready_versions,
    sum_metrics,
    unready_models,
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


def test_unready_models_names_state_and_reason():
    problems = unready_models(INDEX, ["a", "b", "c", "missing"])
    assert problems == [
        "model b is not READY (version 1 UNAVAILABLE: load failed: boom)",
        "model c is not READY (version ? UNKNOWN)",
        "model missing is not in the repository index",
    ]
