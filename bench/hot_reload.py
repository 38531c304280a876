"""Hot reload and rollback of a Triton model version under load, through the collection's own code paths.

Starts a moto server (S3) and the real tritonserver (CPU, python backend, explicit model control, auto-complete
off as docs/models.md recommends) over a temporary host path, then with 8 tritonclient HTTP clients sending requests
the whole time:

- 20 reloads: publish version N+1 (untimed, the publisher's step), then time from the start of the sync to the
  first request answered by version N+1: `sync_version` (S3 → staging → verify → rename) and `ensure_loaded`
  (Triton load with a version_policy override, wait until the index shows it), the module_utils functions that
  the `model_sync` and `triton_model` modules call. Pruning runs after, untimed, as the playbook prunes after verify;
- 20 rollbacks, one after each reload: time from the start of `ensure_rolled_back` (what `triton_model
  state=rolled_back` calls) to the first request answered by the previous version.

By default the loads serve the new version alone, as the role does by default, so a rollback loads the previous
version again. `--standby` keeps the previous version loaded next to the new one (`triton_model standby=true`,
`model_repository_standby: true`), so a rollback is a switch rather than a load.

Before each timed step the bench waits until Triton's index shows no version LOADING or UNLOADING (the previous
step's old stub processes shutting down in the background), so each step starts from a settled server, as an
operator's rollback after a finished release would; the clients keep sending requests throughout.

ansible-playbook start-up and SSH are not timed: they depend on the inventory, not on this code.
Every version answers OUTPUT0 = INPUT0 + <version>; a request fails when it raises or answers with no known version.

Prints `name: value` lines. Exits non-zero only when it cannot measure (a server does not start, a step fails).
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO_ROOT), str(REPO_ROOT / ".build" / "collections")]

import numpy as np  # noqa: E402
import tritonclient.http as httpclient  # noqa: E402

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.module import retrying_client  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.publish import publish_version  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.sync import (  # noqa: E402
    local_versions,
    prune_versions,
    sync_version,
)
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.triton_model import ensure_loaded, ensure_rolled_back  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._triton_client import TritonClient  # noqa: E402
from tests.harness.ansible import ensure_collection_link  # noqa: E402
from tests.harness.clients import ClientThreads  # noqa: E402
from tests.harness.figures import report  # noqa: E402
from tests.harness.model_versions import make_version  # noqa: E402
from tests.harness.moto import MotoServer  # noqa: E402
from tests.harness.triton import TritonServer  # noqa: E402

CLIENTS = 8
ITERATIONS = 20
MODEL = "m"
BUCKET = "bench-models"
PREFIX = "models"
KEEP_VERSIONS = 3
PROBE_TIMEOUT_S = 30.0
STANDBY = "--standby" in sys.argv[1:]


class Load(ClientThreads):
    """CLIENTS threads sending requests without a version until stopped; counts what failed."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.lock = threading.Lock()
        self.sent = 0
        self.failed = 0
        self.errors: list[str] = []
        super().__init__([()] * CLIENTS, join_timeout_s=60)

    def _run(self) -> None:
        client = httpclient.InferenceServerClient(self.url.removeprefix("http://"), network_timeout=30.0)
        data = np.array([10.0], dtype=np.float32)
        while not self.stop_event.is_set():
            ok, error = True, ""
            try:
                inp = httpclient.InferInput("INPUT0", [1], "FP32")
                inp.set_data_from_numpy(data)
                offset = float(client.infer(MODEL, [inp]).as_numpy("OUTPUT0")[0]) - 10.0
                ok = offset.is_integer() and offset >= 1
                error = "" if ok else f"answer from no known version: {offset}"
            except Exception as err:  # every client-side failure counts as a failed request
                ok, error = False, f"{type(err).__name__}: {err}"
            with self.lock:
                self.sent += 1
                if not ok:
                    self.failed += 1
                    if len(self.errors) < 5:
                        self.errors.append(error)
        client.close()


