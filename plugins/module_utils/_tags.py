# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""Tags converged the amazon.aws way, on every run: `tags` (None leaves them alone) and `purge_tags`.

The plan is amazon.aws's `compare_aws_tags`, plus the keys a module must never purge: `aws:` keys (AWS owns them)
and, on a production listener or rule, the cutover lock and record (`_bluegreen/lock.py`), which another run of the
bluegreen module writes there. The modules call `plan` with what the resource has and write the result through
their service's tag calls in `_aws/`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ansible_collections.amazon.aws.plugins.module_utils.tagging import compare_aws_tags

RESERVED_PREFIX = "aws:"
# The argument spec of amazon.aws's `tags` doc fragment, as every module that converges tags declares it.
TAGS_OPTIONS = dict(
    tags=dict(type="dict", aliases=["resource_tags"]),
    purge_tags=dict(type="bool", default=True),
)


@dataclass
class TagPlan:
    """What to write to bring a resource's tags to the wanted ones."""

    before: dict[str, str]
    to_set: dict[str, str] = field(default_factory=dict)
    to_remove: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.to_set or self.to_remove)

    @property
    def after(self) -> dict[str, str]:
        tags = {k: v for k, v in self.before.items() if k not in self.to_remove}
        tags.update(self.to_set)
        return tags


def as_strings(tags: dict[str, Any] | None) -> dict[str, str] | None:
    """Tag values as AWS stores them (strings); None stays None (tags left alone)."""
    return None if tags is None else {str(k): str(v) for k, v in tags.items()}


def plan(current: dict[str, str] | None, wanted: dict[str, Any] | None, purge: bool, keep_prefixes: tuple[str, ...] = ()) -> TagPlan:
    """Tags to set and keys to remove. `wanted` None leaves the tags alone; keys starting with `aws:` or one of
    `keep_prefixes` are never removed."""
    before = dict(current or {})
    if wanted is None:
        return TagPlan(before)
    to_set, to_remove = compare_aws_tags(before, as_strings(wanted), purge_tags=purge)
    kept = (RESERVED_PREFIX, *keep_prefixes)
    return TagPlan(before, dict(sorted(to_set.items())), sorted(k for k in to_remove if not k.startswith(kept)))


def key_errors(wanted: dict[str, Any] | None, reserved: tuple[str, ...] = ()) -> list[str]:
    """Keys the module may not write: `aws:` keys (AWS refuses them) and the module's own reserved prefixes."""
    errors = []
    for key in wanted or {}:
        for prefix in (RESERVED_PREFIX, *reserved):
            if str(key).startswith(prefix):
                errors.append(f"tags.{key}: keys starting with {prefix!r} are reserved (AWS's or this collection's); rename the tag")
                break
    return errors
