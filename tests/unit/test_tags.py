"""Tag planning (plugins/module_utils/_tags.py): pure functions, no stand-in needed. The modules' tag writes
against a moto server are in tests/integration/test_tags.py."""

from __future__ import annotations

from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.lock import LOCK_PREFIX, RECORD_KEY
from ansible_collections.inferops.triton_ecs.plugins.module_utils._tags import key_errors, plan

LOCK_KEYS = (LOCK_PREFIX, RECORD_KEY)


def test_tags_none_leaves_every_tag_alone_even_with_purge() -> None:
    current = {"team": "inference", "old": "x"}
    tag_plan = plan(current, None, purge=True)
    assert not tag_plan.changed
    assert tag_plan.after == current


def test_a_changed_value_and_a_new_key_are_set_and_an_unlisted_key_purged() -> None:
    tag_plan = plan({"team": "inference", "old": "x", "keep": "1"}, {"team": "ml", "keep": "1", "cost": "gpu"}, purge=True)
    assert tag_plan.to_set == {"cost": "gpu", "team": "ml"}
    assert tag_plan.to_remove == ["old"]
    assert tag_plan.after == {"team": "ml", "keep": "1", "cost": "gpu"}


def test_without_purge_unlisted_keys_stay() -> None:
    tag_plan = plan({"team": "inference", "old": "x"}, {"team": "ml"}, purge=False)
    assert tag_plan.to_set == {"team": "ml"}
    assert tag_plan.to_remove == []
    assert tag_plan.after == {"team": "ml", "old": "x"}


def test_empty_tags_with_purge_removes_every_tag_but_aws_keys() -> None:
    tag_plan = plan({"team": "inference", "aws:cloudformation:stack-name": "s"}, {}, purge=True)
    assert tag_plan.to_remove == ["team"]
    assert tag_plan.after == {"aws:cloudformation:stack-name": "s"}


def test_purge_never_removes_the_cutover_lock_nor_its_record() -> None:
    current = {
        "team": "inference",
        f"{LOCK_PREFIX}ci-1": "since=1 expires=600 by=ci@host 1",
        RECORD_KEY: "from=blue to=green task_definition=triton:7",
    }
    tag_plan = plan(current, {"team": "inference"}, purge=True, keep_prefixes=LOCK_KEYS)
    assert not tag_plan.changed
    tag_plan = plan(current, {}, purge=True, keep_prefixes=LOCK_KEYS)
    assert tag_plan.to_remove == ["team"]
    assert set(tag_plan.after) == {f"{LOCK_PREFIX}ci-1", RECORD_KEY}


def test_same_tags_plan_nothing_and_values_compare_as_strings() -> None:
    tag_plan = plan({"replicas": "2", "team": "inference"}, {"replicas": 2, "team": "inference"}, purge=True)
    assert not tag_plan.changed
    tag_plan = plan({}, {"replicas": 2}, purge=True)
    assert tag_plan.to_set == {"replicas": "2"}


def test_reserved_keys_are_refused_naming_the_key() -> None:
    assert key_errors({"team": "x"}) == []
    errors = key_errors({"aws:owner": "x", f"{LOCK_PREFIX}me": "y", "ok": "z"}, reserved=LOCK_KEYS)
    assert len(errors) == 2
    assert errors[0].startswith("tags.aws:owner: ")
    assert errors[1].startswith(f"tags.{LOCK_PREFIX}me: ")
    assert key_errors(None) == []
