"""Load, unload and rollback decisions against a fake Triton client (mocked at the client boundary)."""

from __future__ import annotations

import pytest

from ansible_collections.inferops.triton_ecs.plugins.module_utils._models import triton_model as _triton_model
from ansible_collections.inferops.triton_ecs.plugins.module_utils._models.triton_model import (
    ModelStateError,
    ensure_loaded,
    ensure_rolled_back,
    ensure_unloaded,
)
from ansible_collections.inferops.triton_ecs.plugins.module_utils._triton_client import TritonError


class FakeTriton:
    """Holds the READY versions of one model `m`; load with a pinned config makes that version READY alone."""

    def __init__(self, ready=(), on_disk=(1, 2, 3), broken=(), unload_steps=1):
        self.ready = list(ready)
        self.on_disk = on_disk
        self.broken = broken
        self.calls: list[tuple] = []
        self.unloading = 0
        self.unload_steps = unload_steps
        self.unloaded: list[int] = []

    def repository_index(self):
        if self.unloading:
            self.unloading -= 1
            return [{"name": "m", "version": str(v), "state": "UNLOADING"} for v in self.unloaded]
        entries = [{"name": "m", "version": str(v), "state": "READY"} for v in self.ready]
        entries += [{"name": "m", "version": str(v), "state": "UNAVAILABLE", "reason": "broken on purpose"} for v in self.broken]
        return entries or [{"name": "m"}]

    def model_config(self, model):
        if not self.ready:
            raise TritonError("not loaded", 400, "not loaded")
        return {"name": model, "version_policy": {"latest": {"num_versions": 1}}}

    def load(self, model, config=None, timeout_s=300):
        self.calls.append(("load", config))
        versions = config["version_policy"]["specific"]["versions"] if config else [max(self.on_disk)]
        if set(versions) & set(self.broken):
            raise TritonError("load failed", 400, f"version {versions[0]} is broken on purpose")
        self.ready = versions

    def unload(self, model):
        self.calls.append(("unload",))
        self.unloading = self.unload_steps
        self.unloaded, self.ready = self.ready, []


@pytest.fixture(autouse=True)
def fast_poll(monkeypatch):
    monkeypatch.setattr(_triton_model, "POLL_S", 0)


def test_loaded_pins_the_version_and_is_idempotent():
    triton = FakeTriton(ready=[1])
    planned = ensure_loaded(triton, "m", 2, check_mode=True)
    assert planned["changed"] and planned["after"] == [2] and triton.calls == []
    done = ensure_loaded(triton, "m", 2)
    assert done["changed"] and done["before"] == [1] and done["after"] == [2]
    assert triton.calls[-1][1]["version_policy"] == {"specific": {"versions": [2]}}
    assert ensure_loaded(triton, "m", 2, check_mode=True)["changed"] is False
    assert ensure_loaded(triton, "m", 2)["changed"] is False


def test_never_loaded_model_is_loaded_from_disk_then_pinned():
    triton = FakeTriton(ready=[])
    assert ensure_loaded(triton, "m", 1)["after"] == [1]
    assert [c[0] for c in triton.calls] == ["load", "load"]
    assert triton.calls[0][1] is None


def test_load_failure_returns_tritons_reason_and_keeps_serving():
    triton = FakeTriton(ready=[1], broken=(2,))
    with pytest.raises(ModelStateError, match=r"failed to load model m \(version 2\): version 2 is broken on purpose"):
        ensure_loaded(triton, "m", 2)
    assert triton.ready == [1]


def test_missing_model_and_timeout_are_clear():
    with pytest.raises(ModelStateError, match="not in Triton's model repository"):
        ensure_loaded(FakeTriton(ready=[1]), "other", 1)
    with pytest.raises(ModelStateError, match=r"timed out after 0\.01 s waiting for model m to finish unloading"):
        ensure_unloaded(FakeTriton(ready=[1], unload_steps=10**6), "m", timeout_s=0.01)


def test_unloaded_waits_for_the_unload_to_finish():
    triton = FakeTriton(ready=[3], unload_steps=3)
    assert ensure_unloaded(triton, "m", check_mode=True)["changed"] and triton.ready == [3]
    assert ensure_unloaded(triton, "m")["changed"]
    assert triton.unloading == 0
    assert ensure_unloaded(triton, "m")["changed"] is False


def test_rolled_back_serves_the_version_before_the_newest_once():
    triton = FakeTriton(ready=[3])
    first = ensure_rolled_back(triton, "m", [1, 2, 3])
    assert first["changed"] and first["version"] == 2 and triton.ready == [2]
    assert ensure_rolled_back(triton, "m", [1, 2, 3])["changed"] is False
    with pytest.raises(ModelStateError, match="no version to roll back to"):
        ensure_rolled_back(FakeTriton(ready=[3]), "m", [3])


def test_standby_keeps_the_previous_version_loaded_and_rollback_drops_the_new_one():
    triton = FakeTriton(ready=[1])
    loaded = ensure_loaded(triton, "m", 2, standby=True)
    assert loaded["after"] == [1, 2]
    assert triton.calls[-1][1]["version_policy"] == {"specific": {"versions": [1, 2]}}
    assert ensure_loaded(triton, "m", 2, standby=True)["changed"] is False
    assert ensure_loaded(triton, "m", 2, check_mode=True)["after"] == [2]  # without standby, 1 would go
    rolled = ensure_rolled_back(triton, "m", [1, 2])
    assert rolled["changed"] and triton.ready == [1]
