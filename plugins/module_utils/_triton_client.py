# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""Triton's HTTP/REST API (KServe v2 plus the model-repository extension), its Prometheus metrics, and pure helpers
over its answers: the one Triton client of the collection.

Python standard library only (urllib, no `ansible` import), so the same file serves the modules, the model agent on
the instances, the Triton image's scripts (copied beside them at build time, imported as `_triton_client`) and the
test harness. Requests go out directly (open_direct), never through the environment's proxies.
"""

from __future__ import annotations

import json
import math
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

READY = "READY"
# What "quiet" reads (see is_quiet): the gauge of QUEUED requests, and the counters of finished requests.
PENDING = "nv_inference_pending_request_count"
SUCCESS = "nv_inference_request_success"
FAILURE = "nv_inference_request_failure"


class TritonError(OSError):
    """A Triton request failed; `reason` is Triton's own message when it sent one.

    An OSError, as urllib's HTTPError is: callers that treat an unreachable server and a refused request alike catch
    OSError."""

    def __init__(self, message: str, status: int | None = None, reason: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


def open_direct(req: urllib.request.Request | str, timeout_s: float, context: ssl.SSLContext | None = None) -> Any:
    """Open a URL without the environment's proxies: Triton tasks, the ECS agent and IMDS are reached directly,
    also on instances whose HTTP(S)_PROXY serves egress to the internet."""
    handlers: list[Any] = [urllib.request.ProxyHandler({})]
    if context is not None:
        handlers.append(urllib.request.HTTPSHandler(context=context))
    return urllib.request.build_opener(*handlers).open(req, timeout=timeout_s)


class TritonClient:
    def __init__(self, url: str, timeout_s: float = 2.0, validate_certs: bool = True) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.validate_certs = validate_certs

    def _open(self, req: urllib.request.Request | str, timeout_s: float | None) -> tuple[int, bytes]:
        context = None
        if not self.validate_certs:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        try:
            with open_direct(req, timeout_s or self.timeout_s, context) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as err:
            return err.code, err.read()

    def request(self, method: str, path: str, body: Any = None, timeout_s: float | None = None) -> tuple[int, bytes]:
        """(HTTP status, raw body) of one request; TritonError when Triton cannot be reached."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            return self._open(req, timeout_s)
        except (urllib.error.URLError, OSError) as err:
            raise TritonError(f"cannot reach Triton at {self.url}{path}: {err}") from err

    def _json(self, method: str, path: str, body: Any = None, timeout_s: float | None = None) -> Any:
        status, raw = self.request(method, path, body, timeout_s)
        payload = json.loads(raw) if raw else None
        if status != 200:
            reason = payload.get("error", "") if isinstance(payload, dict) else raw.decode(errors="replace")
            raise TritonError(f"{method} {path} returned {status}: {reason}", status, reason)
        return payload

    def live(self) -> bool:
        return self.request("GET", "/v2/health/live")[0] == 200

    def ready(self) -> bool:
        return self.request("GET", "/v2/health/ready")[0] == 200

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

    def model_metadata(self, model: str, version: str = "") -> dict:
        """The model's inputs and outputs (names, datatypes, shapes with -1 for a variable dimension)."""
        return self._json("GET", f"/v2/models/{model}" + (f"/versions/{version}" if version else ""))

    def infer(self, model: str, inputs: list[dict], version: str = "", timeout_s: float | None = None) -> list[dict]:
        path = f"/v2/models/{model}" + (f"/versions/{version}" if version else "") + "/infer"
        return self._json("POST", path, {"inputs": inputs}, timeout_s)["outputs"]

    def metrics(self, metrics_url: str) -> dict[str, float]:
        """The metrics endpoint (Triton's :8002/metrics) summed per metric name; OSError when it cannot be read."""
        status, raw = self._open(metrics_url, None)
        if status != 200:
            raise TritonError(f"GET {metrics_url} returned {status}", status)
        return sum_metrics(raw.decode("utf-8", "replace"))


# ---------------------------------------------------------------- metrics


def zero_inputs(metadata: dict) -> list[dict]:
    """An inference request of zeros shaped as the model's metadata says, each variable dimension (-1) as 1: enough
    to show that a version which loaded also answers."""
    inputs = []
    for tensor in metadata.get("inputs", []):
        shape = [dim if dim > 0 else 1 for dim in tensor["shape"]]
        zero: Any = "" if tensor["datatype"] == "BYTES" else False if tensor["datatype"] == "BOOL" else 0
        inputs.append({"name": tensor["name"], "datatype": tensor["datatype"], "shape": shape, "data": [zero] * math.prod(shape)})
    return inputs


