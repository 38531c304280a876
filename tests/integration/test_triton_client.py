"""The Triton client against the real tritonserver."""

from __future__ import annotations

import pytest

from ansible_collections.inferops.triton_ecs.plugins.module_utils._triton_client import (
    TritonClient,
    TritonError,
    ready_versions,
    unready_models,
)
from tests.harness.triton import write_model


def test_client_loads_infers_and_reports_failures(tmp_path, triton_server):
    repo = tmp_path / "models"
    write_model(repo, "simple", versions=(1, 2), offset=5.0)
    write_model(repo, "broken", fail_to_load=True)
    server = triton_server(repo)
    client = TritonClient(server.url)

    assert client.live() and client.ready()
    client.load("simple")
    assert ready_versions(client.repository_index(), "simple") == ["2"]
    outputs = client.infer("simple", [{"name": "INPUT0", "shape": [1], "datatype": "FP32", "data": [1.0]}])
    assert outputs[0]["data"] == [6.0]
    assert client.metrics(server.metrics_url)["nv_inference_request_success"] == 1

    config = client.model_config("simple")
    config["version_policy"] = {"specific": {"versions": [1]}}
    client.load("simple", config=config)
    assert ready_versions(client.repository_index(), "simple") == ["1"]

    with pytest.raises(TritonError) as failure:
        client.load("broken")
    assert failure.value.status == 400
    assert "fail_to_load" in failure.value.reason
    assert unready_models(client.repository_index(), ["simple", "broken"])[0].startswith("model broken is not READY")
