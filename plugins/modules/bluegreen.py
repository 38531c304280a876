#!/usr/bin/python
# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: bluegreen
short_description: Blue/green cutover of a Triton ECS service behind an ALB, with Triton-aware gates, traffic steps, alarm rollback and drains
version_added: 0.1.0
description:
  - Moves an application from one colour to the other. The application is two ECS services, C(<name>-blue) and
    C(<name>-green), each with its own target group, behind a production listener (or listener rule) that forwards
    to both target groups with weights.
  - "Phases, each in the returned RV(timeline): V(discover) (which colour is live, what each runs),
    V(capacity) (can each standby task be placed on one instance with enough free GPUs, CPU and memory - on the
    registered container instances, or on what the managed-scaling Auto Scaling groups can still add up to their max size),
    V(standby_up) (update the standby service, wait until its deployment is complete, every task runs and every
    target of its target group is healthy), V(gates) (Triton live, ready, expected models READY and a smoke
    inference through the test route; CloudWatch alarms not in ALARM), V(traffic) (each step of
    O(traffic_steps), baked for O(bake_time_s) while alarms and gates are watched), V(drain) (wait until the old
    colour has no work in flight), V(finish) (termination wait, then scale the old colour down)."
  - Any failed gate, alarm or timeout after the standby was touched rolls back (weights to the old colour in one
    call, standby scaled to 0) and fails the task with the reason.
  - Every decision is taken from what AWS shows, so a re-run after an interruption continues (or rolls back) from
    where the last run stopped; no local state is kept.
  - All input is validated, and every named AWS resource looked up, before the first write.
  - One cutover per application at a time (O(lock_owner)). Before each write the module checks that the controller
    that started it still runs, that it still holds the lock, and that AWS still shows what it last read or wrote;
    otherwise it stops without writing.
author:
  - inferops maintainers (@inferops)
options:
  state:
    description:
      - V(present) makes the requested task definition live at 100% on one colour.
      - V(rolled_back) undoes the cutover to O(task_definition) - traffic back to the other colour in one call,
        the colour running O(task_definition) scaled to 0. It fails when the other colour was already scaled down.
    type: str
    choices: [present, rolled_back]
    default: present
  task_definition:
    description: Task definition to roll out (C(family:revision) or ARN; a bare family means its latest ACTIVE revision).
    type: str
    required: true
  desired_count:
    description: Tasks the new colour runs. Required with O(state=present).
    type: int
  test_listener_arn:
    description: Optional test listener; before the gates it is pointed 100% at the standby colour.
    type: str
  test_route_url:
    description: Triton HTTP URL that reaches the standby colour (through the test listener). The gates and the bake watch call it.
    type: str
  test_route_urls:
    description: Triton HTTP URL of each colour (keys V(blue) and V(green)), when each colour has its own route.
    type: dict
  traffic_steps:
    description: Weights (percent) the new colour gets, step by step; increasing, ending at 100.
    type: list
    elements: int
    default: [100]
  bake_time_s:
    description: Seconds each traffic step is held while alarms and gates are watched.
    type: int
    default: 0
  watch_interval_s:
    description: Seconds between alarm and gate checks during a bake or termination wait.
    type: int
    default: 5
  alarm_names:
    description: CloudWatch alarms that must not be in ALARM (checked at the gates and during every bake).
    type: list
    elements: str
    default: []
  gates:
    description: Pre-traffic checks through the test route.
    type: dict
    default: {}
    suboptions:
      expected_models:
        description: Models that must have a READY version in Triton's repository index.
        type: list
        elements: str
        default: []
      expected_versions:
        description:
          - Model name to the version the new colour must serve, and no other READY version of it (the models of the
            release this cutover brings up, as M(inferops.triton_ecs.model_release) resolved it). Checked before traffic
            and at every bake.
        type: dict
        default: {}
      smoke:
        description:
          - A smoke inference - C(model), C(inputs) (KServe v2 input tensors), C(expected_outputs)
            (C({name, data}) each), optional C(version) and C(tolerance).
        type: dict
      timeout_s:
        description: Seconds the gates are retried before they fail (0 checks once).
        type: int
        default: 60
      interval_s:
        description: Seconds between gate attempts.
        type: int
        default: 2
      request_timeout_s:
        description: Timeout of each Triton request.
        type: int
        default: 5
  drain:
    description: How the old colour is drained once its weight is 0.
    type: dict
    default: {}
    suboptions:
      timeout_s:
        description: Longest wait for the old colour to be quiet; the old colour is scaled down when it expires.
        type: int
        default: 300
      quiet_period_s:
        description:
          - The old colour is quiet when no request is queued and none finished for this long.
          - Make it longer than the longest inference - Triton counts a request when it finishes, and its pending
            gauge counts only queued requests, so a shorter period can fall inside one running request.
        type: int
        default: 10
      metrics_urls:
        description:
          - Triton metrics URLs (C(:8002/metrics)) of each colour's tasks, keys V(blue) and V(green). Without them
            the drain waits O(drain.quiet_period_s).
        type: dict
      wait_deregistration:
        description: After scaling down, wait (up to O(drain.timeout_s)) until no target of the old colour is C(draining).
        type: bool
        default: false
  old_color:
    description: After the cutover, V(scale_down) the old colour to 0 tasks (after O(termination_wait_s)) or V(keep) it at full size.
    type: str
    choices: [scale_down, keep]
    default: scale_down
  termination_wait_s:
    description: Seconds the old colour stays at full size after the cutover (alarms watched; an alarm rolls back instantly).
    type: int
    default: 0
  timeouts:
    description: Per-phase timeouts.
    type: dict
    default: {}
    suboptions:
      standby_up_s:
        description: Seconds for the standby to run every task with every target healthy.
        type: int
        default: 900
      poll_interval_s:
        description: Seconds between polls of ECS and target health.
        type: int
        default: 5
  autoscaling:
    description:
      - The live colour is scaled by Application Auto Scaling (M(inferops.triton_ecs.bluegreen_autoscaling)). Then
        the standby comes up at the live colour's current desired count when that is above O(desired_count)
        (a re-run with the same task definition changes nothing, whatever count autoscaling set); dynamic scale-in
        of the live colour is suspended from V(standby_up) to the end of the cutover and restored whatever the
        outcome; at V(finish) the scalable target and its policies move to the new live colour and the old
        colour's target is deregistered (so it can no longer scale up); a rollback leaves them on (or brings them
        back to) the colour that serves.
      - Colours without a scalable target are left alone, so this can be on before the first policy exists.
    type: bool
    default: false
  stop_after:
    description: Run the phases up to this one and stop (the role runs one phase per task). Unset runs them all.
    type: str
    choices: [discover, capacity, standby_up, gates, traffic, drain, finish]
  lock_owner:
    description:
      - Identity of this cutover run (lower-case letters, digits, hyphens; at most 64) for the cutover lock, a tag
        C(inferops:cutover-lock:<owner>) on the production listener or rule. Another run of the same application fails
        before any write while the lock is held, and names the holder.
      - Give it when one cutover spans several module calls (the role passes one per play); such a run keeps the lock
        when O(stop_after) leaves phases to do. Unset, the module makes one and releases the lock when it ends.
    type: str
  lock_ttl_s:
    description:
      - Seconds the lock stays valid after its last refresh; a running cutover refreshes it before each write and
        during its waits. A crashed run blocks the application at most this long.
    type: int
    default: 600
  break_lock:
    description:
      - Take the lock even when another run holds it. Only when that run is dead - a live run whose lock is broken
        stops at its next write. See docs/cutover.md.
    type: bool
    default: false
