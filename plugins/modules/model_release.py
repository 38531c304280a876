#!/usr/bin/python
# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: model_release
short_description: Roll a model release out to the fleet through S3 release records, staged, and wait for the agents
version_added: 0.1.0
description:
  - Writes the release records the model agent on every container instance reads
    (C(<prefix>/releases/<application>/current.json), C(previous.json), C(canary.json)) and reads back the status object
    each agent writes (C(<prefix>/status/<application>/<instance-id>.json)). The controller never reaches an instance;
    it needs S3 and ECS API access only, no SSH, no SSM, no network path into the VPC.
  - I(state=canary) writes C(canary.json) naming the release and the canary instances (the given O(instances), else the
    first ACTIVE container instance of O(cluster)); only they move to it. Every model version must have its manifest in
    S3 (C(latest) is the highest published version), checked before anything is written.
  - I(state=promoted) writes C(previous.json) from C(current.json), then C(current.json) from the release, then deletes
    C(canary.json). I(state=canary_absent) deletes C(canary.json) (a failed canary goes back to C(current.json)).
    I(state=rolled_back) deletes C(canary.json) and writes C(current.json) from C(previous.json); a second run finds
    them equal and changes nothing.
  - I(state=converged) waits until every ACTIVE container instance of O(cluster) (or the listed O(instances)) reports
    its target release (C(canary.json) when it lists the instance, else C(current.json)) applied. It fails at once when
    an agent reports the release failed, and after O(timeout_s) naming each laggard with its state and last error.
    With O(inference_failures_before) (the canary check) an instance must also report no error and no more inference
    failures than before, for O(bake_s) seconds.
  - A release is one thing, the image, every model version (pinned by the SHA-256 of its manifest object) and the task
    definition revision that runs them. A task belongs to the release bound to its task definition revision, so each
    colour's tasks serve their own release's models (see docs/models.md, "One release per colour").
  - I(state=resolved) writes nothing and returns the release (and its id) for O(models) and O(image), the id a task
    definition carries (C(INFEROPS_RELEASE_ID)). I(state=standby) writes C(standby.json), the release a cutover brings up
    on the standby colour (O(image), O(task_definition)); its instances' agents sync its versions and build its view
    before the colour's tasks start. I(state=standby_promoted) (the cutover finished) writes C(previous.json) from
    C(current.json), C(current.json) from C(standby.json) and deletes C(standby.json); I(state=standby_absent) deletes it
    (the cutover rolled back). I(state=cutover_reverted) follows the emergency rollback, production being back on the
    previous colour, so C(current.json) and C(previous.json) swap (or, mid-cutover, C(standby.json) goes).
  - A model-only release (I(state=canary), I(state=promoted)) keeps the image and task definition of C(current.json); it
    changes the models of the colour that serves, in place. I(state=rolled_back) refuses a C(previous.json) of another
    task definition (the previous colour's release; roll production back with C(playbooks/rollback_traffic.yml)).
  - The release id is derived from the content (image, models, versions, manifest digests) unless O(release_id) is given,
    so running the same release again writes nothing. A release id already written with other content is refused.
  - One run writes an application's records at a time. A run with something to write takes the records' lock (S3
    If-None-Match), reads the records again and writes nothing when they changed since it planned; every record write
    is conditional on the record being what the run read (S3 If-Match). A run that loses a race to another model release
    fails naming it, having written nothing; no write is silently lost. Check mode takes no lock.
  - A broken record (not JSON, another schema, a bad field) affects only what it names. I(state=canary_absent) and
    I(state=rolled_back) remove a broken C(canary.json), I(state=standby_absent) a broken C(standby.json); a broken
    C(previous.json) is replaced by the next promotion, a broken C(current.json) by I(state=rolled_back). States that
    need a broken record's content fail naming it and its recovery; I(state=converged) fails the instances whose
    target it is (a broken C(canary.json) only those it may list). RV(broken_records) names them.
author:
  - inferops maintainers (@inferops)
options:
  state:
    description: What to do (see the description).
    type: str
    required: true
    choices: [canary, promoted, canary_absent, rolled_back, converged, resolved, standby, standby_promoted, standby_absent, cutover_reverted]
  bucket:
    description: S3 bucket of the model repository.
    type: str
    required: true
  prefix:
    description: Key prefix of the model repository (the release records and status objects live below it).
    type: str
    default: ""
  application:
    description: The application (the ECS service family); names the release records and status objects.
    type: str
    required: true
  models:
    description:
      - The release, for I(state=canary) and I(state=promoted). Each C({name, version}); version a number or C(latest)
        (the default).
      - I(state=resolved) and I(state=standby) without O(models) take the models of C(current.json) (a new image on the
        models production serves; no models when there is no C(current.json)).
    type: list
    elements: dict
  release_id:
    description: Release id (1-128 of letters, digits, C(.), C(_), C(-)); default a short hash of the release's content.
    type: str
  image:
    description: I(state=resolved) and I(state=standby) the image of the release (C(repo@sha256:...)).
    type: str
  task_definition:
    description: I(state=standby) the ARN of the task definition revision that runs the release.
    type: str
  release:
    description:
      - I(state=converged) which release to wait for. C(target) each instance's (C(canary.json) when it lists the
        instance, else C(current.json)); C(standby) the release of C(standby.json), on every instance (its versions
        synced and its view built, and every task of its revision serving it).
    type: str
    choices: [target, standby]
    default: target
  cluster:
    description: ECS cluster whose ACTIVE container instances make the fleet. Required for I(state=converged).
    type: str
  publishing:
    description:
      - Check mode only. Versions this run publishes before the release (C(model_publish) entries with C(model) and
        C(version)); a check run publishes nothing, so they count as published when the release is planned.
    type: list
    elements: dict
    default: []
  instances:
    description:
      - EC2 instance ids. I(state=canary) the canary instances (each must be an ACTIVE container instance of O(cluster)
        when O(cluster) is given). I(state=converged) wait on these only.
    type: list
    elements: str
    default: []
  timeout_s:
    description:
      - I(state=converged) seconds to wait for the fleet, 0 to 86400. A cluster with no ACTIVE container instance is
        waited on until one registers; the timeout then says the cluster has none.
    type: int
    default: 600
  poll_interval_s:
    description: I(state=converged) seconds between two reads of the status objects, 1 to 3600 (0 would poll S3 in a busy loop).
    type: int
    default: 5
  bake_s:
    description:
      - I(state=converged) seconds every instance must stay good once all are (a canary's bake time), 0 to O(timeout_s).
    type: int
    default: 0
  break_lock:
    description:
      - Take over the release records' lock (C(<prefix>/releases/<application>/lock.json)) even when another run holds
        it. Every state that writes records takes that lock first (an S3 conditional write), and fails naming the
        holder when another run holds it; a lock whose run died expires after 300 seconds. Use only when the holder
        is known to be dead.
    type: bool
    default: false
  inference_failures_before:
    description:
      - I(state=converged) the canary check. Instance id to the inference failures its status reported before the
        canary (RV(inference_failures_before) of I(state=canary)).
    type: dict
attributes:
  check_mode:
    details:
      - Plans the writes without making them; O(state=converged) reads the status objects once, without waiting or failing.
  diff_mode:
    details:
      - The release records before and after.
extends_documentation_fragment:
  - inferops.triton_ecs.attributes.full
  - amazon.aws.common.modules
  - amazon.aws.region.modules
  - amazon.aws.boto3
"""

EXAMPLES = r"""
- name: Canary the release on the first ACTIVE instance
  inferops.triton_ecs.model_release:
    state: canary
    bucket: models-bucket
    prefix: triton
    application: triton
    cluster: inference
    models:
      - {name: resnet50, version: 4}
      - {name: bert}
  register: canary

- name: Wait for the canary (applied, no error, no new inference failures for two minutes)
  inferops.triton_ecs.model_release:
    state: converged
    bucket: models-bucket
    prefix: triton
    application: triton
    cluster: inference
    instances: "{{ canary.canary_instances }}"
    inference_failures_before: "{{ canary.inference_failures_before }}"
    bake_s: 120

- name: Promote it, then wait for the whole fleet
  inferops.triton_ecs.model_release:
    state: "{{ item }}"
    bucket: models-bucket
    prefix: triton
    application: triton
    cluster: inference
    models: "{{ canary.release.models }}"
  loop: [promoted, converged]

- name: Roll back to the previous release
  inferops.triton_ecs.model_release:
    state: rolled_back
    bucket: models-bucket
    prefix: triton
    application: triton

- name: A deploy's release on the standby colour, then the wait for every instance to hold it
  inferops.triton_ecs.model_release:
    state: "{{ item }}"
    bucket: models-bucket
    prefix: triton
    application: triton
    cluster: inference
    models: [{name: resnet50, version: 5}]
    image: 111111111111.dkr.ecr.eu-west-1.amazonaws.com/triton@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
    task_definition: arn:aws:ecs:eu-west-1:111111111111:task-definition/triton:12
    release: standby
  loop: [standby, converged]
"""

RETURN = r"""
release_id:
  description: The release written (canary, promoted) or current after the run (canary_absent, rolled_back).
  returned: when known
  type: str
  sample: r-3f2a9c1b7d4e
release:
  description: The release record (canary, promoted, resolved, standby).
  returned: when state is canary, promoted, resolved or standby
  type: dict
actions:
  description: The writes and deletes made (in check mode, planned), in order.
  returned: always
  type: list
  elements: str
  sample: ["write previous.json (r-0a1b2c3d4e5f)", "write current.json (r-3f2a9c1b7d4e)", "delete canary.json"]
records:
  description: The release records after the run (current, previous, canary, standby; null when absent).
  returned: always
  type: dict
broken_records:
  description: Record name to why it cannot be used (not JSON, another schema, a bad field), for each broken record.
  returned: when a record is broken
  type: dict
  sample: {"canary": "s3://models/p/releases/triton/canary.json is not JSON (Expecting value: line 1 column 1 (char 0)); write the release again"}
canary_instances:
  description: The canary instances.
  returned: when state is canary
  type: list
  elements: str
inference_failures_before:
  description: Instance id to the inference failures its status reported before the canary; pass to state=converged.
  returned: when state is canary
  type: dict
already_current:
  description: The release is already current.json, so no canary was written.
  returned: when state is canary
  type: bool
instances:
  description: One verdict per instance (instance_id, wanted_release_id, release_id, state, applied, last_error, inference_failures, ok, reason).
  returned: when state is converged
  type: list
  elements: dict
converged:
  description: Every instance reports its target release applied.
  returned: when state is converged
  type: bool
waited_s:
  description: Seconds waited for the fleet.
  returned: when state is converged
  type: float
"""

import time  # noqa: E402

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import module_errors  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.module import aws_module, client  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.convergence import RolloutError  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.release import ReleaseError  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.rollout import STATES, run  # noqa: E402


def main() -> None:
    argument_spec = dict(
        state=dict(type="str", required=True, choices=[*STATES]),
        bucket=dict(type="str", required=True),
        prefix=dict(type="str", default=""),
        application=dict(type="str", required=True),
        models=dict(type="list", elements="dict"),
        release_id=dict(type="str"),
        cluster=dict(type="str"),
        publishing=dict(type="list", elements="dict", default=[]),
        instances=dict(type="list", elements="str", default=[]),
        timeout_s=dict(type="int", default=600),
        poll_interval_s=dict(type="int", default=5),
        bake_s=dict(type="int", default=0),
        inference_failures_before=dict(type="dict"),
        image=dict(type="str"),
        task_definition=dict(type="str"),
        release=dict(type="str", choices=["target", "standby"], default="target"),
        break_lock=dict(type="bool", default=False),
    )
    module = aws_module(
        argument_spec,
        required_if=[
            ("state", "canary", ["models"]),
            ("state", "promoted", ["models"]),
            ("state", "standby", ["image", "task_definition"]),
            ("state", "converged", ["cluster"]),
        ],
    )
    p = module.params
    s3 = client(module, "s3")
    ecs = client(module, "ecs") if p["cluster"] else None
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    with module_errors(
        module,
        f"model_release application={p['application']}: AWS call failed (bucket {p['bucket']}, cluster {p['cluster']})",
        {
            ReleaseError: lambda err: {"msg": f"model_release state={p['state']} application={p['application']}: {err}"},
            RolloutError: lambda err: {"msg": f"model_release application={p['application']}: {err}", "instances": err.verdicts},
        },
    ):
        result = run(s3, ecs, p, module.check_mode, created)
    if not module._diff:
        result.pop("diff", None)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
