"""Fleet model delivery (issue 10): how fast a new instance hydrates its models, against the plain AWS tool.

Hydration figures (function `hydrate_figures`):

- publishes 3 models, 4 files of 88 MiB each (1056 MiB in all, incompressible bytes), to a moto server on loopback
  behind the S3-shaped proxy (tests/harness/s3_proxy.py, here without limits: it serves ranged GETs from a copy of
  the object, where moto reads the whole object for each) and writes the release record naming them (untimed: the
  publisher's step);
- `hydrate_seconds`: the model agent's boot hydration, `python3 -m ..._models.agent --boot` on a simulated instance
  (tests/harness/model_agent.py: stand-in IMDSv2, no task), from process start to exit: it reads the release record,
  and for every model lists the versions, reads the manifest, downloads every file into staging while hashing it,
  checks size and SHA-256 against the manifest, and renames the version into place;
- `peer_hydrate_seconds`: the same objects with `aws s3 sync` (awscli, pinned in requirements-dev.txt) against the same
  endpoint, then `sha256sum -c` of every file against the manifests' digests (the list is written before timing);
- `hydrate_ratio`: hydrate_seconds / peer_hydrate_seconds (target: <= 1.0).

Fleet figures (function `fleet_figures`): FLEET_SIZE simulated instances (tests/harness/fleet.py: moto ECS container
instances, each with the real model agent polling every FLEET_POLL_S seconds and its own real tritonserver), the
controller's steps run in-process with module model_release's own code, and one client per tritonserver sending
requests from the first release's arrival to the end:

- `fleet_converge_seconds`: from the controller's write of release 2 (promoted) to every instance's status object
  reporting it applied (read every 0.1 s). Target: <= FLEET_POLL_S + 5 s;
- `failed_requests`: requests that failed on any tritonserver through the rollout, the failed canary and the
  rollback. Target: 0;
- `rollback_converge_seconds`: from the moment the canary of a version that fails to load is reported failed to every
  instance reporting the previous release applied again (canary.json deleted: the controller's rollback).

Each figure group is one function returning {name: value}; `main` prints every group's figures as `name: value`.
Exits non-zero only when it cannot measure (a server does not start, a hydration fails or is not verified).
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parents[1] / ".build" / "collections")]

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.module import retrying_client  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models import sync as _model_sync  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.convergence import RolloutError  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.manifest import manifest_files, manifest_key, parse_manifest  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.publish import publish_version  # noqa: E402
from tests.harness.ansible import ensure_collection_link  # noqa: E402
from tests.harness.clients import ClientThreads  # noqa: E402
from tests.harness.figures import report  # noqa: E402
from tests.harness.fleet import MODEL, SimulatedFleet  # noqa: E402
from tests.harness.model_agent import SimulatedInstance, write_release  # noqa: E402
from tests.harness.moto import MotoServer  # noqa: E402
from tests.harness.s3_proxy import ProxiedMoto, ProxyProcess  # noqa: E402
from tests.harness.triton import model_config  # noqa: E402

BUCKET = "fleet-models-bench"
PREFIX = "models"
APP = "triton"
MODELS = ("detector", "embedder", "ranker")
FILES_PER_MODEL = 4
FILE_BYTES = 88 * 1024 * 1024
FLEET_SIZE = 4
FLEET_POLL_S = 2


def publish_model_set(moto: MotoServer, source: Path) -> dict[str, int]:
    """MODELS at version 1, FILES_PER_MODEL files of FILE_BYTES each, published; returns the release's models."""
    s3 = retrying_client(moto.client("s3"))
    fill = random.Random(10)
    for model in MODELS:
        version_dir = source / model / "1"
        version_dir.mkdir(parents=True)
        for index in range(FILES_PER_MODEL):
            (version_dir / f"shard-{index}.bin").write_bytes(fill.randbytes(FILE_BYTES))
        (source / model / "config.pbtxt").write_text(model_config(model))
        publish_version(s3, BUCKET, PREFIX, model, 1, str(version_dir), str(source / model / "config.pbtxt"))
    return {model: 1 for model in MODELS}


def manifest_checksums(moto: MotoServer, models: dict[str, int]) -> str:
    """`sha256sum -c` input for the files as `aws s3 sync` lays them out (<model>/<version>/<path>)."""
    lines = []
    for model, version in models.items():
        raw = moto.client("s3").get_object(Bucket=BUCKET, Key=manifest_key(PREFIX, model, version))["Body"].read()
        for path, (_size, sha) in manifest_files(parse_manifest(raw, model, version)).items():
            lines.append(f"{sha}  {model}/{version}/{path}")
    return "\n".join(lines) + "\n"


