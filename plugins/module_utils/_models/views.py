# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""Per-task-definition views of the instance's model store: what each colour's Triton tasks see as their repository.

The store is the model host path, ``<host>/<model>/<version>/`` (verified by the sync). A view is a directory
``<host>/.task-definitions/<family>-<revision>/`` holding, for each model of the release bound to that revision,
``<model>/config.pbtxt`` (the config of the version it serves, from that version's verified manifest) and
``<model>/<version>``, a relative symlink to ``../../../<model>/<version>`` in the store. A Triton task whose task
definition asks for it (``INFEROPS_MODEL_VIEW``) serves its view as ``--model-repository``: at start it loads exactly
its release's versions, and a task of the other colour on the same instance never sees them.

What is atomic: a new view appears by one rename(2) of a complete staging directory; a link or a config inside a view
is replaced by rename(2) too. Versions linked by any view are never pruned (`linked_versions`).

Runs on the instance without Ansible, like the agent.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.local_repository import (
    STAGING_PREFIX,
    TRASH_PREFIX,
    fsync_dir,
    read_local_manifest,
    read_raw,
    write_atomic,
)
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.manifest import ManifestError, check_model_name

VIEWS_DIR = ".task-definitions"
CONFIG_FILE = "config.pbtxt"


def views_root(host_path: str) -> str:
    return os.path.join(host_path, VIEWS_DIR)


def view_path(host_path: str, name: str) -> str:
    if not name or name.startswith(".") or "/" in name:
        raise ManifestError(f"view name {name!r} is not a task definition's <family>-<revision>")
    return os.path.join(views_root(host_path), name)


def view_names(host_path: str) -> list[str]:
    """The views on disk (staging and trash left out)."""
    root = views_root(host_path)
    if not os.path.isdir(root):
        return []
    return sorted(n for n in os.listdir(root) if not n.startswith(".") and os.path.isdir(os.path.join(root, n)))


def read_view(host_path: str, name: str) -> dict[str, list[int]]:
    """{model: [linked versions]} of a view ({} when it does not exist)."""
    path = view_path(host_path, name)
    found: dict[str, list[int]] = {}
    if not os.path.isdir(path):
        return found
    for model in sorted(os.listdir(path)):
        model_dir = os.path.join(path, model)
        if model.startswith(".") or not os.path.isdir(model_dir) or os.path.islink(model_dir):
            continue
        found[model] = sorted(int(v) for v in os.listdir(model_dir) if v.isdigit() and os.path.islink(os.path.join(model_dir, v)))
    return found


def linked_versions(host_path: str) -> dict[str, set[int]]:
    """{model: versions} linked by any view: the versions the prune must keep."""
    linked: dict[str, set[int]] = {}
    for name in view_names(host_path):
        for model, versions in read_view(host_path, name).items():
            linked.setdefault(model, set()).update(versions)
    return linked


def _config_of(host_path: str, model: str, version: int) -> bytes:
    manifest = read_local_manifest(os.path.join(host_path, model), model, version)
    if manifest is None:
        raise ManifestError(f"{model} version {version} is not complete in {host_path}; sync it before it goes into a view")
    return manifest["config"]["text"].encode()


def _link(model_dir: str, version: int) -> bool:
    """<view>/<model>/<version> -> ../../../<model>/<version>, replaced by rename(2); True when it was not there."""
    target = os.path.join("..", "..", "..", os.path.basename(model_dir), str(version))
    path = os.path.join(model_dir, str(version))
    if os.path.islink(path) and os.readlink(path) == target:
        return False
    temporary = os.path.join(model_dir, f"{STAGING_PREFIX}link-{version}-{os.getpid()}")
    if os.path.lexists(temporary):
        os.unlink(temporary)
    os.symlink(target, temporary)
    os.replace(temporary, path)
    return True


def _fill_model(model_dir: str, host_path: str, model: str, versions: list[int]) -> bool:
    """Config of the newest version, exactly `versions` linked; True when anything changed."""
    changed = False
    os.makedirs(model_dir, exist_ok=True)
    config = _config_of(host_path, model, max(versions))
    config_path = os.path.join(model_dir, CONFIG_FILE)
    if read_raw(config_path) != config:
        write_atomic(config_path, config)
        changed = True
    for version in versions:
        changed = _link(model_dir, version) or changed
    for entry in os.listdir(model_dir):
        if entry.isdigit() and int(entry) not in versions and os.path.islink(os.path.join(model_dir, entry)):
            os.unlink(os.path.join(model_dir, entry))
            changed = True
    if changed:
        fsync_dir(model_dir)
    return changed


def ensure_view(host_path: str, name: str, links: dict[str, list[int]]) -> bool:
    """Makes view `name` hold exactly `links` ({model: versions}, each synced and complete); True when it changed.

    A new view is built aside and renamed into place, so a task never sees it half made.
    """
    for model, versions in links.items():
        check_model_name(model)
        if not versions:
            raise ManifestError(f"view {name}: model {model} has no version to link")
    path = view_path(host_path, name)
    root = views_root(host_path)
    if not os.path.isdir(path):
        os.makedirs(root, exist_ok=True)
        staging = tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{name}-", dir=root)
        try:
            for model, versions in links.items():
                _fill_model(os.path.join(staging, model), host_path, model, sorted(versions))
            os.chmod(staging, 0o755)  # mkdtemp makes it 0700: Triton (uid 1000) reads it
            os.rename(staging, path)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        fsync_dir(root)
        return True
    changed = False
    for model, versions in links.items():
        changed = _fill_model(os.path.join(path, model), host_path, model, sorted(versions)) or changed
    for model in set(read_view(host_path, name)) - set(links):
        _remove(os.path.join(path, model), root)
        changed = True
    return changed


def _remove(path: str, root: str) -> None:
    """Out of sight first (rename to trash), then deleted."""
    trash = os.path.join(root, f"{TRASH_PREFIX}{os.path.basename(path)}-{os.getpid()}")
    shutil.rmtree(trash, ignore_errors=True)
    os.rename(path, trash)
    shutil.rmtree(trash, ignore_errors=True)


def remove_view(host_path: str, name: str) -> None:
    path = view_path(host_path, name)
    if os.path.isdir(path):
        _remove(path, views_root(host_path))


def clean_stale(host_path: str) -> list[str]:
    """Staging and trash left in the views directory by a killed agent."""
    root = views_root(host_path)
    stale = sorted(n for n in os.listdir(root) if n.startswith((STAGING_PREFIX, TRASH_PREFIX))) if os.path.isdir(root) else []
    for name in stale:
        path = os.path.join(root, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    return stale
