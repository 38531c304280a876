#!/usr/bin/python
# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: bluegreen_rollback
short_description: Emergency rollback of a blue/green Triton application - production traffic back in one call, from what AWS shows
version_added: 0.1.0
description:
  - Puts production traffic back on the colour the last cutover moved it from, in one C(ModifyListener) (or
    C(ModifyRule)) call, then scales the colour it left to 0 (O(new_color)).
  - Needs only the cluster and the application name. The colour services C(<name>-blue) and C(<name>-green) give the
    target groups, the target groups their load balancers, and the production listener (or rule) is the one that
    forwards to both colours and carries the record of the last cutover (tag C(inferops:cutover), written by
    M(inferops.triton_ecs.bluegreen)). No task definition, image, registry or checkout is involved.
  - Takes the cutover lock, by default even from a cutover in progress (O(break_lock)); that cutover stops at its
    next write. The state is read again once the lock is held, and the colour that takes the traffic must run
    tasks with every target healthy, or nothing is written.
  - An application with a gRPC route has its gRPC production forward moved to the same weights right after the HTTP
    one, in a second call (C(set gRPC weights) in RV(actions)).
  - After a capacity-paced cutover (O(inferops.triton_ecs.bluegreen#module:mode=capacity_paced)) the colour traffic goes
    back to may have shrunk. Traffic still moves back at once, then that colour is scaled back to the full count the
    cutover recorded (after the other colour's scale-down, which frees the GPUs it needs); until its tasks run, it
    serves with fewer tasks than before - RV(old_capacity) gives the counts and the module warns. A colour already
    scaled to 0 is refused, as after a blue/green cutover.
  - Without a recorded cutover, traffic goes to the other colour when one colour has all of it and the other still
    runs; split traffic without a record is refused.
author:
  - inferops maintainers (@inferops)
options:
  listener_arn:
    description: Production listener, when it cannot be found from the target groups (or to skip the search).
    type: str
  listener_rule_arn:
    description: Production listener rule, when the weights live in a rule.
    type: str
  grpc_listener_arn:
    description:
      - The gRPC production listener, when the application has a gRPC route (its services are also in target groups of
        protocol version GRPC) and the listener cannot be told from the target groups. Without it, the one listener or
        rule forwarding to both gRPC target groups (at the HTTP production's weights, when several do) is moved.
    type: str
  grpc_listener_rule_arn:
    description: The gRPC production listener rule, as O(grpc_listener_arn).
    type: str
  new_color:
    description: V(scale_down) the colour traffic leaves to 0 tasks once the weights are back, or V(keep) it running (to investigate).
    type: str
    choices: [scale_down, keep]
    default: scale_down
  break_lock:
    description: Take the cutover lock even from a run that holds it (a live cutover stops at its next write). V(false) fails instead.
    type: bool
    default: true
  lock_ttl_s:
    description: Seconds the lock this run takes stays valid (it is released at the end).
    type: int
    default: 600
attributes:
  check_mode:
    details:
      - Reads AWS and returns the writes it would make (RV(actions)), without any write.
  diff_mode:
    details:
      - C(before) and C(after) hold the weights and desired counts.
extends_documentation_fragment:
  - inferops.triton_ecs.application
  - inferops.triton_ecs.attributes.full
  - amazon.aws.common.modules
  - amazon.aws.region.modules
  - amazon.aws.boto3
notes:
  - "The playbook C(playbooks/rollback_traffic.yml) runs this module: C(ansible-playbook playbooks/rollback_traffic.yml -i inventories/<env>)."
  - Running it again changes nothing.
"""

EXAMPLES = r"""
- name: Production traffic back to the previous colour
  inferops.triton_ecs.bluegreen_rollback:
    cluster: inference
    name: triton

- name: Back, but keep the colour that failed running to look at it
  inferops.triton_ecs.bluegreen_rollback:
    cluster: inference
    name: triton
    new_color: keep
"""

RETURN = r"""
decision:
  description: V(rollback) or V(noop) (traffic is already back).
  returned: always
  type: str
reason:
  description: Why, naming the recorded cutover.
  returned: always
  type: str
to_color:
  description: The colour production traffic goes back to.
  returned: always
  type: str
from_color:
  description: The colour traffic leaves.
  returned: always
  type: str
actions:
  description: The writes made (in check mode, the writes that would be made).
  returned: always
  type: list
  elements: str
production_arn:
  description: The production listener or rule that holds the weights.
  returned: always
  type: str
target_groups:
  description: HTTP target group ARN of each colour, read from the services.
  returned: always
  type: dict
record:
  description: The last cutover recorded on the production listener or rule (C(from), C(to), C(task_definition)); empty when none.
  returned: always
  type: dict
weights:
  description: Production weights at the end, by colour.
  returned: always
  type: dict
  sample: {blue: 100, green: 0}
desired_counts:
  description: Each colour's desired count at the end.
  returned: always
  type: dict
grpc:
  description: The gRPC route, when the application has one - C(production_arn), C(target_groups) and C(weights) at the end; V({}) otherwise.
  returned: always
  type: dict
  sample: {}
old_capacity:
  description:
    - After a capacity-paced cutover that shrank the colour taking the traffic back - C(color), C(full_count),
      C(before) (C(running), C(desired)), C(after) (C(desired)) and C(warning); V({}) otherwise.
  returned: always
  type: dict
  sample: {color: blue, full_count: 4, before: {running: 2, desired: 2}, after: {desired: 4}, warning: "..."}
weights_restore_seconds:
  description: Seconds the HTTP weight write took.
  returned: always
  type: float
wall_s:
  description: Seconds the module ran.
  returned: always
  type: float
"""

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import module_errors  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.module import aws_module, client  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.guard import WriteRefused, discovering_guard  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.rollback import rollback  # noqa: E402


def main() -> None:
    module = aws_module(
        dict(
            cluster=dict(type="str", required=True),
            name=dict(type="str", required=True),
            listener_arn=dict(type="str"),
            listener_rule_arn=dict(type="str"),
            grpc_listener_arn=dict(type="str"),
            grpc_listener_rule_arn=dict(type="str"),
            new_color=dict(type="str", choices=["scale_down", "keep"], default="scale_down"),
            break_lock=dict(type="bool", default=True),
            lock_ttl_s=dict(type="int", default=600),
        ),
        mutually_exclusive=[("listener_arn", "listener_rule_arn"), ("grpc_listener_arn", "grpc_listener_rule_arn")],
    )
    params = module.params
    ecs = client(module, "ecs")
    elbv2 = client(module, "elbv2")
    with module_errors(module, f"emergency rollback of {params['name']}: AWS call failed", {WriteRefused: lambda e: {"msg": str(e)}}):
        guard, make_lock = discovering_guard(params, elbv2)
        result = rollback(ecs, elbv2, params, guard, module.check_mode, make_lock)
    if result["old_capacity"]:
        module.warn(result["old_capacity"]["warning"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()
