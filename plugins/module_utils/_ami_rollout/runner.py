# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The module's run of an AMI rollout: observe, decide, take the cutover lock, then version, canary, refresh, default.

One change at a time per application: the rollout holds the cutover lock (`_bluegreen/lock.py`) on the application's
production listener, found as the emergency rollback finds it (`_bluegreen/application.discover`), so a cutover and an
AMI rollout of one application never run together. Every write first checks that the controller still runs and the
lock is still held (`CutoverGuard`); every wait is cut into slices that check the same.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._ami_rollout import plan as ar
from ansible_collections.inferops.triton_ecs.plugins.module_utils._ami_rollout.canary import Canary
from ansible_collections.inferops.triton_ecs.plugins.module_utils._ami_rollout.refresh import Refresh
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import autoscaling as asg_svc
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import cloudwatch as cw
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import ec2 as ec2_svc
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import ecs as ecs_svc
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import BotoCoreError, ClientError, InputError
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import gates
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.application import discover
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.clock import Clock
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.colors import other
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.guard import CutoverGuard
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.lock import CutoverLock
from ansible_collections.inferops.triton_ecs.plugins.module_utils._triton_client import TritonClient


@dataclass
class Clients:
    ec2: Any
    ecs: Any
    elbv2: Any
    autoscaling: Any
    cloudwatch: Any


def observe_fleet(aws: Clients, params: dict[str, Any]) -> ar.Fleet:
    """The group, its template's versions, its newest refresh and the capacity providers of the cluster that use it."""
    name = params["auto_scaling_group"]
    group = asg_svc.describe_group(aws.autoscaling, name)
    if group is None:
        raise InputError(f"auto_scaling_group {name}: no such Auto Scaling group; give the fleet's (fleet_capacity_name)")
    spec = group.get("LaunchTemplate") or {}
    fleet = ar.Fleet(name, group, spec.get("LaunchTemplateId", ""), spec.get("LaunchTemplateName", ""), str(spec.get("Version", "")))
    if fleet.template_id:
        fleet.versions = ec2_svc.describe_launch_template_versions(aws.ec2, fleet.template_id)
    refreshes = asg_svc.describe_instance_refreshes(aws.autoscaling, name)
    fleet.refresh = max(refreshes, key=lambda r: str(r.get("StartTime", ""))) if refreshes else None
    cluster = ecs_svc.describe_cluster(aws.ecs, params["cluster"]) or {}
    providers = ecs_svc.describe_capacity_providers(aws.ecs, list(cluster.get("capacityProviders") or []))
    fleet.providers = [
        p for p in providers if (p.get("autoScalingGroupProvider") or {}).get("autoScalingGroupArn") == group.get("AutoScalingGroupARN")
    ]
    return fleet