def hydrate_figures(work: Path) -> dict[str, float]:
    server = MotoServer(work).start()
    moto = ProxiedMoto(server, ProxyProcess(server.endpoint, work))
    try:
        moto.client("s3").create_bucket(Bucket=BUCKET)
        models = publish_model_set(moto, work / "source")
        write_release(moto, BUCKET, PREFIX, APP, "bench-1", models)
        shutil.rmtree(work / "source")  # the page cache should not hold what the runs download

        instance = SimulatedInstance(work / "instance", moto, BUCKET, PREFIX, APP, "i-0000000000000b01", boot_attempts=1)
        try:
            start = time.monotonic()
            boot = instance.run("--boot", timeout_s=900)
            ours = time.monotonic() - start
        finally:
            instance.stop()
        complete = {m: _model_sync.complete_versions(str(instance.host_path / m), m) for m in models}
        if boot.returncode != 0 or complete != {m: [v] for m, v in models.items()}:
            raise RuntimeError(f"the agent's hydration failed ({boot.returncode}, on disk {complete}): {boot.stderr[-2000:]}")
        shutil.rmtree(instance.host_path)

        peer_dir = work / "peer"
        checksums = work / "SHA256SUMS"
        checksums.write_text(manifest_checksums(moto, models))
        aws = [str(Path(sys.executable).with_name("aws")), "--endpoint-url", moto.endpoint, "s3", "sync", "--only-show-errors"]
        aws += [f"s3://{BUCKET}/{PREFIX}/", str(peer_dir), "--exclude", "releases/*", "--exclude", "status/*"]
        env = dict(instance.env())
        start = time.monotonic()
        subprocess.run(aws, env=env, check=True)
        subprocess.run(["sha256sum", "--quiet", "-c", str(checksums)], cwd=peer_dir, check=True)
        peer = time.monotonic() - start
    finally:
        moto.stop()
        server.stop()
    return {"hydrate_seconds": round(ours, 2), "peer_hydrate_seconds": round(peer, 2), "hydrate_ratio": round(ours / peer, 3)}


class Clients(ClientThreads):
    """One thread per tritonserver sending requests back to back until stopped; counts the failed ones."""

    def __init__(self, tritons: list) -> None:
        self.failed = 0
        self.sent = 0
        self.errors: list[str] = []
        self._lock = threading.Lock()
        super().__init__([(triton,) for triton in tritons])

    def _run(self, triton) -> None:
        while not self.stop_event.is_set():
            try:
                triton.infer(MODEL, [1.0])
                failed = None
            except (OSError, RuntimeError, ValueError, KeyError) as err:
                failed = str(err)
            with self._lock:
                self.sent += 1
                if failed:
                    self.failed += 1
                    self.errors.append(failed)


def fleet_figures(work: Path) -> dict[str, float]:
    moto = MotoServer(work).start()
    fleet = None
    try:
        fleet = SimulatedFleet(work, moto, size=FLEET_SIZE, poll_interval_s=FLEET_POLL_S)
        for version in (1, 2):
            fleet.publish(version)
        fleet.publish(3, broken=True)
        fleet.controller("promoted", models=[{"name": MODEL, "version": 1}])
        fleet.controller("converged")
        with Clients([triton for instance in fleet.instances for triton in instance.tritons]) as clients:
            start = time.monotonic()
            fleet.controller("promoted", models=[{"name": MODEL, "version": 2}])
            fleet.controller("converged")
            converge = time.monotonic() - start

            canary = fleet.controller("canary", models=[{"name": MODEL, "version": 3}], instances=fleet.instance_ids[:1])
            try:
                fleet.controller(
                    "converged", instances=canary["canary_instances"], inference_failures_before=canary["inference_failures_before"]
                )
            except RolloutError:
                pass
            else:
                raise RuntimeError("the canary of a version that fails to load was not reported failed")
            failed_at = time.monotonic()
            fleet.controller("canary_absent")
            fleet.controller("converged")
            rollback = time.monotonic() - failed_at
        if fleet.serving() != [2.0] * FLEET_SIZE:
            raise RuntimeError(f"after the rollback the fleet serves {fleet.serving()}, not version 2 everywhere")
        if clients.sent == 0:
            raise RuntimeError("the clients sent no request")
    finally:
        if fleet:
            fleet.stop()
        moto.stop()
    if clients.errors:
        print(f"fleet_models: {clients.failed} of {clients.sent} requests failed, first: {clients.errors[0]}", file=sys.stderr)
    return {
        "fleet_converge_seconds": round(converge, 2),
        "failed_requests": clients.failed,
        "rollback_converge_seconds": round(rollback, 2),
    }


# One function per figure group: each takes a fresh work directory and returns {name: value}.
FIGURE_GROUPS = [hydrate_figures, fleet_figures]


def main() -> int:
    ensure_collection_link()
    figures: dict[str, float] = {}
    try:
        for group in FIGURE_GROUPS:
            with tempfile.TemporaryDirectory(prefix=f"bench-{group.__name__}-") as work:
                figures.update(group(Path(work)))
    except (RuntimeError, OSError, subprocess.CalledProcessError, TimeoutError, RolloutError) as err:
        print(f"fleet_models: cannot measure: {err}", file=sys.stderr)
        return 1
    print(json.dumps(figures), file=sys.stderr)
    return report(figures)


if __name__ == "__main__":
    sys.exit(main())
