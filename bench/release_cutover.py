"""One release per colour through a cutover and an emergency rollback, with clients on the production route.

A release whose new model version answers differently (version N answers OUTPUT0 = INPUT0 + N) goes through the
blue/green cutover the way deploy.yml moves it (model_release standby, the wait for the instance, the cutover with
gates on exactly its versions, standby_promoted), then `ansible-playbook playbooks/rollback_traffic.yml` puts
production back. Clients send requests on the production route throughout.

Prints, one per line as `name: value`:
- live_requests_on_unreleased_models: answers of the new release's model version (2) that came from the live colour's
  target group (blue), or before the cutover gave the new colour any weight; target 0;
- rollback_model_versions_restored: 1 when every answer from the end of the emergency rollback on comes from the
  previous release's model version (1), else 0;
- failed_requests: requests that failed on the production route, through the release, the cutover and the rollback;
  target 0;
- emergency_rollback_seconds: wall time of `ansible-playbook playbooks/rollback_traffic.yml` (Ansible start-up, the
  listener write and the release records included); target <= 10;
- requests: requests sent on the production route.

Stand-ins (tests/harness/README.md): a fresh moto server for ECS, ELBv2, EC2, CloudWatch and S3; one container instance
with the real model agent (its ECS introspection API, task metadata endpoint v4 and IMDSv2 stood in); each colour's
task an awsvpc task container at its own address running the image's real entrypoint in view mode over a real
tritonserver (CPU); the ALB's production and test listeners stood in by routes that follow moto's weights and
registered targets (AlbRoute). Targets are registered as ECS would once each task is ready. Exits 1 only when it
cannot measure.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(1, str(Path(__file__).resolve().parents[1] / ".build" / "collections"))

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.module import retrying_client
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models import rollout
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.publish import publish_version
from ansible_collections.inferops.triton_ecs.plugins.module_utils._triton_client import TritonClient
from tests.harness.alb import AlbRoute
from tests.harness.ansible import REPO_ROOT, run_playbook
from tests.harness.bluegreen import ALARM, APP, CLUSTER, CUTOVER_PLAYBOOK, create_app
from tests.harness.clients import ClientThreads
from tests.harness.figures import measure_in_tempdir
from tests.harness.model_agent import SimulatedInstance
from tests.harness.model_versions import make_version
from tests.harness.moto import REGION, MotoServer

BUCKET = "release-bench"
PREFIX = "models"
MODEL = "m"
CLIENTS = 4
VIEW_MODE = {"INFEROPS_MODEL_VIEW": "task-definition", "TRITON_EXTRA_ARGS": "--disable-auto-complete-config"}


class Clients(ClientThreads):
    """Threads sending inferences on the production route; each answer with its time, target group and version."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.answers: list[tuple[float, str, float]] = []
        self.failed: list[str] = []
        super().__init__([()] * CLIENTS)

    def _run(self) -> None:
        client = TritonClient(self.url, timeout_s=30)
        body = {"inputs": [{"name": "INPUT0", "shape": [1], "datatype": "FP32", "data": [10.0]}]}
        while not self.stop_event.is_set():
            try:
                status, raw, group = post(client, f"/v2/models/{MODEL}/infer", body)
                if status != 200:
                    self.failed.append(f"{status}: {raw[:200]!r}")
                    continue
                self.answers.append((time.monotonic(), group, json.loads(raw)["outputs"][0]["data"][0] - 10.0))
            except Exception as err:  # any client-side failure is a failed request
                self.failed.append(f"{type(err).__name__}: {err}")


def post(client: TritonClient, path: str, body: dict) -> tuple[int, bytes, str]:
    """A POST through the route, with the target group it used (X-Inferops-Target-Group)."""
    import urllib.request

    request = urllib.request.Request(client.url + path, data=json.dumps(body).encode(), method="POST")
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, resp.read(), resp.headers.get("X-Inferops-Target-Group", "")
    except urllib.error.HTTPError as err:
        return err.code, err.read(), err.headers.get("X-Inferops-Target-Group", "")


def controller(moto: MotoServer, state: str, **params: Any) -> dict[str, Any]:
    """One model_release run in-process (the module's own code)."""
    full = {
        "state": state,
        "bucket": BUCKET,
        "prefix": PREFIX,
        "application": APP,
        "models": None,
        "release_id": None,
        "cluster": CLUSTER,
        "instances": [],
        "timeout_s": 120,
        "poll_interval_s": 0.5,
        "bake_s": 0,
        "inference_failures_before": None,
        **params,
    }
    s3, ecs = (retrying_client(moto.client(service)) for service in ("s3", "ecs"))
    return rollout.run(s3, ecs, full, False, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))


def release(moto: MotoServer, version: int, task_definition: str, image: str) -> dict[str, Any]:
    """What deploy.yml does before its cutover: standby.json, then the wait for the instance to hold it."""
    written = controller(moto, "standby", models=[{"name": MODEL, "version": version}], image=image, task_definition=task_definition)
    controller(moto, "converged", release="standby")
    return written


def start_colour(node: SimulatedInstance, moto: MotoServer, target_group: str, revision: int) -> Any:
    """A task of triton:<revision> in view mode, registered in the colour's target group once ready (as ECS does)."""
    task = node.add_awsvpc_task(APP, revision, env=VIEW_MODE)
    moto.client("elbv2").register_targets(TargetGroupArn=target_group, Targets=[{"Id": task.ip, "Port": 8000}])
    return task


