# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The release ledger's entries: schema, validation and key names. Pure functions, no I/O.

Every deploy, cutover, emergency rollback, model release and model rollback appends one entry, an S3 JSON object
that is never rewritten, under the model prefix P for the application APP:

    P/ledger/APP/<YYYY>/<MM>/<DD>/<YYYYMMDDTHHMMSS.mmmZ>-<kind>-<8 hex>.json

The time in the key is the entry's `ended` (when it took effect), so a listing of the prefix is in time order; the
8 hex digits are the start of the SHA-256 of the entry's bytes, so appending the same entry twice names the same key.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import datetime, timezone
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.colors import COLORS
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.manifest import (
    ManifestError,
    check_model_name,
    check_version,
    repository_base,
)
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.release import (
    ReleaseError,
    check_application,
    check_release_id,
)

SCHEMA = 1
KINDS = ("deploy", "cutover", "cutover_rollback", "model_release", "model_rollback")
OUTCOMES = ("succeeded", "failed", "rolled_back")
# Kinds that move traffic between the colours: they name the colour they concern.
TRAFFIC_KINDS = ("deploy", "cutover", "cutover_rollback")
FIELDS = (
    "schema",
    "kind",
    "application",
    "release_id",
    "image",
    "task_definition",
    "models",
    "ami_id",
    "caller",
    "color",
    "production_color",
    "verdicts",
    "started",
    "ended",
    "outcome",
    "detail",
)
_TIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?(Z|[+-]00:00)")
_IMAGE_DIGEST = re.compile(r"[^\s@]+@sha256:[0-9a-f]{64}")
_IMAGE_TAG = re.compile(r"[^\s@]+")
_TASK_DEFINITION_ARN = re.compile(r"arn:aws[a-z-]*:ecs:[a-z0-9-]+:\d{12}:task-definition/[A-Za-z0-9_-]{1,255}:\d+")
_AMI_ID = re.compile(r"ami-[0-9a-f]{8,17}")
_SHA256 = re.compile(r"[0-9a-f]{64}")


class LedgerError(ValueError):
    """A ledger entry or query is not usable; the message names the field, the value and the fix."""


# ---------------------------------------------------------------- times


def parse_time(value: Any, field: str) -> datetime:
    """An ISO-8601 UTC time (`2026-12-01T10:00:00Z`, fractions and `+00:00` accepted) as an aware datetime."""
    found = _TIME.fullmatch(value) if isinstance(value, str) else None
    if found is None:
        raise LedgerError(f"{field}={value!r} is not an ISO-8601 UTC time: write it as 2026-12-01T10:00:00Z")
    year, month, day, hour, minute, second, fraction, _zone = found.groups()
    try:
        return datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second), int((fraction or "0").ljust(6, "0")), timezone.utc
        )
    except ValueError as err:
        raise LedgerError(f"{field}={value!r} is not a calendar time ({err}): write it as 2026-12-01T10:00:00Z") from err


