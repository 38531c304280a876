"""The shared fixtures themselves: moto server answers AWS calls, tritonserver serves a python-backend model."""

from __future__ import annotations

from tests.harness.triton import write_model


def test_moto_server_serves_ecs_and_counts_requests(moto_server):
    ecs = moto_server.client("ecs")
    before = moto_server.request_count()
    ecs.create_cluster(clusterName="harness")
    assert ecs.list_clusters()["clusterArns"][0].endswith("cluster/harness")
    assert moto_server.request_count() - before == 2


def test_tritonserver_serves_and_reloads_a_python_model(tmp_path, triton_server):
    repo = tmp_path / "models"
    write_model(repo, "simple", versions=(1,), offset=1.0)
    server = triton_server(repo, models=("simple",))
    assert server.infer("simple", [1.0, 2.0]) == [2.0, 3.0]

    write_model(repo, "broken", fail_to_load=True)
    status, body = server.post("/v2/repository/models/broken/load")
    assert status == 400
    assert "fail_to_load" in body["error"]

    status, index = server.post("/v2/repository/index")
    states = {entry["name"]: entry.get("state") for entry in index}
    assert states["simple"] == "READY"
    assert states["broken"] == "UNAVAILABLE"
