"""A stand-in for an ALB listener's forward action: an HTTP reverse proxy on loopback that routes as moto says.

moto stores listeners, rules, weights and registered targets but routes nothing. `AlbRoute` is the data plane for
one forward action (a listener's default action: the production or the test listener; or a listener rule). It
reads the action's ForwardConfig weights and each weighted target group's registered targets from the moto server
(DescribeListeners/DescribeRules, DescribeTargetHealth) every `cache_s` in the background, so a request never waits
for moto and a change reaches the route within about `cache_s`. Per request it picks a target group by smooth
weighted round robin (so 10 % is 10 % over ten requests, not on average), then a target of that group round robin,
and forwards the request (method, path, query, headers, body) to <ip>:<port>. The answer goes back with
`X-Inferops-Target-Group: <target group ARN>`; requests are counted per target group.

As an ALB does: keep-alive towards clients (HTTP/1.1, idle timeout 60 s); Host passed through, X-Forwarded-For/
-Proto/-Port added; only `healthy` targets get requests, and when a group has none healthy it fails open to all its
registered targets (moto reports every registered target healthy); 503 with a JSON reason when no group has weight
or the chosen group has no target; 502 when the target refuses or drops the connection, 504 when it does not answer
in time. The parsing of actions is its own (not the collection's code under test).

With `publish_metrics=True` it also publishes, every `metrics_interval_s`, what the ALB publishes to CloudWatch per
target group (namespace AWS/ApplicationELB, dimensions LoadBalancer and TargetGroup): RequestCount,
HTTPCode_Target_5XX_Count (5xx answers from targets, not the route's own 502/503/504) and TargetResponseTime (each
request's seconds as values), into moto's CloudWatch - what the cutover's canary verdict reads. AWS publishes per
minute and a minute or so late; here every second, at once. moto computes no percentile (p99 reads as no data).

Not modelled: ALB health checks (a target is as healthy as moto says, so a dead target still gets requests: 502),
slow start, deregistration delay and connection draining (a deregistered target gets no new request from the next
refresh on; requests in flight to it finish), stickiness, listener rule conditions (a rule's forward action is used
whatever the request), gRPC, and keep-alive towards targets (one connection per request, so a stopping Triton
sees no idle load-balancer connection; the real ALB's pooled connections can eat its exit timeout).

    with AlbRoute(moto, listener_arn=listener) as route:
        urllib.request.urlopen(route.url + "/v2/health/ready")
        route.counts()                         # {target group ARN: requests}

An HTTPS listener: `ssl_context` (a server context with the listener's certificate) and, for a URL that names the
listener's port, `port`; the route then terminates TLS as the ALB does and forwards plain HTTP to the targets.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import ssl
import threading
import time
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .moto import MotoServer

TARGET_GROUP_HEADER = "X-Inferops-Target-Group"
HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer", "transfer-encoding", "upgrade"}
IDLE_TIMEOUT_S = 60  # ALB's default idle timeout for client connections


def forward_weights(actions: list[dict[str, Any]]) -> list[tuple[str, int]]:
    """[(target group ARN, weight)] of the first forward action (by Order); a plain TargetGroupArn weighs 1."""
    forwards = sorted((a for a in actions if a.get("Type") == "forward"), key=lambda a: a.get("Order", 0))
    if not forwards:
        return []
    action = forwards[0]
    groups = (action.get("ForwardConfig") or {}).get("TargetGroups")
    if groups:
        return [(g["TargetGroupArn"], int(g.get("Weight", 1))) for g in groups]
    return [(action["TargetGroupArn"], 1)] if action.get("TargetGroupArn") else []


def routable_targets(descriptions: list[dict[str, Any]], default_port: int | None) -> list[tuple[str, int]]:
    """[(ip, port)] from DescribeTargetHealth: the healthy ones; none healthy: every registered one not draining."""
    healthy = [d for d in descriptions if d["TargetHealth"]["State"] == "healthy"]
    chosen = healthy or [d for d in descriptions if d["TargetHealth"]["State"] not in ("draining", "unused")]
    return sorted((d["Target"]["Id"], int(d["Target"].get("Port") or default_port or 80)) for d in chosen)


class SmoothWeightedPicker:
    """nginx's smooth weighted round robin: each pick adds every weight to its group's score, takes the highest
    score and takes the total off it. Weights 1:9 give one pick in ten to the first, spread out, not bunched."""

    def __init__(self) -> None:
        self.weights: tuple[tuple[str, int], ...] = ()
        self.scores: dict[str, int] = {}

    def pick(self, weights: list[tuple[str, int]]) -> str | None:
        positive = tuple((arn, w) for arn, w in weights if w > 0)
        if positive != self.weights:  # new weights: start over, as an ALB applies a modified listener at once
            self.weights, self.scores = positive, {arn: 0 for arn, _w in positive}
        if not positive:
            return None
        for arn, weight in positive:
            self.scores[arn] += weight
        chosen = max(positive, key=lambda item: self.scores[item[0]])[0]
        self.scores[chosen] -= sum(w for _arn, w in positive)
        return chosen


@dataclass
class RouteConfig:
    weights: list[tuple[str, int]]
    targets: dict[str, list[tuple[str, int]]]  # routable targets of each group with weight > 0


class _Server(ThreadingHTTPServer):
    """Keeps the client sockets, so stop() can end keep-alive connections that would outlive the listener."""

    daemon_threads = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.clients: set[socket.socket] = set()
        self.clients_lock = threading.Lock()
        super().__init__(*args, **kwargs)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.clients_lock:
            self.clients.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.clients_lock:
            self.clients.discard(request)
        super().shutdown_request(request)

    def close_clients(self) -> None:
        with self.clients_lock:
            clients = list(self.clients)
        for client in clients:
            with contextlib.suppress(OSError):  # the client closed it meanwhile
                client.shutdown(socket.SHUT_RDWR)


class AlbRoute:
    """The forward action of one listener (`listener_arn`) or one listener rule (`rule_arn`), on 127.0.0.1:<free port>."""

    def __init__(
        self,
        moto: MotoServer,
        listener_arn: str | None = None,
        rule_arn: str | None = None,
        cache_s: float = 0.25,
        target_timeout_s: float = 60.0,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
        publish_metrics: bool = False,
        metrics_interval_s: float = 1.0,
        port: int = 0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        if (listener_arn is None) == (rule_arn is None):
            raise ValueError("AlbRoute: give exactly one of listener_arn (a listener's default action) or rule_arn (a rule's)")
        self.listener_arn, self.rule_arn = listener_arn, rule_arn
        self.cache_s = cache_s
        self.target_timeout_s = target_timeout_s
        self.elbv2 = moto.client("elbv2")
        self.cloudwatch = moto.client("cloudwatch") if publish_metrics else None
        self.metrics_interval_s = metrics_interval_s
        self._observed: dict[str, list[tuple[int, float]]] = {}  # target group -> [(status, seconds)] not published yet
        self._dimensions: dict[str, list[dict[str, str]]] = {}
        self._config: RouteConfig | None = None
        self._config_lock = threading.Lock()
        self._pick_lock = threading.Lock()
        self._picker = SmoothWeightedPicker()
        self._next_target: Counter[str] = Counter()
        self._ports: dict[str, int | None] = {}  # target group ARN -> its port (immutable on AWS)
        self._requests: Counter[str] = Counter()
        self._statuses: Counter[tuple[str, int]] = Counter()
        self.server = _Server(("127.0.0.1", port), self._handler(idle_timeout_s))
        self.scheme = "http"
        if ssl_context is not None:
            self.server.socket = ssl_context.wrap_socket(self.server.socket, server_side=True)
            self.scheme = "https"
        self.url = f"{self.scheme}://127.0.0.1:{self.server.server_address[1]}"
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self.refresh_errors = 0  # reads of moto that failed (the last good configuration kept routing)

    # -- lifecycle

    def start(self) -> AlbRoute:
        """Serve, and keep the configuration fresh in the background: a request never waits for moto (except the
        very first, when nothing was read yet), so the route adds no control-plane latency to what it measures."""
        if self._thread is None:
            self._stopping.clear()
            self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
            self._thread.start()
            threading.Thread(target=self._refresh_loop, daemon=True).start()
            if self.cloudwatch is not None:
                threading.Thread(target=self._publish_loop, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self.server.shutdown()
            self._thread = None
        self.server.server_close()
        self.server.close_clients()

    def __enter__(self) -> AlbRoute:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what it counted

    def counts(self) -> dict[str, int]:
        """Requests routed to each target group (whatever the answer)."""
        with self._pick_lock:
            return dict(self._requests)

    def statuses(self) -> dict[tuple[str, int], int]:
        """Answers by (target group ARN, HTTP status), 502/504 included."""
        with self._pick_lock:
            return dict(self._statuses)

    def reset_counts(self) -> None:
        with self._pick_lock:
            self._requests.clear()
            self._statuses.clear()

    # -- routing

    def config(self) -> RouteConfig:
        """The action's weights and targets as last read from moto (read now when nothing was read yet)."""
        config = self._config
        if config is None:
            with self._config_lock:
                if self._config is None:
                    self._config = self._read_config()
                config = self._config
        return config

    def refresh(self) -> RouteConfig:
        """Read the configuration from moto now; on failure keep the last good one (an ALB keeps routing when its
        control plane does not answer)."""
        with self._config_lock:
            try:
                self._config = self._read_config()
            except Exception:
                self.refresh_errors += 1
                if self._config is None:
                    raise
            return self._config

    def _refresh_loop(self) -> None:
        while not self._stopping.wait(self.cache_s):
            try:
                self.refresh()
            except Exception:
                continue  # nothing read yet: requests read it themselves and answer 503 with the reason

    # -- the ALB's CloudWatch metrics

    def observe(self, group: str, status: int, seconds: float) -> None:
        """A target's answer (not the route's own error), for the metrics."""
        if self.cloudwatch is not None:
            with self._pick_lock:
                self._observed.setdefault(group, []).append((status, seconds))

    def _group_dimensions(self, arn: str) -> list[dict[str, str]]:
        if arn not in self._dimensions:
            group = self.elbv2.describe_target_groups(TargetGroupArns=[arn])["TargetGroups"][0]
            balancer = (group.get("LoadBalancerArns") or [""])[0].split(":loadbalancer/")[-1]
            self._dimensions[arn] = [{"Name": "LoadBalancer", "Value": balancer}, {"Name": "TargetGroup", "Value": arn.split(":")[-1]}]
        return self._dimensions[arn]

    def publish(self) -> None:
        """Put what the targets answered since the last call into CloudWatch, per target group."""
        with self._pick_lock:
            observed, self._observed = self._observed, {}
        for arn, answers in observed.items():
            dims = self._group_dimensions(arn)
            errors = sum(1 for status, _s in answers if status >= 500)
            data = [
                {"MetricName": "RequestCount", "Dimensions": dims, "Value": float(len(answers)), "Unit": "Count"},
                {"MetricName": "HTTPCode_Target_5XX_Count", "Dimensions": dims, "Value": float(errors), "Unit": "Count"},
                {
                    "MetricName": "TargetResponseTime",
                    "Dimensions": dims,
                    "Values": [round(s, 6) for _st, s in answers][:150],
                    "Unit": "Seconds",
                },
            ]
            self.cloudwatch.put_metric_data(Namespace="AWS/ApplicationELB", MetricData=data)

    def _publish_loop(self) -> None:
        while not self._stopping.wait(self.metrics_interval_s):
            try:
                self.publish()
            except Exception:
                self.refresh_errors += 1  # moto did not answer: those figures are lost, as a missed ALB datapoint
        try:
            self.publish()
        except Exception:
            self.refresh_errors += 1

    def _actions(self) -> list[dict[str, Any]]:
        if self.listener_arn:
            return self.elbv2.describe_listeners(ListenerArns=[self.listener_arn])["Listeners"][0]["DefaultActions"]
        return self.elbv2.describe_rules(RuleArns=[self.rule_arn])["Rules"][0]["Actions"]

    def _group_port(self, arn: str) -> int | None:
        if arn not in self._ports:
            self._ports[arn] = self.elbv2.describe_target_groups(TargetGroupArns=[arn])["TargetGroups"][0].get("Port")
        return self._ports[arn]

    def _read_config(self) -> RouteConfig:
        weights = forward_weights(self._actions())
        targets = {}
        for arn, weight in weights:
            if weight > 0:
                health = self.elbv2.describe_target_health(TargetGroupArn=arn)["TargetHealthDescriptions"]
                targets[arn] = routable_targets(health, self._group_port(arn))
        return RouteConfig(weights, targets)

    def choose(self) -> tuple[str | None, tuple[str, int] | None, str]:
        """(target group, target, reason when there is none) for the next request; counts the request."""
        config = self.config()
        with self._pick_lock:
            group = self._picker.pick(config.weights)
            if group is None:
                return None, None, "the forward action has no target group with a weight above 0"
            self._requests[group] += 1
            targets = config.targets.get(group) or []
            if not targets:
                return group, None, f"target group {group} has no registered target"
            target = targets[self._next_target[group] % len(targets)]
            self._next_target[group] += 1
            return group, target, ""

    def record(self, group: str | None, status: int) -> None:
        if group:
            with self._pick_lock:
                self._statuses[(group, status)] += 1

    def _handler(self, idle_timeout_s: float) -> type[BaseHTTPRequestHandler]:
        route = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = idle_timeout_s
            # Headers and body leave in one segment: written apart, Nagle and the client's delayed ACK add ~40 ms.
            disable_nagle_algorithm = True
            wbufsize = 64 * 1024

            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self, status: int, headers: list[tuple[str, str]], body: bytes, group: str | None) -> None:
                self.send_response(status)
                for key, value in headers:
                    self.send_header(key, value)
                if group:
                    self.send_header(TARGET_GROUP_HEADER, group)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)
                route.record(group, status)

            def _error(self, status: int, reason: str, group: str | None) -> None:
                body = json.dumps({"error": reason}).encode()
                self._answer(status, [("Content-Type", "application/json")], body, group)

            def _body(self) -> bytes | None:
                if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                    chunks = []
                    while True:
                        size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass  # trailers
                            return b"".join(chunks)
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()
                length = self.headers.get("Content-Length")
                return self.rfile.read(int(length)) if length is not None else None

            def _forward(self) -> None:
                body = self._body()
                try:
                    group, target, reason = route.choose()
                except Exception as err:  # moto unreachable before the first read
                    self._error(503, f"the route's configuration could not be read: {err}", None)
                    return
                if target is None:
                    self._error(503, reason, group)
                    return
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP and k.lower() != "content-length"}
                forwarded_for = self.headers.get("X-Forwarded-For")
                headers["X-Forwarded-For"] = f"{forwarded_for}, {self.client_address[0]}" if forwarded_for else self.client_address[0]
                headers["X-Forwarded-Proto"] = route.scheme
                headers["X-Forwarded-Port"] = str(route.server.server_address[1])
                connection = http.client.HTTPConnection(target[0], target[1], timeout=route.target_timeout_s)
                started = time.monotonic()
                try:
                    connection.request(self.command, self.path, body=body, headers=headers)
                    response = connection.getresponse()
                    payload = response.read()
                    route.observe(group, response.status, time.monotonic() - started)
                    answer_headers = [(k, v) for k, v in response.getheaders() if k.lower() not in HOP_BY_HOP | {"content-length"}]
                except TimeoutError:
                    self._error(504, f"target {target[0]}:{target[1]} did not answer within {route.target_timeout_s:g} s", group)
                    return
                except (OSError, http.client.HTTPException) as err:
                    self._error(502, f"target {target[0]}:{target[1]}: {err.__class__.__name__}: {err}", group)
                    return
                finally:
                    connection.close()
                self._answer(response.status, answer_headers, payload, group)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = do_OPTIONS = _forward

        return Handler
