"""What a canary-verdict test needs besides moto and tritonserver: clients at a fixed request rate on a route, the
metrics sidecar's Triton figures per colour in CloudWatch, and Lambda hooks that answer what the test queued.

- `PacedClients(url, rate)`: inferences at `rate` requests per second in all (spread over a few threads, each
  request on its own schedule so a slow answer does not lower the rate), each answer kept with its time, target
  group (the route's X-Inferops-Target-Group) and status. HTTP (KServe v2 JSON); `grpc_url` switches to
  `tritonclient.grpc` on the gRPC route.
- `SidecarStandIn(moto, {colour: [metrics URL]}, dimensions)`: what the metrics sidecar (CloudWatch agent,
  playbooks/vars/metrics_sidecar.yml) publishes - every second, the change of Triton's success, failure, queue and
  compute counters of each colour's tasks, into namespace Triton with the sidecar's dimensions and `Color`. The real
  agent scrapes every 15 s and goes through CloudWatch Logs (embedded metric format); this puts the same figures at once.
- `hook_function(moto, name)` creates a Lambda function in moto's simple Lambda, which runs no code;
  `queue_hook_answers(moto, answers)` queues what its next invocations answer, in order (with none queued, moto
  echoes the request, which a hook reads as a failure: no hookStatus).
"""

from __future__ import annotations

import io
import json
import threading
import time
import urllib.error
import urllib.request
import zipfile
from typing import Any

from .bluegreen import BlueGreenApp
from .clients import ClientThreads
from .moto import REGION, MotoServer

MODEL = "m"
BODY = {"inputs": [{"name": "INPUT0", "shape": [1], "datatype": "FP32", "data": [10.0]}]}
TRITON_COUNTERS = {
    "nv_inference_request_success": "success",
    "nv_inference_request_failure": "failure",
    "nv_inference_queue_duration_us": "queue",
    "nv_inference_compute_infer_duration_us": "compute",
}


def canary_cutover_args(app: BlueGreenApp, task_definition: str, test_url: str, **overrides: Any) -> dict:
    """The bluegreen arguments of a cutover with one task per colour, each a real tritonserver serving MODEL: traffic
    50 -> 100 with a 5 s bake, the old colour kept, the gates expecting MODEL; `overrides` on top (the canary
    verdict's settings as `canary`)."""
    args = app.module_args(
        task_definition,
        desired_count=1,
        test_route_url=test_url,
        traffic_steps=[50, 100],
        bake_time_s=5,
        watch_interval_s=1,
        old_color="keep",
        gates={"timeout_s": 30, "interval_s": 1, "expected_models": [MODEL]},
        timeouts={"standby_up_s": 30, "poll_interval_s": 1},
    )
    args.update(overrides)
    return args


class PacedClients(ClientThreads):
    """Requests at `rate` per second on the route until stopped; `answers`: (time, target group, status or error)."""

    THREADS = 4

    def __init__(self, url: str = "", rate: float = 2.0, grpc_url: str = "", model: str = MODEL) -> None:
        self.url, self.grpc_url, self.rate, self.model = url, grpc_url, rate, model
        self.answers: list[tuple[float, str, int | str]] = []
        self.lock = threading.Lock()
        super().__init__([(i,) for i in range(self.THREADS)], join_timeout_s=40)

    def _send_http(self) -> tuple[str, int | str]:
        request = urllib.request.Request(f"{self.url}/v2/models/{self.model}/infer", data=json.dumps(BODY).encode(), method="POST")
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=30) as resp:
                resp.read()
                return resp.headers.get("X-Inferops-Target-Group", ""), resp.status
        except urllib.error.HTTPError as err:
            return err.headers.get("X-Inferops-Target-Group", ""), err.code
        except Exception as err:  # any client-side failure (a reset, a malformed answer) is a failed request
            return "", f"{type(err).__name__}: {err}"

    def _send_grpc(self, client: Any) -> tuple[str, int | str]:
        import numpy as np
        from tritonclient import grpc as grpcclient
        from tritonclient.utils import InferenceServerException

        tensor = grpcclient.InferInput("INPUT0", [1], "FP32")
        tensor.set_data_from_numpy(np.array([10.0], dtype=np.float32))
        try:
            result = client.infer(self.model, [tensor], client_timeout=30)
            return "", 200 if result.as_numpy("OUTPUT0") is not None else "no output"
        except InferenceServerException as err:
            return "", f"grpc {err.status()}: {err.message()}"

    def _run(self, index: int) -> None:
        client = None
        if self.grpc_url:
            from tritonclient import grpc as grpcclient

            client = grpcclient.InferenceServerClient(self.grpc_url)
        interval = self.THREADS / self.rate
        due = time.monotonic() + index * interval / self.THREADS
        while not self.stop_event.is_set():
            wait = due - time.monotonic()
            if wait > 0 and self.stop_event.wait(wait):
                break
            due += interval
            group, status = self._send_grpc(client) if client is not None else self._send_http()
            with self.lock:
                self.answers.append((time.monotonic(), group, status))
        if client is not None:
            client.close()

    def failed(self) -> list[tuple[float, str, int | str]]:
        with self.lock:
            return [a for a in self.answers if a[2] != 200]