def serving_version(triton: TritonServer) -> float:
    return triton.infer(MODEL, [10.0])[0] - 10.0


def wait_serving(triton: TritonServer, version: int) -> None:
    deadline = time.monotonic() + PROBE_TIMEOUT_S
    while serving_version(triton) != version:
        if time.monotonic() > deadline:
            raise RuntimeError(f"version {version} not serving {PROBE_TIMEOUT_S} s after its load returned")


def settle(client: TritonClient) -> None:
    """Until no version is LOADING or UNLOADING: each timed step starts from a settled server, as an operator's would."""
    deadline = time.monotonic() + PROBE_TIMEOUT_S
    while any(entry.get("state") in ("LOADING", "UNLOADING") for entry in client.repository_index()):
        if time.monotonic() > deadline:
            raise RuntimeError(f"Triton still loading or unloading {PROBE_TIMEOUT_S} s after a step")
        time.sleep(0.05)


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.array(values), q))


def run(work: Path) -> dict[str, float]:
    source, host = work / "source", work / "host"
    host.mkdir()
    moto = MotoServer(work).start()
    triton = None
    try:
        moto.client("s3").create_bucket(Bucket=BUCKET)
        s3 = retrying_client(moto.client("s3"))

        def publish(version: int) -> None:
            version_dir, config = make_version(source, MODEL, version)
            publish_version(s3, BUCKET, PREFIX, MODEL, version, str(version_dir), str(config))

        triton = TritonServer(host, work, extra_args=("--disable-auto-complete-config",)).start()
        client = TritonClient(triton.url, timeout_s=10)
        publish(1)
        sync_version(s3, BUCKET, PREFIX, MODEL, "latest", str(host))
        ensure_loaded(client, MODEL, 1)
        wait_serving(triton, 1)

        reloads: list[float] = []
        rollbacks: list[float] = []
        with Load(triton.url) as load:
            time.sleep(1.0)  # clients warmed up before the first measurement
            serving = 1
            for _iteration in range(ITERATIONS):
                newest = max(local_versions(str(host / MODEL))) + 1
                publish(newest)

                start = time.monotonic()
                synced = sync_version(s3, BUCKET, PREFIX, MODEL, "latest", str(host))
                loaded = ensure_loaded(client, MODEL, synced["version"], timeout_s=60, standby=STANDBY)
                wait_serving(triton, newest)
                reloads.append(time.monotonic() - start)
                prune_versions(str(host), MODEL, KEEP_VERSIONS, loaded["after"])  # never a READY version
                settle(client)

                start = time.monotonic()
                rolled = ensure_rolled_back(client, MODEL, local_versions(str(host / MODEL)), timeout_s=60)
                wait_serving(triton, rolled["version"])
                rollbacks.append(time.monotonic() - start)
                serving = rolled["version"]
                settle(client)
            time.sleep(0.5)
        if load.errors:
            print("# first failures: " + " | ".join(load.errors), file=sys.stderr)
        print(f"# standby: {STANDBY}; requests sent: {load.sent}; serving at the end: version {serving}", file=sys.stderr)
        return {
            "reload_p50_seconds": percentile(reloads, 50),
            "reload_p99_seconds": percentile(reloads, 99),
            "rollback_p50_seconds": percentile(rollbacks, 50),
            "rollback_p99_seconds": percentile(rollbacks, 99),
            "failed_requests": load.failed,
        }
    finally:
        if triton:
            triton.stop()
        moto.stop()


def main() -> int:
    ensure_collection_link()
    with tempfile.TemporaryDirectory(prefix="hot-reload-") as work:
        try:
            figures = run(Path(work))
        except Exception as err:
            print(f"hot_reload: cannot measure: {type(err).__name__}: {err}", file=sys.stderr)
            return 1
    return report({name: f"{value:.3f}" if isinstance(value, float) else value for name, value in figures.items()})


if __name__ == "__main__":
    sys.exit(main())
