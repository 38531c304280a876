# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The instance refresh of an AMI rollout: started towards the new version, watched, gated at each checkpoint.

AWS does the replacing: a rolling refresh with checkpoints (it pauses `CheckpointDelay` at each), skip matching
(the instances already on the new version stay), scale-in protected instances refreshed (the capacity provider's
managed termination protection protects every instance that runs tasks), auto rollback on the fleet's alarms
(`AlarmSpecification`). ECS managed draining (the capacity provider's `managedDraining`) holds each instance the
refresh terminates on ECS's lifecycle hook, sets its container instance DRAINING, lets the services move their tasks
away, then lets it go. The controller watches: each poll it records the container instances it sees DRAINING on
the way out, checks the alarms, and at each checkpoint checks every new instance (joined, its GPUs, Healthy in its
group); a problem rolls the refresh back (RollbackInstanceRefresh: AWS replaces the new instances with the group's
previous version). A controller that dies leaves the refresh to AWS, still gated by its alarms.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._ami_rollout import plan as ar
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import autoscaling as asg_svc
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import ecs as ecs_svc
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import ClientError, error_code


class Refresh:
    def __init__(self, run: Any) -> None:
        self.run = run
        self.refresh_id = ""
        self.passed: list[int] = []
        self.drained: dict[str, str] = {}  # instance -> container instance status seen while it left the group
        self.last: dict[str, Any] = {}

    def start(self, version: str) -> None:
        run = self.run
        run.write()
        desired = {"LaunchTemplate": {"LaunchTemplateId": run.fleet.template_id, "Version": version}}
        self.refresh_id = asg_svc.start_instance_refresh(run.aws.autoscaling, run.fleet.group_name, desired, ar.preferences(run.p))
        run.actions.append(f"start instance refresh {self.refresh_id} of {run.fleet.group_name} to version {version}")

    def current(self) -> dict[str, Any]:
        found = asg_svc.describe_instance_refreshes(self.run.aws.autoscaling, self.run.fleet.group_name)
        mine = next((r for r in found if r.get("InstanceRefreshId") == self.refresh_id), None) if self.refresh_id else None
        self.last = mine or (found[0] if found else {})
        self.refresh_id = self.last.get("InstanceRefreshId", self.refresh_id)
        return self.last

    def watch(self, version: str) -> None:
        """Until the refresh is Successful; RolloutFailed when it fails, a gate fails, or refresh.timeout_s passes."""
        run = self.run
        options = run.p["refresh"]
        deadline = run.clock.monotonic() + options["timeout_s"]
        while True:
            refresh = self.current()
            status = refresh.get("Status", "")
            group = self.observe_drains()
            if status == "Successful":
                self.final_check(group, version)
                run.timeline.append({"phase": "refresh", "outcome": "ok", "detail": f"instance refresh {self.refresh_id} Successful"})
                return
            if status in ar.REFRESH_FAILED or status in ("Cancelling", "RollbackInProgress"):
                raise ar.RolloutFailed(f"instance refresh {self.refresh_id} is {status}: {refresh.get('StatusReason', 'no reason given')}")
            problems = run.alarm_problems()
            point = ar.checkpoint_reached(refresh, options["checkpoints"], self.passed)
            if point is not None and not problems:
                problems = ar.fleet_problems(group, version, ecs_svc.container_instances_by_ec2_id(run.aws.ecs, run.p["cluster"]), run.gpus)
                if not problems:
                    self.passed.append(point)
                    fresh = [
                        i["InstanceId"]
                        for i in group.get("Instances") or []
                        if str((i.get("LaunchTemplate") or {}).get("Version")) == version
                    ]
                    run.timeline.append(
                        {
                            "phase": f"checkpoint {point}%",
                            "outcome": "ok",
                            "detail": f"alarms OK; {len(fresh)} instances of version {version} joined with their GPUs",
                        }
                    )
            if problems:
                raise ar.RolloutFailed(
                    f"instance refresh {self.refresh_id} at {refresh.get('PercentageComplete', 0)}%: " + "; ".join(problems)
                )
            if run.clock.monotonic() >= deadline:
                raise ar.RolloutFailed(f"instance refresh {self.refresh_id} not Successful after {options['timeout_s']} s ({status})")
            run.clock.sleep(min(options["poll_interval_s"], max(deadline - run.clock.monotonic(), 0)))

    def final_check(self, group: dict[str, Any], version: str) -> None:
        """The last checkpoint, when the refresh ended before the controller saw it: AWS has already moved the group to
        the new version, so its verdict is reported (a rollback is no longer possible; roll the previous AMI out)."""
        run = self.run
        for point in [p for p in run.p["refresh"]["checkpoints"] if p not in self.passed]:
            problems = ar.fleet_problems(group, version, ecs_svc.container_instances_by_ec2_id(run.aws.ecs, run.p["cluster"]), run.gpus)
            problems += run.alarm_problems()
            self.passed.append(point)
            detail = "; ".join(problems) if problems else f"alarms OK; every instance of version {version} joined with its GPUs"
            run.timeline.append({"phase": f"checkpoint {point}%", "outcome": "warning" if problems else "ok", "detail": detail})

    def observe_drains(self) -> dict[str, Any]:
        """The group now; each instance on its way out whose container instance is DRAINING is recorded."""
        run = self.run
        group = asg_svc.describe_group(run.aws.autoscaling, run.fleet.group_name) or {}
        leaving = [i["InstanceId"] for i in group.get("Instances") or [] if i.get("LifecycleState", "").startswith("Terminat")]
        if leaving:
            by_id = ecs_svc.container_instances_by_ec2_id(run.aws.ecs, run.p["cluster"], ("ACTIVE", "DRAINING"))
            for instance_id in leaving:
                status = (by_id.get(instance_id) or {}).get("status", "deregistered")
                if self.drained.get(instance_id) != "DRAINING":
                    self.drained[instance_id] = status
        return group

    def roll_back(self) -> str:
        """Stop the refresh and put the instances it replaced back on the group's version; '' when nothing ran."""
        run = self.run
        refresh = self.current()
        if refresh.get("Status") not in ar.REFRESH_RUNNING:
            return ""
        if refresh.get("Status") in ("Cancelling", "RollbackInProgress"):
            return refresh["Status"]
        try:
            asg_svc.rollback_instance_refresh(run.aws.autoscaling, run.fleet.group_name)
            run.actions.append(f"roll back instance refresh {self.refresh_id}")
            return "RollbackInProgress"
        except ClientError as e:
            # A refresh that cannot roll back (nothing replaced yet, or AWS refuses) is cancelled: nothing new launches.
            if error_code(e) not in ("ActiveInstanceRefreshNotFound", "IrreversibleInstanceRefresh", "ValidationError"):
                raise
        asg_svc.cancel_instance_refresh(run.aws.autoscaling, run.fleet.group_name)
        run.actions.append(f"cancel instance refresh {self.refresh_id}")
        return "Cancelling"

    def wait_ended(self, timeout_s: float) -> str:
        """Until the refresh (or its rollback) has ended; its last status."""
        run = self.run
        deadline = run.clock.monotonic() + timeout_s
        while True:
            status = self.current().get("Status", "")
            self.observe_drains()
            if status not in ar.REFRESH_RUNNING or run.clock.monotonic() >= deadline:
                return status
            run.clock.sleep(run.p["refresh"]["poll_interval_s"])
