# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""Staged model releases from the controller: plans over the release records, and the wait on the agents' status objects.

The controller never reaches an instance. It writes release records in S3 (keys and validation in
`release.py`, shared with the model agent) and reads back the status object each instance's agent writes:

- ``canary``: canary.json names a release and the instances that must run it; every other instance keeps current.json;
- ``promoted``: previous.json <- current.json, current.json <- the release, canary.json deleted;
- ``canary_absent``: canary.json deleted (a failed canary: its instances go back to current.json);
- ``rolled_back``: canary.json deleted and current.json <- previous.json (a model rollback on the colour that serves);
- ``resolved``: nothing written: the release id of an image and models (what a task definition carries);
- ``standby``: standby.json <- the release a cutover brings up on the standby colour (its image and task definition);
- ``standby_promoted``: after the cutover, previous.json <- current.json, current.json <- standby.json, standby deleted;
- ``standby_absent``: standby.json deleted (a cutover that rolled back);
- ``cutover_reverted``: production went back to the previous colour (the emergency rollback): the records follow it;
- ``converged``: waits until every ACTIVE container instance of the cluster (or the listed ones) reports its target
  release applied (or the standby release, with release=standby); the timeout names the laggards.

Pure functions plan (a list of actions) and judge (one verdict per instance); `apply_actions`, `read_records` and
`fleet_verdicts` are the only I/O, through `_aws/s3.py` and `_aws/ecs.py`; the verdicts and the wait are in `convergence`.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import ecs as _ecs
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import s3 as _s3
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.convergence import (
    failures_total,
    instance_verdict,
    wait_converged,
)
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.manifest import (
    ManifestError,
    check_model_name,
    check_version,
    manifest_key,
    model_prefix,
    pick_version,
    versions_from_keys,
)
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.records_lock import RecordsLock
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.release import (
    CANARY,
    CURRENT,
    PREVIOUS,
    RECORD_NAMES,
    STANDBY,
    ReleaseError,
    broken_concerns,
    build_release,
    check_instance_id,
    check_release_id,
    parse_record,
    parse_status,
    recovery,
    release_key,
    release_models,
    releases_prefix,
    render_release,
    status_key,
    status_prefix,
    target_release,
)

STATES = (
    "canary",
    "promoted",
    "canary_absent",
    "rolled_back",
    "converged",
    "resolved",
    "standby",
    "standby_promoted",
    "standby_absent",
    "cutover_reverted",
)

# ---------------------------------------------------------------- the release asked for


def requested_models(models: Any) -> list[tuple[str, str]]:
    """[(name, version or "latest")] from the module's `models`, every entry checked; errors name models[i]."""
    if not isinstance(models, list) or not models:
        raise ReleaseError("models is empty: list the release's models as {name, version} (version: a number or latest)")
    requested: list[tuple[str, str]] = []
    for index, entry in enumerate(models):
        where = f"models[{index}]"
        if not isinstance(entry, dict) or "name" not in entry:
            raise ReleaseError(f"{where}={entry!r} must be a mapping with name (and version, default latest)")
        version = str(entry.get("version") if entry.get("version") not in (None, "") else "latest")
        try:
            check_model_name(entry["name"])
            if version != "latest":
                check_version(version)
        except ManifestError as err:
            raise ReleaseError(f"{where} ({entry['name']}): {err}") from err
        if entry["name"] in [name for name, _v in requested]:
            raise ReleaseError(f"{where}: model {entry['name']} is listed twice; a release serves one version per model, keep one entry")
        requested.append((entry["name"], version))
    return requested


def resolve_versions(requested: list[tuple[str, str]], published: dict[str, list[int]]) -> dict[str, int]:
    """{name: version}: `latest` becomes the highest published version; a pinned version must have its manifest."""
    resolved: dict[str, int] = {}
    for index, (name, version) in enumerate(requested):
        try:
            resolved[name] = pick_version(published.get(name, []), version)
        except ManifestError as err:
            raise ReleaseError(f"models[{index}] ({name}): {err}") from err
    return resolved


