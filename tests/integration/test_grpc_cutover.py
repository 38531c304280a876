"""gRPC through the cutover: `tritonclient.grpc` clients on the production gRPC route while the bluegreen module cuts
over to green and back to blue, each colour a real tritonserver (HTTP and gRPC ports) registered in its HTTP and its
gRPC target group; the gates run over HTTP and gRPC on the test routes (the gRPC test route over TLS, as an ALB's
HTTPS listener, with a certificate naming the service: the gates check it against that name).

Stand-ins (tests/harness/README.md): moto for ECS, ELBv2 (target groups of protocol version GRPC behind HTTPS
listeners), CloudWatch; AlbRoute (HTTP) and GrpcRoute (gRPC, per call, by moto's weights: plaintext HTTP/2 on the
production route where the ALB speaks TLS, TLS on the test route) for the listeners. Two tritonservers: run this file
under `flock /tmp/inferops-heavy.lock`.
"""

from __future__ import annotations

from pathlib import Path

from ansible_collections.inferops.triton_ecs.plugins.module_utils._triton_client import TritonClient, sample_from
from tests.harness.alb import AlbRoute
from tests.harness.ansible import run_playbook
from tests.harness.bluegreen import CUTOVER_PLAYBOOK, create_app
from tests.harness.canary import MODEL, PacedClients
from tests.harness.example_account import self_signed_certificate
from tests.harness.grpc_route import GrpcRoute
from tests.harness.triton import TritonServer, write_model

SERVICE_HOST = "triton-grpc.example.test"


def test_grpc_clients_see_no_failure_through_a_cutover_and_back(moto_server, tmp_path: Path):
    app = create_app(moto_server, live_tasks=1, grpc=True)
    elbv2 = moto_server.client("elbv2")
    servers = {}
    for color in ("blue", "green"):
        stale = [t["Target"] for t in elbv2.describe_target_health(TargetGroupArn=app.target_groups[color])["TargetHealthDescriptions"]]
        if stale:
            elbv2.deregister_targets(TargetGroupArn=app.target_groups[color], Targets=stale)
        write_model(tmp_path / color, MODEL, offset=1.0)
        server = servers[color] = TritonServer(tmp_path / color, tmp_path, models=(MODEL,)).start()
        elbv2.register_targets(TargetGroupArn=app.target_groups[color], Targets=[{"Id": "127.0.0.1", "Port": server.http_port}])
        elbv2.register_targets(TargetGroupArn=app.grpc_target_groups[color], Targets=[{"Id": "127.0.0.1", "Port": server.grpc_port}])
    certificate, key = self_signed_certificate(SERVICE_HOST, tmp_path)
    try:
        with (
            AlbRoute(moto_server, listener_arn=app.test_listener_arn) as test,
            GrpcRoute(moto_server, app.grpc_listener_arn) as production,
            GrpcRoute(moto_server, app.grpc_test_listener_arn, tls=(certificate, key)) as grpc_test,
            PacedClients(grpc_url=production.url, rate=10.0) as clients,
        ):
            results = []
            for td in (app.task_definitions[1], app.task_definitions[2]):  # green with revision 2, then blue with 3
                args = app.module_args(
                    td,
                    desired_count=1,
                    test_route_url=test.url,
                    traffic_steps=[10, 50, 100],
                    bake_time_s=2,
                    old_color="keep",
                    gates={"timeout_s": 30, "interval_s": 1, "expected_models": [MODEL]},
                    grpc={
                        "target_groups": app.grpc_target_groups,
                        "listener_arn": app.grpc_listener_arn,
                        "test_listener_arn": app.grpc_test_listener_arn,
                        "test_route_url": grpc_test.url,  # 127.0.0.1:<port>, over TLS: the certificate names the service
                        "test_route_server_name": SERVICE_HOST,
                        "test_route_ca_file": str(certificate),
                    },
                )
                run = run_playbook(CUTOVER_PLAYBOOK, {"bg_args": args}, env=moto_server.env())
                assert run.rc == 0, run.stdout[-3000:]
                results.append(run.result("Cutover"))
        counts = production.counts()
        # What the drain reads (Triton's counters, _triton_client.sample_from): each server's counted every gRPC call
        # it answered (no HTTP inference was made), so the old colour's drain is not quiet while gRPC work goes on.
        completed = {c: sample_from(TritonClient(s.url).metrics(s.metrics_url)).completed for c, s in servers.items()}
    finally:
        for server in servers.values():
            server.stop()
    assert results[0]["weights"] == {"blue": 0, "green": 100} and results[1]["weights"] == {"blue": 100, "green": 0}
    assert "set gRPC weights blue=90 green=10" in results[0]["actions"]
    forward = elbv2.describe_listeners(ListenerArns=[app.grpc_listener_arn])["Listeners"][0]["DefaultActions"][0]["ForwardConfig"]
    assert {g["TargetGroupArn"]: g["Weight"] for g in forward["TargetGroups"]} == {
        app.grpc_target_groups["blue"]: 100,
        app.grpc_target_groups["green"]: 0,
    }
    assert counts.get(app.grpc_target_groups["green"], 0) > 0 and counts.get(app.grpc_target_groups["blue"], 0) > 0
    assert len(clients.answers) > 50 and clients.failed() == []
    assert completed == {c: counts.get(app.grpc_target_groups[c], 0) for c in ("blue", "green")}