attributes:
  check_mode:
    support: partial
    details:
      - Observes AWS and returns the plan (RV(plan), RV(actions)) without any write.
      - It only plans - the health gates, alarm checks, bake and drains of a real cutover are not run, so their outcome is not predicted.
  diff_mode:
    support: full
    details:
      - The weights, task definitions and desired counts of both colours before and after.
extends_documentation_fragment:
  - inferops.triton_ecs.application
  - inferops.triton_ecs.production_listener
  - inferops.triton_ecs.attributes
  - inferops.triton_ecs.target_groups
  - amazon.aws.common.modules
  - amazon.aws.region.modules
  - amazon.aws.boto3
notes:
  - See docs/cutover.md for how the drain, deregistration delay, stopTimeout and Triton exit timeout relate.
"""

EXAMPLES = r"""
- name: Cut traffic over to the new Triton task definition in three steps
  inferops.triton_ecs.bluegreen:
    cluster: inference
    name: triton
    task_definition: triton:42
    desired_count: 2
    target_groups:
      blue: "{{ blue_tg_arn }}"
      green: "{{ green_tg_arn }}"
    listener_arn: "{{ prod_listener_arn }}"
    test_listener_arn: "{{ test_listener_arn }}"
    test_route_url: http://internal-triton.example.com:8080
    traffic_steps: [10, 50, 100]
    bake_time_s: 300
    alarm_names: [triton-5xx, triton-p99-latency]
    gates:
      expected_models: [resnet50]
      smoke:
        model: resnet50
        inputs: [{name: INPUT0, shape: [1], datatype: FP32, data: [1.0]}]
        expected_outputs: [{name: OUTPUT0, data: [2.0]}]
    termination_wait_s: 600

- name: Undo it
  inferops.triton_ecs.bluegreen:
    state: rolled_back
    cluster: inference
    name: triton
    task_definition: triton:42
    target_groups: {blue: "{{ blue_tg_arn }}", green: "{{ green_tg_arn }}"}
    listener_arn: "{{ prod_listener_arn }}"
"""

RETURN = r"""
decision:
  description: What the plan was - V(noop), V(cutover), V(finish) (drain and scale down the old colour), V(rollback).
  returned: always
  type: str
plan:
  description: The plan taken from the observed state - phases, new and old colour, remaining steps, reason.
  returned: always
  type: dict
phases_run:
  description: The phases of RV(plan) this run carried out (all of them unless O(stop_after) is set).
  returned: always
  type: list
  elements: str