def release_id_for(models: dict[str, int], digests: dict[str, str] | None = None, image: str | None = None) -> str:
    """A short id derived from the content (the image, each model version and its manifest's digest), so running the
    same release again finds it already written, and a task definition carrying it changes exactly when the release does."""
    content: Any = sorted(models.items())
    if digests or image:
        content = {"image": image, "models": [[m, v, (digests or {}).get(m)] for m, v in sorted(models.items())]}
    text = json.dumps(content, separators=(",", ":"))
    return "r-" + hashlib.sha256(text.encode()).hexdigest()[:12]


def make_release(
    application: str,
    models: dict[str, int],
    release_id: str | None,
    created: str,
    digests: dict[str, str] | None = None,
    image: str | None = None,
    task_definition: str | None = None,
) -> dict[str, Any]:
    chosen = check_release_id(release_id) if release_id else release_id_for(models, digests, image)
    entries = [
        dict({"name": n, "version": v}, **({"sha256": digests[n]} if digests and n in digests else {})) for n, v in sorted(models.items())
    ]
    return build_release(application, chosen, entries, created, image=image, task_definition=task_definition)


def same_release(record: dict[str, Any] | None, release: dict[str, Any] | None) -> bool:
    """Same id, models, image and task definition; `created` (and a canary's instances) left out."""
    if record is None or release is None:
        return record is release
    return (
        record["release_id"] == release["release_id"]
        and release_models(record) == release_models(release)
        and record.get("task_definition") == release.get("task_definition")
        and record.get("image") == release.get("image")
    )


def check_id_reuse(records: dict[str, Any], release: dict[str, Any]) -> None:
    """A release id names one content: an id already written with other models is refused before any write. A release
    resolved before its task definition is registered (state=resolved: deploy.yml's first step) names none yet, so
    the record's is not compared (a re-run of a deploy resolves the release production already serves)."""
    for name in RECORD_NAMES:
        record = records.get(name)
        if record and release.get("task_definition") is None:
            record = {**record, "task_definition": None}
        if record and record["release_id"] == release["release_id"] and not same_release(record, release):
            raise ReleaseError(
                f"release_id={release['release_id']!r} is already {name}.json with models {release_models(record)}, not "
                f"{release_models(release)}; a release id names one content: give another release_id, or none to derive one"
            )


# ---------------------------------------------------------------- plans: [(op, record name, record or None)]


def plan_canary(records: dict[str, Any], release: dict[str, Any], instances: list[str]) -> list[tuple[str, str, Any]]:
    """Write canary.json for `instances`, unless the release is already current or already the same canary."""
    if same_release(records.get(CURRENT), release):
        return []
    canary = dict(release, instances=sorted(instances))
    existing = records.get(CANARY)
    if same_release(existing, release) and sorted(existing.get("instances", [])) == canary["instances"]:
        return []
    return [("put", CANARY, canary)]


def plan_promote(records: dict[str, Any], release: dict[str, Any], broken: dict[str, Any] | None = None) -> list[tuple[str, str, Any]]:
    """previous.json <- current.json, current.json <- the release, then canary.json deleted (a broken current.json is
    replaced, previous.json then kept: there is nothing to copy from it)."""
    actions: list[tuple[str, str, Any]] = []
    current = records.get(CURRENT)
    if not same_release(current, release) or _present(CURRENT, None, broken):
        if current is not None:
            actions.append(("put", PREVIOUS, current))
        actions.append(("put", CURRENT, release))
    return actions + plan_canary_removal(records, broken)


def _present(name: str, records: dict[str, Any] | None, broken: dict[str, Any] | None) -> bool:
    """Whether the record's key holds an object: a valid record (in `records`) or a broken one (in `broken`)."""
    return (records or {}).get(name) is not None or name in (broken or {})


def plan_canary_removal(records: dict[str, Any], broken: dict[str, Any] | None = None) -> list[tuple[str, str, Any]]:
    return [("delete", CANARY, None)] if _present(CANARY, records, broken) else []


def plan_standby(records: dict[str, Any], release: dict[str, Any], broken: dict[str, Any] | None = None) -> list[tuple[str, str, Any]]:
    """standby.json <- the release, unless production already serves it or it is already the standby."""
    if same_release(records.get(CURRENT), release) and STANDBY not in (broken or {}):
        return []
    if same_release(records.get(STANDBY), release):
        return []
    return [("put", STANDBY, release)]


