# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The canary of an AMI rollout: one instance from the new launch template version, proven without SSH.

The controller has no reach into the VPC, so the canary proves itself through what AWS and the test route show:
- it joins the cluster: its container instance is ACTIVE with the agent connected (the AMI's boot order held: driver,
  DCGM, the model agent's hydration and gpu_health's count check all come before ecs.service, so an instance whose
  GPUs or models are wrong never registers, and the wait times out);
- its GPUs: the ECS agent registered as many GPUs as EC2 says its instance type has;
- its health: the container instance stays ACTIVE (gpu_health drains an instance whose GPUs fail) and the ECS agent's
  health report (ACCELERATED_COMPUTE, from DCGM) is not IMPAIRED, through the bake;
- Triton serves on it: one task of the live colour's task definition (the release in production: image, models)
  placed on it with `memberOf(ec2InstanceId == ...)`, registered by its awsvpc address in the standby colour's target
  group, which the test listener forwards to, answers ready, its models and the smoke inference through the test route.

The canary runs outside the Auto Scaling group (a group launches only its own version), so no service task is placed
on it by a capacity provider strategy; it is drained through ECS and terminated when it has spoken, pass or fail.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._ami_rollout import plan as ar
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import ec2 as ec2_svc
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import ecs as ecs_svc
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import elbv2 as elb
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import gates, listener_actions


