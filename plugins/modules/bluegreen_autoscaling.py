#!/usr/bin/python
# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: bluegreen_autoscaling
short_description: Application Auto Scaling of the live colour of a blue/green Triton service, on Triton and GPU signals
version_added: 0.1.0
description:
  - Registers the scalable target (C(ecs:service:DesiredCount)) of the B(live) colour's service - the colour with
    the larger production weight - with O(min_capacity) and O(max_capacity), and converges its policies - target
    tracking on a Triton metric the metrics sidecar publishes, and optionally step scaling on GPU utilisation with its
    two CloudWatch alarms.
  - Which colour is live changes at every cutover; M(inferops.triton_ecs.bluegreen) (with O(inferops.triton_ecs.bluegreen#module:autoscaling=true))
    moves the target and policies to the new live colour at finish. This module never touches the standby's target
    (an interrupted cutover may still hold one) and never changes a target's suspended state (a cutover suspends
    scale-in while it runs).
  - Why not M(community.aws.application_autoscaling_policy) - it takes a fixed resource id (here it follows the live
    colour), writes to AWS in check mode, compares a policy's configuration as returned by AWS with the task's
    input (so AWS's C(85) against C(85.0) reads as a change), does not create the alarms step scaling needs, and
    cannot check that the metric is one the sidecar publishes before writing.
  - All input is validated before the first write - min above max, a target of 0 or less, a metric the sidecar does
    not publish.
  - While the live colour runs no tasks (before the first cutover) nothing is written - a target with a minimum
    would scale an ungated revision up; run it again after the cutover (deploy.yml does).
author:
  - inferops maintainers (@inferops)
options:
  name:
    description: Application name; the services are C(<name>-blue) and C(<name>-green). Also prefixes policy and alarm names.
    type: str
    required: true
  min_capacity:
    description: Fewest tasks the live colour runs. Also the floor of the standby's desired count at a cutover.
    type: int
    required: true
  max_capacity:
    description:
      - Most tasks the live colour may run (at most 5000, ECS's tasks per service). Size the Auto Scaling group for twice
        this (both colours during a cutover).
      - Below what the live colour runs now (its desired or running count) it is refused before any write -
        Application Auto Scaling would scale production in to it at once; scale the service in first.
    type: int
    required: true
  target_tracking:
    description: Target tracking on one of the sidecar's metrics.
    type: dict
    default: {}
    suboptions:
      enabled:
        description: Create the target-tracking policy.
        type: bool
        default: true
      metric:
        description: The metric, one of O(metrics.published).
        type: str
        default: nv_inference_request_success
      statistic:
        description: Statistic of the metric over a minute.
        type: str
        default: Sum
        choices: [Average, Sum, Maximum, Minimum, SampleCount]
      per:
        description:
          - V(task) divides the metric by the live colour's running tasks (Container Insights C(RunningTaskCount)),
            V(request) by the requests served (C(nv_inference_request_success)), V(none) takes it as it is.
        type: str
        default: task
        choices: [task, request, none]
      target:
        description:
          - The value target tracking holds the metric at (per O(target_tracking.per)); a finite number above 0 in
            Application Auto Scaling's range (NaN and infinities are refused).
        type: float
        default: 600
      scale_out_cooldown_s:
        description: Seconds after a scale-out before another (0 to 86400).
        type: int
        default: 60
      scale_in_cooldown_s:
        description: Seconds after a scale-in before another (0 to 86400).
        type: int
        default: 300
  step_scaling:
    description: Step scaling on GPU utilisation (seed 001) - two policies and their two CloudWatch alarms.
    type: dict
    default: {}
    suboptions:
      enabled:
        description: Create the step-scaling policies and alarms.
        type: bool
        default: false
      metric:
        description: The metric, one of O(metrics.published).
        type: str
        default: nv_gpu_utilization
      statistic:
        description: Statistic of the metric over each period.
        type: str
        default: Average
        choices: [Average, Sum, Maximum, Minimum, SampleCount]
      scale_out_threshold:
        description:
          - Add O(step_scaling.scale_out_step) tasks when the metric is above this (C(nv_gpu_utilization) is 0-1); a
            finite number.
        type: float
        default: 0.85
      scale_out_periods:
        description: Periods the metric must stay above the threshold (times O(step_scaling.period_s), at most a day).
        type: int
        default: 5
      scale_in_threshold:
        description: Remove O(step_scaling.scale_in_step) tasks when the metric is below this.
        type: float
        default: 0.4
      scale_in_periods:
        description: Periods the metric must stay below the threshold (times O(step_scaling.period_s), at most a day).
        type: int
        default: 15
      period_s:
        description: Seconds of one alarm period.
        type: int
        default: 60
      scale_out_step:
        description: Tasks added at each scale-out; 1 to O(max_capacity) - O(min_capacity).
        type: int
        default: 1
      scale_in_step:
        description: Tasks removed at each scale-in; 1 to O(max_capacity) - O(min_capacity).
        type: int
        default: 1
      cooldown_s:
        description: Seconds after a step before the next (0 to 86400).
        type: int
        default: 300
  metrics:
    description: What the metrics sidecar publishes (playbooks/vars/metrics_sidecar.yml).
    type: dict
    required: true
    suboptions:
      namespace:
        description: CloudWatch namespace of the sidecar's metrics.
        type: str
        default: Triton
      dimensions:
        description: The dimension set the policies and alarms read (name to value), one the sidecar publishes.
        type: dict
        required: true
      published:
        description: Names of the metrics the sidecar publishes; a policy on any other metric is rejected.
        type: list
        elements: str
        required: true
attributes:
  check_mode:
    details:
      - Reads AWS and reports the writes it would make.
  diff_mode:
    details:
      - The target's bounds and the policy names before and after.
extends_documentation_fragment:
  - inferops.triton_ecs.application
  - inferops.triton_ecs.production_listener
  - inferops.triton_ecs.attributes.full
  - inferops.triton_ecs.target_groups
  - amazon.aws.common.modules
  - amazon.aws.region.modules
  - amazon.aws.boto3
notes:
  - See docs/infrastructure.md (Autoscaling) for picking the target, and docs/cutover.md for how the policies move.
"""

EXAMPLES = r"""
- name: Scale the live colour on requests per task, and on GPU utilisation
  inferops.triton_ecs.bluegreen_autoscaling:
    cluster: inference
    name: triton
    target_groups: {blue: "{{ blue_tg_arn }}", green: "{{ green_tg_arn }}"}
    listener_arn: "{{ prod_listener_arn }}"
    min_capacity: 2
    max_capacity: 8
    target_tracking:
      metric: nv_inference_request_success
      per: task
      target: 600
    step_scaling:
      enabled: true
    metrics:
      dimensions: {ClusterName: inference}
      published: [nv_inference_request_success, nv_gpu_utilization]
"""

RETURN = r"""
actions:
  description: The writes made (in check mode, the writes that would be made).
  returned: always
  type: list
  elements: str
live_color:
  description: The colour whose service owns the scalable target.
  returned: always
  type: str
resource_id:
  description: Application Auto Scaling resource id of the live colour's service.
  returned: always
  type: str
  sample: service/inference/triton-blue
policies:
  description: Names of the policies on the live colour.
  returned: always
  type: list
  elements: str
alarm_names:
  description: Names of the step-scaling alarms (empty without step scaling).
  returned: always
  type: list
  elements: str
skipped_reason:
  description: Why nothing was done, when the live colour runs no tasks yet.
  returned: when skipped
  type: str
"""

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import module_errors  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.module import aws_module, client  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import autoscaling as scaling  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import scaling_policies  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.colors import TARGET_GROUPS_OPTION  # noqa: E402


def main() -> None:
    seconds = dict(type="int")
    argument_spec = dict(
        cluster=dict(type="str", required=True),
        name=dict(type="str", required=True),
        target_groups=TARGET_GROUPS_OPTION,
        listener_arn=dict(type="str"),
        listener_rule_arn=dict(type="str"),
        min_capacity=dict(type="int", required=True),
        max_capacity=dict(type="int", required=True),
        target_tracking=dict(
            type="dict",
            default={},
            options=dict(
                enabled=dict(type="bool", default=True),
                metric=dict(type="str", default="nv_inference_request_success"),
                statistic=dict(type="str", default="Sum", choices=list(scaling_policies.STATISTICS)),
                per=dict(type="str", default="task", choices=list(scaling_policies.PER_CHOICES)),
                target=dict(type="float", default=600),
                scale_out_cooldown_s=dict(seconds, default=60),
                scale_in_cooldown_s=dict(seconds, default=300),
            ),
        ),
        step_scaling=dict(
            type="dict",
            default={},
            options=dict(
                enabled=dict(type="bool", default=False),
                metric=dict(type="str", default="nv_gpu_utilization"),
                statistic=dict(type="str", default="Average", choices=list(scaling_policies.STATISTICS)),
                scale_out_threshold=dict(type="float", default=0.85),
                scale_out_periods=dict(type="int", default=5),
                scale_in_threshold=dict(type="float", default=0.4),
                scale_in_periods=dict(type="int", default=15),
                period_s=dict(seconds, default=60),
                scale_out_step=dict(type="int", default=1),
                scale_in_step=dict(type="int", default=1),
                cooldown_s=dict(seconds, default=300),
            ),
        ),
        metrics=dict(
            type="dict",
            required=True,
            options=dict(
                namespace=dict(type="str", default="Triton"),
                dimensions=dict(type="dict", required=True),
                published=dict(type="list", elements="str", required=True),
            ),
        ),
    )
    module = aws_module(
        argument_spec,
        required_one_of=[("listener_arn", "listener_rule_arn")],
        mutually_exclusive=[("listener_arn", "listener_rule_arn")],
    )
    errors = scaling_policies.validate(module.params, module.params["metrics"]["published"])
    if errors:
        module.fail_json(msg="; ".join(errors), errors=errors)
    clients = [client(module, service) for service in ("ecs", "elbv2", "application-autoscaling", "cloudwatch")]
    with module_errors(module, f"autoscaling of {module.params['name']}: AWS call failed"):
        result = scaling.ensure_live(*clients, module.params, module.check_mode)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
