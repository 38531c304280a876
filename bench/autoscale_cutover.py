"""Benchmark of a blue/green cutover with autoscaling, against a moto server (ECS, ELBv2, CloudWatch, Application
Auto Scaling, Auto Scaling, EC2), through ansible-playbook as tests/integration/test_autoscaling.py runs it.

Blue is live with the target-tracking and the GPU step-scaling policies (module bluegreen_autoscaling; 3 policies,
2 alarms) and has been scaled to 5 tasks (the inventory's desired count is 2). One bluegreen task cuts over to
green (steps [50, 100], 3 s bake); then a second cutover back to blue sees an alarm fire during its first bake
and rolls back.

Prints, one per line as `name: value`:
- desired_carried_over: 1 when green came up at 5 tasks, else 0;
- scale_in_suspended_during_cutover: 1 when Application Auto Scaling showed blue's dynamic scale-in suspended
  during the bake of the 50 % step, else 0;
- policies_on_live_after: 1 when, after the cutover, green alone has the scalable target, its 3 policies and
  scale-in not suspended, else 0;
- policies_on_live_after_rollback: the same for green after the rolled-back second cutover;
- cutover_extra_api_calls: Application Auto Scaling and CloudWatch calls the autoscaling handling made in the
  cutover (the module counts each call it makes). Target: <= 12;
- rollback_extra_api_calls: the same for the rolled-back cutover.

moto stands in for ECS registering tasks in the target groups and for autoscaling scaling blue to 5 (the desired
count is set directly); see tests/harness/. Exits non-zero only when it cannot measure.
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.harness.ansible import REPO_ROOT, run_playbook
from tests.harness.autoscaling import policies, scale_in_suspended, scale_live, scaling_args, targets
from tests.harness.bluegreen import CUTOVER_PLAYBOOK, BlueGreenApp, create_app
from tests.harness.figures import report
from tests.harness.moto import MotoServer

ONE_TASK = REPO_ROOT / "tests" / "integration" / "playbooks" / "autoscaling_module.yml"
POLICY_COUNT = 3


def on_live(app: BlueGreenApp, color: str) -> int:
    return int(set(targets(app)) == {color} and len(policies(app, color)) == POLICY_COUNT and not scale_in_suspended(app, color))


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        moto = MotoServer(Path(tmp)).start()
        try:
            app = create_app(moto)
            made = run_playbook(ONE_TASK, {"as_args": scaling_args(app)}, env=moto.env())
            if made.rc != 0:
                print(f"cannot measure: the policies were not created\n{made.stdout[-3000:]}", file=sys.stderr)
                return 1
            scale_live(app, "blue", 5)
            app.register_targets("green", 5)
            # room for both colours at 5 one-GPU tasks (the harness's group holds 4)
            moto.client("autoscaling").update_auto_scaling_group(AutoScalingGroupName="gpu", MaxSize=10)

            seen_suspended: list[bool] = []

            def read_during_bake() -> None:
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline:
                    if app.weights()["green"] == 50:
                        seen_suspended.append(scale_in_suspended(app, "blue"))
                        return
                    time.sleep(0.1)

            reader = threading.Thread(target=read_during_bake)
            reader.start()
            args = app.module_args("triton:2", autoscaling=True, traffic_steps=[50, 100], bake_time_s=3)
            run = run_playbook(CUTOVER_PLAYBOOK, {"bg_args": args}, env=moto.env())
            reader.join()
            if run.rc != 0 or not seen_suspended:
                print(f"cannot measure: the cutover failed or its bake was not seen\n{run.stdout[-3000:]}", file=sys.stderr)
                return 1
            result = run.result("Cutover")
            carried = int(result["desired_counts"]["green"] == 5)
            after_cutover = on_live(app, "green")

            app.register_targets("blue", 5)
            alarm = threading.Thread(target=app.alarm_once_it_has_traffic, args=("blue", "benchmark"))
            alarm.start()
            args = app.module_args("triton:3", autoscaling=True, traffic_steps=[50, 100], bake_time_s=30)
            rolled = run_playbook(CUTOVER_PLAYBOOK, {"bg_args": args}, env=moto.env())
            alarm.join()
            rollback = rolled.result("Cutover") if rolled.tasks else {}
            if not rollback.get("rollback"):
                print(f"cannot measure: no rollback happened\n{rolled.stdout[-3000:]}", file=sys.stderr)
                return 1
            after_rollback = on_live(app, "green")
        finally:
            moto.stop()

    return report(
        {
            "desired_carried_over": carried,
            "scale_in_suspended_during_cutover": int(seen_suspended[0]),
            "policies_on_live_after": after_cutover,
            "policies_on_live_after_rollback": after_rollback,
            "cutover_extra_api_calls": result["autoscaling"]["api_calls"],
            "rollback_extra_api_calls": rollback["autoscaling"]["api_calls"],
        }
    )


if __name__ == "__main__":
    raise SystemExit(main())
