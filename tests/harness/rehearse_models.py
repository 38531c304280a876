"""The local rehearsal of a model release and a model rollback: `make rehearse-models`.

On inventories/local's AWS API (the moto server on 127.0.0.1:5100 that scripts/services.sh starts), with the names
the inventory gives (group_vars/all/models.yml: bucket, prefix, application, cluster, model), it

1. creates the stand-ins a real account would already have: the model bucket (when missing) and two simulated
   container instances registered in the cluster (tests/harness/fleet.py), each running the real model agent and a
   real tritonserver task, all reaching the moto server through the S3-shaped proxy (tests/harness/s3_proxy.py: S3's
   single-PUT limit and per-connection cap, scaled down), as do the playbooks;
2. runs `ansible-playbook playbooks/sync_models.yml -i inventories/local` for the inventory's version of the model,
   then for the next version, then `playbooks/rollback_models.yml`, streaming their output, and after each step asks
   every instance's tritonserver which version answers (versions answer OUTPUT0 = INPUT0 + <version>);
3. always removes what it added to the moto server that the deploy rehearsal could see (its container instances
   deregistered, its EC2 instances terminated) and stops its agents and tritonservers, also on a failure, Ctrl-C or
   SIGTERM. The bucket and its objects stay: release ids derive from the models, so a second rehearsal finds
   version 1 already current, promotes version 2 and rolls back again.

Exit status 0 when every step served what it should, 1 with the reason otherwise. Agent journals and tritonserver
logs stay under the work directory (.cache/rehearse-models) until the next rehearsal.

The moto server on 127.0.0.1:5100 is shared: hold /tmp/inferops-local.lock while using it (the make target does).
`--endpoint-url` points the rehearsal (stand-ins and playbooks) at another moto server, as its integration test does.

    python -m tests.harness.rehearse_models [--endpoint-url http://127.0.0.1:PORT] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .ansible import COLLECTIONS_PATH, REPO_ROOT, ensure_collection_link, playbook_env
from .moto import REGION, MotoServer

# The simulated fleet imports the collection's module_utils: from this checkout, as the playbooks load it.
ensure_collection_link()
sys.path.insert(0, str(COLLECTIONS_PATH))
from .fleet import SimulatedFleet  # noqa: E402

INVENTORY = Path("inventories") / "local"
SYNC = Path("playbooks") / "sync_models.yml"
ROLLBACK = Path("playbooks") / "rollback_models.yml"
FLEET_SIZE = 2
WORKDIR = REPO_ROOT / ".cache" / "rehearse-models"
# What the rehearsal reads from the inventory, templated by Ansible itself (models.yml derives them from fleet.yml).
SETTINGS = {
    "bucket": "model_repository_bucket",
    "prefix": "model_repository_prefix",
    "application": "model_repository_application",
    "cluster": "model_repository_cluster",
    "models": "model_repository_models",
    "region": "aws_region",
    "endpoint_url": "aws_endpoint_url",
}


class RehearsalError(Exception):
    """A step that failed; the message says which and why."""


@dataclass
class Step:
    name: str
    release_id: str
    serving: dict[str, int]

    def line(self) -> str:
        served = ", ".join(f"{instance} serves {version}" for instance, version in self.serving.items())
        return f"{self.name}: release {self.release_id}; {served}"


def inventory_settings() -> dict[str, Any]:
    """The inventory's model release settings, as the playbooks see them."""
    expression = "{{ {" + ", ".join(f"'{key}': {var} | default(none)" for key, var in SETTINGS.items()) + "} }}"
    ansible = Path(sys.executable).with_name("ansible")
    env = dict(playbook_env(), ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="json")
    command = [str(ansible), "localhost", "-i", str(INVENTORY), "-m", "ansible.builtin.debug", "-a", f"msg={expression}"]
    proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO_ROOT, check=False)
    try:
        settings = json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]["msg"]
    except (json.JSONDecodeError, KeyError, IndexError, TypeError) as err:
        raise RehearsalError(f"could not read the settings of {INVENTORY}: {proc.stderr[-2000:] or proc.stdout[-2000:]}") from err
    missing = [SETTINGS[key] for key, value in settings.items() if value in (None, "", [])]
    if missing:
        raise RehearsalError(f"{INVENTORY} sets no {', '.join(missing)}: see {INVENTORY}/group_vars/all/models.yml")
    return settings


def first_release(settings: dict[str, Any]) -> tuple[str, int]:
    """(model, version) of the inventory's release: one model, pinned, so the next version is known."""
    models = settings["models"]
    if not isinstance(models, list) or len(models) != 1 or not isinstance(models[0], dict) or not str(models[0].get("version")).isdigit():
        raise RehearsalError(
            f"model_repository_models={models!r} in {INVENTORY}: the rehearsal needs one model with a pinned version, "
            "e.g. [{name: add_version, version: 1}] (it then releases version + 1 and rolls back)"
        )
    return models[0]["name"], int(models[0]["version"])


def footprint(moto: MotoServer, cluster: str) -> tuple[set[str], set[str]]:
    """(container instance ARNs of the cluster, EC2 instance ids not terminated): what cleanup compares against."""
    ecs, ec2 = moto.client("ecs"), moto.client("ec2")
    arns = set(ecs.get_paginator("list_container_instances").paginate(cluster=cluster).build_full_result()["containerInstanceArns"])
    reservations = ec2.get_paginator("describe_instances").paginate().build_full_result()["Reservations"]
    ids = {i["InstanceId"] for r in reservations for i in r["Instances"] if i["State"]["Name"] not in ("shutting-down", "terminated")}
    return arns, ids


