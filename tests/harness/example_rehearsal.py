"""The production-shaped rehearsal: inventories/example, filled for an account made in moto, deployed end to end.

`make rehearse-example`, tests/integration/test_example_deploy.py and bench/example_deploy.py run `Rehearsal.run()`:

1. a moto server (AWS managed policies loaded) with the account inventories/example documents as "created
   elsewhere" (tests/harness/example_account.py, from tests/fixtures/example_account.yml), a copy of the example with
   only its placeholders replaced, two levels below a stand-in checkout that holds the Packer manifest, and the
   example's `aws_profile` in an AWS config file that carries the moto endpoint (how a team points an inventory at an
   endpoint; no key in the inventory);
2. the runs, each `ansible-playbook` from the repository root, in getting_started's order: the preflight,
   `infrastructure.yml --check --diff`, `infrastructure.yml`, then one container instance joins the cluster, the
   first model release (`sync_models.yml`: a first deploy needs one), `deploy.yml --check --diff`, `deploy.yml`,
   `deploy.yml` again (changed=0), a second model release, `rollback_models.yml`, a second deploy whose new image
   keeps the old colour (the emergency rollback's instant path), and `rollback_traffic.yml`.

What every deploy adds on the command line, and why: `deploy_build_image: false` with `task_definition_image` (an
image built elsewhere: moto's ECR takes no pushes, and the NGC base cannot be pulled here; docs/dry_run.md) and the
cutover's times (`TIMING`: the example's 300 s bakes and 900 s termination wait shortened; what they gate is not).

Stand-ins (tests/harness/README.md): one container instance with the real model agent (`SimulatedInstance`: its ECS
introspection, task metadata v4 and IMDS stood in); `EcsStandIn`, the ECS scheduler moto does not have (each
service's desired tasks of its task definition as awsvpc task containers running the image's real entrypoint in view
mode, registered in the colour's target group once ready, deregistered and stopped when the service scales down);
the test listener's route as an HTTPS `AlbRoute` on its port, with the listener's certificate (trusted through
SSL_CERT_FILE); the service host is `localhost` (no DNS here). Not modelled: routing (NAT, VPC endpoints), IAM
evaluation, the ALB's rule conditions, Auto Scaling launching instances (the capacity phase counts the group's
headroom).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import ssl
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import yaml

from .alb import AlbRoute
from .ansible import COLLECTIONS_PATH, REPO_ROOT, PlaybookRun, ensure_collection_link, run_playbook
from .aws_calls import start_recording, writes
from .example_account import MOTO_ENV, Account, create_account, edits_beyond_placeholders, fill_example, profile_env, write_packer_manifest
from .moto import ACCOUNT_ID, MotoServer

# The simulated instance imports the collection's module_utils: from this checkout, as the playbooks load it.
ensure_collection_link()
if str(COLLECTIONS_PATH) not in sys.path:
    sys.path.insert(0, str(COLLECTIONS_PATH))
from .model_agent import SimulatedInstance  # noqa: E402
from .model_versions import make_version  # noqa: E402

# The cutover's times, shortened for the rehearsal (the example's bakes are 300 s a step, its termination wait 900 s).
TIMING = {
    "bluegreen_cutover_bake_time_s": 0,
    "bluegreen_cutover_watch_interval_s": 1,
    "bluegreen_cutover_termination_wait_s": 0,
    "bluegreen_cutover_timeouts": {"standby_up_s": 300, "poll_interval_s": 1},
    "bluegreen_cutover_drain": {"timeout_s": 10, "quiet_period_s": 0},
    "deploy_release_poll_s": 1,
    "deploy_release_timeout_s": 300,
}
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
VIEW_MODE = {"INFEROPS_MODEL_VIEW": "task-definition", "TRITON_EXTRA_ARGS": "--disable-auto-complete-config"}
# sync_models.yml's settings, from the example's own variables (nothing typed twice): the models file a team passes.
MODELS_FILE = """\
model_repository_bucket: "{{ fleet_iam_model_bucket }}"
model_repository_prefix: "{{ fleet_iam_model_prefix }}"
model_repository_application: "{{ fleet_services_app_name }}"
model_repository_cluster: "{{ fleet_cluster_name }}"
model_repository_canary_bake_s: 2
model_repository_rollout_poll_s: 1
model_repository_rollout_timeout_s: 180
"""


# What a check run plans in place of the real run's tasks it does not run. The collection's modules given an input
# known only after apply report their change themselves (same task); the rest: a real task (or every task of a role,
# by its prefix) -> (the check run's task that plans it, what its message must say).
CUTOVER_PLAN = "The cutover a real run would make (check mode; the fleet is created first)"
PLANNED_BY = {
    "inferops.triton_ecs.fleet_capacity : Auto Scaling group (desired capacity left to managed scaling)": (
        "inferops.triton_ecs.fleet_capacity : Auto Scaling group changes a real run would make (check mode)",
        "would create Auto Scaling group",
    ),
    "The release's models on every instance before its colour starts": (CUTOVER_PLAN, "standby.json"),
    "inferops.triton_ecs.bluegreen_cutover : ": (CUTOVER_PLAN, "cutover's phases"),
    "Production serves the release": (CUTOVER_PLAN, "promote the release"),
    "inferops.triton_ecs.fleet_autoscaling : ": (CUTOVER_PLAN, "Application Auto Scaling"),
    "Release ledger | record the deploy": (CUTOVER_PLAN, "release ledger"),
}


def planned(task: str, check: PlaybookRun) -> bool:
    """Whether the check run names a task its real run changed: it changed the same task, or the task that plans it
    (PLANNED_BY) changed with a message that says so."""
    if task in check.changed_tasks:
        return True
    for prefix, (planner, says) in PLANNED_BY.items():
        if task.startswith(prefix) and planner in check.changed_tasks:
            return any(says in str(result.get("msg", "")) for result in check.results(planner))
    return False


def push_images(ecr: Any, repository: str, region: str) -> list[str]:
    """The first release's image and a second one, as a team's CI pushes them to the account's ECR repository: image
    indexes with a linux/amd64 entry (the example's fleet is x86_64), which deploy.yml's image_platforms check reads
    from ECR as on AWS. Their layers are not pushed: the ECS scheduler stand-in runs the rehearsal's local image."""
    images = []
    for build in ("1", "2"):
        platform_manifest = {
            "mediaType": OCI_MANIFEST,
            "digest": "sha256:" + hashlib.sha256(f"triton build {build}".encode()).hexdigest(),
            "size": 1024,
            "platform": {"architecture": "amd64", "os": "linux"},
        }
        index = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [platform_manifest]})
        pushed = ecr.put_image(repositoryName=repository, imageManifest=index, imageManifestMediaType=OCI_INDEX, imageTag=f"build-{build}")
        images.append(f"{ACCOUNT_ID}.dkr.ecr.{region}.amazonaws.com/{repository}@{pushed['image']['imageId']['imageDigest']}")
    return images