def plan_standby_promotion(records: dict[str, Any], broken: dict[str, Any] | None = None) -> list[tuple[str, str, Any]]:
    """previous.json <- current.json, current.json <- standby.json, standby.json deleted (the cutover has finished)."""
    _refuse_broken(broken, STANDBY, "there is no release to promote")
    standby = records.get(STANDBY)
    if standby is None:
        return []
    actions: list[tuple[str, str, Any]] = []
    current = records.get(CURRENT)
    if not same_release(current, standby) or _present(CURRENT, None, broken):
        if current is not None:
            actions.append(("put", PREVIOUS, current))
        actions.append(("put", CURRENT, standby))
    return [*actions, ("delete", STANDBY, None)]


def plan_standby_removal(records: dict[str, Any], broken: dict[str, Any] | None = None) -> list[tuple[str, str, Any]]:
    return [("delete", STANDBY, None)] if _present(STANDBY, records, broken) else []


def plan_cutover_revert(records: dict[str, Any], broken: dict[str, Any] | None = None) -> list[tuple[str, str, Any]]:
    """Production is back on the previous colour. Mid-cutover, the standby's record goes; after one, current and previous
    swap when previous is the other colour's release (another task definition). Anything else: nothing to follow."""
    if _present(STANDBY, records, broken):
        return plan_standby_removal(records, broken)
    _refuse_broken(broken, CURRENT, "the records cannot follow the rollback")
    _refuse_broken(broken, PREVIOUS, "the records cannot follow the rollback")
    current, previous = records.get(CURRENT), records.get(PREVIOUS)
    if current is None or previous is None or current.get("task_definition") == previous.get("task_definition"):
        return []
    return [("put", PREVIOUS, current), ("put", CURRENT, previous)]


def plan_rollback(records: dict[str, Any], broken: dict[str, Any] | None = None) -> list[tuple[str, str, Any]]:
    """canary.json deleted and current.json <- previous.json; a second run finds current == previous and does nothing.
    A broken canary.json is deleted like a valid one; a broken current.json is replaced by previous.json."""
    actions = plan_canary_removal(records, broken)
    _refuse_broken(broken, PREVIOUS, "there is no release to roll back to", done=describe_actions(actions))
    previous = records.get(PREVIOUS)
    current = records.get(CURRENT)
    if previous is not None and current is not None and previous.get("task_definition") != current.get("task_definition"):
        raise ReleaseError(
            f"previous.json ({previous['release_id']}) runs on task definition {previous.get('task_definition')}, not on the "
            f"live colour's {current.get('task_definition')}: it is the previous colour's release. Put production back on "
            "that colour with playbooks/rollback_traffic.yml (image and models together); nothing was changed"
        )
    if previous is None:
        if not actions and _present(CURRENT, records, broken):
            raise ReleaseError("there is no previous.json to roll back to (current.json was never replaced); nothing was changed")
        return actions
    if not same_release(current, previous) or _present(CURRENT, None, broken):
        actions.append(("put", CURRENT, previous))
    return actions


def _refuse_broken(broken: dict[str, Any] | None, name: str, consequence: str, done: list[str] | None = None) -> None:
    if name in (broken or {}):
        raise ReleaseError(
            f"{broken[name]['error']}: {consequence}; {recovery(name)}. Nothing was changed"
            + (f" (a run without it would {', '.join(done)})" if done else "")
        )


def describe_actions(actions: list[tuple[str, str, Any]]) -> list[str]:
    return [f"write {name}.json ({record['release_id']})" if op == "put" else f"delete {name}.json" for op, name, record in actions]


def records_after(records: dict[str, Any], actions: list[tuple[str, str, Any]]) -> dict[str, Any]:
    after = dict(records)
    for op, name, record in actions:
        after[name] = record if op == "put" else None
    return after


# ---------------------------------------------------------------- I/O: S3 records and status objects, ECS instances


def s3_url(bucket: str, key: str) -> str:
    return f"s3://{bucket}/{key}"


def published_versions(s3: Any, bucket: str, prefix: str, names: list[str]) -> dict[str, list[int]]:
    """The versions of each model that have a manifest (one listing per model)."""
    return {name: versions_from_keys(_s3.list_keys(s3, bucket, model_prefix(prefix, name)), prefix, name) for name in names}