def metric_lines(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Prometheus text exposition -> [(metric name, {label: value}, value)], in order.

    Label values may hold quotes (escaped), braces, commas and spaces. Comments, NaN values and lines that do not
    parse are skipped."""
    found = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parsed = _parse_line(line)
        if parsed is not None:
            found.append(parsed)
    return found


def sum_metrics(text: str) -> dict[str, float]:
    """Prometheus text -> {metric name: value summed over every label set}."""
    totals: dict[str, float] = {}
    for name, _labels, value in metric_lines(text):
        totals[name] = totals.get(name, 0.0) + value
    return totals


def sum_by_label(text: str, metric: str, label: str) -> dict[str, float]:
    """One metric summed per value of one label (e.g. failures per model, over its versions)."""
    totals: dict[str, float] = {}
    for name, labels, value in metric_lines(text):
        if name == metric and label in labels:
            totals[labels[label]] = totals.get(labels[label], 0.0) + value
    return totals


_ESCAPES = {"n": "\n", "\\": "\\", '"': '"'}


def _parse_line(line: str) -> tuple[str, dict[str, str], float] | None:
    """'name{label="value",...} value [timestamp]' -> (name, labels, value); None when it does not parse."""
    end = 0
    while end < len(line) and (line[end].isalnum() or line[end] in "_:"):
        end += 1
    name, pos, labels = line[:end], end, {}
    if not name:
        return None
    if line.startswith("{", pos):
        pos += 1
        while True:
            while pos < len(line) and line[pos] in " ,":
                pos += 1
            if line.startswith("}", pos):
                pos += 1
                break
            eq = line.find("=", pos)
            if eq < 0 or not line.startswith('"', eq + 1):
                return None
            key, pos, value = line[pos:eq].strip(), eq + 2, []
            if not key.replace("_", "a").isalnum():
                return None
            while pos < len(line) and line[pos] != '"':
                if line[pos] == "\\" and pos + 1 < len(line):
                    pos += 1
                    value.append(_ESCAPES.get(line[pos], "\\" + line[pos]))
                else:
                    value.append(line[pos])
                pos += 1
            if pos >= len(line):
                return None  # the quoted value never closes
            labels[key] = "".join(value)
            pos += 1
    fields = line[pos:].split()
    if not fields:
        return None
    try:
        value = float(fields[0])
    except ValueError:
        return None
    return None if math.isnan(value) else (name, labels, value)


@dataclass(frozen=True)
class Sample:
    """What "quiet" reads from one metrics scrape, all models together."""

    pending: float  # queued requests (a gauge: it drops when execution starts)
    completed: float  # finished requests, successful or not (counters)


def sample_from(totals: dict[str, float]) -> Sample:
    return Sample(pending=totals.get(PENDING, 0.0), completed=totals.get(SUCCESS, 0.0) + totals.get(FAILURE, 0.0))


def is_quiet(before: Sample, after: Sample) -> bool:
    """Quiet between two scrapes: no request queued now and none finished since the earlier scrape.

    The one definition the cutover's drain of the old colour and the container's drain on SIGTERM both use: a
    server is quiet for N seconds when every pair of scrapes across those N seconds is quiet."""
    return after.pending == 0 and after.completed == before.completed


# ---------------------------------------------------------------- repository index


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


def version_problems(index: list[dict], expected: dict[str, int]) -> list[str]:
    """One line per model whose READY versions are not exactly the expected one (a colour serves its release, no other)."""
    problems = []
    for model, version in sorted(expected.items()):
        ready = sorted(int(v) for v in ready_versions(index, model) if str(v).isdigit())
        if ready != [int(version)]:
            found = describe_versions(model_versions(index, model)) or "not in the repository index"
            problems.append(f"model {model} must serve exactly version {version} (its release's), serves {ready or 'none'} ({found})")
    return problems


def describe_versions(entries: dict[str, dict]) -> str:
    """Index entries by version → "version 1 UNAVAILABLE: reason; version 2 READY" (Triton's states and reasons)."""
    return "; ".join(
        f"version {v or '?'} {e.get('state', 'UNKNOWN')}" + (f": {e['reason']}" if e.get("reason") else "")
        for v, e in sorted(entries.items())
    )