class RegionalMoto:
    """A moto server seen from one region (the example's), for the harness's clients and the agent's environment."""

    def __init__(self, server: MotoServer, region: str) -> None:
        self.server, self.region, self.endpoint = server, region, server.endpoint

    def client(self, service: str):
        return boto3.client(
            service, region_name=self.region, endpoint_url=self.endpoint, aws_access_key_id="testing", aws_secret_access_key="testing"
        )

    def env(self) -> dict[str, str]:
        return {**self.server.env(), "AWS_DEFAULT_REGION": self.region, "AWS_REGION": self.region}


class EcsStandIn:
    """The ECS scheduler moto lacks: each colour service's desired count of tasks of its task definition, as awsvpc task
    containers on the simulated instance, registered in the colour's target group once Triton is ready (as ECS does
    after the health checks), deregistered then stopped (the entrypoint's drain) when the service scales down or moves
    to another revision."""

    def __init__(self, moto: RegionalMoto, cluster: str, app: str, instance: SimulatedInstance, target_groups: dict[str, str]) -> None:
        self.ecs, self.elbv2 = moto.client("ecs"), moto.client("elbv2")
        self.cluster, self.app, self.instance, self.target_groups = cluster, app, instance, target_groups
        self.tasks: dict[str, list[tuple[Any, str]]] = {"blue": [], "green": []}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._paused = threading.Event()
        self._idle = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> EcsStandIn:
        self._thread.start()
        return self

    def pause(self) -> None:
        """Hold still (a check run's AWS calls are then the only ones moto records)."""
        self._paused.set()
        self._idle.wait(600)

    def resume(self) -> None:
        self._paused.clear()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(600)
        for color in self.tasks:
            self._scale(color, 0, "")

    def _loop(self) -> None:
        while not self._stop.wait(0.5):
            if self._paused.is_set():
                self._idle.set()
                continue
            self._idle.clear()
            try:
                self.reconcile()
            except Exception as err:  # recorded for the test's report; the loop keeps serving
                self.errors.append(f"{type(err).__name__}: {err}")
        self._idle.set()

    def reconcile(self) -> None:
        names = [f"{self.app}-{color}" for color in self.tasks]
        for service in self.ecs.describe_services(cluster=self.cluster, services=names)["services"]:
            if service.get("status") != "ACTIVE":
                continue
            color = service["serviceName"].rsplit("-", 1)[1]
            self._scale(color, int(service["desiredCount"]), service["taskDefinition"])

    def _scale(self, color: str, want: int, task_definition: str) -> None:
        running = self.tasks[color]
        for task, revision in [t for t in running if t[1] != task_definition]:
            self._stop_task(color, task)
            running.remove((task, revision))
        while len(running) > want:
            self._stop_task(color, running.pop()[0])
        while len(running) < want:
            family, revision = task_definition.rsplit("/", 1)[1].split(":")
            task = self.instance.add_awsvpc_task(family, revision, env=VIEW_MODE, timeout_s=240)
            self.elbv2.register_targets(TargetGroupArn=self.target_groups[color], Targets=[{"Id": task.ip, "Port": 8000}])
            running.append((task, task_definition))

    def _stop_task(self, color: str, task: Any) -> None:
        self.elbv2.deregister_targets(TargetGroupArn=self.target_groups[color], Targets=[{"Id": task.ip, "Port": 8000}])
        task.stop(timeout_s=60)
        task.remove()


