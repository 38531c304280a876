#!/usr/bin/python
# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ami_rollout
short_description: Gated AMI rollout of an ECS GPU fleet - a canary instance, then an instance refresh with checkpoints, reverted on failure
version_added: 0.1.0
description:
  - Brings a new AMI to the Auto Scaling group of an ECS GPU fleet without letting a broken AMI reach every instance at once.
  - Creates a launch template version that is the group's version with only the image changed (not the default), and
    launches one canary instance from it outside the group. The canary must join the cluster (container instance
    ACTIVE, agent connected) with as many GPUs as EC2 says its instance type has and no impaired health (the ECS agent's
    ACCELERATED_COMPUTE report); one task of the live colour's task definition is placed on it (placement constraint
    C(memberOf(ec2InstanceId == ...))), registered in the standby colour's target group (the test listener's), and must
    answer Triton's readiness, the expected models and the smoke inference through O(test_route_url); it must stay
    ACTIVE and healthy for O(canary.bake_s). The canary is then drained through ECS and terminated.
  - Then starts an instance refresh of the group towards the new version, with checkpoints, skip matching, scale-in
    protected instances refreshed and auto rollback on O(alarm_names). The capacity provider's managed draining
    (required) sets each leaving container instance DRAINING before termination. At every checkpoint the module checks
    the alarms and every new instance (joined, its GPUs, Healthy in its group).
  - On success the new version becomes the template's default. On any failure the refresh is rolled back
    (C(RollbackInstanceRefresh); cancelled when there is nothing to roll back), the previous version stays the
    group's and the default, the new version is deleted, and the module fails with the reason.
  - One change at a time per application - the rollout holds the cutover lock on the production listener (as
    M(inferops.triton_ecs.bluegreen) does), so a cutover and an AMI rollout of one application never run together.
  - The group must launch a numbered version of its template (AWS rolls a refresh back only to one); role
    C(fleet_capacity) pins it to the template's default version.
author:
  - inferops maintainers (@inferops)
