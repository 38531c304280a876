#!/usr/bin/python
# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: release_ledger
short_description: Append one immutable entry to the release ledger (S3, optionally EventBridge)
version_added: 0.1.0
description:
  - Appends what a deploy, cutover, emergency cutover rollback, model release or model rollback did to the
    application's release ledger, one S3 JSON object per entry under
    C(<prefix>/ledger/<application>/<YYYY>/<MM>/<DD>/<time>-<kind>-<8 hex>.json) (the time is O(ended), so a listing
    is in time order; the hex digits are the start of the entry's SHA-256).
  - The object is created with an S3 conditional write (header C(If-None-Match) set to C(*)), so no entry is ever replaced, by this
    module or any other writer. The same entry appended again (a retried run) finds its key holding the same bytes
    and reports no change; another entry under that key fails the module.
  - The entry records the release (O(release_id), O(image), O(task_definition), O(models) with the SHA-256 of each
    version's manifest), the AMI, the caller (STS, unless given), the colour the entry concerns and the colour serving
    production after it, the verdicts, the times and the outcome. A value the flow does not know is null.
  - M(inferops.triton_ecs.release_ledger_info) answers from the ledger which release served a colour, or the
    production route, at a time.
author:
  - inferops maintainers (@inferops)
options:
  kind:
    description: What happened.
    type: str
    required: true
    choices: [deploy, cutover, cutover_rollback, model_release, model_rollback]
  outcome:
    description:
      - V(succeeded); V(failed) (nothing moved, so the entry moves neither production nor a colour); V(rolled_back) (the
        release did not stay, so only the production route moves, to O(production_color)).
    type: str
    default: succeeded
    choices: [succeeded, failed, rolled_back]
  release_id:
    description: The release id (C(r-) and 12 hex digits for a release derived from its content), null when unknown.
    type: str
  image:
    description: The image the release runs, C(repository@sha256:...); null for a model-only release or when unknown.
    type: str
  task_definition:
    description: ARN of the task definition revision that runs the release; null when unknown.
    type: str
  models:
    description:
      - The release's model versions, each C({name, version, sha256}) (the SHA-256 of the version's manifest object,
        null when unknown). Omit when the entry leaves the models as they were; V([]) for a release without models.
    type: list
    elements: dict
    suboptions:
      name:
        description: Model name.
        type: str
        required: true
      version:
        description: The version the release resolved (an integer, never C(latest)).
        type: int
        required: true
      sha256:
        description: SHA-256 of the version's manifest object in S3.
        type: str
  ami_id:
    description: The AMI the fleet's launch template boots; null when the flow does not know it.
    type: str
  caller:
    description: ARN of who made the change; default the caller of the module's credentials (STS GetCallerIdentity).
    type: str
  color:
    description:
      - The colour the entry concerns (the colour a deploy or cutover brought up, the colour an emergency rollback put
        traffic back on). Required for V(deploy), V(cutover) and V(cutover_rollback); null for a model release or
        rollback applied to the whole fleet.
    type: str
    choices: [blue, green]
  production_color:
    description: The colour serving the production route after the entry, when known.
    type: str
    choices: [blue, green]
  verdicts:
    description: What decided the outcome (gates, alarms, canary), free-form.
    type: dict
    default: {}
  started:
    description: When the flow began, ISO-8601 UTC (C(2026-12-01T10:00:00Z)); null when unknown.
    type: str
  ended:
    description: When it finished and took effect, ISO-8601 UTC; default now.
    type: str
  detail:
    description: One line for a reader.
    type: str
    default: ""
  event_bus_name:
    description:
      - Also send the entry to this EventBridge bus (source C(inferops.triton_ecs), detail-type
        C(Triton release ledger entry), detail C({bucket, key, entry})), after the S3 write and only when this run wrote it.
    type: str
attributes:
  check_mode:
    details:
      - Validates the entry and returns it with its key; writes nothing and sends no event.
  diff_mode:
    details:
      - C(before) is empty, C(after) the entry (an append never changes what was there).
extends_documentation_fragment:
  - inferops.triton_ecs.release_ledger
  - inferops.triton_ecs.attributes.full
  - amazon.aws.common.modules
  - amazon.aws.region.modules
  - amazon.aws.boto3
"""

EXAMPLES = r"""
- name: Record the deploy that just cut production over to green
  inferops.triton_ecs.release_ledger:
    bucket: models-bucket
    prefix: models/
    application: triton
    kind: deploy
    release_id: r-3f2a9c1b7d4e
    image: 111111111111.dkr.ecr.eu-west-1.amazonaws.com/triton@sha256:0b1c...
    task_definition: arn:aws:ecs:eu-west-1:111111111111:task-definition/triton:42
    models:
      - {name: resnet50, version: 4, sha256: 9f86d0...}
    ami_id: ami-0a1b2c3d4e5f6a7b8
    color: green
    production_color: green
    verdicts: {gates: ok, alarms: OK}
    started: "2026-12-01T09:41:07Z"

- name: Record an emergency rollback, also on the ops event bus
  inferops.triton_ecs.release_ledger:
    bucket: models-bucket
    prefix: models/
    application: triton
    kind: cutover_rollback
    color: blue
    production_color: blue
    detail: traffic back on blue after a 5xx spike
    event_bus_name: ops-events
"""

RETURN = r"""
key:
  description: The entry's S3 key.
  returned: always
  type: str
  sample: models/ledger/triton/2026/12/01/20261201T100000.000Z-deploy-3f2a9c1b.json
url:
  description: C(s3://bucket/key) of the entry.
  returned: always
  type: str
entry:
  description: The entry written (in check mode, the one that would be written).
  returned: always
  type: dict
already_written:
  description: The key already held this very entry (a retried run); nothing was written.
  returned: when true
  type: bool
event_id:
  description: The EventBridge event id, when O(event_bus_name) is set and the entry was written by this run.
  returned: always
  type: str
"""

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import module_errors  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.identity import get_caller_identity  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.module import aws_module, client  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.colors import COLORS  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._ledger.entry import KINDS, OUTCOMES, LedgerError, build_entry  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._ledger.store import LEDGER_OPTIONS, EventNotSent, append  # noqa: E402

COLOR = dict(type="str", choices=list(COLORS))


def main() -> None:
    argument_spec = dict(
        **LEDGER_OPTIONS,
        kind=dict(type="str", required=True, choices=list(KINDS)),
        outcome=dict(type="str", default="succeeded", choices=list(OUTCOMES)),
        release_id=dict(type="str"),
        image=dict(type="str"),
        task_definition=dict(type="str"),
        models=dict(
            type="list",
            elements="dict",
            options=dict(name=dict(type="str", required=True), version=dict(type="int", required=True), sha256=dict(type="str")),
        ),
        ami_id=dict(type="str"),
        caller=dict(type="str"),
        color=COLOR,
        production_color=COLOR,
        verdicts=dict(type="dict", default={}),
        started=dict(type="str"),
        ended=dict(type="str"),
        detail=dict(type="str", default=""),
        event_bus_name=dict(type="str"),
    )
    module = aws_module(argument_spec)
    p = module.params
    aws_msg = f"release_ledger application={p['application']}: AWS call failed (bucket {p['bucket']})"
    reports = {
        LedgerError: lambda err: {"msg": f"release_ledger kind={p['kind']}: {err}"},
        EventNotSent: lambda err: {"msg": f"release_ledger kind={p['kind']}: {err}"},
    }
    with module_errors(module, aws_msg, reports):
        caller = p["caller"] or get_caller_identity(client(module, "sts"))["Arn"]
        entry = build_entry({**p, "caller": caller})  # bad input fails here, before the first write
        events = client(module, "events") if p["event_bus_name"] else None
        result = append(client(module, "s3"), events, p, entry, module.check_mode)
    if module._diff:
        result["diff"] = {"before": {}, "after": entry if result["changed"] else {}}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
