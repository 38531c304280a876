# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The gRPC route of a blue/green application: a second pair of target groups (protocol version GRPC, behind an
HTTPS listener of the same ALB, or a rule of it) whose forward action moves in the same steps as the HTTP one, and
the gates over gRPC on its test route (Triton's `inference.GRPCInferenceService`, through `tritonclient.grpc`).

`tritonclient[grpc]` is needed on the controller only when a gRPC test route is given; its absence is an input
error naming the fix, before any write. The test route is called over TLS (an ALB's gRPC listeners are HTTPS) unless
`test_route_tls` is false. Triton's metrics cover both protocols, so the drain needs nothing here.
"""

from __future__ import annotations

import re
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.colors import COLORS

_HOST_PORT = re.compile(r"^[A-Za-z0-9.\-]+:\d{1,5}$")
MISSING_CLIENT = (
    "the gRPC gates (grpc.test_route_url) need tritonclient[grpc] on the controller: pip install 'tritonclient[grpc]==2.73.0' "
    "(requirements-dev.txt pins it), or leave grpc.test_route_url(s) out to gate over HTTP only"
)


def option_errors(grpc: dict[str, Any] | None, http_target_groups: dict[str, str]) -> list[str]:
    """Each bad grpc suboption, with its value and the fix."""
    if not grpc:
        return []
    errors = []
    tgs = grpc.get("target_groups") or {}
    for color in COLORS:
        arn = tgs.get(color) or ""
        if not arn.startswith("arn:"):
            errors.append(f"grpc.target_groups.{color} is {arn!r}: give the ARN of the {color} gRPC target group (protocol version GRPC)")
        elif arn in (http_target_groups or {}).values():
            errors.append(f"grpc.target_groups.{color} is an HTTP target group of target_groups: each protocol needs its own target groups")
    if tgs.get("blue") and tgs.get("blue") == tgs.get("green"):
        errors.append("grpc.target_groups.blue and grpc.target_groups.green are the same ARN: each colour needs its own target group")
    if bool(grpc.get("listener_arn")) == bool(grpc.get("listener_rule_arn")):
        errors.append("grpc: give exactly one of listener_arn (the HTTPS listener of the gRPC route) or listener_rule_arn")
    routes = {
        "test_route_url": grpc.get("test_route_url"),
        **{f"test_route_urls.{c}": u for c, u in (grpc.get("test_route_urls") or {}).items()},
    }
    for option, value in routes.items():
        if value is not None and (not isinstance(value, str) or not _HOST_PORT.match(value)):
            errors.append(f"grpc.{option} is {value!r}: give host:port of the gRPC test route, e.g. triton-test.internal:8443")
    tls = grpc.get("test_route_tls", True) is not False
    for option in ("test_route_server_name", "test_route_ca_file"):
        if grpc.get(option) and not tls:
            errors.append(f"grpc.{option} is set but grpc.test_route_tls is false: TLS options need a TLS route; drop one of them")
    for color in grpc.get("test_route_urls") or {}:
        if color not in COLORS:
            errors.append(f"grpc.test_route_urls has key {color!r}: the keys are blue and green")
    if (grpc.get("test_route_url") or grpc.get("test_route_urls")) and not client_available():
        errors.append(MISSING_CLIENT)
    return errors


def client_available() -> bool:
    try:
        import tritonclient.grpc  # noqa: F401
    except ImportError:
        return False
    return True


def test_url(grpc: dict[str, Any] | None, color: str) -> str | None:
    grpc = grpc or {}
    return (grpc.get("test_route_urls") or {}).get(color) or grpc.get("test_route_url")


def client_options(grpc: dict[str, Any] | None) -> dict[str, Any]:
    """How the gates reach the gRPC test route: TLS (an ALB forwards gRPC on HTTPS listeners only) unless
    `test_route_tls` is false, the root certificates of a private CA, and the name the certificate is checked against
    when it is not the route's host (the ALB's DNS name reaches a listener whose certificate names the service)."""
    grpc = grpc or {}
    tls = grpc.get("test_route_tls", True) is not False
    options: dict[str, Any] = {"ssl": tls}
    if tls and grpc.get("test_route_ca_file"):
        options["root_certificates"] = grpc["test_route_ca_file"]
    if tls and grpc.get("test_route_server_name"):
        options["channel_args"] = [("grpc.ssl_target_name_override", grpc["test_route_server_name"])]
    return options


def smoke_inputs(inputs: list[dict[str, Any]]) -> list[Any]:
    """KServe v2 JSON input tensors (the HTTP smoke inference's `inputs`) as tritonclient.grpc InferInputs."""
    import numpy as np
    from tritonclient import grpc as grpcclient
    from tritonclient.utils import triton_to_np_dtype

    out = []
    for tensor in inputs:
        infer_input = grpcclient.InferInput(tensor["name"], list(tensor["shape"]), tensor["datatype"])
        dtype = object if tensor["datatype"] == "BYTES" else triton_to_np_dtype(tensor["datatype"])
        data = [str(v).encode() for v in tensor.get("data") or []] if dtype is object else tensor.get("data") or []
        infer_input.set_data_from_numpy(np.array(data, dtype=dtype).reshape(tensor["shape"]))
        out.append(infer_input)
    return out


def gate_problems(url: str, gates_options: dict[str, Any], grpc: dict[str, Any] | None) -> list[str]:
    """Triton live, ready, each expected model ready and, with `gates.smoke`, the smoke inference answering as expected,
    over gRPC at `url` (host:port); the same gates the HTTP test route passes (`cutover_phases.gate_problems`)."""
    from tritonclient import grpc as grpcclient
    from tritonclient.utils import InferenceServerException

    from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import gates

    timeout_s = gates_options["request_timeout_s"]
    try:
        client = grpcclient.InferenceServerClient(url, **client_options(grpc))
    except (InferenceServerException, OSError) as e:
        return [f"Triton gate on grpc {url}: {e}"]
    try:
        if not client.is_server_live(client_timeout=timeout_s):
            return [f"Triton at grpc {url} is not live"]
        problems = [] if client.is_server_ready(client_timeout=timeout_s) else [f"Triton at grpc {url} is not ready"]
        problems += [
            f"model {m} is not ready over grpc {url}"
            for m in gates_options.get("expected_models") or []
            if not client.is_model_ready(m, client_timeout=timeout_s)
        ]
        smoke = gates_options.get("smoke")
        if smoke and not problems:
            expected = smoke.get("expected_outputs") or []
            result = client.infer(
                smoke["model"],
                smoke_inputs(smoke.get("inputs") or []),
                model_version=str(smoke.get("version") or ""),
                outputs=[grpcclient.InferRequestedOutput(o["name"]) for o in expected] or None,
                client_timeout=timeout_s,
            )
            outputs = []
            for want in expected:
                array = result.as_numpy(want["name"])
                if array is not None:
                    data = [v.decode() if isinstance(v, bytes) else v for v in array.flatten().tolist()]
                    outputs.append({"name": want["name"], "data": data})
            problems += [f"over grpc {url}: {p}" for p in gates.smoke_problems(outputs, expected, smoke.get("tolerance") or 0.0)]
        return problems
    except InferenceServerException as e:
        return [f"Triton gate on grpc {url}: {e.message() or e}"]
    finally:
        client.close()
