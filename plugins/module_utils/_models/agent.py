# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The model agent: runs on every container instance, makes the instance's models follow the application's release.

    inferops-model-agent --config FILE --boot|--serve|--once

On the instances that is `python3 /opt/inferops/model-agent.pyz ...`: this file and the module_utils its imports reach,
packed into one zipapp whose `__main__` calls `main()` (`agent_program.py`, module model_agent_program, role
model_agent); from a checkout, `python3 -m ansible_collections.inferops.triton_ecs.plugins.module_utils._models.agent`.

- ``--boot``: before ``ecs.service``. Reads the target release (canary.json when it lists this instance, else
  current.json), syncs every model version it names into the host path (the verified sync of module model_sync:
  manifest, size and SHA-256, staging + atomic rename), writes the status object, and exits 0. Retries
  ``boot_attempts`` times ``boot_retry_delay_s`` apart, then exits 1 with the reason in the journal and the status.
- ``--serve``: reconciles every ``poll_interval_s`` (HEAD of the release records, a read only when an ETag changed):
  syncs new versions, loads them on every Triton task of the instance (found through the ECS agent's introspection
  API), keeping the previous version serving until the new one is READY, prunes, and writes the status object.
- ``--once``: one reconcile pass; exits 0 when the release is applied, 1 otherwise (tests, benchmarks, debugging).

It runs with the system python3 and boto3, without Ansible: every module it imports is free of ``ansible``
(`agent_program.agent_closure` refuses the build otherwise).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import s3 as _s3
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import BotoCoreError, ClientError
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models import instance_health as _instance_health
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models import sync as _model_sync
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models import views as _views
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.agent_config import CONFIG_PATH, load_config
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.agent_instance import (
    HTTP_TIMEOUT_S,
    build_status,
    failures_by_model,
    http_request,
    imds_instance_id,
    instance_metadata,
    serving_by_view,
    smoke_test,
    triton_tasks,
    utc_now,
    views_in_use,
)
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.release import (
    CANARY,
    CURRENT,
    RECORD_NAMES,
    broken_concerns,
    parse_record,
    recovery,
    release_key,
    release_models,
    render_status,
    status_key,
    target_release,
    view_releases,
    wanted_versions,
)
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.transfer import (
    Downloads,
    HydrationMeter,
    agent_download_settings,
    load_hydration,
    save_hydration,
)
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.triton_model import ModelStateError, ensure_loaded, serving
from ansible_collections.inferops.triton_ecs.plugins.module_utils._triton_client import TritonClient, TritonError

log = logging.getLogger("inferops-model-agent")


# ---------------------------------------------------------------- S3 client


# What a pass reports (and a boot attempt retries) rather than crashes on. ValueError: ManifestError, ReleaseError, bad JSON.
AGENT_ERRORS = (BotoCoreError, ClientError, ModelStateError, TritonError, OSError, ValueError)


INTROSPECTION_ATTEMPTS = 3  # within one pass, a second apart


class IntrospectionDown(OSError):
    """The ECS agent's introspection API did not answer within a pass."""


def introspection_grace_s(config: dict[str, Any]) -> float:
    """How long the ECS agent may not answer before the agent reports failed: longer than a restart of it (tens of
    seconds) and than three polls."""
    return max(120.0, 3.0 * config["poll_interval_s"])


class BotocoreRetryingClient:
    """A boto3 client whose retries are botocore's own (standard mode), taking the `aws_retry=True` the _s3 functions pass.

    The agent runs without Ansible, so not through AnsibleAWSModule's retrying wrapper.
    """

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._client, name)
        if not callable(method):
            return method

        def call(*args: Any, aws_retry: bool = False, **kwargs: Any) -> Any:
            return method(*args, **kwargs)

        return call


def s3_client(config: dict[str, Any]) -> BotocoreRetryingClient:
    import boto3
    from botocore.config import Config

    # A connection per download worker (the pool would otherwise drop and reopen them), plus the agent's own calls.
    pool = config["download_concurrency"] + config["sync_threads"] + 4
    retries = Config(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=5, read_timeout=60, max_pool_connections=pool)
    return BotocoreRetryingClient(boto3.client("s3", region_name=config["region"], endpoint_url=config["endpoint_url"], config=retries))


# ---------------------------------------------------------------- the agent