def remove_added(moto: MotoServer, cluster: str, before: tuple[set[str], set[str]]) -> list[str]:
    """Deregisters the container instances and terminates the EC2 instances added since `before`; returns what it removed."""
    arns, ids = footprint(moto, cluster)
    added_arns, added_ids = sorted(arns - before[0]), sorted(ids - before[1])
    for arn in added_arns:
        moto.client("ecs").deregister_container_instance(cluster=cluster, containerInstance=arn, force=True)
    if added_ids:
        moto.client("ec2").terminate_instances(InstanceIds=added_ids)
    return [f"container instance {arn}" for arn in added_arns] + [f"EC2 instance {i}" for i in added_ids]


def run_playbook_streamed(playbook: Path, extra_vars: dict[str, Any], what: str) -> None:
    """ansible-playbook on the local inventory, its output on this terminal."""
    command = [str(Path(sys.executable).with_name("ansible-playbook")), str(playbook), "-i", str(INVENTORY)]
    if extra_vars:
        command += ["-e", json.dumps(extra_vars)]
    shown = ["ansible-playbook", *command[1:]]
    print(f"\n=== {what}\n$ {shlex.join(shown)}", flush=True)
    rc = subprocess.run(command, env=playbook_env(), cwd=REPO_ROOT, check=False).returncode
    if rc != 0:
        raise RehearsalError(f"{what}: ansible-playbook {playbook} exited {rc} (its output is above)")


def observe(fleet: SimulatedFleet, what: str, expected: int) -> Step:
    """What each instance serves now (a real inference on its tritonserver), checked against `expected`."""
    try:
        versions = [round(v) for v in fleet.serving()]
    except (OSError, RuntimeError) as err:
        raise RehearsalError(f"{what}: an instance's tritonserver did not answer {fleet.model}: {err}") from err
    serving = dict(zip(fleet.instance_ids, versions, strict=True))
    current = fleet.record("current")
    step = Step(what, current["release_id"] if current else "(none)", serving)
    print(f"=== {step.line()}", flush=True)
    wrong = [f"{instance} serves version {version}" for instance, version in serving.items() if version != expected]
    if wrong:
        raise RehearsalError(f"{what}: expected version {expected} everywhere, but {'; '.join(wrong)}")
    return step


def rehearse(endpoint_url: str | None, workdir: Path) -> list[Step]:
    settings = inventory_settings()
    model, version = first_release(settings)
    if settings["region"] != REGION:
        raise RehearsalError(f"aws_region={settings['region']!r} in {INVENTORY}: the simulated instances run in {REGION}")
    endpoint = endpoint_url or settings["endpoint_url"]
    moto = MotoServer.attached(endpoint)
    try:
        moto.is_up()
    except OSError as err:
        raise RehearsalError(f"no moto server answers at {endpoint} ({err}): start it with scripts/services.sh start") from err
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    cluster = settings["cluster"]
    before = footprint(moto, cluster)
    fleet = None
    print(
        f"Rehearsal of a model release and rollback on {endpoint}: {FLEET_SIZE} simulated container instances in cluster "
        f"{cluster} (real model agent, real tritonserver), model {model} from s3://{settings['bucket']}/{settings['prefix']}",
        flush=True,
    )
    try:
        try:
            fleet = SimulatedFleet(
                workdir,
                moto,
                size=FLEET_SIZE,
                bucket=settings["bucket"],
                prefix=settings["prefix"],
                application=settings["application"],
                cluster=cluster,
                model=model,
            )
        except Exception as err:
            raise RehearsalError(f"starting the simulated instances failed: {err!r} (logs under {workdir})") from err
        print(f"instances: {', '.join(fleet.instance_ids)}; their agent journals and tritonserver logs: {workdir}", flush=True)
        # The model paths (publish, release records, the agents' syncs) through the S3-shaped proxy, as AWS limits them.
        connection = {"aws_endpoint_url": fleet.moto.endpoint}
        print(f"S3 as AWS limits it: {fleet.proxy.describe()}", flush=True)
        what = f"release of {model} version {version}"
        run_playbook_streamed(SYNC, {**connection, "model_repository_publish": [fleet.version_source(version)]}, what)
        steps = [observe(fleet, what, version)]
        what = f"release of {model} version {version + 1}"
        release = {"model_repository_models": [{"name": model, "version": version + 1}]}
        run_playbook_streamed(SYNC, {**connection, **release, "model_repository_publish": [fleet.version_source(version + 1)]}, what)
        steps.append(observe(fleet, what, version + 1))
        what = "rollback"
        run_playbook_streamed(ROLLBACK, connection, what)
        steps.append(observe(fleet, what, version))
        return steps
    finally:
        if fleet is not None:
            fleet.stop()
        removed = remove_added(moto, cluster, before)
        print(f"\nremoved from {endpoint}: {', '.join(removed) or 'nothing'}; the bucket and its objects stay", flush=True)


def _interrupt_on_sigterm(_signum: int, _frame: Any) -> None:
    """SIGTERM unwinds like Ctrl-C, so the cleanup runs."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.harness.rehearse_models", description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--endpoint-url", help="the moto server to use instead of the inventory's aws_endpoint_url")
    parser.add_argument("--workdir", type=Path, default=WORKDIR, help=f"agent journals, tritonserver logs (default {WORKDIR})")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt_on_sigterm)
    try:
        steps = rehearse(args.endpoint_url, args.workdir)
    except RehearsalError as err:
        print(f"\nrehearse-models FAILED: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nrehearse-models interrupted (Ctrl-C or SIGTERM); what it added was removed", file=sys.stderr)
        return 130
    print("\nSummary (LOCAL REHEARSAL: moto server, simulated instances; nothing reached AWS):")
    for step in steps:
        print(f"  after {step.line()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
