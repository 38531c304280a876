"""Benchmark: inferops.triton_ecs.task_definition vs community.aws.ecs_taskdefinition against a moto server.

Prints one figure per line on stdout (details go to stderr):
  noop_api_calls / peer_noop_api_calls            AWS requests of one no-op run, family with 50 revisions
  noop_module_seconds / peer_noop_module_seconds  the module's own time for that run (median of 9, runs alternating), without
                                                  interpreter start-up and imports
  phantom_revisions / peer_phantom_revisions      revisions registered by 3 re-applies of the corpus
                                                  (ours: in moto and against the AWS-shaped responses; peer: in moto)
Exits non-zero only when it cannot measure.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / ".build" / "collections")]

import yaml  # noqa: E402

from tests.harness.ansible import ensure_collection_link  # noqa: E402
from tests.harness.figures import report  # noqa: E402
from tests.harness.moto import REGION, MotoServer, moto_compatible  # noqa: E402

REVISIONS = 50
REPEATS = 9
CORPUS = sorted((REPO / "tests" / "unit" / "corpus").glob("*.yml"))
OURS = "ansible_collections.inferops.triton_ecs.plugins.modules.task_definition"
PEER = "ansible_collections.community.aws.plugins.modules.ecs_taskdefinition"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/triton@sha256:" + "ab" * 32

# Imports the module, then times main() alone; the module prints its JSON result on stdout.
RUNNER = """
import importlib, sys, time
sys.argv = ["module", sys.argv[1]]
module = importlib.import_module({module!r})
start = time.perf_counter()
try:
    module.main()
finally:
    sys.stderr.write("BENCH_SECONDS=%f\\n" % (time.perf_counter() - start))
