#!/usr/bin/env python3
"""Deep health check for the ECS container healthCheck: live, every expected model READY, optional smoke inference.

Prints ONE line and exits 0 (healthy) or 1 (unhealthy, with the reason). Every HTTP call has a 2 s timeout.
Configuration comes from the environment the entrypoint also reads (flags override it):
  TRITON_HTTP_PORT           Triton's HTTP port (8000)
  TRITON_HEALTH_MODELS       expected models, comma separated: `name` (any version READY) or `name:version`;
                             defaults to TRITON_LOAD_MODELS
  TRITON_SMOKE_MODEL         model for the smoke inference (none: no smoke inference)
  TRITON_SMOKE_REQUEST       KServe v2 inference request body (JSON), e.g. {"inputs": [{"name": "INPUT0", ...}]}
  TRITON_SMOKE_EXPECTED      expected outputs (JSON), {"OUTPUT0": [2.0, 3.0]}
  TRITON_SMOKE_TOLERANCE     absolute tolerance for numeric outputs (1e-6)
Python stdlib only: it runs inside the Triton image.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import Any

import triton_drain
from _triton_client import TritonClient
from triton_drain import HTTP_TIMEOUT_S


class Unhealthy(Exception):
    """The one-line reason the check failed."""


def parse_expected(spec: str) -> list[tuple[str, str]]:
    """'a, b:2' -> [('a', ''), ('b', '2')]; an empty version means any version."""
    models = []
    for item in spec.split(","):
        item = item.strip()
        if not item:
            continue
        name, _sep, version = item.partition(":")
        models.append((name.strip(), version.strip()))
    return models


def check_index(index: list[dict[str, Any]], expected: list[tuple[str, str]]) -> list[str]:
    """Problems with the repository index (POST /v2/repository/index); empty when every expected model is READY."""
    problems = []
    for name, version in expected:
        entries = [e for e in index if e.get("name") == name and (not version or str(e.get("version", "")) == version)]
        label = f"{name}:{version}" if version else name
        if not entries:
            problems.append(f"model {label} is not in the repository index")
        elif not any(e.get("state") == "READY" for e in entries):
            details = "; ".join(f"{e.get('state') or 'NOT LOADED'}" + (f" ({e['reason']})" if e.get("reason") else "") for e in entries)
            problems.append(f"model {label} is not READY: {details}")
    return problems


def _flatten(value: Any) -> list[Any]:
    if isinstance(value, list):
        return [leaf for item in value for leaf in _flatten(item)]
    return [value]


def _close(got: Any, want: Any, tolerance: float) -> bool:
    if isinstance(got, bool) or isinstance(want, bool) or not isinstance(got, int | float) or not isinstance(want, int | float):
        return got == want
    return math.isclose(float(got), float(want), rel_tol=0.0, abs_tol=tolerance)


def compare_outputs(response: dict[str, Any], expected: dict[str, Any], tolerance: float = 1e-6) -> list[str]:
    """Differences between an inference response's outputs and the expected {output name: values}."""
    outputs = {o.get("name"): o.get("data") for o in response.get("outputs", [])}
    problems = []
    for name, want in expected.items():
        if name not in outputs:
            problems.append(f"output {name} missing (got {sorted(k for k in outputs if k)})")
            continue
        got_flat, want_flat = _flatten(outputs[name]), _flatten(want)
        if len(got_flat) != len(want_flat) or not all(_close(g, w, tolerance) for g, w in zip(got_flat, want_flat, strict=False)):
            problems.append(f"{name} = {_short(outputs[name])}, expected {_short(want)}")
    return problems


def one_line(text: str, limit: int = 400) -> str:
    """Collapse whitespace (Triton's reasons carry Python tracebacks) and bound the length: ECS shows one line."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _request(client: TritonClient, path: str, body: Any = None) -> tuple[int, Any]:
    try:
        status, raw = client.request("GET" if body is None else "POST", path, body)
    except (OSError, ValueError) as exc:
        cause = exc.__cause__ or exc
        raise Unhealthy(f"{client.url}{path}: {getattr(cause, 'reason', cause)}") from exc
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, raw.decode("utf-8", "replace")[:200]


def check(
    base_url: str, expected: list[tuple[str, str]], smoke_model: str, smoke_request: Any, smoke_expected: Any, tolerance: float
) -> str:
    """Run the checks in order; returns the healthy summary or raises Unhealthy with the first failure."""
    client = TritonClient(base_url, HTTP_TIMEOUT_S)
    status, _body = _request(client, "/v2/health/live")
    if status != 200:
        raise Unhealthy(f"server not live (GET /v2/health/live answered {status})")
    status, index = _request(client, "/v2/repository/index", {})
    if status != 200 or not isinstance(index, list):
        raise Unhealthy(f"repository index unavailable (HTTP {status}: {_short(index)})")
    problems = check_index(index, expected)
    if problems:
        raise Unhealthy("; ".join(problems))
    summary = f"live, {len(expected)} expected model(s) READY"
    if smoke_model:
        status, body = _request(client, f"/v2/models/{smoke_model}/infer", smoke_request)
        if status != 200 or not isinstance(body, dict):
            raise Unhealthy(f"smoke inference on {smoke_model} failed (HTTP {status}: {_short(body)})")
        problems = compare_outputs(body, smoke_expected, tolerance)
        if problems:
            raise Unhealthy(f"smoke inference on {smoke_model} returned the wrong output: {'; '.join(problems)}")
        summary += f", smoke inference on {smoke_model} ok"
    return summary


def main(argv: list[str] | None = None, env: dict[str, str] | None = None) -> int:
    env = dict(os.environ if env is None else env)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=triton_drain.http_url(env))
    parser.add_argument("--models", default=env.get("TRITON_HEALTH_MODELS") or env.get("TRITON_LOAD_MODELS", ""))
    parser.add_argument("--smoke-model", default=env.get("TRITON_SMOKE_MODEL", ""))
    parser.add_argument("--smoke-request", default=env.get("TRITON_SMOKE_REQUEST", ""))
    parser.add_argument("--smoke-expected", default=env.get("TRITON_SMOKE_EXPECTED", ""))
    parser.add_argument("--smoke-tolerance", type=float, default=float(env.get("TRITON_SMOKE_TOLERANCE", "1e-6")))
    args = parser.parse_args(argv)
    try:
        smoke_request = json.loads(args.smoke_request) if args.smoke_model else None
        smoke_expected = json.loads(args.smoke_expected) if args.smoke_model else None
        if args.smoke_model and not (isinstance(smoke_request, dict) and isinstance(smoke_expected, dict)):
            raise ValueError("TRITON_SMOKE_REQUEST and TRITON_SMOKE_EXPECTED must be JSON objects")
    except ValueError as exc:
        print(one_line(f"unhealthy: bad smoke inference configuration: {exc}"))
        return 1
    try:
        summary = check(
            args.url.rstrip("/"), parse_expected(args.models), args.smoke_model, smoke_request, smoke_expected, args.smoke_tolerance
        )
    except Unhealthy as exc:
        print(one_line(f"unhealthy: {exc}"))
        return 1
    print(one_line(f"healthy: {summary}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