actions:
  description: The writes made (in check mode, the writes that would be made).
  returned: always
  type: list
  elements: str
timeline:
  description: One entry per phase (traffic - one per step) with C(phase), C(start), C(duration_s), C(outcome), C(detail).
  returned: always
  type: list
  elements: dict
weights:
  description: Production weights at the end, by colour.
  returned: always
  type: dict
  sample: {blue: 0, green: 100}
live_color:
  description: The colour with the larger weight at the end.
  returned: always
  type: str
task_definitions:
  description: The task definition each colour's service runs at the end.
  returned: always
  type: dict
desired_counts:
  description: Each colour's desired count at the end.
  returned: always
  type: dict
colors:
  description: What was observed for each colour (service counts, deployments, target health).
  returned: always
  type: dict
rollback:
  description: When a rollback ran - its C(reason), C(to_color), C(detected_at), C(weights_restored_at), C(seconds).
  returned: always
  type: dict
autoscaling:
  description:
    - With O(autoscaling) - each colour's scalable target (C(MinCapacity), C(MaxCapacity), C(SuspendedState)) as
      this run left it, and C(api_calls), the Application Auto Scaling and CloudWatch calls the autoscaling
      handling made.
  returned: always
  type: dict
told_waits_s:
  description: Seconds spent in the waits the caller asked for (bake, termination wait, drain quiet periods).
  returned: always
  type: float
wall_s:
  description: Seconds the module ran.
  returned: always
  type: float
"""

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import module_errors  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.module import aws_module, client  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.cutover_state import Clients  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.guard import GuardedClock, WriteRefused, cutover_guard  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.input import all_input_errors  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.plan import PHASES, TARGET_GROUPS_OPTION  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.runner import Runner  # noqa: E402


def main() -> None:
    seconds = dict(type="int")
    argument_spec = dict(
        state=dict(type="str", choices=["present", "rolled_back"], default="present"),
        cluster=dict(type="str", required=True),
        name=dict(type="str", required=True),
        task_definition=dict(type="str", required=True),
        desired_count=dict(type="int"),
        target_groups=TARGET_GROUPS_OPTION,
        listener_arn=dict(type="str"),
        listener_rule_arn=dict(type="str"),
        test_listener_arn=dict(type="str"),
        test_route_url=dict(type="str"),
        test_route_urls=dict(type="dict"),
        traffic_steps=dict(type="list", elements="int", default=[100]),
        bake_time_s=dict(seconds, default=0),
        watch_interval_s=dict(seconds, default=5),
        alarm_names=dict(type="list", elements="str", default=[]),
        gates=dict(
            type="dict",
            default={},
            options=dict(
                expected_models=dict(type="list", elements="str", default=[]),
                expected_versions=dict(type="dict", default={}),
                smoke=dict(type="dict"),
                timeout_s=dict(seconds, default=60),
                interval_s=dict(seconds, default=2),
                request_timeout_s=dict(seconds, default=5),
            ),
        ),
        drain=dict(
            type="dict",
            default={},
            options=dict(
                timeout_s=dict(seconds, default=300),
                quiet_period_s=dict(seconds, default=10),
                metrics_urls=dict(type="dict"),
                wait_deregistration=dict(type="bool", default=False),
            ),
        ),
        old_color=dict(type="str", choices=["scale_down", "keep"], default="scale_down"),
        termination_wait_s=dict(seconds, default=0),
        timeouts=dict(
            type="dict",
            default={},
            options=dict(standby_up_s=dict(seconds, default=900), poll_interval_s=dict(seconds, default=5)),
        ),
        autoscaling=dict(type="bool", default=False),
        stop_after=dict(type="str", choices=list(PHASES)),
        lock_owner=dict(type="str"),
        lock_ttl_s=dict(seconds, default=600),
        break_lock=dict(type="bool", default=False),
    )
    module = aws_module(
        argument_spec,
        required_one_of=[("listener_arn", "listener_rule_arn")],
        mutually_exclusive=[("listener_arn", "listener_rule_arn"), ("test_route_url", "test_route_urls")],
        required_if=[("state", "present", ["desired_count"])],
    )
    errors = all_input_errors(module.params)
    if errors:
        module.fail_json(msg="; ".join(errors), errors=errors)

    clients = Clients(
        client(module, "ecs"),
        client(module, "elbv2"),
        client(module, "cloudwatch"),
        connect=lambda service: client(module, service),
    )
    guard = cutover_guard(module.params, clients.elbv2)
    runner = Runner(module.params, clients, check_mode=module.check_mode, clock=GuardedClock(guard), guard=guard)
    with module_errors(
        module,
        f"blue/green cutover of {module.params['name']}: AWS call failed",
        {WriteRefused: lambda e: {"msg": str(e)}},
        details=lambda: {"timeline": runner.timeline, "actions": runner.writes},
    ):
        result = runner.run()
    reason = result.pop("failed_reason", "")
    if reason:
        module.fail_json(msg=f"rolled back to {result['rollback']['to_color']}: {reason}", **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
