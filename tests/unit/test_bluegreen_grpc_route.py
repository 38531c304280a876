"""The gRPC route's gates (`_bluegreen/grpc_route.py`) over a fake tritonclient.grpc client: how the test route is
reached (TLS by default, the certificate's name, a private CA), the smoke inference's tensors, the input errors.
The real client against a real tritonserver: tests/integration/test_grpc_cutover.py."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest
from tritonclient import grpc as grpcclient

from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import grpc_route

TGS = {"blue": "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/triton-blue/1"}
GRPC = {
    "target_groups": {
        "blue": "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/triton-grpc-blue/1",
        "green": "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/triton-grpc-green/2",
    },
    "listener_arn": "arn:aws:elasticloadbalancing:us-east-1:123456789012:listener/app/triton/1/2",
}
GATES = {"request_timeout_s": 5, "expected_models": ["simple"]}
SMOKE = {
    "model": "simple",
    "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 2], "data": [1.0, 2.0]}],
    "expected_outputs": [{"name": "OUTPUT0", "data": [2.0, 3.0]}],
}


class FakeResult:
    def __init__(self, outputs: dict[str, Any]) -> None:
        self.outputs = outputs

    def as_numpy(self, name: str) -> Any:
        return self.outputs.get(name)


class FakeClient:
    """tritonclient.grpc.InferenceServerClient as the gates use it; records how it was made and what it was asked."""

    made: ClassVar[list[tuple[str, dict[str, Any]]]] = []
    ready_models: ClassVar[set[str]] = {"simple"}
    answer: ClassVar[dict[str, Any]] = {}
    asked: ClassVar[list[tuple[str, list[Any], str]]] = []

    def __init__(self, url: str, **options: Any) -> None:
        FakeClient.made.append((url, options))

    def is_server_live(self, client_timeout: float) -> bool:
        return True

    def is_server_ready(self, client_timeout: float) -> bool:
        return True

    def is_model_ready(self, name: str, client_timeout: float) -> bool:
        return name in FakeClient.ready_models

    def infer(self, model: str, inputs: list[Any], model_version: str, outputs: Any, client_timeout: float) -> FakeResult:
        FakeClient.asked.append((model, inputs, model_version))
        return FakeResult(FakeClient.answer)

    def close(self) -> None:
        pass


@pytest.fixture
def fake_client(monkeypatch):
    FakeClient.made, FakeClient.asked, FakeClient.ready_models = [], [], {"simple"}
    FakeClient.answer = {"OUTPUT0": np.array([[2.0, 3.0]], dtype=np.float32)}
    monkeypatch.setattr(grpcclient, "InferenceServerClient", FakeClient)
    return FakeClient


def test_the_test_route_is_called_over_tls_by_default_with_the_certificates_name_and_ca(fake_client):
    grpc = {**GRPC, "test_route_server_name": "triton.example.test", "test_route_ca_file": "/etc/pki/ca.pem"}
    assert grpc_route.gate_problems("alb.example:8444", GATES, grpc) == []
    assert fake_client.made == [
        (
            "alb.example:8444",
            {
                "ssl": True,
                "root_certificates": "/etc/pki/ca.pem",
                "channel_args": [("grpc.ssl_target_name_override", "triton.example.test")],
            },
        )
    ]
    grpc_route.gate_problems("proxy.internal:8001", GATES, {**GRPC, "test_route_tls": False})
    assert fake_client.made[-1] == ("proxy.internal:8001", {"ssl": False})


def test_an_unready_model_fails_the_gate_and_skips_the_smoke_inference(fake_client):
    fake_client.ready_models = set()
    problems = grpc_route.gate_problems("route:8444", {**GATES, "smoke": SMOKE}, GRPC)
    assert problems == ["model simple is not ready over grpc route:8444"] and fake_client.asked == []


def test_the_smoke_inference_runs_over_grpc_with_the_http_gates_tensors(fake_client):
    assert grpc_route.gate_problems("route:8444", {**GATES, "smoke": SMOKE}, GRPC) == []
    model, inputs, version = fake_client.asked[0]
    assert (model, version) == ("simple", "")
    assert inputs[0].name() == "INPUT0" and inputs[0].datatype() == "FP32" and inputs[0].shape() == [1, 2]
    fake_client.answer = {"OUTPUT0": np.array([[2.0, 4.0]], dtype=np.float32)}
    assert grpc_route.gate_problems("route:8444", {**GATES, "smoke": SMOKE}, GRPC) == [
        "over grpc route:8444: smoke inference output OUTPUT0 is [2.0, 4.0], expected [2.0, 3.0] (tolerance 0.0)"
    ]
    fake_client.answer = {}
    assert grpc_route.gate_problems("route:8444", {**GATES, "smoke": SMOKE}, GRPC) == [
        "over grpc route:8444: smoke inference returned no output OUTPUT0"
    ]


def test_smoke_inputs_of_bytes_and_integers():
    inputs = grpc_route.smoke_inputs(
        [
            {"name": "TEXT", "datatype": "BYTES", "shape": [2], "data": ["a", "bc"]},
            {"name": "IDS", "datatype": "INT64", "shape": [1, 3], "data": [1, 2, 3]},
        ]
    )
    assert [(i.name(), i.datatype(), i.shape()) for i in inputs] == [("TEXT", "BYTES", [2]), ("IDS", "INT64", [1, 3])]


def test_tls_options_on_a_plaintext_route_name_the_conflict():
    errors = grpc_route.option_errors({**GRPC, "test_route_tls": False, "test_route_server_name": "triton.example.test"}, TGS)
    assert errors == ["grpc.test_route_server_name is set but grpc.test_route_tls is false: TLS options need a TLS route; drop one of them"]
    assert (
        grpc_route.option_errors({**GRPC, "test_route_url": "alb.example:8444", "test_route_server_name": "triton.example.test"}, TGS) == []
    )


def test_a_controller_without_tritonclient_is_told_the_fix(monkeypatch):
    monkeypatch.setattr(grpc_route, "client_available", lambda: False)
    errors = grpc_route.option_errors({**GRPC, "test_route_url": "alb.example:8444"}, TGS)
    assert errors == [grpc_route.MISSING_CLIENT] and "pip install 'tritonclient[grpc]==2.73.0'" in errors[0]
    assert grpc_route.option_errors(GRPC, TGS) == []  # no gRPC gates: the client is not needed
