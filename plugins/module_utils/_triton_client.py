# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""Triton's HTTP/REST API (KServe v2 plus the model-repository extension), and pure helpers over its answers.

The client is the one place this collection talks to a Triton endpoint; it goes through Ansible's URL
utilities so proxies, timeouts and TLS settings behave as in every other Ansible module.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.error import HTTPError, URLError

from ansible.module_utils.urls import open_url

READY = "READY"
_METRIC_LINE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)")


class TritonError(Exception):
    """A Triton request failed; `reason` is Triton's own message when it sent one."""

    def __init__(self, message: str, status: int | None = None, reason: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


class TritonClient:
    def __init__(self, url: str, timeout_s: float = 2.0, validate_certs: bool = True) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.validate_certs = validate_certs

    def _request(self, method: str, path: str, body: Any = None, timeout_s: float | None = None) -> tuple[int, bytes]:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        try:
            resp = open_url(
                self.url + path,
                data=data,
                method=method,
                headers=headers,
                timeout=timeout_s or self.timeout_s,
                validate_certs=self.validate_certs,
            )
            return resp.getcode(), resp.read()
        except HTTPError as err:
            return err.code, err.read()
        except (URLError, OSError) as err:
            raise TritonError(f"cannot reach Triton at {self.url}{path}: {err}") from err

    def _json(self, method: str, path: str, body: Any = None, timeout_s: float | None = None) -> Any:
        status, raw = self._request(method, path, body, timeout_s)
        payload = json.loads(raw) if raw else None
        if status != 200:
            reason = payload.get("error", "") if isinstance(payload, dict) else raw.decode(errors="replace")
            raise TritonError(f"{method} {path} returned {status}: {reason}", status, reason)
        return payload

    def live(self) -> bool:
        return self._request("GET", "/v2/health/live")[0] == 200

    def ready(self) -> bool:
        return self._request("GET", "/v2/health/ready")[0] == 200

    def repository_index(self) -> list[dict]:
        return self._json("POST", "/v2/repository/index", {})

    def model_config(self, model: str) -> dict:
        return self._json("GET", f"/v2/models/{model}/config")

    def load(self, model: str, config: dict | None = None, timeout_s: float = 300) -> None:
        """Synchronous: returns once Triton has loaded the model, raises TritonError with its reason otherwise."""
        body = {"parameters": {"config": json.dumps(config)}} if config is not None else {}
        self._json("POST", f"/v2/repository/models/{model}/load", body, timeout_s)

    def unload(self, model: str) -> None:
        """Returns before the unload finishes: poll repository_index() for the outcome."""
        self._json("POST", f"/v2/repository/models/{model}/unload", {})

    def infer(self, model: str, inputs: list[dict], version: str = "", timeout_s: float | None = None) -> list[dict]:
        path = f"/v2/models/{model}" + (f"/versions/{version}" if version else "") + "/infer"
        return self._json("POST", path, {"inputs": inputs}, timeout_s)["outputs"]

    def metrics(self, metrics_url: str) -> dict[str, float]:
        resp = open_url(metrics_url, timeout=self.timeout_s, validate_certs=self.validate_certs)
        return sum_metrics(resp.read().decode())


def sum_metrics(text: str) -> dict[str, float]:
    """Prometheus text → {metric name: value summed over every label set} (comments and bad lines skipped)."""
    totals: dict[str, float] = {}
    for line in text.splitlines():
        match = _METRIC_LINE.match(line)
        if not match:
            continue
        try:
            value = float(match["value"])
        except ValueError:
            continue
        totals[match["name"]] = totals.get(match["name"], 0.0) + value
    return totals


def model_versions(index: list[dict], model: str) -> dict[str, dict]:
    """The index entries of one model, by version ("" when Triton reports none)."""
    return {str(entry.get("version", "")): entry for entry in index if entry.get("name") == model}


def ready_versions(index: list[dict], model: str) -> list[str]:
    return sorted(
        (v for v, entry in model_versions(index, model).items() if entry.get("state") == READY),
        key=lambda v: (len(v), v),
    )


def unready_models(index: list[dict], expected: list[str]) -> list[str]:
    """One line per expected model that has no READY version, with Triton's state and reason."""
    problems = []
    for model in expected:
        entries = model_versions(index, model)
        if not entries:
            problems.append(f"model {model} is not in the repository index")
        elif not ready_versions(index, model):
            problems.append(f"model {model} is not READY ({describe_versions(entries)})")
    return problems


def describe_versions(entries: dict[str, dict]) -> str:
    """Index entries by version → "version 1 UNAVAILABLE: reason; version 2 READY" (Triton's states and reasons)."""
    return "; ".join(
        f"version {v or '?'} {e.get('state', 'UNKNOWN')}" + (f": {e['reason']}" if e.get("reason") else "")
        for v, e in sorted(entries.items())
    )