"""


def log(message: str) -> None:
    print(f"# {message}", file=sys.stderr)


def run_module(moto: MotoServer, module: str, args: dict, workdir: Path) -> tuple[dict, float, int]:
    """One run of `module` with `args`; returns its result, its own seconds and the AWS requests it made."""
    connection = {"region": REGION, "endpoint_url": moto.endpoint, "access_key": "testing", "secret_key": "testing"}
    args_file = workdir / "args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {**args, **connection}}))
    before = moto.request_count()
    proc = subprocess.run(
        [sys.executable, "-c", RUNNER.format(module=module), str(args_file)],
        check=False,
        capture_output=True,
        text=True,
        env={
            "PYTHONPATH": str(REPO / ".build" / "collections"),
            "PATH": "/usr/bin:/bin",
            "HOME": str(workdir),  # no ~/.aws of the caller's
        },
        cwd=workdir,
        timeout=300,
    )
    calls = moto.request_count() - before
    seconds = next(float(line.split("=", 1)[1]) for line in proc.stderr.splitlines() if line.startswith("BENCH_SECONDS="))
    result = json.loads(proc.stdout)
    if result.get("failed"):
        raise RuntimeError(f"{module} failed: {result.get('msg')}")
    return result, seconds, calls


def our_args(family: str) -> dict:
    return {"family": family, "image": IMAGE, "memory": 16000, "memory_reservation": 15000, "triton": {"models": ["simple"]}}


def rendered_container(family: str) -> dict:
    from ansible_collections.inferops.triton_ecs.plugins.module_utils._task_definition.render import render
    from tests.unit.task_definition_params import module_params

    return render(module_params(**our_args(family)), REGION)["containerDefinitions"][0]


def peer_args(family: str, containers: list[dict]) -> dict:
    return {"family": family, "state": "present", "containers": containers, "network_mode": "awsvpc", "launch_type": "EC2"}


def seed(moto: MotoServer, family: str, count: int) -> None:
    """`count` older revisions of a family, each a little different from what the modules will register."""
    ecs = moto.client("ecs")
    for i in range(count):
        ecs.register_task_definition(
            family=family,
            networkMode="awsvpc",
            containerDefinitions=[{"name": "triton", "image": IMAGE, "memory": 16000, "environment": [{"name": "REV", "value": str(i)}]}],
        )


def noop_side_by_side(moto: MotoServer, workdir: Path, existing: int) -> dict[str, dict]:
    """Both modules on families of `existing` revisions (the latest is theirs), then alternating no-op runs.

    Alternating keeps the noise of a shared machine on both sides alike; the figure is the median.
    """
    runs = {
        "ours": (OURS, our_args(f"bench-ours-{existing}")),
        "peer": (PEER, peer_args(f"bench-peer-{existing}", [rendered_container(f"bench-ours-{existing}")])),
    }
    for module, args in runs.values():
        seed(moto, args["family"], existing - 1)
        run_module(moto, module, args, workdir)
    stats = {side: {"calls": [], "seconds": [], "changed": False} for side in runs}
    for _repeat in range(REPEATS):
        for side, (module, args) in runs.items():
            result, took, made = run_module(moto, module, args, workdir)
            stats[side]["calls"].append(made)
            stats[side]["seconds"].append(took)
            stats[side]["changed"] = stats[side]["changed"] or bool(result.get("changed"))
    return {
        side: {"calls": max(s["calls"]), "seconds": statistics.median(s["seconds"]), "changed": s["changed"]} for side, s in stats.items()
    }


def our_corpus_phantoms(moto: MotoServer) -> tuple[int, int]:
    """Phantom revisions of our comparison: re-applies through moto, and against each AWS-shaped response."""
    from ansible_collections.amazon.aws.plugins.module_utils.retries import AWSRetry, RetryingBotoClientWrapper
    from ansible_collections.inferops.triton_ecs.plugins.module_utils._task_definition.canonical import diff, from_describe
    from ansible_collections.inferops.triton_ecs.plugins.module_utils._task_definition.plan import ensure

    # The module's own client shape: calls take aws_retry=True.
    ecs = RetryingBotoClientWrapper(moto.client("ecs"), AWSRetry.jittered_backoff())
    in_moto = against_aws = 0
    for path in CORPUS:
        case = yaml.safe_load(path.read_text())
        desired = moto_compatible(dict(case["input"], family=f"ours-{path.stem}"[:255].replace(".", "-")))
        ensure(ecs, desired)
        for _apply in range(3):
            in_moto += int(ensure(ecs, desired)["changed"])
            against_aws += int(bool(diff(from_describe(case["response"]), case["input"])["paths"]))
    return in_moto, against_aws


def peer_corpus_phantoms(moto: MotoServer, workdir: Path) -> int:
    phantoms = 0
    for path in CORPUS:
        td = moto_compatible(yaml.safe_load(path.read_text())["input"])
        args = {
            "family": f"peer-{path.stem}",
            "state": "present",
            "containers": td["containerDefinitions"],
            "network_mode": td.get("networkMode", "bridge"),
            "volumes": td.get("volumes", []),
            "task_role_arn": td.get("taskRoleArn", ""),
            "execution_role_arn": td.get("executionRoleArn", ""),
            "placement_constraints": td.get("placementConstraints", []),
        }
        if td.get("requiresCompatibilities"):
            args["launch_type"] = td["requiresCompatibilities"][0]
        for key in ("cpu", "memory", "runtime_platform"):
            field = {"runtime_platform": "runtimePlatform"}.get(key, key)
            if td.get(field):
                args[key] = td[field]
        try:
            run_module(moto, PEER, args, workdir)
        except RuntimeError as e:  # the peer cannot express every case; those are left out of its figure
            log(f"peer: {path.stem}: left out, the peer fails to register it: {str(e).splitlines()[-1][:160]}")
            continue
        for _apply in range(3):
            result, _seconds, _calls = run_module(moto, PEER, args, workdir)
            if result.get("changed"):
                phantoms += 1
                log(f"peer: {path.stem}: phantom revision {result.get('taskdefinition', {}).get('revision')}")
    return phantoms


def main() -> int:
    ensure_collection_link()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        moto = MotoServer(workdir).start()
        try:
            figures = {}
            for existing in (1, REVISIONS):
                side = noop_side_by_side(moto, workdir, existing)
                for name, got in side.items():
                    log(
                        f"{name}: no-op at {existing} revisions: {got['calls']} AWS calls, {got['seconds']:.4f} s, changed={got['changed']}"
                    )
            figures.update(noop_api_calls=side["ours"]["calls"], peer_noop_api_calls=side["peer"]["calls"])
            figures.update(
                noop_module_seconds=round(side["ours"]["seconds"], 4), peer_noop_module_seconds=round(side["peer"]["seconds"], 4)
            )
            in_moto, against_aws = our_corpus_phantoms(moto)
            log(
                f"ours: corpus of {len(CORPUS)}, 3 re-applies: {in_moto} phantom revisions in moto, {against_aws} against AWS-shaped responses"
            )
            peer = peer_corpus_phantoms(moto, workdir)
            log(f"peer: corpus of {len(CORPUS)}, 3 re-applies: {peer} phantom revisions in moto")
            figures.update(phantom_revisions=in_moto + against_aws, peer_phantom_revisions=peer)
        finally:
            moto.stop()
    order = (
        "noop_api_calls",
        "peer_noop_api_calls",
        "noop_module_seconds",
        "peer_noop_module_seconds",
        "phantom_revisions",
        "peer_phantom_revisions",
    )
    return report({name: figures[name] for name in order})


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # the benchmark could not measure: say why
        print(f"bench/task_definition.py: cannot measure: {e!r}", file=sys.stderr)
        sys.exit(1)