class Canary:
    """One canary instance of `run` (the rollout's state: clients, params, clock, guard, timeline, writes)."""

    def __init__(self, run: Any) -> None:
        self.run = run
        self.instance_id = ""
        self.container_instance: dict[str, Any] | None = None
        self.task_arn = ""
        self.target: tuple[str, int] | None = None

    # ------------------------------------------------------------ launch and join

    def launch(self, version: str) -> None:
        run = self.run
        subnets = [s for s in (run.fleet.group.get("VPCZoneIdentifier") or "").split(",") if s]
        if not subnets:
            raise ar.RolloutFailed(f"Auto Scaling group {run.fleet.group_name} names no subnet: the canary has nowhere to launch")
        run.write()
        instance = ec2_svc.run_instance(
            run.aws.ec2,
            {"LaunchTemplateId": run.fleet.template_id, "Version": version},
            subnets[0],
            {ar.CANARY_TAG: run.fleet.group_name, "Name": f"{run.fleet.group_name}-ami-canary"},
        )
        self.instance_id = instance["InstanceId"]
        run.actions.append(f"launch canary {self.instance_id} from version {version} in {subnets[0]}")

    def wait_joined(self) -> None:
        """Until the canary's container instance is ACTIVE with its agent connected (its GPUs and health checked next)."""
        run = self.run
        timeout = run.p["canary"]["join_timeout_s"]
        deadline = run.clock.monotonic() + timeout
        while True:
            self.container_instance = ecs_svc.container_instance_of(run.aws.ecs, run.p["cluster"], self.instance_id)
            if (
                self.container_instance
                and self.container_instance.get("status") == "ACTIVE"
                and self.container_instance.get("agentConnected")
            ):
                return
            instance = ec2_svc.describe_instance(run.aws.ec2, self.instance_id) or {}
            state = (instance.get("State") or {}).get("Name", "gone")
            if state not in ("pending", "running"):
                raise ar.RolloutFailed(f"canary {self.instance_id} is {state} before joining the cluster")
            if run.clock.monotonic() >= deadline:
                seen = self.container_instance.get("status") if self.container_instance else "not registered"
                raise ar.RolloutFailed(
                    f"canary {self.instance_id} did not join cluster {run.p['cluster']} within {timeout} s ({seen}): the AMI's boot "
                    "(driver, DCGM, model hydration, gpu_health's GPU count) keeps ECS stopped when it fails; read its console output"
                )
            run.clock.sleep(min(run.p["canary"]["poll_interval_s"], max(deadline - run.clock.monotonic(), 0)))

    def problems(self) -> list[str]:
        run = self.run
        self.container_instance = ecs_svc.container_instance_of(run.aws.ecs, run.p["cluster"], self.instance_id)
        return ar.instance_problems(self.instance_id, self.container_instance, run.gpus)

    # ------------------------------------------------------------ Triton on the canary, through the test route

    def smoke(self) -> str:
        """Place the live release's task on the canary, route the test listener to it, run the gates. Returns a summary."""
        run = self.run
        app, url = run.app, run.p.get("test_route_url")
        if not url:
            return "no test route given: Triton not checked on the canary"
        standby = run.standby_color
        service = app.services[app.service_names[run.live_color]]
        definition = ecs_svc.describe_task_definition(run.aws.ecs, service["taskDefinition"]) or {}
        port = ar.container_port(definition.get("taskDefinition") or {})
        self.point_test_listener(standby)
        run.write()
        task = ecs_svc.run_task_on(
            run.aws.ecs, run.p["cluster"], service["taskDefinition"], self.instance_id, service.get("networkConfiguration"), ar.STARTED_BY
        )
        self.task_arn = task["taskArn"]
        run.actions.append(f"run task {service['taskDefinition'].rsplit('/', 1)[-1]} on canary {self.instance_id}")
        if task.get("containerInstanceArn") != (self.container_instance or {}).get("containerInstanceArn"):
            raise ar.RolloutFailed(
                f"ECS placed the canary task {self.task_arn} on {task.get('containerInstanceArn')}, not on canary {self.instance_id}"
            )
        ip = self.wait_task_address()
        run.write()
        elb.register_ip_target(run.aws.elbv2, app.http.target_groups[standby], ip, port)
        self.target = (ip, port)
        run.actions.append(f"register {ip}:{port} in the {standby} target group (the test route)")
        return self.gates(url)

    def point_test_listener(self, color: str) -> None:
        run = self.run
        arn = run.p.get("test_listener_arn")
        if not arn:
            return
        listener = elb.describe_listener(run.aws.elbv2, arn)
        tg = run.app.http.target_groups[color]
        if listener and listener_actions.forwards_only_to(listener["DefaultActions"], tg):
            return
        run.write()
        elb.modify_listener(
            run.aws.elbv2, arn, {"DefaultActions": listener_actions.single_forward(listener["DefaultActions"] if listener else [], tg)}
        )
        run.actions.append(f"point test listener at {color}")

    def wait_task_address(self) -> str:
        run = self.run
        deadline = run.clock.monotonic() + run.p["canary"]["task_timeout_s"]
        while True:
            found = ecs_svc.describe_tasks(run.aws.ecs, run.p["cluster"], [self.task_arn])
            task = found[0] if found else {}
            if task.get("lastStatus") == "STOPPED":
                raise ar.RolloutFailed(f"the canary task {self.task_arn} stopped: {task.get('stoppedReason', 'no reason given')}")
            address = ar.task_address(task)
            if address and task.get("lastStatus") == "RUNNING":
                return address
            if run.clock.monotonic() >= deadline:
                raise ar.RolloutFailed(
                    f"the canary task {self.task_arn} is not RUNNING with an address after {run.p['canary']['task_timeout_s']} s"
                )
            run.clock.sleep(run.p["canary"]["poll_interval_s"])

    def gates(self, url: str) -> str:
        """Triton live, ready, the expected models READY and the smoke inference as expected, retried until gates.timeout_s."""
        run = self.run
        options = run.p["gates"]
        deadline = run.clock.monotonic() + options["timeout_s"]
        while True:
            problems = self.gate_problems(url, options)
            if not problems:
                return (
                    "Triton ready, models READY"
                    + (", smoke inference as expected" if options.get("smoke") else "")
                    + " through the test route"
                )
            if run.clock.monotonic() >= deadline:
                raise ar.RolloutFailed(f"the canary's Triton through the test route: {'; '.join(problems)}")
            run.clock.sleep(options["interval_s"])

    def gate_problems(self, url: str, options: dict[str, Any]) -> list[str]:
        return gates.triton_problems(self.run.triton(url, options["request_timeout_s"]), url, options)

    # ------------------------------------------------------------ bake and cleanup

    def bake(self) -> None:
        """The canary stays ACTIVE, with its GPUs, and healthy for canary.bake_s (alarms watched too)."""
        run = self.run
        end = run.clock.monotonic() + run.p["canary"]["bake_s"]
        while True:
            problems = self.problems() + run.alarm_problems()
            if problems:
                raise ar.RolloutFailed("canary: " + "; ".join(problems))
            if run.clock.monotonic() >= end:
                return
            run.clock.told_sleep(min(run.p["canary"]["poll_interval_s"], max(end - run.clock.monotonic(), 0)))

    def cleanup(self) -> None:
        """Take the canary out, whatever its verdict: target deregistered, task stopped, instance DRAINING, terminated."""
        run = self.run
        if not self.instance_id:
            return
        if self.target:
            elb.deregister_ip_target(run.aws.elbv2, run.app.http.target_groups[run.standby_color], *self.target)
            run.actions.append(f"deregister {self.target[0]}:{self.target[1]} from the {run.standby_color} target group")
            self.target = None
        if self.task_arn:
            ecs_svc.stop_task(run.aws.ecs, run.p["cluster"], self.task_arn, "inferops AMI rollout: the canary has spoken")
            run.actions.append(f"stop canary task {self.task_arn.rsplit('/', 1)[-1]}")
            self.task_arn = ""
        joined = ecs_svc.container_instance_of(run.aws.ecs, run.p["cluster"], self.instance_id)
        if joined and joined.get("status") == "ACTIVE":
            ecs_svc.drain_container_instance(run.aws.ecs, run.p["cluster"], joined["containerInstanceArn"])
            run.actions.append(f"drain canary {self.instance_id} (container instance DRAINING)")
        ec2_svc.terminate_instances(run.aws.ec2, [self.instance_id])
        run.actions.append(f"terminate canary {self.instance_id}")
        self.instance_id = ""
