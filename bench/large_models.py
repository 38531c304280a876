"""Real-size models (issue 23): publish above the single-PUT limit, hydrate a new instance at its bandwidth.

Everything goes through the S3-shaped proxy (tests/harness/s3_proxy.py, in a process of its own) in front of a moto
server on loopback, with
S3's two limits scaled down to this machine: a per-connection throughput cap (S3: ~90 MB/s per connection) and a
single-PUT limit (S3: 5 GB), both printed first. The release is one large file (LARGE_BYTES, >= 2 GiB, incompressible
bytes: a TensorRT-LLM engine's shape) plus SMALL_FILES small ones (tokenizer, configs).

- `publish_over_single_put_limit`: 1 when the large file, larger than the single-PUT limit (the proxy refuses one
  PutObject of it with EntityTooLarge, shown first), publishes with model_publish's code (multipart, parts in
  parallel, a SHA-256 per part) and S3's composite checksum matches the local one, manifest written; else 0;
- `hydrate_throughput_fraction`: the model agent's boot hydration (`python3 -m ..._models.agent --boot` on a simulated
  instance, default download settings) in bytes per second, as its own status object reports it (`hydration`),
  divided by the most the proxy serves on this machine with parallel ranged GETs of the large object that only
  count the bytes (the best of several connection counts, measured in the same run). Target: >= 0.8;
- `hydrate_ratio`: the agent's boot hydration, process start to exit (what ecs.service waits for), divided by
  `aws s3 cp --recursive` (AWS CLI v1, pinned in requirements-dev.txt; it fetches large objects as parallel ranged
  GETs, 10 at once) followed by `sha256sum -c` of every file against the manifest. Target: <= 0.8;
- `agent_peak_rss_mib`: the agent process's peak resident memory during that hydration (wait4's ru_maxrss).
  Target: <= 512;
- `cold_start_seconds`: boot hydration of that release to ECS start: from the start of the agent's `--boot` (the unit
  ordered right after instance storage) to its exit 0, the moment systemd starts ecs.service. Reported.

The simulated instance's instance store is a tmpfs when one has room (an instance-store NVMe RAID writes GB/s; this
machine's virtual disk writes a few hundred MB/s with fsync, and would be the figure instead), stated in the output;
the peer writes there too.

Exits non-zero only when it cannot measure (a server does not start, a hydration fails or is not verified).
`--large-mib` and `--mib-per-s` change the size and the cap (e.g. a quick run: --large-mib 256).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parents[1] / ".build" / "collections")]

import boto3  # noqa: E402
from botocore.config import Config  # noqa: E402
from botocore.exceptions import ClientError  # noqa: E402

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import s3 as _s3  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.module import retrying_client  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models import sync as _model_sync  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models import transfer  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.manifest import file_key, manifest_key  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.publish import publish_version  # noqa: E402
from tests.harness.ansible import ensure_collection_link  # noqa: E402
from tests.harness.figures import report  # noqa: E402
from tests.harness.model_agent import SimulatedInstance, write_release  # noqa: E402
from tests.harness.moto import REGION, MotoServer  # noqa: E402
from tests.harness.s3_proxy import MIB, ProxiedMoto, ProxyProcess  # noqa: E402
from tests.harness.triton import model_config  # noqa: E402

BUCKET = "large-models-bench"
PREFIX = "models"
APP = "triton"
MODEL = "llm"
LARGE_NAME = "rank0.engine"
SMALL_FILES = 64
SMALL_BYTES = 256 * 1024
# S3's limits scaled to a 2-core machine that is also the client, the proxy and moto: ~90 MB/s per connection becomes
# 4 MiB/s, 5 GB per PutObject becomes 64 MiB (so a 2 GiB file is 32 single-PUT limits large, as 26 GB is 5 GB x 5).
# At 4 MiB/s the stand-in is bound by its connections, as S3 and a GPU instance's network are, and not by these two
# cores, which also run the proxy and moto (a GPU instance has 48-192 vCPUs for its 25-400 Gbit/s): at 16 MiB/s the
# cores are the bound, and the figure measures the proxy's CPU against the agent's, not the agent's parallelism.
DEFAULT_MIB_PER_S = 4
DEFAULT_PUT_LIMIT_MIB = 64
DEFAULT_LARGE_MIB = 2048
# The publisher's settings for the scaled limit: multipart above 32 MiB, parts of 16 MiB, 16 at once.
UPLOAD = transfer.UploadSettings.from_mib(32, 16, 16)
PROBE_CONNECTIONS = (16, 32, 64)


def write_release_files(source: Path, large_bytes: int) -> Path:
    """<source>/llm/1/{rank0.engine, tokenizer/*.json} of incompressible bytes, and the model's config.pbtxt."""
    version_dir = source / MODEL / "1"
    (version_dir / "tokenizer").mkdir(parents=True)
    fill = random.Random(23)
    with open(version_dir / LARGE_NAME, "wb") as out:
        left = large_bytes
        while left:
            chunk = min(left, 64 * MIB)
            out.write(fill.randbytes(chunk))
            left -= chunk
    for index in range(SMALL_FILES):
        (version_dir / "tokenizer" / f"part-{index:03d}.json").write_bytes(fill.randbytes(SMALL_BYTES))
    (source / MODEL / "config.pbtxt").write_text(model_config(MODEL))
    return version_dir


def publish_figure(moto: ProxiedMoto, source: Path, put_limit: int) -> tuple[int, dict]:
    """(1 when the large file published and verified above the single-PUT limit, the publish result)."""
    s3 = retrying_client(moto.client("s3"))
    version_dir = source / MODEL / "1"
    try:
        with open(version_dir / LARGE_NAME, "rb") as body:
            moto.client("s3").put_object(Bucket=BUCKET, Key="single-put-probe", Body=body.read(put_limit + 1))
        raise RuntimeError("the proxy accepted one PutObject above its single-PUT limit")
    except ClientError as err:
        if err.response["Error"]["Code"] != "EntityTooLarge":
            raise
    started = time.monotonic()
    result = publish_version(s3, BUCKET, PREFIX, MODEL, 1, str(version_dir), str(source / MODEL / "config.pbtxt"), upload=UPLOAD)
    print(f"# publish: {time.monotonic() - started:.1f} s, multipart {json.dumps(result['multipart'])}", flush=True)
    large = os.path.getsize(version_dir / LARGE_NAME)
    stored = _s3.head(s3, BUCKET, file_key(PREFIX, MODEL, 1, LARGE_NAME))
    verified = (
        result["manifest_written"]
        and large > put_limit
        and LARGE_NAME in result["multipart"]
        and (stored or {}).get("ContentLength") == large
        and _s3.get_bytes(s3, BUCKET, manifest_key(PREFIX, MODEL, 1)) is not None
    )
    return int(bool(verified)), result


_SCRATCH = threading.local()


def count_range(client, key: str, span: tuple[int, int]) -> int:
    """One ranged GET read to the end in chunks of 1 MiB (as the agent reads), the bytes only counted."""
    body = client.get_object(Bucket=BUCKET, Key=key, Range=f"bytes={span[0]}-{span[1]}")["Body"]
    if not hasattr(_SCRATCH, "view"):
        _SCRATCH.view = memoryview(bytearray(MIB))
    got = 0
    while n := body.readinto(_SCRATCH.view):
        got += n
    return got


def most_the_proxy_serves(moto: ProxiedMoto, key: str, size: int, part_bytes: int) -> tuple[float, int]:
    """(bytes per second, connections): parallel ranged GETs of `key` that only count the bytes, best of PROBE_CONNECTIONS."""
    moto.client("s3").get_object(Bucket=BUCKET, Key=key, Range="bytes=0-0")["Body"].read()  # the proxy's cache, filled untimed
    best = (0.0, 0)
    for connections in PROBE_CONNECTIONS:
        client = boto3.client(
            "s3",
            endpoint_url=moto.endpoint,
            region_name=REGION,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            config=Config(max_pool_connections=connections + 2),
        )
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=connections) as pool:
            moved = sum(pool.map(lambda span, client=client: count_range(client, key, span), transfer.part_ranges(size, part_bytes)))
        rate = moved / (time.monotonic() - started)
        print(f"# parallel ranged GETs, {connections} connections: {rate / MIB:.0f} MiB/s", flush=True)
        if moved != size:
            raise RuntimeError(f"the ranged GETs returned {moved} bytes of {size}")
        best = max(best, (rate, connections))
    return best


def instance_store(work: Path, large_bytes: int) -> Path:
    """Where the simulated instance's instance store is: a tmpfs when one has room (an instance-store NVMe RAID writes
    GB/s; this machine's virtual disk writes a few hundred MB/s and would be the figure), else the work directory."""
    shm = Path("/dev/shm")
    if shm.is_dir() and shutil.disk_usage(shm).free > 3 * large_bytes:
        return Path(tempfile.mkdtemp(prefix="bench-large-models-store-", dir=shm))
    return work


def boot_hydration(moto: ProxiedMoto, store: Path) -> dict:
    """The agent's --boot on a simulated instance: wall seconds, peak RSS, its status object's hydration figures."""
    instance = SimulatedInstance(store / "instance", moto, BUCKET, PREFIX, APP, "i-0000000000000b23", boot_attempts=1)
    try:
        log = (store / "agent-boot.log").open("w")
        started = time.monotonic()
        proc = subprocess.Popen(instance.command("--boot"), env=instance.env(), stdout=log, stderr=subprocess.STDOUT)
        _pid, status, usage = os.wait4(proc.pid, 0)
        seconds = time.monotonic() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        log.close()
        complete = _model_sync.complete_versions(str(instance.host_path / MODEL), MODEL)
        if proc.returncode != 0 or complete != [1]:
            tail = (store / "agent-boot.log").read_text()[-3000:]
            raise RuntimeError(f"the agent's boot hydration failed (exit {proc.returncode}, on disk {complete}): {tail}")
        reported = (instance.status() or {}).get("hydration")
        if not reported or not reported.get("throughput_bytes_per_s"):
            raise RuntimeError(f"the agent's status object reports no hydration figures: {instance.status()}")
        cpu = usage.ru_utime + usage.ru_stime
        return {
            "seconds": seconds,
            "peak_rss_mib": usage.ru_maxrss / 1024,
            "cpu_s": cpu,
            "hydration": reported,
            "host_path": instance.host_path,
        }
    finally:
        instance.stop()


def peer_hydration(moto: ProxiedMoto, work: Path, manifest: dict) -> float:
    """`aws s3 cp --recursive` of the version, then `sha256sum -c` against the manifest: wall seconds."""
    peer_dir = work / "peer"
    checksums = work / "SHA256SUMS"
    checksums.write_text("".join(f"{f['sha256']}  {f['path']}\n" for f in manifest["files"]))
    aws = [str(Path(sys.executable).with_name("aws")), "--endpoint-url", moto.endpoint, "s3", "cp", "--recursive", "--only-show-errors"]
    aws += [f"s3://{BUCKET}/{PREFIX}/{MODEL}/1/", str(peer_dir)]
    env = dict(os.environ, **moto.env())
    started = time.monotonic()
    subprocess.run(aws, env=env, check=True)
    subprocess.run(["sha256sum", "--quiet", "-c", str(checksums)], cwd=peer_dir, check=True)
    seconds = time.monotonic() - started
    shutil.rmtree(peer_dir)
    return seconds


def aws_cli_version() -> str:
    done = subprocess.run([str(Path(sys.executable).with_name("aws")), "--version"], capture_output=True, text=True, check=True)
    return (done.stdout or done.stderr).split()[0]


def figures(work: Path, large_bytes: int, bytes_per_s: int, put_limit: int) -> dict[str, float]:
    moto = MotoServer(work).start()
    proxy = ProxyProcess(moto.endpoint, work, bytes_per_s=bytes_per_s, single_put_limit=put_limit)
    proxied = ProxiedMoto(moto, proxy)
    store = work
    try:
        print(f"# {proxy.describe()}", flush=True)
        print(
            f"# release: {MODEL} version 1 = {LARGE_NAME} {large_bytes / MIB:.0f} MiB + {SMALL_FILES} files of "
            f"{SMALL_BYTES // 1024} KiB; peer: {aws_cli_version()} (aws s3 cp --recursive) + sha256sum -c",
            flush=True,
        )
        proxied.client("s3").create_bucket(Bucket=BUCKET)
        published, result = publish_figure(proxied, work / "source", put_limit)
        shutil.rmtree(work / "source")  # the page cache should not hold what the runs download
        write_release(proxied, BUCKET, PREFIX, APP, "bench-large-1", {MODEL: 1})

        key = file_key(PREFIX, MODEL, 1, LARGE_NAME)
        part_bytes = transfer.DownloadSettings().part_bytes
        most, connections = most_the_proxy_serves(proxied, key, large_bytes, part_bytes)

        store = instance_store(work, large_bytes)
        print(f"# instance store: {'tmpfs ' if str(store).startswith('/dev/shm') else ''}{store}", flush=True)
        boot = boot_hydration(proxied, store)
        hydration = boot["hydration"]
        print(
            f"# agent --boot: {boot['seconds']:.1f} s, {boot['cpu_s']:.1f} s of CPU; status object hydration: {hydration['bytes']} bytes, "
            f"{hydration['files']} files, {hydration['seconds']} s, {hydration['throughput_bytes_per_s'] / MIB:.0f} MiB/s "
            f"(the most the proxy serves: {most / MIB:.0f} MiB/s with {connections} connections)",
            flush=True,
        )
        shutil.rmtree(boot["host_path"])
        peer = peer_hydration(proxied, store, result["manifest"])
        print(f"# peer: {peer:.1f} s", flush=True)
    finally:
        proxy.stop()
        moto.stop()
        if store != work:
            shutil.rmtree(store, ignore_errors=True)
    return {
        "publish_over_single_put_limit": published,
        "hydrate_throughput_fraction": round(hydration["throughput_bytes_per_s"] / most, 3),
        "hydrate_ratio": round(boot["seconds"] / peer, 3),
        "agent_peak_rss_mib": round(boot["peak_rss_mib"], 1),
        "cold_start_seconds": round(boot["seconds"], 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/large_models.py", description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--large-mib", type=int, default=DEFAULT_LARGE_MIB, help=f"size of the large file (default {DEFAULT_LARGE_MIB})")
    parser.add_argument("--mib-per-s", type=float, default=DEFAULT_MIB_PER_S, help="the proxy's per-connection cap")
    parser.add_argument("--put-limit-mib", type=int, default=DEFAULT_PUT_LIMIT_MIB, help="the proxy's single-PUT limit")
    args = parser.parse_args(argv)
    ensure_collection_link()
    try:
        with tempfile.TemporaryDirectory(prefix="bench-large-models-", dir=os.environ.get("BENCH_WORKDIR")) as work:
            write_release_files(Path(work) / "source", args.large_mib * MIB)
            found = figures(Path(work), args.large_mib * MIB, int(args.mib_per_s * MIB), args.put_limit_mib * MIB)
    except (RuntimeError, OSError, subprocess.CalledProcessError, TimeoutError, ClientError) as err:
        print(f"large_models: cannot measure: {err}", file=sys.stderr)
        return 1
    print(json.dumps(found), file=sys.stderr)
    return report(found)


if __name__ == "__main__":
    sys.exit(main())