def measure(tmp: Path) -> dict[str, float] | None:
    moto = MotoServer(tmp).start()
    node = None
    try:
        app = create_app(moto, live_tasks=1)
        elbv2, s3 = moto.client("elbv2"), moto.client("s3")
        for color in ("blue", "green"):  # create_app's stand-in targets: real tasks are registered below
            stale = [t["Target"] for t in elbv2.describe_target_health(TargetGroupArn=app.target_groups[color])["TargetHealthDescriptions"]]
            if stale:
                elbv2.deregister_targets(TargetGroupArn=app.target_groups[color], Targets=stale)
        s3.create_bucket(Bucket=BUCKET)
        for version in (1, 2):
            version_dir, config = make_version(tmp / "source", MODEL, version)
            publish_version(retrying_client(s3), BUCKET, PREFIX, MODEL, version, str(version_dir), str(config))
        ec2, ecs = moto.client("ec2"), moto.client("ecs")
        image_id = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
        instance_id = ec2.run_instances(ImageId=image_id, MinCount=1, MaxCount=1, InstanceType="g5.xlarge")["Instances"][0]["InstanceId"]
        ecs.register_container_instance(cluster=CLUSTER, instanceIdentityDocument=json.dumps({"instanceId": instance_id, "region": REGION}))
        node = SimulatedInstance(tmp / instance_id, moto, BUCKET, PREFIX, APP, instance_id, cluster=CLUSTER)
        blue_td, green_td = app.task_definitions[0], app.task_definitions[1]

        # Release 1 is live on blue (its records written as a finished deploy leaves them).
        controller(moto, "standby", models=[{"name": MODEL, "version": 1}], image="registry.local/triton:r1", task_definition=blue_td)
        controller(moto, "standby_promoted")
        node.start_agent()
        start_colour(node, moto, app.target_groups["blue"], 1)
        with AlbRoute(moto, listener_arn=app.listener_arn) as production, AlbRoute(moto, listener_arn=app.test_listener_arn) as test:
            with Clients(production.url) as clients:
                time.sleep(2)
                # Release 2 (model version 2) through blue/green, as deploy.yml moves it.
                release(moto, 2, green_td, "registry.local/triton:r2")
                start_colour(node, moto, app.target_groups["green"], 2)
                args = app.module_args(
                    green_td,
                    desired_count=1,
                    test_route_url=test.url,
                    traffic_steps=[10, 50, 100],
                    bake_time_s=2,
                    alarm_names=[ALARM],
                    old_color="keep",
                    gates={"timeout_s": 60, "interval_s": 1, "expected_versions": {MODEL: 2}},
                    timeouts={"standby_up_s": 60, "poll_interval_s": 1},
                )
                cutover = run_playbook(CUTOVER_PLAYBOOK, {"bg_args": args}, env=moto.env())
                if cutover.rc != 0:
                    print(f"cannot measure: the cutover failed\n{cutover.stdout[-3000:]}{cutover.stderr[-2000:]}", file=sys.stderr)
                    return None
                controller(moto, "standby_promoted")
                time.sleep(2)
                # The emergency rollback, as an operator runs it.
                extra = {
                    "aws_endpoint_url": moto.endpoint,
                    "rollback_cutover_cluster": CLUSTER,
                    "rollback_cutover_name": APP,
                    "rollback_cutover_new_color": "keep",
                    "rollback_cutover_release_bucket": BUCKET,
                    "rollback_cutover_release_prefix": PREFIX,
                }
                started = time.monotonic()
                rolled = run_playbook(
                    REPO_ROOT / "playbooks" / "rollback_traffic.yml", extra, inventory=str(REPO_ROOT / "inventories" / "local")
                )
                rollback_seconds = time.monotonic() - started
                if rolled.rc != 0:
                    print(f"cannot measure: the emergency rollback failed\n{rolled.stdout[-3000:]}{rolled.stderr[-2000:]}", file=sys.stderr)
                    return None
                rolled_back_at = time.monotonic() + production.cache_s  # the route follows the listener within cache_s
                time.sleep(3)
            first_green = min((t for t, group, _v in clients.answers if group == app.target_groups["green"]), default=None)
            unreleased = [
                (t, group)
                for t, group, version in clients.answers
                if version == 2.0 and (group == app.target_groups["blue"] or first_green is None or t < first_green)
            ]
            after = [version for t, _group, version in clients.answers if t > rolled_back_at]
            records = controller(moto, "standby_absent")["records"]
            if records["current"]["task_definition"] != blue_td:
                print(f"cannot measure: the release records did not follow production back: {records['current']}", file=sys.stderr)
                return None
            return {
                "live_requests_on_unreleased_models": len(unreleased),
                "rollback_model_versions_restored": int(bool(after) and set(after) == {1.0}),
                "failed_requests": len(clients.failed),
                "emergency_rollback_seconds": round(rollback_seconds, 3),
                "requests": len(clients.answers) + len(clients.failed),
            }
    finally:
        if node is not None:
            node.stop()
        moto.stop()


def main() -> int:
    return measure_in_tempdir(measure, prefix="release-cutover-")


if __name__ == "__main__":
    raise SystemExit(main())
