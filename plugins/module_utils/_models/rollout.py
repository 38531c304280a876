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
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.release import (
    CANARY,
    CURRENT,
    PREVIOUS,
    RECORD_NAMES,
    STANDBY,
    ReleaseError,
    build_release,
    check_instance_id,
    check_release_id,
    parse_release,
    parse_status,
    release_key,
    release_models,
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


def plan_promote(records: dict[str, Any], release: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """previous.json <- current.json, current.json <- the release, then canary.json deleted."""
    actions: list[tuple[str, str, Any]] = []
    current = records.get(CURRENT)
    if not same_release(current, release):
        if current is not None:
            actions.append(("put", PREVIOUS, current))
        actions.append(("put", CURRENT, release))
    if records.get(CANARY) is not None:
        actions.append(("delete", CANARY, None))
    return actions


def plan_canary_removal(records: dict[str, Any]) -> list[tuple[str, str, Any]]:
    return [("delete", CANARY, None)] if records.get(CANARY) is not None else []


def plan_standby(records: dict[str, Any], release: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """standby.json <- the release, unless production already serves it or it is already the standby."""
    if same_release(records.get(CURRENT), release) or same_release(records.get(STANDBY), release):
        return []
    return [("put", STANDBY, release)]


def plan_standby_promotion(records: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """previous.json <- current.json, current.json <- standby.json, standby.json deleted (the cutover has finished)."""
    standby = records.get(STANDBY)
    if standby is None:
        return []
    actions: list[tuple[str, str, Any]] = []
    current = records.get(CURRENT)
    if not same_release(current, standby):
        if current is not None:
            actions.append(("put", PREVIOUS, current))
        actions.append(("put", CURRENT, standby))
    return [*actions, ("delete", STANDBY, None)]


def plan_standby_removal(records: dict[str, Any]) -> list[tuple[str, str, Any]]:
    return [("delete", STANDBY, None)] if records.get(STANDBY) is not None else []


def plan_cutover_revert(records: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """Production is back on the previous colour. Mid-cutover, the standby's record goes; after one, current and previous
    swap when previous is the other colour's release (another task definition). Anything else: nothing to follow."""
    if records.get(STANDBY) is not None:
        return plan_standby_removal(records)
    current, previous = records.get(CURRENT), records.get(PREVIOUS)
    if current is None or previous is None or current.get("task_definition") == previous.get("task_definition"):
        return []
    return [("put", PREVIOUS, current), ("put", CURRENT, previous)]


def plan_rollback(records: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """canary.json deleted and current.json <- previous.json; a second run finds current == previous and does nothing."""
    actions = plan_canary_removal(records)
    previous = records.get(PREVIOUS)
    current = records.get(CURRENT)
    if previous is not None and current is not None and previous.get("task_definition") != current.get("task_definition"):
        raise ReleaseError(
            f"previous.json ({previous['release_id']}) runs on task definition {previous.get('task_definition')}, not on the "
            f"live colour's {current.get('task_definition')}: it is the previous colour's release. Put production back on "
            "that colour with playbooks/rollback_cutover.yml (image and models together); nothing was changed"
        )
    if previous is None:
        if not actions and records.get(CURRENT) is not None:
            raise ReleaseError("there is no previous.json to roll back to (current.json was never replaced); nothing was changed")
        return actions
    if not same_release(records.get(CURRENT), previous):
        actions.append(("put", CURRENT, previous))
    return actions


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


def read_records(s3: Any, bucket: str, prefix: str, application: str) -> dict[str, Any]:
    """{current, previous, canary}: each validated record, or None when the key does not exist."""
    records: dict[str, Any] = {}
    for name in RECORD_NAMES:
        key = release_key(prefix, application, name)
        raw = _s3.get_bytes(s3, bucket, key)
        records[name] = None if raw is None else parse_release(raw, application, s3_url(bucket, key))
    return records


def apply_actions(s3: Any, bucket: str, prefix: str, application: str, actions: list[tuple[str, str, Any]]) -> None:
    """In plan order: previous before current, so a run cut off between two writes never loses the rollback target."""
    for op, name, record in actions:
        key = release_key(prefix, application, name)
        if op == "put":
            _s3.put_object(s3, bucket, key, render_release(record), ContentType="application/json")
        else:
            _s3.delete_object(s3, bucket, key)


def read_status(s3: Any, bucket: str, prefix: str, application: str, instance_id: str) -> tuple[dict[str, Any] | None, str]:
    """(status, problem): the agent's status object, or None; an unreadable one is a problem named with its URL."""
    key = status_key(prefix, application, instance_id)
    raw = _s3.get_bytes(s3, bucket, key)
    if raw is None:
        return None, ""
    try:
        return parse_status(raw, application, s3_url(bucket, key)), ""
    except ReleaseError as err:
        return None, str(err)


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
) -> list[dict[str, Any]]:
    """One verdict per instance: its target (canary.json when it lists the instance, else current.json; or standby.json
    with wanted_record=standby) against its status.

    A named instance that left the cluster (terminated, drained) fails: it can no longer prove the release.
    """
    verdicts = []
    for instance_id in instance_ids:
        if instance_id not in active:
            gone = instance_verdict(instance_id, None, None, problem="is no longer an ACTIVE container instance of the cluster")
            verdicts.append(dict(gone, failed=True))
            continue
        status, problem = read_status(s3, bucket, prefix, application, instance_id)
        if wanted_record == STANDBY:
            wanted = records.get(STANDBY)
        else:
            wanted = target_release(records.get(CURRENT), records.get(CANARY), instance_id)
        verdicts.append(instance_verdict(instance_id, status, wanted, (failures_before or {}).get(instance_id), problem))
    return verdicts


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


def run(s3: Any, ecs: Any, params: dict[str, Any], check_mode: bool, created: str) -> dict[str, Any]:
    """The module's work for params["state"]; raises ReleaseError (bad input, nothing written) or RolloutError."""
    bucket, prefix, application, state = params["bucket"], params["prefix"], params["application"], params["state"]
    records = read_records(s3, bucket, prefix, application)
    status_url = s3_url(bucket, status_prefix(prefix, application))
    result: dict[str, Any] = {"changed": False, "actions": [], "records": records}
    if state == "converged":
        active = active_instance_ids(ecs, params["cluster"])
        named = check_instances(params["instances"], None, None) if params["instances"] else active
        wanted_record = params.get("release") or "target"
        if wanted_record == STANDBY and records.get(STANDBY) is None:
            raise ReleaseError("release=standby: there is no standby.json to wait for; write it with state=standby first")

        def read() -> list[dict[str, Any]]:
            return fleet_verdicts(
                s3, bucket, prefix, application, records, named, active, params["inference_failures_before"], wanted_record
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
        if state == "standby" and records.get(CANARY) is not None:
            raise ReleaseError(
                f"canary.json ({records[CANARY]['release_id']}) is in flight: finish that model release (playbooks/sync_models.yml) "
                "or remove it (model_release state=canary_absent) before a cutover brings up another release"
            )
        if state == "canary" and records.get(STANDBY) is not None:
            raise ReleaseError(
                f"standby.json ({records[STANDBY]['release_id']}) is in flight: a cutover is bringing it up; finish it (deploy.yml) "
                "or roll it back (playbooks/rollback_cutover.yml) before a model release"
            )
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
        before = {}
        for instance_id in canaries:
            status, _problem = read_status(s3, bucket, prefix, application, instance_id)
            before[instance_id] = failures_total(status)
        result.update(canary_instances=canaries, inference_failures_before=before, already_current=same_release(records[CURRENT], release))
    elif state == "promoted":
        actions = plan_promote(records, release)
    elif state == "standby":
        actions = plan_standby(records, release)
        result["already_current"] = same_release(records[CURRENT], release)
    elif state == "standby_promoted":
        actions = plan_standby_promotion(records)
    elif state == "standby_absent":
        actions = plan_standby_removal(records)
    elif state == "cutover_reverted":
        actions = plan_cutover_revert(records)
    elif state == "canary_absent":
        actions = plan_canary_removal(records)
    else:
        actions = plan_rollback(records)
    after = records_after(records, actions)
    if state in ("canary_absent", "rolled_back", "standby_promoted", "cutover_reverted") and after[CURRENT] is not None:
        result["release_id"] = after[CURRENT]["release_id"]
    result.update(changed=bool(actions), actions=describe_actions(actions), records=after, diff={"before": records, "after": after})
    if actions and not check_mode:
        apply_actions(s3, bucket, prefix, application, actions)
    return result
