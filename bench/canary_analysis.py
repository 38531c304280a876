"""The cutover's relative canary verdict at low traffic, and gRPC through a cutover, on the rehearsal's routing.

Each colour is a real tritonserver (CPU) registered in its HTTP and gRPC target groups; clients send inferences on the
production route (AlbRoute for HTTP, GrpcRoute for gRPC) while `ansible-playbook` runs the bluegreen module with the
canary verdict on (traffic steps 50 -> 100, bake 10 s, the defaults: at least 50 standby requests before a verdict,
1 percentage point more errors than the live colour at most).

Prints, one per line as `name: value`:
- bad_canary_detected: 1 when a standby failing 3 % of its requests (every 33rd) at 2 requests/s in all is rolled
  back at the first step (50 %) while the absolute 5xx alarm stays OK (moto evaluates no alarm: the standby's 5xx
  stay under the 5 a minute of fleet_alarms' threshold); else 0;
- detect_seconds: from the first production request answered by the bad standby to the rollback's listener write;
- false_rollbacks: cutovers rolled back among 5 with a healthy standby (same settings, same 2 requests/s); target 0;
- grpc_failed_requests: `tritonclient.grpc` inferences that failed on the production gRPC route through a full
  cutover (10 -> 50 -> 100) and back; target 0;
- grpc_requests: gRPC inferences sent.

Stand-ins (tests/harness/README.md): a fresh moto server (ECS, ELBv2, CloudWatch, ACM); the ALB's target-group metrics
published into moto's CloudWatch by the route (every second, not per minute and a minute late as on AWS); the metrics
sidecar's Triton counters with their Color dimension (SidecarStandIn). Exits 1 only when it cannot measure.
Heavy (three tritonservers, about ten minutes): run it under `flock /tmp/inferops-heavy.lock`.
"""

from __future__ import annotations

import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(1, str(Path(__file__).resolve().parents[1] / ".build" / "collections"))

from tests.harness.alb import AlbRoute
from tests.harness.ansible import run_playbook
from tests.harness.bluegreen import ALARM, CUTOVER_PLAYBOOK, BlueGreenApp, create_app
from tests.harness.canary import MODEL, PacedClients, SidecarStandIn, canary_cutover_args
from tests.harness.figures import measure_in_tempdir
from tests.harness.grpc_route import GrpcRoute
from tests.harness.moto import MotoServer
from tests.harness.triton import TritonServer, write_model

RATE = 2.0  # requests per second, all colours together
HEALTHY_CUTOVERS = 5
CANARY = {"enabled": True, "max_wait_s": 300, "triton_dimensions": {"App": "triton"}}


def cutover(app: BlueGreenApp, task_definition: str, test_url: str, **overrides: Any) -> tuple[int, dict]:
    args = canary_cutover_args(app, task_definition, test_url, **{"canary": CANARY, "bake_time_s": 10, **overrides})
    run = run_playbook(CUTOVER_PLAYBOOK, {"bg_args": args}, env=app.moto.env())
    return run.rc, run.result("Cutover")


