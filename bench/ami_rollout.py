"""The gated AMI rollout against moto behind the instance refresh stand-in, with a real tritonserver on the canary.

Prints, one per line as `name: value`:
- ami_rollout_api_calls: AWS API requests of one successful rollout of a two-instance fleet (new launch template
  version, canary joined, smoke inference through the test route, bake, instance refresh with checkpoints [50, 100],
  default version), reads and writes, counted at the stand-in in front of moto; reported;
- ami_rollout_seconds: its wall time (canary bake 1 s, checkpoint delay 1 s: the waits are the bench's, not AWS's);
- ami_revert_seconds: for a canary whose AMI registers no GPU, seconds from the failed verdict to the end of the revert
  (canary drained and terminated, the new version deleted, the previous version still the group's); reported;
- ami_revert_api_calls: AWS API requests of that failed rollout, from start to the end of the revert.

Stand-ins (tests/harness/instance_refresh.py, ami_fleet.py): moto for EC2, Auto Scaling, ECS, ELBv2 and CloudWatch; the
proxy for the instance refresh, ECS managed draining, the instances' boot and GPUs, the canary task's placement and
address. Exits 1 only when it cannot measure.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / ".build" / "collections"))  # the collection, as pytest.ini adds it

from ansible_collections.amazon.aws.plugins.module_utils.retries import AWSRetry, RetryingBotoClientWrapper
from ansible_collections.inferops.triton_ecs.plugins.module_utils._ami_rollout.runner import Clients, roll_ami
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.controller_watch import ControllerWatch
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.guard import CutoverGuard, GuardedClock
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.lock import CutoverLock, new_owner
from tests.harness.alb import AlbRoute
from tests.harness.ami_fleet import AMI_NEW, create_fleet
from tests.harness.figures import report
from tests.harness.instance_refresh import Boot, RefreshProxy
from tests.harness.moto import MotoServer
from tests.harness.triton import TritonServer, write_model

SMOKE = {
    "model": "simple",
    "inputs": [{"name": "INPUT0", "shape": [2], "datatype": "FP32", "data": [1.0, 2.0]}],
    "expected_outputs": [{"name": "OUTPUT0", "data": [2.0, 3.0]}],
}


def rollout(workdir: Path, triton: TritonServer, broken: bool) -> tuple[dict, int, float]:
    moto = MotoServer(workdir / ("broken" if broken else "good")).start()
    proxy = RefreshProxy(moto, "inference").start()
    try:
        fleet = create_fleet(moto, proxy, triton.http_port)
        if broken:
            proxy.boots[AMI_NEW] = Boot(gpus=0)
        with AlbRoute(moto, listener_arn=fleet.test_listener_arn) as route:
            proxy.calls.clear()
            wrap = AWSRetry.jittered_backoff(retries=3)
            aws = Clients(*(RetryingBotoClientWrapper(proxy.client(s), wrap) for s in ("ec2", "ecs", "elbv2", "autoscaling", "cloudwatch")))
            guard = CutoverGuard(ControllerWatch(), None)
            owner = new_owner()
            started = time.monotonic()
            result = roll_ami(
                aws,
                fleet.module_params(route.url, gates={"smoke": SMOKE}),
                guard,
                GuardedClock(guard),
                False,
                lambda arn: CutoverLock(aws.elbv2, arn, "triton", owner, 900),
            )
            return result, len(proxy.calls), time.monotonic() - started
    finally:
        proxy.stop()
        moto.stop()


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="bench-ami-") as tmp:
        workdir = Path(tmp)
        (workdir / "good").mkdir()
        (workdir / "broken").mkdir()
        write_model(workdir / "repo", "simple")
        triton = TritonServer(workdir / "repo", workdir, models=("simple",)).start()
        try:
            good, good_calls, good_s = rollout(workdir, triton, broken=False)
            bad, bad_calls, _bad_s = rollout(workdir, triton, broken=True)
        finally:
            triton.stop()
    if good["outcome"] != "rolled_out" or bad["outcome"] != "reverted":
        print(f"cannot measure: good rollout {good['outcome']} ({good['failure']}), broken canary {bad['outcome']}", file=sys.stderr)
        return 1
    return report(
        {
            "ami_rollout_api_calls": good_calls,
            "ami_rollout_seconds": f"{good_s:.1f}",
            "ami_revert_seconds": f"{bad['revert_seconds']:.2f}",
            "ami_revert_api_calls": bad_calls,
        }
    )


if __name__ == "__main__":
    sys.exit(main())