@dataclass
class Run:
    name: str
    run: PlaybookRun
    seconds: float
    writes: list[str] | None = None  # AWS writes a check run made (recorded), None for real runs

    @property
    def ok(self) -> bool:
        return self.run.rc == 0

    @property
    def changed(self) -> list[str]:
        return self.run.changed_tasks


@dataclass
class Rehearsal:
    workdir: Path
    runs: list[Run] = field(default_factory=list)
    edits: list[str] = field(default_factory=list)
    stand_in_errors: list[str] = field(default_factory=list)
    test_route_requests: int = 0  # requests the cutovers' gates sent through the test listener's HTTPS route
    seconds: float = 0.0

    # -- the figures the issue names

    def failed_runs(self) -> list[str]:
        return [r.name for r in self.runs if not r.ok]

    def noop_changed(self) -> list[str]:
        return next((r.changed for r in self.runs if r.name == "deploy.yml (again)"), ["(not run)"])

    def unpredicted(self) -> dict[str, list[str]]:
        """Per real run, the tasks it changed that its check run did not name (and the check runs' own writes)."""
        found: dict[str, list[str]] = {}
        by_name = {r.name: r for r in self.runs}
        for check, real in (("infrastructure.yml --check --diff", "infrastructure.yml"), ("deploy.yml --check --diff", "deploy.yml")):
            if check not in by_name or real not in by_name:
                found[real] = ["(not run)"]
                continue
            missed = [t for t in by_name[real].changed if not planned(t, by_name[check].run)]
            written = [f"check run wrote {w}" for w in by_name[check].writes or []]
            if missed or written:
                found[real] = missed + written
        return found

    def figures(self) -> dict[str, Any]:
        return {
            "example_failed_runs": len(self.failed_runs()),
            "example_noop_changed": len(self.noop_changed()),
            "example_check_predicted": int(not self.unpredicted()),
            "example_edits_beyond_placeholders": len(self.edits),
            "example_seconds": round(self.seconds, 1),
        }

    def result(self, run: str, task: str) -> dict[str, Any]:
        return next(r for r in self.runs if r.name == run).run.result(task)

    def report(self) -> str:
        lines = [f"{r.name}: rc={r.run.rc} changed={len(r.changed)} {r.seconds:.0f} s" for r in self.runs]
        for r in self.runs:
            if not r.ok:
                failures = [
                    f"{task['name']}: {host.get('msg', '')}"
                    for task in r.run.tasks
                    for host in task["hosts"].values()
                    if host.get("failed") and not host.get("ignore_errors")
                ]
                lines.append(f"--- {r.name} failed:\n" + "\n".join(failures or [r.run.stderr[-3000:]]))
        return "\n".join([*lines, f"unpredicted: {self.unpredicted()}", f"edits: {self.edits}", f"stand-in: {self.stand_in_errors}"])

    # -- the rehearsal

    def run(self) -> Rehearsal:
        started = time.monotonic()
        server = MotoServer(self.workdir, env=MOTO_ENV).start()
        instance = scheduler = test_route = None
        try:
            account = create_account(server, self.workdir)
            moto = RegionalMoto(server, account.region)
            checkout = self.workdir / "checkout"
            inventory = fill_example(checkout / "inventories" / "acme", account)
            write_packer_manifest(checkout / "packer" / "manifest.json", account)
            self.edits = edits_beyond_placeholders(inventory, account)
            env = profile_env(self.workdir, server, account)
            models_file = self.workdir / "models.yml"
            models_file.write_text(MODELS_FILE)
            images = push_images(moto.client("ecr"), account.ids["repository"].rsplit("/", 1)[-1], account.region)
            deploy_vars = {"deploy_build_image": False, "task_definition_image": images[0], **TIMING}

            def play(name: str, playbook: str, extra: dict | None = None, check: bool = False, args: tuple[str, ...] = ()) -> bool:
                if check:
                    start_recording(server)
                t0 = time.monotonic()
                result = run_playbook(
                    REPO_ROOT / playbook,
                    extra_vars=extra,
                    inventory=str(inventory),
                    check=check,
                    diff=check,
                    env=env,
                    args=args,
                    timeout_s=1200,
                )
                self.runs.append(Run(name, result, time.monotonic() - t0, writes(server) if check else None))
                return result.rc == 0

            if not (
                play("preflight", "playbooks/preflight.yml")
                and play("infrastructure.yml --check --diff", "playbooks/infrastructure.yml", check=True)
                and play("infrastructure.yml", "playbooks/infrastructure.yml")
            ):
                return self
            instance, scheduler, test_route = self._fleet(moto, account)
            source = self.workdir / "source"
            if not self._release(play, models_file, source, 1, "model release (first)"):
                return self
            scheduler.pause()
            instance.agent.send_signal(signal.SIGSTOP)
            try:
                checked = play("deploy.yml --check --diff", "deploy.yml", deploy_vars, check=True)
            finally:
                instance.agent.send_signal(signal.SIGCONT)
                scheduler.resume()
            if not (checked and play("deploy.yml", "deploy.yml", deploy_vars) and play("deploy.yml (again)", "deploy.yml", deploy_vars)):
                return self
            if not (
                self._release(play, models_file, source, 2, "model release (second)")
                and play("rollback_models.yml", "playbooks/rollback_models.yml", args=("-e", f"@{models_file}"))
            ):
                return self
            second = {**deploy_vars, "task_definition_image": images[1], "bluegreen_cutover_old_color": "keep"}
            if play("deploy.yml (second image, old colour kept)", "deploy.yml", second):
                play("rollback_traffic.yml", "playbooks/rollback_traffic.yml", {"rollback_cutover_new_color": "keep"})
            return self
        finally:
            if scheduler is not None:
                scheduler.stop()
                self.stand_in_errors = scheduler.errors
            if test_route is not None:
                self.test_route_requests = sum(test_route.counts().values())
                test_route.stop()
            if instance is not None:
                instance.stop()
            server.stop()
            self.seconds = time.monotonic() - started

    def _fleet(self, moto: RegionalMoto, account: Account) -> tuple[SimulatedInstance, EcsStandIn, AlbRoute]:
        """One container instance in the example's cluster, the ECS stand-in, and the test listener's HTTPS route."""
        settings = yaml.safe_load((REPO_ROOT / "inventories" / "example" / "group_vars" / "all" / "fleet.yml").read_text())
        cluster, app = settings["fleet_cluster_name"], settings["fleet_services_app_name"]
        ec2, ecs, elbv2 = moto.client("ec2"), moto.client("ecs"), moto.client("elbv2")
        instance_id = ec2.run_instances(
            ImageId=account.ids["ami"],
            MinCount=1,
            MaxCount=1,
            InstanceType=settings["fleet_capacity_instance_type"],
            SubnetId=account.ids["subnets"][0],
            SecurityGroupIds=[account.ids["security_groups"]["instances"]],
        )["Instances"][0]["InstanceId"]
        ecs.register_container_instance(
            cluster=cluster, instanceIdentityDocument=json.dumps({"instanceId": instance_id, "region": account.region})
        )
        instance = SimulatedInstance(
            self.workdir / instance_id,
            moto,  # type: ignore[arg-type]
            account.ids["bucket"],
            settings["fleet_iam_model_prefix"],
            app,
            instance_id,
            cluster=cluster,
            region=account.region,
        )
        instance.start_agent()
        groups = {
            tg["TargetGroupName"].rsplit("-", 1)[1]: tg["TargetGroupArn"]
            for tg in elbv2.describe_target_groups()["TargetGroups"]
            if tg["TargetGroupName"] in (f"{app}-blue", f"{app}-green")
        }
        scheduler = EcsStandIn(moto, cluster, app, instance, groups).start()
        test_port = settings["fleet_load_balancing_test"]["port"]
        listener = next(li for li in elbv2.describe_listeners(LoadBalancerArn=account.ids["alb"])["Listeners"] if li["Port"] == test_port)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(str(account.certificate_path), str(account.key_path))
        route = AlbRoute(moto, listener_arn=listener["ListenerArn"], port=test_port, ssl_context=context).start()  # type: ignore[arg-type]
        return instance, scheduler, route

    def _release(self, play: Any, models_file: Path, source: Path, version: int, name: str) -> bool:
        """sync_models.yml: publish version N of the example's model and release it through the instances' agents."""
        model = "resnet50"  # the example's task_definition_triton.models; a stand-in model of that name
        version_dir, config = make_version(source, model, version)
        extra = {
            "model_repository_models": [{"name": model, "version": version}],
            "model_repository_publish": [{"model": model, "version": version, "source": str(version_dir), "config": str(config)}],
        }
        return play(name, "playbooks/sync_models.yml", extra, args=("-e", f"@{models_file}"))


def main() -> int:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="example-rehearsal-") as tmp:
        rehearsal = Rehearsal(Path(tmp)).run()
        print(rehearsal.report())
        for name, value in rehearsal.figures().items():
            print(f"{name}: {value}")
    return 0 if not rehearsal.failed_runs() else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