class ModelAgent:
    def __init__(self, config: dict[str, Any], s3: Any, identity: dict[str, Any]) -> None:
        self.config = config
        self.s3 = s3
        self.identity = identity
        self.etags: dict[str, str | None] = {}
        self.records: dict[str, dict[str, Any] | None] = {}
        self.broken_records: dict[str, dict[str, Any] | None] = {}  # record name → {error, instances} of a broken one
        self.last_status: dict[str, Any] | None = None  # written again, unjudged, while the ECS agent does not answer
        self.introspection_down_since: float | None = None
        self.hydrated_at: str | None = None
        self.release: dict[str, Any] | None = None  # the instance's target (canary or current), last read
        self.hydrated_release: str | None = None  # the target whose versions were last all on disk, at hydrated_at
        # (release_id, task arn, model, version) → Triton's reason: a version that failed to load is not retried until
        # the release changes (the controller sees "failed" and rolls back) or the agent restarts.
        self.load_failures: dict[tuple[str, str, str, int], str] = {}
        # Large files: parallel ranged GETs on one pool for every model; the boot hydration's figures (bytes, seconds).
        self.downloads = Downloads(s3, agent_download_settings(config))
        self.hydration: dict[str, Any] | None = load_hydration(config["host_path"])

    # -- the releases

    def _read_record(self, name: str) -> dict[str, Any] | None:
        """A release record, read again only when its ETag changed (a HEAD per poll otherwise); a broken one is None
        here and its error is in `self.broken` (`parse_record`)."""
        bucket, key = self.config["bucket"], release_key(self.config["prefix"], self.config["application"], name)
        head = _s3.head(self.s3, bucket, key)
        etag = head.get("ETag") if head else None
        if name in self.etags and self.etags[name] == etag:
            return self.records[name]
        raw = _s3.get_bytes(self.s3, bucket, key) if head else None
        record, broken = (None, None) if raw is None else parse_record(raw, self.config["application"], f"s3://{bucket}/{key}")
        self.etags[name], self.records[name] = etag, record
        self.broken_records[name] = broken
        return record

    def read_records(self) -> dict[str, dict[str, Any] | None]:
        """Every record; a broken one counts as absent, and is reported (`record_errors`) where it may concern this
        instance: one broken record never stops the others from being applied, at boot or while serving."""
        records = {name: self._read_record(name) for name in RECORD_NAMES}
        self.release = target_release(records[CURRENT], records[CANARY], self.identity["instance_id"])
        for name, error in self.record_errors().items():
            log.error("%s (%s); the other release records are applied", error, recovery(name))
        return records

    def record_errors(self) -> dict[str, str]:
        """{record name: why it is unusable and how to recover} for the broken records that may concern this instance."""
        return {
            name: f"{broken['error']}; {recovery(name)}"
            for name, broken in sorted(self.broken_records.items())
            if broken is not None and broken_concerns(name, broken, self.identity["instance_id"])
        }

    def target(self) -> dict[str, Any] | None:
        """canary.json when it lists this instance, else current.json; None when the application has no release yet."""
        self.read_records()
        return self.release

    # -- the host path

    def synced(self, wanted: dict[str, set[int]]) -> dict[str, list[int]]:
        host = self.config["host_path"]
        return {model: _model_sync.complete_versions(os.path.join(host, model), model) for model in wanted}

    def sync(self, wanted: dict[str, set[int]]) -> dict[str, list[int]]:
        """Syncs every wanted version not complete on disk (several at once); raises the first failure."""
        on_disk = self.synced(wanted)
        missing = sorted((m, v) for m, versions in wanted.items() for v in versions if v not in on_disk[m])

        def one(model: str, version: int) -> None:
            result = _model_sync.sync_version(
                self.s3, self.config["bucket"], self.config["prefix"], model, version, self.config["host_path"], downloads=self.downloads
            )
            log.info("synced %s version %s: %d downloaded, %d linked", model, version, len(result["downloaded"]), len(result["linked"]))

        if missing:
            with ThreadPoolExecutor(max_workers=min(self.config["sync_threads"], len(missing))) as pool:
                for future in [pool.submit(one, m, v) for m, v in missing]:
                    future.result()
        return self.synced(wanted)

    def use_configs(self, target: dict[str, Any] | None) -> None:
        """Each model's config.pbtxt in the store is that of the target's version (what a task outside a view loads)."""
        for model, version in sorted(release_models(target).items()):
            if _model_sync.use_config(self.config["host_path"], model, version):
                log.info("%s/config.pbtxt is now version %s's (release %s)", model, version, target["release_id"] if target else None)

    def prune(self, wanted: dict[str, set[int]], serving: dict[str, set[int]]) -> None:
        """As model_sync prunes: keep the newest keep_versions, never a wanted, serving or view-linked version."""
        host = self.config["host_path"]
        linked = _views.linked_versions(host)
        for model, versions in wanted.items():
            protect = sorted(versions | serving.get(model, set()) | linked.get(model, set()))
            result = _model_sync.prune_versions(host, model, self.config["keep_versions"], protect)
            if result["removed"]:
                log.info("pruned %s versions %s (kept %s)", model, result["removed"], result["kept"])

    def mark_hydrated(self, target: dict[str, Any] | None) -> None:
        """Every version of `target` is on disk (sync returned): hydrated_at says since when."""
        release_id = target["release_id"] if target else None
        if self.hydrated_at is None or self.hydrated_release != release_id:
            self.hydrated_at, self.hydrated_release = utc_now(), release_id

    def build_views(self, views: dict[str, dict[str, Any]], serving_by_view: dict[str, dict[str, set[int]]]) -> None:
        """Each view holds its release's versions, plus those its tasks still serve until they have switched."""
        for name, record in views.items():
            serving = serving_by_view.get(name, {})
            links = {m: sorted({v} | serving.get(m, set())) for m, v in release_models(record).items()}
            if _views.ensure_view(self.config["host_path"], name, links):
                log.info("view %s: %s (release %s)", name, links, record["release_id"])

    def remove_unused_views(self, wanted: set[str]) -> None:
        for name in _views.view_names(self.config["host_path"]):
            if name not in wanted:
                _views.remove_view(self.config["host_path"], name)
                log.info("view %s removed: no release binds it and no task uses it", name)

    # -- the Triton tasks

    def introspect(self) -> dict[str, Any]:
        """The ECS agent's task listing, asked up to INTROSPECTION_ATTEMPTS times a second apart; IntrospectionDown
        after that (an ECS agent restart: a transient, which the pass does not judge, see `reconcile`)."""
        url = f"{self.config['introspection_url']}/v1/tasks"
        for attempt in range(1, INTROSPECTION_ATTEMPTS + 1):
            try:
                listing = json.loads(http_request(url))
                if not isinstance(listing, dict):
                    raise ValueError(f"expected a JSON object, got {type(listing).__name__}")
                self.introspection_down_since = None
                return listing
            except (OSError, ValueError) as err:
                if attempt == INTROSPECTION_ATTEMPTS:
                    raise IntrospectionDown(f"the ECS agent's introspection API ({url}) did not answer: {err}") from err
                time.sleep(1)
        raise AssertionError("unreachable")  # pragma: no cover

    def tasks(self, listing: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        c = self.config
        return triton_tasks(listing or self.introspect(), c["triton_container_name"], c["triton_http_port"], c["triton_metrics_port"])

    def probe(self, tasks: list[dict[str, Any]]) -> tuple[dict[str, list[dict]], list[str]]:
        """Each reachable task's repository index; the unreachable ones named."""
        indexes: dict[str, list[dict]] = {}
        unreachable: list[str] = []
        for task in tasks:
            try:
                indexes[task["arn"]] = TritonClient(task["url"], timeout_s=HTTP_TIMEOUT_S).repository_index()
                task["ready"] = True
            except TritonError as err:
                task["ready"] = False
                unreachable.append(f"task {task['arn']}: {err}")
        return indexes, unreachable

    def load(self, release: dict[str, Any], task: dict[str, Any], index: list[dict]) -> tuple[list[dict], list[str]]:
        """Every version of `release` READY on `task` (pinned, the previous one serving until then), each smoke-tested.

        Returns (the task's index afterwards, the versions that failed to load or answer).
        """
        client = TritonClient(task["url"], timeout_s=HTTP_TIMEOUT_S)
        errors = []
        for model, version in sorted(release_models(release).items()):
            failed = self.load_failures.get((release["release_id"], task["arn"], model, version))
            if version not in serving(index, model) and failed is None:
                try:
                    ensure_loaded(client, model, version, timeout_s=self.config["load_timeout_s"], index=index)
                    log.info("task %s: %s version %s READY", task["arn"], model, version)
                    if self.config["smoke_inference"]:
                        smoke_test(client, model, version)
                except (ModelStateError, TritonError) as err:
                    failed = str(err)
                    self.load_failures[(release["release_id"], task["arn"], model, version)] = failed
                    log.error("task %s: %s version %s did not load or answer: %s", task["arn"], model, version, failed)
                index = client.repository_index()
            if failed:
                errors.append(f"task {task['arn']}: model {model} version {version} failed to load or answer: {failed}")
        return index, errors

    def failures(self, tasks: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
        found = {}
        for task in tasks:
            if task["metrics_url"] and task.get("ready"):
                try:
                    found[task["arn"]] = failures_by_model(http_request(task["metrics_url"]).decode())
                except OSError as err:
                    log.warning("task %s: metrics unreadable: %s", task["arn"], err)
        return found

    # -- status

    def write_status(self, status: dict[str, Any]) -> None:
        key = status_key(self.config["prefix"], self.config["application"], self.identity["instance_id"])
        try:
            _s3.put_object(self.s3, self.config["bucket"], key, render_status(status), ContentType="application/json")
        except (ClientError, BotoCoreError) as err:
            log.error("cannot write the status object s3://%s/%s: %s", self.config["bucket"], key, err)

    def status(self, state: str, **parts: Any) -> dict[str, Any]:
        target = self.release
        status = build_status(
            self.config,
            self.identity,
            target,
            state,
            parts.get("views", {}),
            parts.get("synced", self.synced({m: {v} for m, v in release_models(target).items()})),
            parts.get("loaded", {}),
            parts.get("tasks", []),
            parts.get("failures", {}),
            parts.get("errors", {}),
            parts.get("last_error"),
            self.hydrated_at,
        )
        status["hydration"] = self.hydration
        status["record_errors"] = self.record_errors()
        if CURRENT in status["record_errors"] and not status["last_error"]:
            # current.json is what every task outside another record's binding serves: that is the instance's error
            status["last_error"] = status["record_errors"][CURRENT]
        status["transient"] = None
        self.write_status(status)
        self.last_status = status
        return status

    # -- the three modes

    def hydrate(self) -> dict[str, Any]:
        """One boot attempt: every bound release's versions on disk and its view built, nothing loaded (no task runs yet)."""
        records = self.read_records()
        _views.clean_stale(self.config["host_path"])  # what a killed agent left half made
        views = view_releases(records, self.identity["instance_id"], set())
        wanted = wanted_versions([*views.values(), self.release])
        if not wanted:
            log.info("no release record for application %s yet: nothing to hydrate", self.config["application"])
        meter = HydrationMeter(self.downloads)
        synced = self.sync(wanted)
        self.use_configs(self.release)
        self.hydration = meter.figures()
        save_hydration(self.config["host_path"], self.hydration)
        self.build_views(views, {})
        self.prune(wanted, {})
        self.mark_hydrated(self.release)
        log.info("hydrated %s", {name: record["release_id"] for name, record in views.items()} or wanted)
        return self.status("hydrating" if wanted else "applied", views=views, synced=synced)

    def boot(self) -> int:
        """Hydration with bounded retries; 0 when every model of the release is on disk, 1 (ECS stays stopped) otherwise."""
        attempts = self.config["boot_attempts"]
        for attempt in range(1, attempts + 1):
            try:
                self.hydrate()
                return 0
            except AGENT_ERRORS as err:  # pylint: disable=catching-non-exception  # a tuple of exception classes
                reason = f"boot hydration attempt {attempt}/{attempts} failed: {err}"
                log.error("%s", reason)
                self.status("failed", last_error=reason)
            if attempt < attempts:
                time.sleep(self.config["boot_retry_delay_s"])
        log.error("hydration failed %d times; ECS stays stopped until it succeeds (see docs/runbook.md, stuck hydration)", attempts)
        # No GPU instance idles outside ECS: it is marked Unhealthy in its Auto Scaling group, which replaces it.
        outcome = _instance_health.after_failed_boot(self.config, self.identity["instance_id"])
        log.error("%s", outcome)
        self.status("failed", last_error=f"{reason}; {outcome}")
        return 1

    def reconcile(self) -> dict[str, Any]:
        """One pass: releases → sync → views → load on every Triton task its release → prune → status."""
        self.identity.update(instance_metadata(self.config))
        try:
            records = self.read_records()
            if self.release and any(key[0] != self.release["release_id"] for key in self.load_failures):
                live = {r["release_id"] for r in records.values() if r}
                self.load_failures = {k: v for k, v in self.load_failures.items() if k[0] in live}
            listing = self.introspect()
            in_use = views_in_use(listing, self.config["triton_container_name"])
            views = view_releases(records, self.identity["instance_id"], in_use)
            wanted = wanted_versions([*views.values(), self.release])
            synced = self.sync(wanted)
            self.use_configs(self.release)
            self.mark_hydrated(self.release)
            tasks = self.tasks(listing)
            indexes, unreachable = self.probe(tasks)
            self.build_views(views, serving_by_view(tasks, indexes))
            errors: dict[str, list[str]] = {}
            for task in tasks:
                release = views.get(task["view"])
                if release is not None and task["arn"] in indexes:
                    indexes[task["arn"]], failed = self.load(release, task, indexes[task["arn"]])
                    errors.setdefault(release["release_id"], []).extend(failed)
            self.build_views(views, serving_by_view(tasks, indexes))  # the versions every task has left go out of the views
            self.remove_unused_views(set(views) | in_use)
            loaded = {arn: {m["name"]: serving(index, m["name"]) for m in index} for arn, index in indexes.items()}
            if not unreachable:  # what an unreachable task serves is unknown: prune nothing then
                self.prune(wanted, {m: {v for by_model in loaded.values() for v in by_model.get(m, [])} for m in wanted})
            target_errors = errors.get(self.release["release_id"], []) if self.release else []
            parts = {"views": views, "synced": synced, "loaded": loaded, "tasks": tasks, "failures": self.failures(tasks), "errors": errors}
            return self.status(
                "failed" if target_errors else "applying", last_error="; ".join(target_errors + unreachable) or None, **parts
            )
        except IntrospectionDown as err:
            return self.introspection_transient(str(err))
        except AGENT_ERRORS as err:  # pylint: disable=catching-non-exception  # a tuple of exception classes
            log.error("reconcile failed: %s", err)
            return self.status("failed", last_error=str(err))

    def introspection_transient(self, reason: str) -> dict[str, Any]:
        """The ECS agent did not answer (it restarts, or is updated): nothing about the tasks is known, so nothing is
        judged. The last status is written again, unchanged but for `transient`, until the outage outlasts
        `introspection_grace_s()`; then the pass reports failed."""
        now = time.monotonic()
        if self.introspection_down_since is None:
            self.introspection_down_since = now
        down_s = now - self.introspection_down_since
        if down_s >= introspection_grace_s(self.config):
            log.error("%s for %.0f s", reason, down_s)
            return self.status("failed", last_error=f"{reason} for {down_s:.0f} s; check ecs.service on the instance")
        log.warning("%s (%.0f s; a restart of the ECS agent is retried, not judged)", reason, down_s)
        status = dict(self.last_status or {}, transient=reason, updated=utc_now())
        if self.last_status is None:  # no pass has judged this instance yet
            status = self.status("applying", last_error=None)
            status["transient"] = reason
        self.write_status(status)
        return status

    def serve(self) -> None:
        while True:
            status = self.reconcile()
            log.debug("state %s, release %s", status["state"], status["release_id"])
            time.sleep(self.config["poll_interval_s"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="inferops-model-agent", description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--config", default=CONFIG_PATH, help=f"agent configuration (JSON), default {CONFIG_PATH}")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--boot", action="store_true", help="hydrate the host path, then exit 0 (ecs.service waits for it) or 1")
    mode.add_argument("--serve", action="store_true", help="reconcile every poll_interval_s, forever")
    mode.add_argument("--once", action="store_true", help="one reconcile pass; exit 0 when the release is applied")
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(levelname)s %(message)s")
    try:
        config = load_config(args.config)
        identity = dict(instance_metadata(config), instance_id=imds_instance_id(config["imds_url"]))
    except (OSError, ValueError) as err:
        log.error("cannot start: %s", err)
        return 2
    agent = ModelAgent(config, s3_client(config), identity)
    if args.boot:
        return agent.boot()
    if args.once:
        return 0 if agent.reconcile()["applied"] else 1
    agent.serve()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