def triton_counters(text: str) -> dict[str, float]:
    """The four counters of Triton's Prometheus text, summed over models and versions."""
    out = dict.fromkeys(TRITON_COUNTERS.values(), 0.0)
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in TRITON_COUNTERS and not line.startswith("#"):
            out[TRITON_COUNTERS[name]] += float(line.rsplit(" ", 1)[1])
    return out


class SidecarStandIn:
    """Publishes each colour's Triton counters (their change since the last scrape) with a Color dimension."""

    def __init__(self, moto: MotoServer, urls: dict[str, list[str]], dimensions: dict[str, str], interval_s: float = 1.0) -> None:
        self.cloudwatch = moto.client("cloudwatch")
        self.urls, self.dimensions, self.interval_s = urls, dimensions, interval_s
        self.last: dict[str, dict[str, float]] = {}
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def scrape(self) -> None:
        for color, urls in self.urls.items():
            for url in urls:
                try:
                    with urllib.request.urlopen(url, timeout=2) as resp:
                        now = triton_counters(resp.read().decode())
                except OSError:
                    continue
                before, self.last[url] = self.last.get(url), now
                if before is None:
                    continue
                dims = [{"Name": k, "Value": v} for k, v in {**self.dimensions, "Color": color}.items()]
                data = [
                    {"MetricName": name, "Dimensions": dims, "Value": max(now[key] - before[key], 0.0)}
                    for name, key in TRITON_COUNTERS.items()
                ]
                self.cloudwatch.put_metric_data(Namespace="Triton", MetricData=data)

    def _run(self) -> None:
        while not self.stop_event.wait(self.interval_s):
            self.scrape()

    def __enter__(self) -> SidecarStandIn:
        self.scrape()
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_event.set()
        self.thread.join(10)


def _zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("hook.py", "def handler(event, context):\n    return {'hookStatus': 'SUCCEEDED'}\n")
    return buffer.getvalue()


def _moto_api(moto: MotoServer, path: str, body: dict[str, Any]) -> None:
    request = urllib.request.Request(f"{moto.endpoint}/moto-api/{path}", data=json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(request, timeout=10) as resp:
        resp.read()


def hook_function(moto: MotoServer, name: str) -> str:
    """A Lambda function in moto's simple Lambda (no code runs; answers are queued); its ARN."""
    _moto_api(moto, "config", {"lambda": {"use_docker": False}})
    iam = moto.client("iam")
    trust = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}],
    }
    try:
        role = iam.create_role(RoleName="cutover-hooks", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    except iam.exceptions.EntityAlreadyExistsException:
        role = iam.get_role(RoleName="cutover-hooks")["Role"]["Arn"]
    found = moto.client("lambda").create_function(
        FunctionName=name, Runtime="python3.12", Role=role, Handler="hook.handler", Code={"ZipFile": _zip()}
    )
    return found["FunctionArn"]


def queue_hook_answers(moto: MotoServer, answers: list[dict[str, Any]]) -> None:
    """What the next invocations of any function answer, in order."""
    _moto_api(moto, "static/lambda-simple/response", {"results": [json.dumps(a) for a in answers], "region": REGION})