def read_records(s3: Any, bucket: str, prefix: str, application: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, str | None]]:
    """(records, broken, etags): each usable record (None when its key does not exist or it is broken), the broken
    ones ({name: {error, instances}}, see `parse_record`), and every key's ETag (None: no object), which the
    conditional writes of `apply_actions` name."""
    records: dict[str, Any] = {}
    broken: dict[str, Any] = {}
    etags: dict[str, str | None] = {}
    for name in RECORD_NAMES:
        key = release_key(prefix, application, name)
        found = _s3.get_with_etag(s3, bucket, key)
        etags[name] = found[1] if found else None
        record, problem = parse_record(found[0], application, s3_url(bucket, key)) if found else (None, None)
        records[name] = record
        if problem is not None:
            broken[name] = problem
    return records, broken, etags


def apply_actions(
    s3: Any, bucket: str, prefix: str, application: str, actions: list[tuple[str, str, Any]], etags: dict[str, str | None]
) -> None:
    """In plan order: previous before current, so a run cut off between two writes never loses the rollback target.

    Every write is conditional on the record being what this run read (If-Match its ETag; If-None-Match: * where there
    was none): a record another writer changed meanwhile stops the run with an error naming it and what was written.
    A refused put whose object already holds exactly what this run wrote (the answer to its own write was lost and
    botocore's retry met that object: 412) counts as done; a refused delete always stops the run.
    """
    written: list[str] = []
    for (op, name, record), description in zip(actions, describe_actions(actions)):
        key = release_key(prefix, application, name)
        if op == "put":
            body = render_release(record)
            etag = _s3.put_object_if(s3, bucket, key, body, etags.get(name), ContentType="application/json")
            if etag is None:
                found = _s3.get_with_etag(s3, bucket, key)
                etag = found[1] if found and found[0] == body else None
            done = etag is not None
            etags[name] = etag
        else:
            done = etags.get(name) is not None and _s3.delete_object_if(s3, bucket, key, etags[name] or "")
        if not done:
            raise ReleaseError(
                f"{s3_url(bucket, key)} changed while this run wrote the release records (another writer outside the records' "
                f"lock); this run stopped before '{description}' (written before it: {', '.join(written) or 'nothing'}). "
                "Read the records (state=converged in check mode shows them) and run again"
            )
        written.append(description)


def read_status(s3: Any, bucket: str, prefix: str, application: str, instance_id: str) -> tuple[dict[str, Any] | None, str]:
    """(status, problem): the agent's status object, or None; an unreadable one, or one that names another instance
    than its key, is a problem named with its URL."""
    key = status_key(prefix, application, instance_id)
    raw = _s3.get_bytes(s3, bucket, key)
    if raw is None:
        return None, ""
    try:
        status = parse_status(raw, application, s3_url(bucket, key))
    except ReleaseError as err:
        return None, str(err)
    if status["instance_id"] != instance_id:
        return None, (
            f"{s3_url(bucket, key)} names instance {status['instance_id']}, not {instance_id}: it is not this instance's "
            "report (copied, or written by another instance's agent); its own agent rewrites it at its next poll"
        )
    return status, ""


def active_instance_ids(ecs: Any, cluster: str) -> list[str]:
    """EC2 instance ids of the cluster's ACTIVE container instances, sorted (the first is the default canary)."""
    return sorted(ci["ec2InstanceId"] for ci in _ecs.container_instances(ecs, cluster) if ci.get("ec2InstanceId"))


def check_instances(instances: list[str], active: list[str] | None, cluster: str | None) -> list[str]:
    """Named instances: EC2 ids, and ACTIVE container instances of the cluster when one is given."""
    for index, instance_id in enumerate(instances):
        try:
            check_instance_id(instance_id)
        except ReleaseError as err:
            raise ReleaseError(f"instances[{index}]: {err}; give EC2 instance ids such as i-0123456789abcdef0") from err
        if active is not None and instance_id not in active:
            raise ReleaseError(
                f"instances[{index}]={instance_id!r} is not an ACTIVE container instance of cluster {cluster} "
                f"(ACTIVE: {', '.join(active) or 'none'}); name one of those, or none to take the first"
            )
    return sorted(set(instances))


