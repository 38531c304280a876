"""A stand-in for an ALB listener forwarding gRPC: an HTTP/2 (gRPC) proxy on loopback that routes by moto's weights.

An ALB forwards gRPC per request (each call on a client's long-lived HTTP/2 connection may go to another target
group), to target groups of protocol version GRPC behind an HTTPS listener. `GrpcRoute(moto, listener_arn=...)` is
that data plane for one forward action: a grpcio server on 127.0.0.1:<free port> (`.url`, host:port) with one generic
handler for every method, forwarding each call's request bytes, as they are, to a target chosen per call, and its
answer (or its status code and details) back. Weights and targets come from moto the way `alb.AlbRoute` reads them
(ForwardConfig weights, DescribeTargetHealth; refreshed every `cache_s` in the background, smooth weighted round
robin per call, round robin over a group's targets; one channel kept per target). Triton's
`ModelStreamInfer` is forwarded as one stream to one target (an ALB routes a stream as one request); every other
method of `inference.GRPCInferenceService` is unary.

The HTTPS listener: with `tls=(certificate_path, key_path)` the route serves TLS with that certificate, as the
listener serves its ACM certificate (the gates then call it as they call an ALB); without, plaintext HTTP/2.

Not modelled: ALB health checks (a target is as healthy as moto
says), gRPC health-check matchers, deregistration delay (a deregistered target gets no new call from the next refresh
on), per-request metrics in CloudWatch (the HTTP route publishes them; the canary sees gRPC work through Triton's
counters), other streaming methods than Triton's.
"""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc

from .alb import RouteConfig, SmoothWeightedPicker, forward_weights, routable_targets
from .moto import MotoServer

STREAMING = ("/inference.GRPCInferenceService/ModelStreamInfer",)
_RESERVED = ("grpc-", ":")


class GrpcRoute:
    def __init__(
        self, moto: MotoServer, listener_arn: str, cache_s: float = 0.25, workers: int = 32, tls: tuple[Path, Path] | None = None
    ) -> None:
        self.listener_arn = listener_arn
        self.cache_s = cache_s
        self.elbv2 = moto.client("elbv2")
        self._config: RouteConfig | None = None
        self._lock = threading.Lock()
        self._picker = SmoothWeightedPicker()
        self._next_target: Counter[str] = Counter()
        self._channels: dict[tuple[str, int], grpc.Channel] = {}
        self._ports: dict[str, int | None] = {}
        self._requests: Counter[str] = Counter()
        self._failures: Counter[tuple[str, str]] = Counter()
        self._stopping = threading.Event()
        self.server = grpc.server(ThreadPoolExecutor(max_workers=workers), handlers=[_Forward(self)])
        if tls is None:
            self.port = self.server.add_insecure_port("127.0.0.1:0")
        else:
            certificate, key = (Path(p).read_bytes() for p in tls)
            self.port = self.server.add_secure_port("127.0.0.1:0", grpc.ssl_server_credentials([(key, certificate)]))
        self.url = f"127.0.0.1:{self.port}"

    def start(self) -> GrpcRoute:
        self.refresh()
        self.server.start()
        threading.Thread(target=self._refresh_loop, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self.server.stop(grace=2).wait(5)
        for channel in self._channels.values():
            channel.close()

    def __enter__(self) -> GrpcRoute:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def counts(self) -> dict[str, int]:
        """Calls routed to each target group."""
        with self._lock:
            return dict(self._requests)

    def failures(self) -> dict[tuple[str, str], int]:
        """Calls that ended with a status other than OK, by (target group, status code name)."""
        with self._lock:
            return dict(self._failures)

    # -- configuration, as AlbRoute reads it

    def refresh(self) -> None:
        actions = self.elbv2.describe_listeners(ListenerArns=[self.listener_arn])["Listeners"][0]["DefaultActions"]
        weights = forward_weights(actions)
        targets = {}
        for arn, weight in weights:
            if weight > 0:
                if arn not in self._ports:
                    self._ports[arn] = self.elbv2.describe_target_groups(TargetGroupArns=[arn])["TargetGroups"][0].get("Port")
                health = self.elbv2.describe_target_health(TargetGroupArn=arn)["TargetHealthDescriptions"]
                targets[arn] = routable_targets(health, self._ports[arn])
        self._config = RouteConfig(weights, targets)

    def _refresh_loop(self) -> None:
        while not self._stopping.wait(self.cache_s):
            try:
                self.refresh()
            except Exception:
                continue  # moto did not answer: the last configuration keeps routing, as an ALB's data plane does

    def choose(self) -> tuple[str | None, grpc.Channel | None, str]:
        config = self._config
        with self._lock:
            group = self._picker.pick(config.weights) if config else None
            if group is None:
                return None, None, "the forward action has no target group with a weight above 0"
            self._requests[group] += 1
            targets = config.targets.get(group) or []
            if not targets:
                return group, None, f"target group {group} has no registered target"
            target = targets[self._next_target[group] % len(targets)]
            self._next_target[group] += 1
            if target not in self._channels:
                self._channels[target] = grpc.insecure_channel(f"{target[0]}:{target[1]}")
            return group, self._channels[target], ""

    def failed(self, group: str | None, code: grpc.StatusCode) -> None:
        with self._lock:
            self._failures[(group or "", code.name)] += 1


def _metadata(context: grpc.ServicerContext) -> list[tuple[str, Any]]:
    return [(k, v) for k, v in context.invocation_metadata() if not k.startswith(_RESERVED) and k != "user-agent"]


class _Forward(grpc.GenericRpcHandler):
    """Every method: bytes in, bytes out, to the target chosen for the call."""

    def __init__(self, route: GrpcRoute) -> None:
        self.route = route

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        method = handler_call_details.method
        if method in STREAMING:
            return grpc.stream_stream_rpc_method_handler(lambda requests, context: self._stream(method, requests, context))
        return grpc.unary_unary_rpc_method_handler(lambda request, context: self._unary(method, request, context))

    def _target(self, context: grpc.ServicerContext) -> tuple[str | None, grpc.Channel]:
        """The call's target group and channel; with none to route to, the call ends UNAVAILABLE (as an ALB's 503)."""
        group, channel, reason = self.route.choose()
        if channel is None:
            self.route.failed(group, grpc.StatusCode.UNAVAILABLE)
            context.abort(grpc.StatusCode.UNAVAILABLE, reason)
        return group, channel

    def _relay(self, group: str | None, err: grpc.RpcError, context: grpc.ServicerContext) -> None:
        """The target's status and details, back to the client."""
        self.route.failed(group, err.code())
        context.abort(err.code(), err.details() or "")

    def _unary(self, method: str, request: bytes, context: grpc.ServicerContext) -> bytes:
        group, channel = self._target(context)
        try:
            return channel.unary_unary(method)(request, metadata=_metadata(context), timeout=context.time_remaining())
        except grpc.RpcError as err:
            self._relay(group, err, context)

    def _stream(self, method: str, requests: Any, context: grpc.ServicerContext) -> Any:
        group, channel = self._target(context)
        try:
            yield from channel.stream_stream(method)(requests, metadata=_metadata(context), timeout=context.time_remaining())
        except grpc.RpcError as err:
            self._relay(group, err, context)