def format_time(moment: datetime) -> str:
    """The form every entry stores: UTC, milliseconds, `Z`."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def now() -> str:
    return format_time(datetime.now(timezone.utc))


# ---------------------------------------------------------------- keys


def ledger_prefix(prefix: str, application: str) -> str:
    """Where every entry of the application lives: `P/ledger/APP/`."""
    return f"{repository_base(prefix)}ledger/{check_application(application)}/"


def _key_time(moment: datetime) -> str:
    # ISO-8601 basic form: fixed width (so keys sort by time) and no ':' (which some S3 tools must escape).
    return moment.strftime("%Y/%m/%d/%Y%m%dT%H%M%S.") + f"{moment.microsecond // 1000:03d}Z"


def time_bound_key(prefix: str, application: str, moment: datetime) -> str:
    """A key that sorts after every key of an entry that ended at or before `moment` (to the millisecond), and
    before every key of a later one."""
    return f"{ledger_prefix(prefix, application)}{_key_time(moment)}~"


def time_start_key(prefix: str, application: str, moment: datetime) -> str:
    """A key that sorts before every key of an entry that ended at or after `moment` (S3's StartAfter)."""
    return f"{ledger_prefix(prefix, application)}{_key_time(moment)}"


def render(entry: dict[str, Any]) -> bytes:
    """Canonical bytes: the same entry always renders (and so hashes and keys) the same."""
    return (json.dumps(entry, sort_keys=True, indent=1) + "\n").encode()


def entry_key(prefix: str, application: str, entry: dict[str, Any]) -> str:
    """The entry's key: its end time, its kind and the start of the SHA-256 of its bytes."""
    digest = hashlib.sha256(render(entry)).hexdigest()[:8]
    return f"{ledger_prefix(prefix, application)}{_key_time(parse_time(entry['ended'], 'ended'))}-{entry['kind']}-{digest}.json"


# ---------------------------------------------------------------- entries


def build_entry(params: dict[str, Any]) -> dict[str, Any]:
    """An entry from the module's options (missing optional fields are null), validated like one read back."""
    entry: dict[str, Any] = {field: params.get(field) for field in FIELDS}
    entry["schema"] = SCHEMA
    entry["verdicts"] = params.get("verdicts") or {}
    entry["detail"] = params.get("detail") or ""
    entry["outcome"] = params.get("outcome") or "succeeded"
    entry["ended"] = params.get("ended") or now()
    if entry["models"] is not None:
        entry["models"] = [{"name": m.get("name"), "version": m.get("version"), "sha256": m.get("sha256")} for m in entry["models"]]
    for field in ("started", "ended"):
        if entry[field] is not None:
            entry[field] = format_time(parse_time(entry[field], field))
    return validate_entry(entry, params.get("application"), "ledger entry")


def parse_entry(raw: bytes, application: str, where: str) -> dict[str, Any]:
    """Validates an entry read from S3; `where` (its s3:// URL) names it in every error."""
    try:
        entry = json.loads(raw)
    except ValueError as err:
        raise LedgerError(f"{where} is not JSON ({err}); a ledger entry is written only by module release_ledger") from err
    return validate_entry(entry, application, where)


def validate_entry(entry: Any, application: Any, where: str) -> dict[str, Any]:
    """Every field of schema 1; raises LedgerError naming each problem and its fix."""
    if not isinstance(entry, dict):
        raise LedgerError(f"{where} must be a JSON object, got {type(entry).__name__}")
    errors: list[str] = []
    unknown = sorted(set(entry) - set(FIELDS))
    if unknown:
        errors.append(f"unknown fields {unknown}: schema {SCHEMA} has {', '.join(FIELDS)}")
    if entry.get("schema") != SCHEMA or isinstance(entry.get("schema"), bool):
        errors.append(f"schema={entry.get('schema')!r}, expected {SCHEMA}: write it with module release_ledger")
    errors += _check_identity(entry, application)
    errors += _check_release(entry)
    errors += _check_colors(entry)
    errors += _check_times(entry)
    if not isinstance(entry.get("verdicts"), dict):
        errors.append(f"verdicts={entry.get('verdicts')!r} must be a mapping (gates, alarms, canary, ...), {{}} when none")
    if not isinstance(entry.get("detail"), str):
        errors.append(f"detail={entry.get('detail')!r} must be a string")
    if errors:
        raise LedgerError(f"{where}: " + "; ".join(errors))
    return entry


def _check_identity(entry: dict[str, Any], application: Any) -> list[str]:
    errors = []
    if entry.get("kind") not in KINDS:
        errors.append(f"kind={entry.get('kind')!r} must be one of {', '.join(KINDS)}")
    if entry.get("outcome") not in OUTCOMES:
        errors.append(f"outcome={entry.get('outcome')!r} must be one of {', '.join(OUTCOMES)}")
    try:
        check_application(application)
        if entry.get("application") != application:
            errors.append(
                f"application={entry.get('application')!r}, expected {application!r}: it was written under another application's key"
            )
    except ReleaseError as err:
        errors.append(str(err))
    caller = entry.get("caller")
    if not isinstance(caller, str) or not caller.startswith("arn:"):
        errors.append(f"caller={caller!r} must be the ARN of the AWS caller (STS GetCallerIdentity's Arn)")
    return errors


def _check_release(entry: dict[str, Any]) -> list[str]:
    errors = []
    if entry.get("release_id") is not None:
        try:
            check_release_id(entry["release_id"])
        except ReleaseError as err:
            errors.append(str(err))
    image = entry.get("image")
    if image is not None and not (
        isinstance(image, str) and (_IMAGE_DIGEST.fullmatch(image) or ("@" not in image and _IMAGE_TAG.fullmatch(image)))
    ):
        errors.append(f"image={image!r} must be the image the tasks run, repository@sha256:<64 hex> (or repository:tag), or null")
    task_definition = entry.get("task_definition")
    if task_definition is not None and not (isinstance(task_definition, str) and _TASK_DEFINITION_ARN.fullmatch(task_definition)):
        errors.append(
            f"task_definition={task_definition!r} must be a task definition revision's ARN (arn:aws:ecs:...:task-definition/<family>:<revision>), or null"
        )
    ami_id = entry.get("ami_id")
    if ami_id is not None and not (isinstance(ami_id, str) and _AMI_ID.fullmatch(ami_id)):
        errors.append(f"ami_id={ami_id!r} must be an AMI id (ami-...), or null when the flow does not know it")
    models = entry.get("models")
    if models is not None:
        if not isinstance(models, list):
            errors.append(f"models={models!r} must be a list of {{name, version, sha256}} ([] for none, null when unchanged)")
        else:
            errors += _check_models(models)
    return errors


def _check_models(models: list[Any]) -> list[str]:
    errors, seen = [], set()
    for index, model in enumerate(models):
        if not isinstance(model, dict) or set(model) != {"name", "version", "sha256"}:
            errors.append(f"models[{index}]={model!r} must have exactly name, version and sha256")
            continue
        try:
            check_model_name(model["name"])
            if isinstance(model["version"], bool) or not isinstance(model["version"], int):
                raise ManifestError(f"version={model['version']!r} must be an integer (1, 2, ...): the version the release resolved")
            check_version(model["version"])
        except ManifestError as err:
            errors.append(f"models[{index}]: {err}")
        if model["sha256"] is not None and not (isinstance(model["sha256"], str) and _SHA256.fullmatch(model["sha256"])):
            errors.append(f"models[{index}].sha256={model['sha256']!r} must be the manifest object's SHA-256 (64 lowercase hex), or null")
        if model["name"] in seen:
            errors.append(f"models[{index}]: model {model['name']!r} is listed twice; a release serves one version per model")
        seen.add(model["name"])
    return errors


def _check_colors(entry: dict[str, Any]) -> list[str]:
    errors = []
    for field in ("color", "production_color"):
        if entry.get(field) not in (*COLORS, None):
            errors.append(f"{field}={entry.get(field)!r} must be blue, green or null")
    kind, outcome = entry.get("kind"), entry.get("outcome")
    if kind in TRAFFIC_KINDS and entry.get("color") is None:
        errors.append(f"color is null: a {kind} entry names the colour it concerns (the colour brought up, or traffic went back to)")
    if kind == "cutover_rollback" and outcome != "failed" and entry.get("production_color") is None:
        errors.append("production_color is null: a cutover_rollback that did not fail names the colour production went back to")
    return errors


def _check_times(entry: dict[str, Any]) -> list[str]:
    try:
        ended = parse_time(entry.get("ended"), "ended")
        if entry.get("started") is not None and parse_time(entry["started"], "started") > ended:
            return [f"started={entry['started']!r} is after ended={entry['ended']!r}: give the times the flow began and finished"]
    except LedgerError as err:
        return [str(err)]
    return []
