# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""What the task_definition module does for state=present and state=absent: read, compare, then write.

The functions take ready-made clients and call AWS only through `_aws/ecs.py` and `_aws/ecr.py`;
the module's main() wraps them.
Every check that can fail happens before the first write.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import ecr as _ecr
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import ecs as _ecs
from ansible_collections.inferops.triton_ecs.plugins.module_utils._tags import plan as plan_tags
from ansible_collections.inferops.triton_ecs.plugins.module_utils._task_definition.canonical import canonicalise, diff, from_describe
from ansible_collections.inferops.triton_ecs.plugins.module_utils._task_definition.render import (
    ecr_repository,
    pin_image,
    render,
    split_image,
)
from ansible_collections.inferops.triton_ecs.plugins.module_utils._task_definition.validate import TaskDefinitionError


def _short(arn: str) -> str:
    return arn.rsplit("/", 1)[-1]


def resolve_image(ecr_client: Callable[[], Any], image: str) -> str:
    """A tagged ECR reference pinned to the digest the tag points at now."""
    repo = ecr_repository(image)
    tag = split_image(image)["tag"]
    digest = _ecr.image_digest(ecr_client(), repo["registryId"], repo["repositoryName"], tag) if repo else None
    if not digest:
        raise TaskDefinitionError(
            [f"image: tag {tag!r} was not found in ECR repository {image.rsplit(':', 1)[0]!r}; push it first or fix the tag"]
        )
    return pin_image(image, digest)


def present(
    ecs: Any, ecr_client: Callable[[], Any], params: dict[str, Any], region: str | None, check_mode: bool = False
) -> dict[str, Any]:
    actions: list[str] = []
    params = dict(params)
    if params.get("resolve_image_digest") and not split_image(params["image"])["digest"]:
        pinned = resolve_image(ecr_client, params["image"])
        actions.append(f"resolved {params['image']} to {pinned}")
        params["image"] = pinned
    desired = render(params, region)
    if params.get("tags") is None:
        desired.pop("tags", None)  # tags omitted: the revision's tags are left alone (and carried to a new revision)
    else:
        desired.setdefault("tags", [])  # render leaves out an empty list; `tags: {}` asks for none (purge_tags removes them)
    result = ensure(ecs, desired, check_mode=check_mode, purge_tags=params.get("purge_tags", True))
    actions += result.pop("actions")
    result["image"] = params["image"]
    if params.get("keep_revisions"):
        pending = result["changed"] and check_mode
        pruned, kept_in_use = prune(ecs, params["family"], params["keep_revisions"], pending=pending, check_mode=check_mode)
        result["changed"] = result["changed"] or bool(pruned)
        result["kept_in_use"] = kept_in_use
        actions += [f"{'would deregister' if check_mode else 'deregistered'} {_short(a)}" for a in pruned]
    result["actions"] = actions
    return result


def _untagged(canonical: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in canonical.items() if k != "tags"}


def ensure(ecs: Any, desired: dict[str, Any], check_mode: bool = False, purge_tags: bool = True) -> dict[str, Any]:
    """Register `desired` (register_task_definition arguments) unless the latest ACTIVE revision already equals it.

    Tags do not make a revision: when only they differ, the latest revision is tagged (TagResource/UntagResource).
    `desired` without a "tags" key leaves the revision's tags as they are."""
    family = desired["family"]
    current_response = _ecs.latest_active_task_definition(ecs, family)
    current = from_describe(current_response) if current_response else None
    wanted_tags = _ecs.tags_of(desired) if "tags" in desired else None
    tags = plan_tags(_ecs.tags_of(current), wanted_tags, purge_tags)
    desired = {**desired, "tags": _ecs.ecs_tags(tags.after)}
    changes = diff(current, desired)
    changed = _untagged(changes["before"]) != _untagged(changes["after"])
    retag = current is not None and not changed and tags.changed
    arn = current["taskDefinitionArn"] if current else None
    revision = current["revision"] if current else None
    actions = []
    if changed and check_mode:
        arn = revision = None
        actions.append(f"would register a new revision of {family}")
    elif changed:
        registered = _ecs.register_task_definition(ecs, desired)["taskDefinition"]
        arn, revision = registered["taskDefinitionArn"], registered["revision"]
        actions.append(f"registered {_short(arn)}")
    elif retag:
        actions.append(f"{'would tag' if check_mode else 'tagged'} {_short(arn)}: {', '.join([*tags.to_set, *tags.to_remove])}")
        if not check_mode:
            _ecs.update_tags(ecs, arn, tags.to_set, tags.to_remove)
    return {
        "changed": changed or retag,
        "tags": tags.after,
        "task_definition_arn": arn,
        "revision": revision,
        "task_definition": changes["after"],
        "diff": {"before": changes["before"], "after": changes["after"]},
        "changed_fields": changes["paths"],
        "actions": actions,
    }


def prune(ecs: Any, family: str, keep: int, pending: bool, check_mode: bool) -> tuple[list[str], dict[str, list[str]]]:
    """Deregister ACTIVE revisions beyond the newest `keep` that no service uses; `pending` counts a revision not yet registered."""
    active = _ecs.list_task_definitions(ecs, family)
    excess = active[keep - 1 :] if pending else active[keep:]
    if not excess:
        return [], {}
    used = _ecs.task_definitions_in_use(ecs)
    kept_in_use = {arn: used[arn] for arn in excess if arn in used}
    pruned = [arn for arn in excess if arn not in used]
    if not check_mode:
        for arn in pruned:
            _ecs.deregister_task_definition(ecs, arn)
    return pruned, kept_in_use


def absent(ecs: Any, params: dict[str, Any], check_mode: bool = False) -> dict[str, Any]:
    family = params["family"]
    active = _ecs.list_task_definitions(ecs, family)
    before: dict[str, Any] = {}
    if active:
        latest = _ecs.describe_task_definition(ecs, active[0])
        before = canonicalise(from_describe(latest)) if latest else {}
        used = _ecs.task_definitions_in_use(ecs)
        in_use = {arn: used[arn] for arn in active if arn in used}
        if in_use:
            listed = "; ".join(f"{_short(arn)} by {', '.join(services)}" for arn, services in in_use.items())
            raise TaskDefinitionError(
                [
                    f"state: absent would deregister revisions still in use ({listed});"
                    " move or delete those services first, or keep the family with keep_revisions"
                ]
            )
        if not check_mode:
            for arn in active:
                _ecs.deregister_task_definition(ecs, arn)
    verb = "would deregister" if check_mode else "deregistered"
    return {
        "changed": bool(active),
        "task_definition": {},
        "diff": {"before": before, "after": {}},
        "changed_fields": ["."] if active else [],
        "actions": [f"{verb} {_short(arn)}" for arn in active],
    }
