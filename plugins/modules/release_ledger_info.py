#!/usr/bin/python
# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: release_ledger_info
short_description: Which release served a colour, or the production route, at a time, from the release ledger
version_added: 0.1.0
description:
  - Reads the application's release ledger (the entries M(inferops.triton_ecs.release_ledger) appends under
    C(<prefix>/ledger/<application>/)) and answers, at the time O(at), which colour served the production route and
    which release (release id, image, task definition revision, models) served O(color), or the production colour.
  - The answer replays the entries that ended at or before O(at), in order - a failed entry moves nothing; a
    rolled-back one moves only the production route; a succeeded one puts its release on its colour (on both for a
    fleet-wide model release), and a field it leaves null keeps the colour's earlier value. It reads the entries
    newest first and stops once every answer is known.
  - With O(since), also returns every entry that ended between O(since) and O(at).
author:
  - inferops maintainers (@inferops)
options:
  at:
    description: The time asked about, ISO-8601 UTC (C(2026-12-01T10:00:00Z)); default now.
    type: str
  color:
    description: The colour asked about; default the colour serving the production route at O(at).
    type: str
    choices: [blue, green]
  since:
    description: Also list the entries that ended between this ISO-8601 UTC time and O(at).
    type: str
extends_documentation_fragment:
  - inferops.triton_ecs.release_ledger
  - inferops.triton_ecs.attributes.info_module
  - amazon.aws.common.modules
  - amazon.aws.region.modules
  - amazon.aws.boto3
"""

EXAMPLES = r"""
- name: What served production at 10:00 UTC on 1 December
  inferops.triton_ecs.release_ledger_info:
    bucket: models-bucket
    prefix: models/
    application: triton
    at: "2026-12-01T10:00:00Z"
  register: served

- name: What blue ran then, and everything that happened that morning
  inferops.triton_ecs.release_ledger_info:
    bucket: models-bucket
    prefix: models/
    application: triton
    at: "2026-12-01T12:00:00Z"
    since: "2026-12-01T06:00:00Z"
    color: blue
"""

RETURN = r"""
at:
  description: The time asked about (UTC, milliseconds).
  returned: always
  type: str
answer:
  description:
    - About O(color) (or the production colour) at RV(at) - C(color), C(production_color), C(serves_production),
      C(release_id), C(image), C(task_definition), C(models), C(ami_id), C(entry_key) and C(since) (the newest entry
      that set the colour's release, and when it ended), C(production_entry_key) and C(production_since) (the entry
      that put production on its colour). Fields are null when no entry before RV(at) says.
  returned: always
  type: dict
colors:
  description: The same release fields for each colour.
  returned: always
  type: dict
entries:
  description: The entries that ended between O(since) and O(at), in time order, each with its C(key).
  returned: when since is given
  type: list
  elements: dict
summary:
  description: The answer (and the entries of the window) as lines for a reader.
  returned: always
  type: list
  elements: str
  sample:
    - "production route at 2026-12-01T10:00:00.000Z: green (since 2026-12-01T09:12:44.210Z)"
    - "green: release r-3f2a9c1b7d4e (since 2026-12-01T09:12:44.210Z)"
entries_listed:
  description: Ledger entries that ended at or before RV(at).
  returned: always
  type: int
entries_read:
  description: Of those, how many the answer read (newest first).
  returned: always
  type: int
"""

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import module_errors  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.module import aws_module, client  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.colors import COLORS  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._ledger.entry import (  # noqa: E402
    LedgerError,
    format_time,
    now,
    parse_time,
)
from ansible_collections.inferops.triton_ecs.plugins.module_utils._ledger.history import answer_for, describe  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._ledger.store import LEDGER_OPTIONS, query  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.release import ReleaseError  # noqa: E402


def main() -> None:
    module = aws_module(
        dict(
            **LEDGER_OPTIONS,
            at=dict(type="str"),
            color=dict(type="str", choices=list(COLORS)),
            since=dict(type="str"),
        )
    )
    p = module.params
    reports = {(LedgerError, ReleaseError): lambda err: {"msg": f"release_ledger_info application={p['application']}: {err}"}}
    with module_errors(module, f"release_ledger_info: AWS call failed (bucket {p['bucket']})", reports):
        at = parse_time(p["at"] or now(), "at")
        since = parse_time(p["since"], "since") if p["since"] else None
        if since is not None and since > at:
            raise LedgerError(f"since={p['since']!r} is after at={p['at']!r}: give the window's start first")
        found = query(client(module, "s3"), p, at, since)
    resolved = found.pop("resolved")
    answer = answer_for(resolved, p["color"])
    module.exit_json(
        changed=False,
        at=format_time(at),
        answer=answer,
        summary=describe(format_time(at), answer, found.get("entries")),
        colors=resolved["colors"],
        entries_read=resolved["entries_read"],
        **found,
    )


if __name__ == "__main__":
    main()
