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
    colour has no work in flight, from its tasks' Triton metrics), V(finish) (termination wait, then scale the old colour down)."
  - "With O(mode=capacity_paced) the phases are V(discover), V(capacity) (can ONE batch be placed), V(batches) (per batch:
    grow the new colour, wait until it serves, the gates on the test route, production weights in proportion to its
    tasks, the bake, shrink the old colour and wait until its removed tasks are gone) and V(finish). See docs/cutover.md."
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
          - Triton metrics URLs (C(:8002/metrics)) of each colour's tasks, keys V(blue) and V(green). An override -
            given for the old colour, these are watched and nothing is looked up.
          - Without them the drain finds the old colour's endpoints itself - ListTasks (its service, desired status
            RUNNING), then DescribeTasks - as C(http://<task address>:<drain.metrics_port>/metrics), the address being
            each awsvpc task's network interface's private IPv4 address. A task without one (bridge or host networking,
            no interface attached) is named in C(not_watched) of RV(drain_watch) and not watched.
          - A controller may have no network reach into the VPC; when none of the endpoints found answers the first
            sample, the drain waits O(drain.quiet_period_s) and says so, rather than its whole O(drain.timeout_s);
            when some answer, those are watched. An endpoint that stops answering later counts as activity, as for
            the URLs given here.
          - With no endpoint to watch (no task found, none reachable, the lookup refused - it needs C(ecs:ListTasks) and
            C(ecs:DescribeTasks) - or O(drain.quiet_period_s=0), when nothing is looked up) the drain waits
            O(drain.quiet_period_s).
        type: dict
      metrics_port:
        description: Triton's metrics port in the old colour's tasks (C(--metrics-port)), for the endpoints found through ECS.
        type: int
        default: 8002
      wait_deregistration:
        description: After scaling down, wait (up to O(drain.timeout_s)) until no target of the old colour is C(draining).
        type: bool
        default: false
  grpc:
    description:
      - The gRPC route of the application - Triton's gRPC port behind the same ALB, a second pair of target groups
        (protocol version GRPC, health check on Triton's gRPC readiness) forwarded by an HTTPS listener or rule.
        Its weights move in the same steps as the HTTP route's (one write after the other); its test listener is
        pointed at the standby with the HTTP one; the gates also run over gRPC on its test route (C(tritonclient.grpc) -
        server live and ready, O(gates.expected_models) ready, the O(gates.smoke) inference; over TLS unless
        O(grpc.test_route_tls=false)); the standby is up when its targets are healthy in both target groups; the
        canary verdict sums both target groups of a colour. The drain needs nothing more (Triton's metrics count both
        protocols).
      - The gRPC gates need C(tritonclient[grpc]) on the controller; without it a gRPC test route is refused before any write.
      - An NLB has no weighted forward (one target group per listener), so a gRPC route on an NLB is a swap, not steps; see
        docs/cutover.md, "gRPC".
    type: dict
    suboptions:
      target_groups:
        description: The gRPC target group ARN of each colour, keys V(blue) and V(green).
        type: dict
        required: true
      listener_arn:
        description: The HTTPS listener of the gRPC route (one forward action to both gRPC target groups).
        type: str
      listener_rule_arn:
        description: Or a rule of a listener (for example a C(content-type) C(application/grpc) header condition).
        type: str
      test_listener_arn:
        description: Optional gRPC test listener, pointed 100% at the standby colour before the gates.
        type: str
      test_route_url:
        description: C(host:port) of the gRPC test route (the gates call it over gRPC).
        type: str
      test_route_urls:
        description: C(host:port) of each colour's gRPC route (keys V(blue) and V(green)).
        type: dict
      test_route_tls:
        description:
          - Call the gRPC test route over TLS. An ALB forwards gRPC on HTTPS listeners only, so this stays V(true)
            against an ALB; V(false) for a plaintext route (a proxy in the VPC, or a test stand-in).
        type: bool
        default: true
      test_route_server_name:
        description:
          - The name the test listener's certificate is checked against, when the route's host is not a name the
            certificate holds (the ALB's DNS name, while the certificate names the service).
        type: str
      test_route_ca_file:
        description: PEM file of the root certificates that sign the test listener's certificate (a private CA); default the system's.
        type: path
  canary:
    description:
      - The relative canary verdict of every traffic step. During each bake the standby colour is compared with the live
        colour over the same window, from CloudWatch - each colour's target groups' C(RequestCount),
        C(HTTPCode_Target_5XX_Count) and C(TargetResponseTime) p99 (AWS/ApplicationELB), and Triton's inference
        successes, failures, queue and compute times that the metrics sidecar publishes with a C(Color) dimension.
      - A step fails, and the cutover rolls back as on an alarm, when the standby's target 5xx ratio or Triton inference
        failure ratio exceeds the live colour's by more than O(canary.max_error_ratio_increase), or its p99 or mean
        queue + compute time exceeds the live colour's times O(canary.max_latency_ratio) (and by more than
        O(canary.latency_slack_ms)).
      - No verdict before the standby served O(canary.min_requests) requests in the window - the step waits past its
        bake for them, up to O(canary.max_wait_s), then rolls back (or passes with O(canary.on_insufficient_data=pass)).
        A quiet standby never passes by silence.
      - The verdicts, their figures and windows are returned in RV(canary). See docs/cutover.md, "Canary verdict".
    type: dict
    default: {}
    suboptions:
      enabled:
        description: Judge every traffic step. Off, only the alarms and the gates are watched.
        type: bool
        default: false
      min_requests:
        description: Requests the standby serves in the window before any verdict (0 judges at once).
        type: int
        default: 50
      max_wait_s:
        description: Seconds a step waits past its bake for O(canary.min_requests) before O(canary.on_insufficient_data) applies.
        type: int
        default: 600
      on_insufficient_data:
        description: What a step does when O(canary.max_wait_s) passed without a verdict - V(rollback) or V(pass).
        type: str
        choices: [rollback, pass]
        default: rollback
      max_error_ratio_increase:
        description: How much higher (absolute, 0.01 is one percentage point) the standby's error ratios may be than the live colour's.
        type: float
        default: 0.01
      max_latency_ratio:
        description: How many times the live colour's p99 (and mean Triton queue + compute time) the standby's may be.
        type: float
        default: 1.5
      latency_slack_ms:
        description: A latency difference below this many milliseconds never fails a step (two fast colours are not told apart by noise).
        type: float
        default: 25
      statistical_test:
        description:
          - V(fisher) also requires the standby's excess errors to be significant - a one-sided Fisher exact test on
            its errors against the live colour's, below O(canary.significance). V(none) judges the ratios alone.
        type: str
        choices: [none, fisher]
        default: none
      significance:
        description: The p-value below which O(canary.statistical_test=fisher) calls the excess significant.
        type: float
        default: 0.05
      baseline_lookback_s:
        description:
          - When the live colour served fewer than O(canary.min_requests) in the step's window (at the 100 % step it
            serves nothing), its baseline reaches back this many seconds before the step.
        type: int
        default: 600
      period_s:
        description: The period of the CloudWatch figures (the load balancer publishes per minute).
        type: int
        default: 60
      triton_namespace:
        description: Namespace of the metrics sidecar's Triton metrics.
        type: str
        default: Triton
      triton_dimensions:
        description:
          - The dimensions the sidecar puts on Triton's metrics besides C(Color) (deploy.yml passes
            C(deploy_metrics_sidecar_dimensions)). Empty leaves Triton's figures out of the verdict.
        type: dict
        default: {}
  hooks:
    description:
      - User hooks at the cutover's phase boundaries - a Lambda function invoked synchronously with the cutover's
        context (application, stage, colours, weights, task definition, target groups, step, canary verdict, rollback
        reason). It answers with C(hookStatus) V(SUCCEEDED), V(FAILED) or V(IN_PROGRESS) (asked again every
        C(retry_interval_s) until C(timeout_s)), as ECS native deployments' lifecycle hooks do.
      - A hook that fails, raises, answers anything else or times out rolls the cutover back; an C(after_rollback)
        hook's failure is only reported. A hook may run again when an interrupted cutover is resumed.
      - The functions are looked up (C(lambda:GetFunction)) before the first write; check mode lists the hooks the
        plan would invoke in RV(hooks_planned).
    type: list
    elements: dict
    default: []
    suboptions:
      stage:
        description:
          - V(standby_healthy) (every standby target healthy, before production traffic), V(before_traffic) (the
            gates passed), V(after_step) (each step's bake and verdict passed), V(after_cutover) (100 % on the new
            colour, before the drain), V(after_rollback).
        type: str
        required: true
        choices: [standby_healthy, before_traffic, after_step, after_cutover, after_rollback]
      lambda_arn:
        description: ARN of the Lambda function.
        type: str
        required: true
      name:
        description: Name shown in the timeline (default the function's name).
        type: str
      timeout_s:
        description: Seconds the hook may take, IN_PROGRESS answers included.
        type: int
        default: 300
      retry_interval_s:
        description: Seconds between invocations while the hook answers IN_PROGRESS.
        type: int
        default: 10
  mode:
    description:
      - V(blue_green) starts the standby colour at its full count beside the live colour, then moves traffic in
        O(traffic_steps); the fleet needs both colours' GPUs at once for the bake.
      - V(capacity_paced) changes colour batch by batch with at most O(batch_size) tasks above the full count at any
        time - the new colour grows by a batch, passes the gates on the test route, takes production weight in
        proportion to its tasks (O(traffic_steps) is not used), the batch is baked with the alarm and canary checks,
        then the old colour shrinks by the batch after its drain (the target group's deregistration delay and Triton's
        SIGTERM drain). A failure rolls back batch by batch in reverse. See docs/cutover.md, Capacity-paced cutover.
    type: str
    choices: [blue_green, capacity_paced]
    default: blue_green
  batch_size:
    description:
      - Tasks per batch with O(mode=capacity_paced) (at least 1; larger than the full count means one batch).
      - Unset, what one spare instance holds - the free registered container instance with the most room for a task
        of O(task_definition), or else one new instance of the smallest instance type of the managed-scaling
        capacity provider's Auto Scaling group.
      - With O(mode=blue_green) it is ignored with a warning.
    type: int
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
    choices: [discover, capacity, standby_up, gates, traffic, drain, batches, finish]
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
      - RV(drain_watch) says which endpoints the drain would watch (the task endpoints are looked up in ECS, a read;
        whether the controller reaches them is not tried).
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

- name: Change a reserved p5 fleet of 4 tasks batch by batch, with one spare instance
  inferops.triton_ecs.bluegreen:
    cluster: inference
    name: triton
    task_definition: triton:43
    desired_count: 4
    mode: capacity_paced  # batch_size unset: what one spare p5 holds
    target_groups:
      blue: "{{ blue_tg_arn }}"
      green: "{{ green_tg_arn }}"
    listener_arn: "{{ prod_listener_arn }}"
    test_listener_arn: "{{ test_listener_arn }}"
    test_route_url: http://internal-triton.example.com:8080
    bake_time_s: 300
    alarm_names: [triton-5xx]
    gates:
      expected_models: [resnet50]

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
  description:
    - When a rollback ran - its C(reason), C(to_color), C(detected_at), C(weights_restored_at), C(seconds) (until all
      traffic was back on C(to_color)) and C(batches) (how many rollback batches ran with O(mode=capacity_paced); 0 otherwise).
  returned: always
  type: dict
batches:
  description:
    - With O(mode=capacity_paced), one entry per batch this run ran - C(index), C(new_count), C(old_count),
      C(weights) (by colour), C(seconds), C(status) (V(ok), V(failed), V(rolled_back) for a rollback batch). V([]) in
      V(blue_green) mode.
  returned: always
  type: list
  elements: dict
  sample: [{index: 1, new_count: 1, old_count: 3, weights: {green: 25, blue: 75}, seconds: 312.4, status: ok}]
capacity_plan:
  description:
    - What the capacity phase found - C(mode), C(batch_size), C(batches) (still to run), C(spare_instances_needed) (new
      instances the Auto Scaling group adds for the next batch or the standby), C(on_registered), C(on_new) (tasks
      placed on registered and on new instances) and C(why). V({}) when the capacity phase did not run.
  returned: always
  type: dict
  sample: {mode: capacity_paced, batch_size: 1, batches: 4, spare_instances_needed: 1, on_registered: 0, on_new: 1, why: "..."}
autoscaling:
  description:
    - With O(autoscaling) - each colour's scalable target (C(MinCapacity), C(MaxCapacity), C(SuspendedState)) as
      this run left it, and C(api_calls), the Application Auto Scaling and CloudWatch calls the autoscaling
      handling made.
  returned: always
  type: dict
drain_watch:
  description:
    - What the drain of the old colour watched (in check mode, would watch); empty when this run has no drain or
      the old colour needs none.
  returned: always
  type: dict
  contains:
    color:
      description: The old colour.
      type: str
    source:
      description:
        - V(metrics_urls) (O(drain.metrics_urls)), V(ecs_tasks) (found through ECS) or V(none)
          (O(drain.quiet_period_s=0), nothing looked up).
      type: str
    urls:
      description:
        - The metrics URLs watched; of the endpoints found through ECS, those that answered the first sample (in
          check mode, every one found - reach is not tried).
      type: list
      elements: str
    not_watched:
      description: One line per task or endpoint left out, and why (no interface address, no answer from the controller, a refused lookup).
      type: list
      elements: str
  sample:
    color: blue
    source: ecs_tasks
    urls: ["http://10.0.1.23:8002/metrics", "http://10.0.2.41:8002/metrics"]
    not_watched: []
canary:
  description:
    - With O(canary.enabled) - C(verdict) (V(pass), V(fail), V(insufficient_data_pass) when a step passed without
      a verdict, V(none)), the C(options) used and C(steps), one entry per judged traffic step - C(step),
      C(outcome) (V(pass), V(fail), V(insufficient_data), V(insufficient_data_pass)), C(verdict), C(reasons),
      C(checks) (each check's standby and live value and limit, the p-value with the test),
      C(standby) and C(live) figures with their C(window), and C(waited_beyond_bake_s). C({enabled - false}) otherwise.
  returned: always
  type: dict
hooks:
  description: Each hook invoked - C(stage), C(name), C(lambda_arn), C(step), C(invocations), C(outcome), C(seconds).
  returned: always
  type: list
  elements: dict
hooks_planned:
  description: The hook invocations the plan makes, in order (in check mode, what a real run would invoke).
  returned: always
  type: list
  elements: str
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
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.colors import TARGET_GROUPS_OPTION  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.cutover_phases import RollbackStalled  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.cutover_state import Clients  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.guard import GuardedClock, WriteRefused, cutover_guard  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.input import all_input_errors, input_warnings  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.plan import PHASES  # noqa: E402
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
                metrics_port=dict(type="int", default=8002),
                wait_deregistration=dict(type="bool", default=False),
            ),
        ),
        grpc=dict(
            type="dict",
            options=dict(
                target_groups=dict(type="dict", required=True),
                listener_arn=dict(type="str"),
                listener_rule_arn=dict(type="str"),
                test_listener_arn=dict(type="str"),
                test_route_url=dict(type="str"),
                test_route_urls=dict(type="dict"),
                test_route_tls=dict(type="bool", default=True),
                test_route_server_name=dict(type="str"),
                test_route_ca_file=dict(type="path"),
            ),
        ),
        canary=dict(
            type="dict",
            default={},
            options=dict(
                enabled=dict(type="bool", default=False),
                min_requests=dict(type="int", default=50),
                max_wait_s=dict(seconds, default=600),
                on_insufficient_data=dict(type="str", choices=["rollback", "pass"], default="rollback"),
                max_error_ratio_increase=dict(type="float", default=0.01),
                max_latency_ratio=dict(type="float", default=1.5),
                latency_slack_ms=dict(type="float", default=25),
                statistical_test=dict(type="str", choices=["none", "fisher"], default="none"),
                significance=dict(type="float", default=0.05),
                baseline_lookback_s=dict(seconds, default=600),
                period_s=dict(seconds, default=60),
                triton_namespace=dict(type="str", default="Triton"),
                triton_dimensions=dict(type="dict", default={}),
            ),
        ),
        hooks=dict(
            type="list",
            elements="dict",
            default=[],
            options=dict(
                stage=dict(
                    type="str",
                    required=True,
                    choices=["standby_healthy", "before_traffic", "after_step", "after_cutover", "after_rollback"],
                ),
                lambda_arn=dict(type="str", required=True),
                name=dict(type="str"),
                timeout_s=dict(seconds, default=300),
                retry_interval_s=dict(seconds, default=10),
            ),
        ),
        mode=dict(type="str", choices=["blue_green", "capacity_paced"], default="blue_green"),
        batch_size=dict(type="int"),
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
    for warning in input_warnings(module.params):
        module.warn(warning)

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
        {(*WriteRefused, RollbackStalled): lambda e: {"msg": str(e)}},
        details=lambda: {"timeline": runner.timeline.report(), "actions": runner.writes, "batches": runner.batches},
    ):
        result = runner.run()
    reason = result.pop("failed_reason", "")
    if reason:
        module.fail_json(msg=f"rolled back to {result['rollback']['to_color']}: {reason}", **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