def measure(tmp: Path) -> dict[str, float] | None:
    moto = MotoServer(tmp).start()
    servers: dict[str, TritonServer] = {}
    try:
        app = create_app(moto, live_tasks=1, grpc=True)
        for name, fail_every in (("blue", 0), ("green", 0), ("bad", 33)):
            write_model(tmp / name, MODEL, offset=1.0, fail_every=fail_every)
            servers[name] = TritonServer(tmp / name, tmp, models=(MODEL,)).start()
        app.serve_only("blue", servers["blue"].http_port, servers["blue"].grpc_port)
        app.serve_only("green", servers["bad"].http_port, servers["bad"].grpc_port)
        moto.client("cloudwatch").set_alarm_state(AlarmName=ALARM, StateValue="OK", StateReason="no 5xx")
        metrics = {"blue": [servers["blue"].metrics_url], "green": [servers["bad"].metrics_url, servers["green"].metrics_url]}
        figures: dict[str, float] = {}
        with (
            AlbRoute(moto, listener_arn=app.listener_arn, publish_metrics=True) as production,
            AlbRoute(moto, listener_arn=app.test_listener_arn) as test,
            SidecarStandIn(moto, metrics, {"App": "triton"}),
        ):
            # 1. a standby failing 3 % of its requests at 2 requests/s
            with PacedClients(production.url, RATE) as clients:
                rc, result = cutover(app, app.task_definitions[1], test.url)
            bad_group = app.target_groups["green"]
            first = min((t for t, group, _s in clients.answers if group == bad_group), default=None)
            rollback = result.get("rollback") or {}
            detected = "canary verdict at 50%" in str(result.get("msg", ""))
            green_5xx = sum(1 for _t, group, status in clients.answers if group == bad_group and status != 200)
            minutes = max(result.get("wall_s", 60) / 60.0, 1.0)
            alarm_ok = (
                green_5xx / minutes < 5
                and moto.client("cloudwatch").describe_alarms(AlarmNames=[ALARM])["MetricAlarms"][0]["StateValue"] == "OK"
            )
            figures["bad_canary_detected"] = int(rc != 0 and detected and app.weights() == {"blue": 100, "green": 0} and alarm_ok)
            if first is None or not rollback.get("weights_restored_at"):
                print(f"cannot measure: no request reached the bad standby or no rollback ({result.get('msg')})", file=sys.stderr)
                return None
            restored = datetime.fromisoformat(rollback["weights_restored_at"]).timestamp()
            figures["detect_seconds"] = round(restored - (first + time.time() - time.monotonic()), 1)

            # 2. healthy standbys, alternating colours
            app.serve_only("green", servers["green"].http_port, servers["green"].grpc_port)
            false_rollbacks = 0
            with PacedClients(production.url, RATE):
                for i in range(HEALTHY_CUTOVERS):
                    rc, result = cutover(app, app.task_definitions[1 + i % 2], test.url)
                    false_rollbacks += int(rc != 0)
                    if rc != 0:
                        print(f"healthy cutover {i + 1} rolled back: {result.get('msg')}", file=sys.stderr)
            figures["false_rollbacks"] = false_rollbacks

        # 3. gRPC clients through a full cutover and back
        with (
            AlbRoute(moto, listener_arn=app.test_listener_arn) as test,
            GrpcRoute(moto, app.grpc_listener_arn) as grpc_production,
            GrpcRoute(moto, app.grpc_test_listener_arn) as grpc_test,
            PacedClients(grpc_url=grpc_production.url, rate=10.0) as grpc_clients,
        ):
            live = "blue" if app.weights()["blue"] == 100 else "green"
            order = (
                [app.task_definitions[2], app.task_definitions[1]]
                if live == "green"
                else [app.task_definitions[1], app.task_definitions[2]]
            )
            grpc = {
                "target_groups": app.grpc_target_groups,
                "listener_arn": app.grpc_listener_arn,
                "test_route_url": grpc_test.url,
                "test_route_tls": False,  # the stand-in's plaintext test route (tests/integration/test_grpc_cutover.py calls one over TLS)
            }
            grpc["test_listener_arn"] = app.grpc_test_listener_arn
            for task_definition in order:
                rc, result = cutover(app, task_definition, test.url, traffic_steps=[10, 50, 100], bake_time_s=2, canary={}, grpc=grpc)
                if rc != 0:
                    print(f"cannot measure: the gRPC cutover failed: {result.get('msg')}", file=sys.stderr)
                    return None
        figures["grpc_failed_requests"] = len(grpc_clients.failed())
        figures["grpc_requests"] = len(grpc_clients.answers)
        return figures
    finally:
        for server in servers.values():
            server.stop()
        moto.stop()


def main() -> int:
    return measure_in_tempdir(measure, prefix="canary-analysis-")


if __name__ == "__main__":
    raise SystemExit(main())
