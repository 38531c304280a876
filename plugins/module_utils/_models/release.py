# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""Release records and instance status objects in S3: key names and validation, pure functions, no I/O.

Keys under the model prefix P, for the application APP (the ECS service family / fleet name):

- ``P/releases/APP/current.json``: the release the whole fleet must run;
- ``P/releases/APP/previous.json``: the release current.json replaced (the rollback target);
- ``P/releases/APP/canary.json``: optional, a release only the instances it lists must run (staged rollout);
- ``P/releases/APP/standby.json``: optional, the release a cutover brings up on the standby colour;
- ``P/status/APP/<instance-id>.json``: written only by the model agent of that instance.

A release is one thing: the image, every model version (with the SHA-256 of its manifest object) and the task
definition revision that runs them. A task belongs to the release bound to its task definition revision
(`bindings`): so each colour's tasks serve their own release's models, and the live colour keeps its models until
the cutover has moved traffic off it. A record without a task definition (a model-only application, or a record
written before schema 2) applies to every task no other record binds.

The controller (module model_release) and the agent on every instance validate records with the same
function, `parse_release`, so a record one side accepts is a record the other side can act on.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.manifest import (
    ManifestError,
    check_model_name,
    check_version,
    repository_base,
)

RELEASE_SCHEMA = 2
READABLE_SCHEMAS = (1, 2)  # schema 1: no image, task definition or manifest digests (written by earlier versions)
STATUS_SCHEMA = 1
CURRENT = "current"
PREVIOUS = "previous"
CANARY = "canary"
STANDBY = "standby"
RECORD_NAMES = (CURRENT, PREVIOUS, CANARY, STANDBY)
# Which record binds a task definition when several name it: a canary (on the instances it lists) first, then the
# release a cutover brings up, then the one production serves, then the one it replaced (the old colour's).
BINDING_ORDER = (CANARY, STANDBY, CURRENT, PREVIOUS)
STATES = ("hydrating", "applying", "applied", "failed")
_RELEASE_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")
_APPLICATION = re.compile(r"[A-Za-z0-9_-]{1,255}")  # an ECS task definition family
_INSTANCE_ID = re.compile(r"i-[0-9a-zA-Z]{1,64}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
# arn:aws:ecs:<region>:<account>:task-definition/<family>:<revision>, or family:revision
_TASK_DEFINITION = re.compile(r"(?:arn:aws[a-z-]*:ecs:[a-z0-9-]+:\d{12}:task-definition/)?([A-Za-z0-9_-]{1,255}):([1-9]\d{0,9})")


class ReleaseError(ValueError):
    """A release record or a status object is not usable; the message names the field, the value and the fix."""


# ---------------------------------------------------------------- names and keys


def check_application(application: Any) -> str:
    if not isinstance(application, str) or not _APPLICATION.fullmatch(application):
        raise ReleaseError(f"application={application!r} is not an ECS service family name: use 1-255 letters, digits, '_' and '-'")
    return application


def check_release_id(release_id: Any) -> str:
    if not isinstance(release_id, str) or not _RELEASE_ID.fullmatch(release_id):
        raise ReleaseError(f"release_id={release_id!r} must be 1-128 characters of letters, digits, '.', '_' and '-'")
    return release_id


def check_instance_id(instance_id: Any) -> str:
    if not isinstance(instance_id, str) or not _INSTANCE_ID.fullmatch(instance_id):
        raise ReleaseError(f"instance id {instance_id!r} is not an EC2 instance id (i-...)")
    return instance_id


def releases_prefix(prefix: str, application: str) -> str:
    return f"{repository_base(prefix)}releases/{check_application(application)}/"


def release_key(prefix: str, application: str, name: str) -> str:
    """The key of record `name` (current, previous or canary)."""
    if name not in RECORD_NAMES:
        raise ReleaseError(f"release record {name!r} is not one of {', '.join(RECORD_NAMES)}")
    return f"{releases_prefix(prefix, application)}{name}.json"


def status_prefix(prefix: str, application: str) -> str:
    return f"{repository_base(prefix)}status/{check_application(application)}/"


def status_key(prefix: str, application: str, instance_id: str) -> str:
    return f"{status_prefix(prefix, application)}{check_instance_id(instance_id)}.json"


# ---------------------------------------------------------------- release records


def task_definition_parts(task_definition: str) -> tuple[str, int]:
    """(family, revision) of a task definition ARN or family:revision; ReleaseError otherwise."""
    match = _TASK_DEFINITION.fullmatch(task_definition) if isinstance(task_definition, str) else None
    if not match:
        raise ReleaseError(
            f"task_definition={task_definition!r} is not a task definition revision: give its ARN "
            "(arn:aws:ecs:REGION:ACCOUNT:task-definition/FAMILY:REVISION) or FAMILY:REVISION"
        )
    return match.group(1), int(match.group(2))


def view_name(family: str, revision: int | str) -> str:
    """The name of a task definition revision's model view on the instance (`<family>-<revision>`)."""
    return f"{family}-{revision}"


def build_release(
    application: str,
    release_id: str,
    models: list[dict[str, Any]],
    created: str,
    instances: list[str] | None = None,
    image: str | None = None,
    task_definition: str | None = None,
) -> dict[str, Any]:
    """A release record (with `instances`: a canary record); validated like one read back from S3.

    `models` entries are {name, version} or {name, version, sha256} (the SHA-256 of the version's manifest object).
    """
    record: dict[str, Any] = {
        "schema": RELEASE_SCHEMA,
        "application": application,
        "release_id": release_id,
        "created": created,
        "image": image,
        "task_definition": task_definition,
        "models": [{k: m[k] for k in ("name", "version", "sha256") if k in m} for m in models],
    }
    if instances is not None:
        record["instances"] = list(instances)
    return validate_release(record, application, "release record")


def render_release(record: dict[str, Any]) -> bytes:
    """Canonical bytes: two renders of the same record compare equal (so a rewrite of the same release is no change)."""
    return (json.dumps(record, sort_keys=True, indent=1) + "\n").encode()


def parse_release(raw: bytes, application: str, where: str) -> dict[str, Any]:
    """Validates a release record read from S3; `where` (e.g. its s3:// URL) names it in every error."""
    try:
        record = json.loads(raw)
    except ValueError as err:
        raise ReleaseError(f"{where} is not JSON ({err}); write the release again") from err
    return validate_release(record, application, where)


def validate_release(record: Any, application: str, where: str) -> dict[str, Any]:
    """Schema, release_id, application, models (names, versions, no duplicate) and, on a canary record, instances."""
    if not isinstance(record, dict):
        raise ReleaseError(f"{where} must be a JSON object, got {type(record).__name__}")
    if record.get("schema") not in READABLE_SCHEMAS or isinstance(record.get("schema"), bool):
        raise ReleaseError(f"{where} has schema={record.get('schema')!r}, expected {RELEASE_SCHEMA}; write it with this collection")
    if record.get("application") != check_application(application):
        raise ReleaseError(
            f"{where} names application={record.get('application')!r}, expected {application!r}; it was written under the wrong key"
        )
    try:
        check_release_id(record.get("release_id"))
    except ReleaseError as err:
        raise ReleaseError(f"{where}: {err}") from err
    if not isinstance(record.get("created"), str) or not record["created"]:
        raise ReleaseError(f"{where} has created={record.get('created')!r}; expected an ISO-8601 UTC time")
    models = record.get("models")
    if not isinstance(models, list):
        raise ReleaseError(f"{where} has models={models!r}; expected a list of {{name, version}} (empty for no models)")
    for field in ("image", "task_definition"):
        if record.get(field) is not None and (not isinstance(record[field], str) or not record[field]):
            raise ReleaseError(f"{where} has {field}={record[field]!r}; expected a string or null")
    if record.get("task_definition") is not None:
        try:
            task_definition_parts(record["task_definition"])
        except ReleaseError as err:
            raise ReleaseError(f"{where}: {err}") from err
    seen: set[str] = set()
    for entry in models:
        if not isinstance(entry, dict) or not {"name", "version"} <= set(entry) <= {"name", "version", "sha256"}:
            raise ReleaseError(f"{where}: models entry {entry!r} must be an object with name, version and (optionally) sha256")
        if "sha256" in entry and not (isinstance(entry["sha256"], str) and _SHA256.fullmatch(entry["sha256"])):
            raise ReleaseError(f"{where}: models entry {entry!r}: sha256 must be 64 lowercase hex digits (the manifest's digest)")
        try:
            check_model_name(entry["name"])
            if isinstance(entry["version"], bool) or not isinstance(entry["version"], int):
                raise ManifestError(f"version={entry['version']!r} must be a JSON integer (1, 2, ...)")
            check_version(entry["version"])
        except ManifestError as err:
            raise ReleaseError(f"{where}: models entry {entry!r}: {err}") from err
        if entry["name"] in seen:
            raise ReleaseError(f"{where}: model {entry['name']} is listed twice; a release serves one version per model")
        seen.add(entry["name"])
    if "instances" in record:
        instances = record["instances"]
        if not isinstance(instances, list) or not instances:
            raise ReleaseError(f"{where} has instances={instances!r}; a canary record lists at least one instance id")
        for instance_id in instances:
            try:
                check_instance_id(instance_id)
            except ReleaseError as err:
                raise ReleaseError(f"{where}: {err}") from err
    return record


def parse_record(raw: bytes, application: str, where: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(record, None) for a usable record; (None, broken) for one that is not, where broken is {error, instances}:
    the error naming the record, and the instance ids it lists when they can still be read (None: unknown).

    A broken record affects only what it names: the agent and the controller skip it where it cannot concern them (a
    canary that lists other instances), name it where it can, and the recovery states remove or replace it.
    """
    try:
        return parse_release(raw, application, where), None
    except ReleaseError as err:
        return None, {"error": str(err), "instances": _readable_instances(raw)}


def _readable_instances(raw: bytes) -> list[str] | None:
    """The `instances` of a broken record when they are a list of EC2 instance ids, else None (they cannot be read)."""
    try:
        record = json.loads(raw)
    except ValueError:
        return None
    instances = record.get("instances") if isinstance(record, dict) else None
    if not isinstance(instances, list) or not instances or not all(isinstance(i, str) and _INSTANCE_ID.fullmatch(i) for i in instances):
        return None
    return list(instances)


def broken_concerns(name: str, broken: dict[str, Any], instance_id: str) -> bool:
    """Whether a broken record may concern this instance: a canary only when it lists it (or its list is unreadable);
    any other record, always (it binds task definitions the instance may run)."""
    return name != CANARY or broken.get("instances") is None or instance_id in broken["instances"]


def recovery(name: str) -> str:
    """How to remove or replace a broken record of this name (docs/runbook.md, 'A broken release record')."""
    return {
        CANARY: "remove it with model_release state=canary_absent (or state=rolled_back)",
        STANDBY: "remove it with model_release state=standby_absent (or playbooks/rollback_traffic.yml), then deploy again",
        PREVIOUS: "replace it with the next promotion (model_release state=promoted or standby_promoted)",
        CURRENT: "replace it with model_release state=rolled_back (current.json <- previous.json) or state=promoted",
    }[name]


def release_models(record: dict[str, Any] | None) -> dict[str, int]:
    """{model: version} of a validated record (empty for no record: a fresh application has no models yet)."""
    return {m["name"]: m["version"] for m in (record or {}).get("models", [])}


def target_release(current: dict[str, Any] | None, canary: dict[str, Any] | None, instance_id: str) -> dict[str, Any] | None:
    """The record this instance must run: the canary when it lists the instance, else current (None: no release yet)."""
    if canary is not None and instance_id in canary.get("instances", []):
        return canary
    return current


def applicable_records(records: dict[str, Any], instance_id: str) -> list[dict[str, Any]]:
    """The records that concern this instance, in BINDING_ORDER (a canary only on the instances it lists)."""
    found = []
    for name in BINDING_ORDER:
        record = records.get(name)
        if record is None or (name == CANARY and instance_id not in record.get("instances", [])):
            continue
        found.append(record)
    return found


def bindings(records: dict[str, Any], instance_id: str) -> tuple[dict[str, dict[str, Any]], dict[str, Any] | None]:
    """({view name: record}, the record for every other task).

    Each task definition revision a record names is bound to the first such record in BINDING_ORDER. A task whose
    revision no record names runs the instance's target (canary or current) only when that record names no task
    definition (a model-only application); otherwise it is left as it is: it belongs to no release the records know.
    """
    bound: dict[str, dict[str, Any]] = {}
    for record in applicable_records(records, instance_id):
        if record.get("task_definition"):
            bound.setdefault(view_name(*task_definition_parts(record["task_definition"])), record)
    target = target_release(records.get(CURRENT), records.get(CANARY), instance_id)
    unbound = target if target is not None and not target.get("task_definition") else None
    return bound, unbound


def view_releases(records: dict[str, Any], instance_id: str, task_views: set[str]) -> dict[str, dict[str, Any]]:
    """{view name: the release its tasks must serve}: every bound revision, and the views of the instance's other tasks
    when the target binds no task definition (`bindings`)."""
    bound, unbound = bindings(records, instance_id)
    views = dict(bound)
    if unbound is not None:
        views.update({view: unbound for view in sorted(task_views) if view not in bound})
    return views


def wanted_versions(releases: list[dict[str, Any] | None]) -> dict[str, set[int]]:
    """{model: versions} the instance must hold on disk for these releases."""
    wanted: dict[str, set[int]] = {}
    for release in releases:
        for model, version in release_models(release).items():
            wanted.setdefault(model, set()).add(version)
    return wanted


# ---------------------------------------------------------------- status objects


def parse_status(raw: bytes, application: str, where: str) -> dict[str, Any]:
    """An agent's status object read back from S3 (the controller's view of an instance)."""
    try:
        status = json.loads(raw)
    except ValueError as err:
        raise ReleaseError(f"{where} is not JSON ({err}); the agent rewrites it at its next poll") from err
    if not isinstance(status, dict) or status.get("schema") != STATUS_SCHEMA:
        raise ReleaseError(f"{where} is not a status object of schema {STATUS_SCHEMA}")
    if status.get("application") != application:
        raise ReleaseError(f"{where} names application={status.get('application')!r}, expected {application!r}")
    check_instance_id(status.get("instance_id"))
    if status.get("state") not in STATES:
        raise ReleaseError(f"{where} has state={status.get('state')!r}, expected one of {', '.join(STATES)}")
    return status


def render_status(status: dict[str, Any]) -> bytes:
    return (json.dumps(status, sort_keys=True, indent=1) + "\n").encode()