class Rollout:
    def __init__(
        self, aws: Clients, params: dict[str, Any], guard: CutoverGuard, clock: Clock, triton: Callable[[str, float], Any] = TritonClient
    ) -> None:
        self.aws, self.p, self.guard, self.clock, self.triton = aws, params, guard, clock, triton
        self.fleet: ar.Fleet
        self.app: Any = None
        self.live_color = self.standby_color = ""
        self.gpus: int | None = None
        self.actions: list[str] = []
        self.timeline: list[dict[str, str]] = []

    def write(self) -> None:
        self.guard.before_write()

    def alarm_problems(self) -> list[str]:
        names = self.p.get("alarm_names") or []
        return gates.alarm_problems(cw.describe_alarms(self.aws.cloudwatch, names), names) if names else []

    def prepare(self, make_lock: Callable[[str], CutoverLock]) -> ar.Plan:
        """Everything read and checked before the first write (check mode stops after this)."""
        errors = ar.validate_params(self.p)
        if errors:
            raise InputError(errors)
        self.app = discover(self.aws.ecs, self.aws.elbv2, self.p)
        self.live_color = self.app.live
        self.standby_color = other(self.live_color)
        standby = self.app.colors[self.standby_color]
        if self.p.get("test_route_url") and (standby.desired or standby.healthy):
            raise InputError(
                f"the standby colour's service {standby.service} runs {standby.desired} tasks ({standby.healthy} healthy targets): the test "
                "route would not reach the canary alone. Scale it to 0 (the cutover's old_color: scale_down does) and run again"
            )
        names = self.p.get("alarm_names") or []
        missing = gates.missing_alarms(cw.describe_alarms(self.aws.cloudwatch, names), names) if names else []
        if missing:
            raise InputError(
                f"alarm_names: no CloudWatch alarm named {', '.join(missing)}: give the fleet_alarms names (or create them first)"
            )
        self.fleet = observe_fleet(self.aws, self.p)
        plan = ar.decide(self.fleet, self.p)
        base = self.fleet.version(plan.base_version) or {}
        kind = (base.get("LaunchTemplateData") or {}).get("InstanceType", "")
        self.gpus = ar.expected_gpus((ec2_svc.describe_instance_types(self.aws.ec2, [kind]) or [None])[0]) if kind else None
        self.guard.lock = make_lock(self.app.http.arn)
        self.guard.check_free()
        return plan

    def run(self, plan: ar.Plan) -> dict[str, Any]:
        """The writes: the lock, then each stage; a failed gate reverts and is returned as `failure`."""
        started = self.clock.monotonic()
        self.guard.take_lock()
        canary, refresh = Canary(self), Refresh(self)
        failure, revert = "", {}
        error: BaseException | None = None
        try:
            if plan.new_version == plan.base_version:
                self.make_default(plan.new_version)
                return self.result(plan, "rolled_out", started, canary, refresh)
            if not plan.new_version:
                plan.new_version = self.create_version(plan.base_version)
            try:
                if plan.action == "rollout":
                    self.prove(canary, plan.new_version)
                    refresh.start(plan.new_version)
                else:
                    refresh.current()
                refresh.watch(plan.new_version)
                self.make_default(plan.new_version)
            except (ar.RolloutFailed, ClientError, BotoCoreError) as e:
                if self.guard.refuses(e):
                    raise
                failure = str(e) if isinstance(e, ar.RolloutFailed) else f"AWS call failed during the rollout: {e}"
                self.timeline.append({"phase": "revert", "outcome": "started", "detail": failure})
                revert_started = self.clock.monotonic()
                revert = self.revert(plan, canary, refresh)
                revert["seconds"] = round(self.clock.monotonic() - revert_started, 3)
            return self.result(plan, "reverted" if failure else "rolled_out", started, canary, refresh, failure, revert)
        except BaseException as e:
            error = e
            raise
        finally:
            self.guard.end(complete=True, error=error)

    def create_version(self, base: str) -> str:
        self.write()
        data = {"ImageId": self.p["ami_id"]}
        created = ec2_svc.create_launch_template_version(
            self.aws.ec2, self.fleet.template_id, base, data, f"inferops AMI rollout: {self.p['ami_id']} (from version {base})"
        )
        number = str(created["VersionNumber"])
        self.actions.append(f"create launch template {self.fleet.template_name} version {number}: image {self.p['ami_id']}")
        return number

    def prove(self, canary: Canary, version: str) -> None:
        error: BaseException | None = None
        try:
            canary.launch(version)
            canary.wait_joined()
            problems = canary.problems()
            if problems:
                raise ar.RolloutFailed("canary: " + "; ".join(problems))
            self.timeline.append(
                {"phase": "canary joined", "outcome": "ok", "detail": f"{canary.instance_id}: ACTIVE, {self.gpus} GPUs, healthy"}
            )
            detail = canary.smoke()
            self.timeline.append({"phase": "canary smoke", "outcome": "ok", "detail": detail})
            canary.bake()
            self.timeline.append(
                {"phase": "canary bake", "outcome": "ok", "detail": f"{self.p['canary']['bake_s']} s ACTIVE and healthy, alarms OK"}
            )
        except BaseException as e:
            error = e
            if isinstance(e, ar.RolloutFailed):
                self.timeline.append({"phase": "canary", "outcome": "failed", "detail": str(e)})
            raise
        finally:
            if error is None or not self.guard.refuses(error):
                canary.cleanup()

    def make_default(self, version: str) -> None:
        if self.fleet.default_version == version:
            return
        self.write()
        ec2_svc.set_default_launch_template_version(self.aws.ec2, self.fleet.template_id, version)
        self.actions.append(f"make version {version} the default of launch template {self.fleet.template_name}")

    def revert(self, plan: ar.Plan, canary: Canary, refresh: Refresh) -> dict[str, Any]:
        """Back to the base version: the refresh rolled back (or cancelled), the canary gone, the base the default,
        the new version deleted once nothing runs towards it."""
        canary.cleanup()
        stopped = refresh.roll_back()
        status = refresh.wait_ended(self.p["refresh"]["revert_timeout_s"]) if stopped else ""
        versions = ec2_svc.describe_launch_template_versions(self.aws.ec2, self.fleet.template_id, [plan.base_version, plan.new_version])
        default = next((str(v["VersionNumber"]) for v in versions if v.get("DefaultVersion")), "")
        if default and default != plan.base_version:
            ec2_svc.set_default_launch_template_version(self.aws.ec2, self.fleet.template_id, plan.base_version)
            self.actions.append(f"make version {plan.base_version} the default of launch template {self.fleet.template_name} again")
        deleted = ""
        if status not in ar.REFRESH_RUNNING and plan.new_version != plan.base_version:
            refused = ec2_svc.delete_launch_template_versions(self.aws.ec2, self.fleet.template_id, [plan.new_version])
            if not refused:
                self.actions.append(f"delete launch template {self.fleet.template_name} version {plan.new_version}")
                deleted = plan.new_version
        self.timeline.append(
            {
                "phase": "revert",
                "outcome": "ok" if status not in ar.REFRESH_RUNNING else "incomplete",
                "detail": f"refresh {status or 'never started'}; version {plan.base_version} is the group's and the default",
            }
        )
        return {"refresh_status": status, "default_version": plan.base_version, "deleted_version": deleted}

    def result(
        self,
        plan: ar.Plan,
        outcome: str,
        started: float,
        canary: Canary | None = None,
        refresh: Refresh | None = None,
        failure: str = "",
        revert: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        before = {
            "group_version": self.fleet.group_version,
            "default_version": self.fleet.default_version,
            "image": ar.image_of(self.fleet.version(self.fleet.group_version)),
        }
        if outcome in ("planned", "noop") or failure:
            after = (
                dict(before)
                if outcome != "planned"
                else {
                    "group_version": plan.new_version or "(new)",
                    "default_version": plan.new_version or "(new)",
                    "image": self.p["ami_id"],
                }
            )
        else:
            after = {"group_version": plan.new_version, "default_version": plan.new_version, "image": self.p["ami_id"]}
        return {
            "changed": bool(self.actions) or outcome == "planned",
            "decision": plan.action,
            "outcome": outcome,
            "reason": plan.reason,
            "failure": failure,
            "ami_id": self.p["ami_id"],
            "auto_scaling_group": self.fleet.group_name,
            "base_version": plan.base_version,
            "new_version": plan.new_version,
            "steps": plan.steps,
            "actions": self.actions,
            "timeline": self.timeline,
            "expected_gpus": self.gpus,
            "refresh": {"id": refresh.refresh_id, "status": refresh.last.get("Status", ""), "checkpoints_passed": refresh.passed}
            if refresh
            else {},
            "drained_instances": dict(refresh.drained) if refresh else {},
            "revert": revert or {},
            "revert_seconds": (revert or {}).get("seconds", 0.0),
            "production_arn": self.app.http.arn,
            "wall_s": round(self.clock.monotonic() - started, 3),
            "diff": {"before": before, "after": after},
        }


def roll_ami(
    aws: Clients,
    params: dict[str, Any],
    guard: CutoverGuard,
    clock: Clock,
    check_mode: bool,
    make_lock: Callable[[str], CutoverLock],
    triton: Callable[[str, float], Any] = TritonClient,
) -> dict[str, Any]:
    rollout = Rollout(aws, params, guard, clock, triton)
    started = time.monotonic()
    plan = rollout.prepare(make_lock)
    if plan.action == "noop":
        return rollout.result(plan, "noop", clock.monotonic())
    if check_mode:
        result = rollout.result(plan, "planned", clock.monotonic())
        result["wall_s"] = round(time.monotonic() - started, 3)
        return result
    return rollout.run(plan)