options:
  ami_id:
    description: The new AMI (C(ami-...)), e.g. the artifact of C(packer build) for the fleet's region.
    type: str
    required: true
  auto_scaling_group:
    description: The fleet's Auto Scaling group (C(fleet_capacity_name)).
    type: str
    required: true
  listener_arn:
    description: Production listener (where the cutover lock lives), when it cannot be found from the target groups.
    type: str
  listener_rule_arn:
    description: Production listener rule, when the weights live in a rule.
    type: str
  test_listener_arn:
    description: Test listener; pointed at the standby colour's target group before the canary task is registered there.
    type: str
  test_route_url:
    description:
      - Triton HTTP URL that reaches the test listener. Without it, Triton is not checked on the canary (its GPUs and health still are).
    type: str
  alarm_names:
    description: CloudWatch alarms that must not be in ALARM during the canary and the refresh (also the refresh's auto rollback alarms).
    type: list
    elements: str
    default: []
  canary:
    description: The canary instance.
    type: dict
    default: {}
    suboptions:
      join_timeout_s:
        description: Seconds the canary has to join the cluster (boot, driver, model hydration, ECS agent).
        type: int
        default: 900
      task_timeout_s:
        description: Seconds the task placed on the canary has to run with an address.
        type: int
        default: 600
      bake_s:
        description: Seconds the canary must stay ACTIVE and healthy (alarms watched) after its smoke inference.
        type: int
        default: 300
      poll_interval_s:
        description: Seconds between two reads while waiting.
        type: int
        default: 10
  gates:
    description: Triton checks on the canary through the test route (the bluegreen module's gates).
    type: dict
    default: {}
    suboptions:
      expected_models:
        description: Models that must have a READY version.
        type: list
        elements: str
        default: []
      expected_versions:
        description: Model name to the version the canary task must serve.
        type: dict
        default: {}
      smoke:
        description: A smoke inference - C(model), C(inputs) (KServe v2 tensors), C(expected_outputs) (C({name, data}) each), optional C(version), C(tolerance).
        type: dict
      timeout_s:
        description: Seconds the gates are retried before the canary fails.
        type: int
        default: 120
      interval_s:
        description: Seconds between gate attempts.
        type: int
        default: 5
      request_timeout_s:
        description: Timeout of each Triton request.
        type: int
        default: 5
  refresh:
    description: The instance refresh.
    type: dict
    default: {}
    suboptions:
      checkpoints:
        description: Percentages of the group replaced at which the refresh pauses and the module gates; increasing, ending at 100.
        type: list
        elements: int
        default: [25, 50, 100]
      checkpoint_delay_s:
        description: Seconds the refresh waits at each checkpoint (the gate's window).
        type: int
        default: 600
      min_healthy_percentage:
        description: Percentage of the group kept InService during the refresh.
        type: int
        default: 90
      max_healthy_percentage:
        description: Percentage the group may grow to (above 100 launches before terminating; scarce GPU capacity makes 100 the default).
        type: int
        default: 100
      instance_warmup_s:
        description: Seconds a new instance warms up before it counts (a GPU instance hydrates its models at boot).
        type: int
        default: 600
      poll_interval_s:
        description: Seconds between two reads of the refresh.
        type: int
        default: 15
      timeout_s:
        description: Seconds the refresh may take before the module rolls it back.
        type: int
        default: 21600
      revert_timeout_s:
        description: Seconds the module waits for a rollback of the refresh to end.
        type: int
        default: 7200
  break_lock:
    description: Take the cutover lock even from a run that holds it (only when that run is dead).
    type: bool
    default: false
  lock_ttl_s:
    description: Seconds the lock stays valid without a refresh (it is refreshed while the rollout waits).
    type: int
    default: 900
attributes:
  check_mode:
    details:
      - Reads AWS and returns the plan (RV(steps)) without any write.
  diff_mode:
    details:
      - C(before) and C(after) hold the group's version, the template's default version and the image.
extends_documentation_fragment:
  - inferops.triton_ecs.application
  - inferops.triton_ecs.attributes.full
  - amazon.aws.common.modules
  - amazon.aws.region.modules
  - amazon.aws.boto3
notes:
  - "The playbook C(playbooks/roll_ami.yml) runs this module: C(ansible-playbook playbooks/roll_ami.yml -i inventories/<env>)."
  - See docs/ami.md, Rolling out a new AMI.
  - Running it again once the group runs the AMI everywhere changes nothing; a run interrupted during the refresh resumes watching it.
"""

EXAMPLES = r"""
- name: Roll the new AMI out to the fleet
  inferops.triton_ecs.ami_rollout:
    cluster: inference
    name: triton
    auto_scaling_group: triton-gpu
    ami_id: ami-0123456789abcdef0
    test_listener_arn: "{{ fleet_load_balancing_test_listener_arn }}"
    test_route_url: http://internal-triton.example.com:8080
    alarm_names: [triton-target-5xx, triton-inference-failures]
    gates:
      expected_models: [resnet50]
      smoke:
        model: resnet50
        inputs: [{name: INPUT0, shape: [1, 4], datatype: FP32, data: [1, 2, 3, 4]}]
        expected_outputs: [{name: OUTPUT0, data: [0.1, 0.9]}]
"""

RETURN = r"""
decision:
  description: V(rollout), V(resume) (a refresh this rollout started is watched again) or V(noop).
  returned: always
  type: str
outcome:
  description: V(rolled_out), V(reverted) (the module failed; RV(failure) says why), V(planned) (check mode) or V(noop).
  returned: always
  type: str
failure:
  description: Why the rollout reverted; empty when it did not.
  returned: always
  type: str
steps:
  description: The plan, one line per step (what check mode shows).
  returned: always
  type: list
  elements: str
actions:
  description: The writes made.
  returned: always
  type: list
  elements: str
timeline:
  description: Each stage (canary joined, canary smoke, canary bake, checkpoint N%, refresh, revert) with its outcome and detail.
  returned: always
  type: list
  elements: dict
base_version:
  description: The launch template version the group ran before (and keeps after a revert).
  returned: always
  type: str
new_version:
  description: The launch template version with the new AMI.
  returned: always
  type: str
expected_gpus:
  description: GPUs of the fleet's instance type (EC2's GpuInfo); every new instance must register as many.
  returned: always
  type: int
refresh:
  description: The instance refresh (C(id), last C(status), C(checkpoints_passed)).
  returned: always
  type: dict
drained_instances:
  description: Instance id to the status of its container instance seen while the refresh took it out (C(DRAINING) when ECS drained it).
  returned: always
  type: dict
revert:
  description: After a failure - the refresh's last status, the default version, the version deleted, the seconds it took.
  returned: always
  type: dict
revert_seconds:
  description: Seconds from the failure to the end of the revert.
  returned: always
  type: float
wall_s:
  description: Seconds the module ran.
  returned: always
  type: float
"""

from ansible_collections.inferops.triton_ecs.plugins.module_utils._ami_rollout.runner import Clients, roll_ami  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import module_errors  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.module import aws_module, client  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.guard import GuardedClock, WriteRefused, discovering_guard  # noqa: E402


def main() -> None:
    module = aws_module(
        dict(
            cluster=dict(type="str", required=True),
            name=dict(type="str", required=True),
            ami_id=dict(type="str", required=True),
            auto_scaling_group=dict(type="str", required=True),
            listener_arn=dict(type="str"),
            listener_rule_arn=dict(type="str"),
            test_listener_arn=dict(type="str"),
            test_route_url=dict(type="str"),
            alarm_names=dict(type="list", elements="str", default=[]),
            canary=dict(
                type="dict",
                default={},
                options=dict(
                    join_timeout_s=dict(type="int", default=900),
                    task_timeout_s=dict(type="int", default=600),
                    bake_s=dict(type="int", default=300),
                    poll_interval_s=dict(type="int", default=10),
                ),
            ),
            gates=dict(
                type="dict",
                default={},
                options=dict(
                    expected_models=dict(type="list", elements="str", default=[]),
                    expected_versions=dict(type="dict", default={}),
                    smoke=dict(type="dict"),
                    timeout_s=dict(type="int", default=120),
                    interval_s=dict(type="int", default=5),
                    request_timeout_s=dict(type="int", default=5),
                ),
            ),
            refresh=dict(
                type="dict",
                default={},
                options=dict(
                    checkpoints=dict(type="list", elements="int", default=[25, 50, 100]),
                    checkpoint_delay_s=dict(type="int", default=600),
                    min_healthy_percentage=dict(type="int", default=90),
                    max_healthy_percentage=dict(type="int", default=100),
                    instance_warmup_s=dict(type="int", default=600),
                    poll_interval_s=dict(type="int", default=15),
                    timeout_s=dict(type="int", default=21600),
                    revert_timeout_s=dict(type="int", default=7200),
                ),
            ),
            break_lock=dict(type="bool", default=False),
            lock_ttl_s=dict(type="int", default=900),
        ),
        mutually_exclusive=[("listener_arn", "listener_rule_arn")],
    )
    params = module.params
    aws = Clients(*(client(module, s) for s in ("ec2", "ecs", "elbv2", "autoscaling", "cloudwatch")))
    with module_errors(
        module, f"AMI rollout of {params['auto_scaling_group']}: AWS call failed", {WriteRefused: lambda e: {"msg": str(e)}}
    ):
        guard, make_lock = discovering_guard(params, aws.elbv2)
        result = roll_ami(aws, params, guard, GuardedClock(guard), module.check_mode, make_lock)
    if result["failure"]:
        module.fail_json(msg=f"AMI rollout of {params['ami_id']} reverted: {result['failure']}", **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
