# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The gRPC route of a blue/green application: a second pair of target groups (protocol version GRPC, behind an
HTTPS listener of the same ALB, or a rule of it) whose forward action moves in the same steps as the HTTP one, and
the gates over gRPC on its test route (Triton's `inference.GRPCInferenceService`, through `tritonclient.grpc`).

`tritonclient[grpc]` is needed on the controller only when a gRPC test route is given; its absence is an input
error naming the fix, before any write. Triton's metrics cover both protocols, so the drain needs nothing here.
"""

from __future__ import annotations

import re
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.plan import COLORS

_HOST_PORT = re.compile(r"^[A-Za-z0-9.\-]+:\d{1,5}$")
MISSING_CLIENT = "the gRPC gates need tritonclient[grpc] on the controller: pip install 'tritonclient[grpc]' (requirements.txt)"


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


def gate_problems(url: str, expected_models: list[str], timeout_s: float, tls: bool = False) -> list[str]:
    """Triton live, ready and each expected model ready, over gRPC at `url` (host:port)."""
    from tritonclient import grpc as grpcclient
    from tritonclient.utils import InferenceServerException

    client = grpcclient.InferenceServerClient(url, ssl=tls)
    try:
        if not client.is_server_live(client_timeout=timeout_s):
            return [f"Triton at grpc {url} is not live"]
        problems = [] if client.is_server_ready(client_timeout=timeout_s) else [f"Triton at grpc {url} is not ready"]
        problems += [
            f"model {m} is not ready over grpc {url}" for m in expected_models if not client.is_model_ready(m, client_timeout=timeout_s)
        ]
        return problems
    except InferenceServerException as e:
        return [f"Triton gate on grpc {url}: {e.message() or e}"]
    finally:
        client.close()
