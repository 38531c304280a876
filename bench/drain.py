"""Drain benchmark: the triton_image role's image on the CPU test base, stopped under load.

Builds the image through the role (pushed to the loopback registry), starts it with a model that takes ~200 ms per
request, and `docker stop`s it while 4 tritonclient clients are sending. Prints, one per line as `name: value`:

  failed_requests_during_stop  failed requests among those sent before the stop (target 0)
  stop_seconds                 how long `docker stop` took (target <= longest_inflight_seconds + 2)
  longest_inflight_seconds     the longest request that was running while the container was stopping
  start_to_ready_seconds       `docker run` to /v2/health/ready answering 200
  image_layers_mb              size of the role's layers over the base image

The clients stop sending when the stop begins, as on ECS, which deregisters a task from its target groups before it
sends SIGTERM. A second stop covers traffic that keeps arriving for 0.5 s after SIGTERM (a caller that does not go
through the load balancer), which tritonserver alone would refuse:

  late_traffic_failed_requests  failed requests among all sent, late ones included (target 0)
  late_traffic_stop_seconds     how long that `docker stop` took
  late_traffic_last_answer_seconds  when the last request was answered, counted from the stop

Exits non-zero only when it cannot measure (no Docker, build or start failure).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.harness.figures import report
from tests.harness.images import triton_cpu_base
from tests.harness.triton import write_model
from tests.harness.triton_image import (
    DrainRun,
    TritonContainer,
    build_image,
    digest_ref,
    image_size_bytes,
    role_vars,
    stop_under_load,
    world_readable,
)

WORK = Path(__file__).resolve().parents[1] / ".cache" / "bench-drain"


def stopped_under_load(image: str, models: Path, lag_s: float) -> tuple[float, DrainRun]:
    """Start the image, wait until ready, `docker stop` it under load: (start-to-ready seconds, the stop)."""
    container = TritonContainer(image, models, env={"TRITON_LOAD_MODELS": "slow", "TRITON_SMOKE_MODEL": ""})
    try:
        ready_s = container.start().wait_ready()
        return ready_s, stop_under_load(container, "slow", clients=4, warmup_s=2.0, lag_s=lag_s)
    finally:
        container.remove()


def measure() -> dict[str, float]:
    base = triton_cpu_base()
    WORK.mkdir(parents=True, exist_ok=True)
    run = build_image(role_vars(WORK / "build", WORK / "source", "inferops-bench/triton"))
    if run.rc != 0:
        raise RuntimeError(f"the triton_image role failed (rc {run.rc}):\n{run.stdout[-3000:]}\n{run.stderr[-2000:]}")
    image = digest_ref(run)
    with tempfile.TemporaryDirectory(prefix="bench-drain-") as tmp:
        models = Path(tmp) / "models"
        write_model(models, "slow", delay_ms=200, instances=1)
        world_readable(Path(tmp))
        ready_s, drained = stopped_under_load(image, models, lag_s=0.0)
        _ready_s, late = stopped_under_load(image, models, lag_s=0.5)
    return {
        "failed_requests_during_stop": len(drained.failed_during_stop),
        "stop_seconds": round(drained.stop_seconds, 2),
        "longest_inflight_seconds": round(drained.longest_inflight_seconds, 2),
        "start_to_ready_seconds": round(ready_s, 2),
        "image_layers_mb": round((image_size_bytes(image) - image_size_bytes(base)) / 1e6, 2),
        "late_traffic_failed_requests": len(late.failed_during_stop),
        "late_traffic_stop_seconds": round(late.stop_seconds, 2),
        "late_traffic_last_answer_seconds": round(late.last_completion_after_stop, 2),
    }


def main() -> int:
    try:
        figures = measure()
    except Exception as exc:  # cannot measure: say why, exit non-zero
        print(f"bench/drain.py: cannot measure: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return report(figures)


if __name__ == "__main__":
    sys.exit(main())