def manifest_digests(s3: Any, bucket: str, prefix: str, models: dict[str, int]) -> dict[str, str]:
    """{model: SHA-256 of its version's manifest object}: what the release pins (a version is immutable once published)."""
    digests = {}
    for model, version in sorted(models.items()):
        key = manifest_key(prefix, model, version)
        raw = _s3.get_bytes(s3, bucket, key)
        if raw is None:
            raise ReleaseError(f"models: {model} version {version} has no manifest at {s3_url(bucket, key)}; publish it first")
        digests[model] = hashlib.sha256(raw).hexdigest()
    return digests


def fleet_verdicts(
    s3: Any,
    bucket: str,
    prefix: str,
    application: str,
    records: dict[str, Any],
    instance_ids: list[str],
    active: list[str],
    failures_before: dict[str, int] | None = None,
    wanted_record: str = "target",
    broken: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """One verdict per instance: its target (canary.json when it lists the instance, else current.json; or standby.json
    with wanted_record=standby) against its status.

    A named instance that left the cluster (terminated, drained) fails: it can no longer prove the release. So does
    one whose target is a broken record (a broken canary.json fails only the instances it may list).
    """
    verdicts = []
    for instance_id in instance_ids:
        if instance_id not in active:
            gone = instance_verdict(instance_id, None, None, problem="is no longer an ACTIVE container instance of the cluster")
            verdicts.append(dict(gone, failed=True))
            continue
        unusable = broken_target(records, broken or {}, instance_id, wanted_record)
        if unusable:
            verdicts.append(dict(instance_verdict(instance_id, None, None, problem=unusable), failed=True))
            continue
        status, problem = read_status(s3, bucket, prefix, application, instance_id)
        if wanted_record == STANDBY:
            wanted = records.get(STANDBY)
        else:
            wanted = target_release(records.get(CURRENT), records.get(CANARY), instance_id)
        verdicts.append(instance_verdict(instance_id, status, wanted, (failures_before or {}).get(instance_id), problem))
    return verdicts


def broken_target(records: dict[str, Any], broken: dict[str, Any], instance_id: str, wanted_record: str) -> str:
    """Why the instance's target cannot be judged (its record is broken), with the recovery; '' when it can."""
    if wanted_record == STANDBY:
        names = [STANDBY]
    elif instance_id in (records.get(CANARY) or {}).get("instances", []):
        names = []  # a valid canary that lists the instance is its target, whatever current.json holds
    else:
        names = [CANARY, CURRENT]
    for name in names:
        if name in broken and broken_concerns(name, broken[name], instance_id):
            return f"its target record is broken: {broken[name]['error']}; {recovery(name)}"
    return ""


# ---------------------------------------------------------------- one module run


def requested_release(s3: Any, params: dict[str, Any], records: dict[str, Any], check_mode: bool, created: str) -> dict[str, Any]:
    """The release the parameters name: versions resolved, manifests' digests read, image and task definition given
    (standby, resolved) or, for a model-only release, those of the release production serves."""
    bucket, prefix = params["bucket"], params["prefix"]
    current = records.get(CURRENT) or {}
    models = params["models"]
    if not models and params["state"] in ("standby", "resolved"):  # a new image on the models production serves
        models = [{"name": n, "version": v} for n, v in sorted(release_models(current).items())]
        if not models:
            return make_release(
                params["application"], {}, params["release_id"], created, {}, params.get("image"), params.get("task_definition")
            )
    requested = requested_models(models)
    published = published_versions(s3, bucket, prefix, [name for name, _v in requested])
    planned = set()
    if check_mode:  # a check run of sync_models.yml publishes nothing: count what it would publish first
        for entry in params.get("publishing") or []:
            published.setdefault(entry["model"], []).append(int(entry["version"]))
            planned.add((entry["model"], int(entry["version"])))
    resolved = resolve_versions(requested, {name: sorted(versions) for name, versions in published.items()})
    digests = manifest_digests(s3, bucket, prefix, {m: v for m, v in resolved.items() if (m, v) not in planned})
    if params["state"] in ("standby", "resolved"):
        image, task_definition = params.get("image"), params.get("task_definition")
    else:
        image, task_definition = current.get("image"), current.get("task_definition")
    return make_release(params["application"], resolved, params["release_id"], created, digests, image, task_definition)


# Bounds of the wait's numbers: a poll of 0 s is a busy loop on S3; a wait over a day is a forgotten task. (The module
# takes whole seconds; the test harness polls at 0.1 s.)
_WAIT_BOUNDS = {"timeout_s": (0, 86400), "poll_interval_s": (0.1, 3600), "bake_s": (0, 86400)}


def check_params(params: dict[str, Any]) -> dict[str, Any]:
    """The parameters the argument spec cannot check, checked before any AWS call; errors name the field and the fix.
    Returns `inference_failures_before` and `publishing` as numbers."""
    for name, (low, high) in _WAIT_BOUNDS.items():
        value = params.get(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not low <= value <= high:
            raise ReleaseError(f"{name}={value!r}; expected seconds from {low} to {high}")
    if params["bake_s"] > params["timeout_s"]:
        raise ReleaseError(
            f"bake_s={params['bake_s']} is longer than timeout_s={params['timeout_s']}: the wait would time out before the "
            "bake ends; raise timeout_s above bake_s"
        )
    failures = params.get("inference_failures_before")
    checked: dict[str, int] = {}
    for instance_id, count in (failures or {}).items():
        try:
            check_instance_id(instance_id)
        except ReleaseError as err:
            raise ReleaseError(f"inference_failures_before: {err}; pass the canary run's inference_failures_before as it is") from err
        if isinstance(count, bool) or not (isinstance(count, int) or (isinstance(count, str) and count.isdigit())) or int(count) < 0:
            raise ReleaseError(f"inference_failures_before[{instance_id}]={count!r}; expected a count (0, 1, ...) from the canary run")
        checked[instance_id] = int(count)
    publishing = []
    for index, entry in enumerate(params.get("publishing") or []):
        version = entry.get("version") if isinstance(entry, dict) else None
        if (
            not isinstance(entry, dict)
            or not isinstance(entry.get("model"), str)
            or isinstance(version, bool)
            or not str(version).isdigit()
        ):
            raise ReleaseError(f"publishing[{index}]={entry!r}; expected {{model, version}} as model_publish returns them")
        publishing.append({"model": entry["model"], "version": int(str(version))})
    return dict(params, inference_failures_before=checked if failures is not None else None, publishing=publishing)


def run(s3: Any, ecs: Any, params: dict[str, Any], check_mode: bool, created: str) -> dict[str, Any]:
    """The module's work for params["state"]; raises ReleaseError (bad input, nothing written) or RolloutError."""
    params = check_params(params)
    bucket, prefix, application, state = params["bucket"], params["prefix"], params["application"], params["state"]
    records, broken, etags = read_records(s3, bucket, prefix, application)
    status_url = s3_url(bucket, status_prefix(prefix, application))
    result: dict[str, Any] = {"changed": False, "actions": [], "records": records}
    if broken:
        result["broken_records"] = {name: problem["error"] for name, problem in broken.items()}
    if state == "converged":
        wanted_record = params.get("release") or "target"
        if wanted_record == STANDBY:
            _refuse_broken(broken, STANDBY, "there is no release to wait for")
            if records.get(STANDBY) is None:
                raise ReleaseError("release=standby: there is no standby.json to wait for; write it with state=standby first")
        given = check_instances(params["instances"], None, None) if params["instances"] else None
        fleet = {"active": active_instance_ids(ecs, params["cluster"])}

        def read() -> list[dict[str, Any]]:
            if given is None and not fleet["active"]:  # a cluster scaling from zero: wait for its first instance
                fleet["active"] = active_instance_ids(ecs, params["cluster"])
            named = given if given is not None else fleet["active"]
            if not named:
                problem = (
                    f"cluster {params['cluster']} has no ACTIVE container instance: no model agent can report the release "
                    "(instances come from the Auto Scaling group of its capacity provider; check its desired capacity)"
                )
                return [instance_verdict("(none)", None, None, problem=problem)]
            return fleet_verdicts(
                s3, bucket, prefix, application, records, named, fleet["active"], params["inference_failures_before"], wanted_record, broken
            )

        if check_mode:
            verdicts = read()
            return dict(result, instances=verdicts, converged=all(v["ok"] for v in verdicts), waited_s=0)
        verdicts, waited = wait_converged(read, params["timeout_s"], params["poll_interval_s"], params["bake_s"], status_url)
        return dict(result, instances=verdicts, converged=True, waited_s=round(waited, 1))

    release = None
    if state in ("canary", "promoted", "standby", "resolved"):
        if state == "standby" and not params.get("task_definition"):
            raise ReleaseError("state=standby needs task_definition: the ARN of the revision that runs the release")
        if state == "standby" and _present(CANARY, records, broken):
            what = records[CANARY]["release_id"] if records.get(CANARY) else "broken: " + broken[CANARY]["error"]
            raise ReleaseError(
                f"canary.json ({what}) is in flight: finish that model release (playbooks/sync_models.yml) "
                "or remove it (model_release state=canary_absent) before a cutover brings up another release"
            )
        if state == "canary" and _present(STANDBY, records, broken):
            what = records[STANDBY]["release_id"] if records.get(STANDBY) else "broken: " + broken[STANDBY]["error"]
            raise ReleaseError(
                f"standby.json ({what}) is in flight: a cutover is bringing it up; finish it (deploy.yml) "
                "or roll it back (playbooks/rollback_traffic.yml) before a model release"
            )
        if state in ("canary", "promoted"):
            _refuse_broken(broken, CURRENT, "a model-only release takes its image and task definition from it")
        release = requested_release(s3, params, records, check_mode, created)
        check_id_reuse(records, release)
        result.update(release=release, release_id=release["release_id"])
        if state == "resolved":
            return result
    if state == "canary":
        if not params["instances"] and not params["cluster"]:
            raise ReleaseError("state=canary needs instances (EC2 instance ids) or cluster (its first ACTIVE instance is the canary)")
        active = active_instance_ids(ecs, params["cluster"]) if params["cluster"] else None
        canaries = check_instances(params["instances"], active, params["cluster"]) or (active or [])[:1]
        if not canaries:
            raise ReleaseError(
                f"cluster {params['cluster']} has no ACTIVE container instance to be the canary; start one, or name instances"
            )
        actions = plan_canary(records, release, canaries)
        if not actions and CANARY in broken:
            actions = [("put", CANARY, dict(release, instances=sorted(canaries)))]  # the release is current: still replace it
        before = {}
        for instance_id in canaries:
            status, _problem = read_status(s3, bucket, prefix, application, instance_id)
            before[instance_id] = failures_total(status)
        result.update(canary_instances=canaries, inference_failures_before=before, already_current=same_release(records[CURRENT], release))
    elif state == "promoted":
        actions = plan_promote(records, release, broken)
    elif state == "standby":
        actions = plan_standby(records, release, broken)
        result["already_current"] = same_release(records[CURRENT], release)
    elif state == "standby_promoted":
        actions = plan_standby_promotion(records, broken)
    elif state == "standby_absent":
        actions = plan_standby_removal(records, broken)
    elif state == "cutover_reverted":
        actions = plan_cutover_revert(records, broken)
    elif state == "canary_absent":
        actions = plan_canary_removal(records, broken)
    else:
        actions = plan_rollback(records, broken)
    after = records_after(records, actions)
    if state in ("canary_absent", "rolled_back", "standby_promoted", "cutover_reverted") and after[CURRENT] is not None:
        result["release_id"] = after[CURRENT]["release_id"]
    before_view = dict(records, **{name: {"broken": problem["error"]} for name, problem in broken.items()})
    result.update(changed=bool(actions), actions=describe_actions(actions), records=after, diff={"before": before_view, "after": after})
    if actions and not check_mode:
        write_records(s3, params, actions, etags)
    return result


def write_records(s3: Any, params: dict[str, Any], actions: list[tuple[str, str, Any]], etags: dict[str, str | None]) -> None:
    """Under the records' lock, the records read again: unchanged since the plan, the actions are written (each write
    conditional); changed, the run fails loudly having written nothing (it lost a race to another model release)."""
    bucket, prefix, application = params["bucket"], params["prefix"], params["application"]
    with RecordsLock(s3, bucket, prefix, application, params["state"], params.get("break_lock", False)):
        _records, _broken, now = read_records(s3, bucket, prefix, application)
        moved = [f"{name}.json" for name in RECORD_NAMES if now[name] != etags[name]]
        if moved:
            raise ReleaseError(
                f"{', '.join(moved)} changed while this run planned (another model release wrote the records meanwhile): this "
                f"run wrote nothing; run it again to plan on what the records hold now ({s3_url(bucket, releases_prefix(prefix, application))})"
            )
        apply_actions(s3, bucket, prefix, application, actions, now)
