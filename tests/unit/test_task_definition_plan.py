"""present/absent with the _ecs client functions replaced by an in-memory family: reads, writes, check mode."""

from __future__ import annotations

import pytest

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import ecr as _ecr
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import ecs as _ecs
from ansible_collections.inferops.triton_ecs.plugins.module_utils._task_definition import plan as _task_definition_plan
from ansible_collections.inferops.triton_ecs.plugins.module_utils._task_definition.render import render
from ansible_collections.inferops.triton_ecs.plugins.module_utils._task_definition.validate import TaskDefinitionError

from .task_definition_params import module_params

ARN = "arn:aws:ecs:us-east-1:123456789012:task-definition/{}:{}"


class FakeEcs:
    """The _ecs and _ecr functions over one in-memory account; `calls` records every one made."""

    def __init__(self) -> None:
        self.revisions: dict[str, list[dict]] = {}
        self.in_use: dict[str, list[str]] = {}
        self.calls: list[str] = []
        self.digests: dict[str, str] = {}

    def install(self, monkeypatch: pytest.MonkeyPatch) -> FakeEcs:
        for name in (
            "latest_active_task_definition",
            "describe_task_definition",
            "register_task_definition",
            "deregister_task_definition",
            "list_task_definitions",
            "task_definitions_in_use",
            "tag_resource",
            "untag_resource",
        ):
            monkeypatch.setattr(_ecs, name, getattr(self, name))
        monkeypatch.setattr(_ecr, "image_digest", self.image_digest)
        return self

    def _find(self, arn: str) -> dict:
        family, revision = arn.rsplit("/", 1)[-1].split(":")
        return self.revisions[family][int(revision) - 1]

    def latest_active_task_definition(self, ecs, family):
        self.calls.append("describe")
        active = [td for td in self.revisions.get(family, []) if td["taskDefinition"]["status"] == "ACTIVE"]
        return active[-1] if active else None

    def describe_task_definition(self, ecs, arn):
        self.calls.append("describe")
        return self._find(arn)

    def register_task_definition(self, ecs, definition):
        self.calls.append("register")
        family = definition["family"]
        revisions = self.revisions.setdefault(family, [])
        body = {k: v for k, v in definition.items() if k != "tags"}
        body.update(taskDefinitionArn=ARN.format(family, len(revisions) + 1), revision=len(revisions) + 1, status="ACTIVE")
        revisions.append({"taskDefinition": body, "tags": definition.get("tags", [])})
        return revisions[-1]

    def deregister_task_definition(self, ecs, arn):
        self.calls.append("deregister")
        self._find(arn)["taskDefinition"]["status"] = "INACTIVE"
        return self._find(arn)["taskDefinition"]

    def list_task_definitions(self, ecs, family, status="ACTIVE"):
        self.calls.append("list")
        found = [td["taskDefinition"] for td in self.revisions.get(family, []) if td["taskDefinition"]["status"] == status]
        return [td["taskDefinitionArn"] for td in reversed(found)]

    def task_definitions_in_use(self, ecs, clusters=None):
        self.calls.append("services")
        return self.in_use

    def tag_resource(self, ecs, arn, tags):
        self.calls.append("tag")
        kept = [t for t in self._find(arn)["tags"] if t["key"] not in tags]
        self._find(arn)["tags"] = kept + [{"key": k, "value": v} for k, v in tags.items()]

    def untag_resource(self, ecs, arn, keys):
        self.calls.append("untag")
        self._find(arn)["tags"] = [t for t in self._find(arn)["tags"] if t["key"] not in keys]

    def image_digest(self, ecr, registry_id, repository, tag):
        self.calls.append("ecr")
        return self.digests.get(f"{repository}:{tag}")


@pytest.fixture
def fake(monkeypatch):
    return FakeEcs().install(monkeypatch)


def present(params, check_mode=False):
    return _task_definition_plan.present(None, lambda: None, params, "us-east-1", check_mode=check_mode)


def test_four_steps_check_apply_check_apply(fake):
    params = module_params()
    first_check = present(params, check_mode=True)
    assert first_check["changed"] is True
    assert first_check["revision"] is None
    assert fake.revisions == {}
    applied = present(params)
    assert applied["changed"] is True
    assert applied["revision"] == 1
    assert applied["task_definition"] == first_check["task_definition"]
    second_check = present(params, check_mode=True)
    assert second_check["changed"] is False
    assert second_check["revision"] == 1
    fake.calls.clear()
    again = present(params)
    assert again["changed"] is False
    assert again["task_definition_arn"].endswith("triton:1")
    assert fake.calls == ["describe"], "a no-op run makes one read call"


def test_a_change_registers_exactly_one_new_revision_and_shows_the_diff(fake):
    present(module_params())
    result = present(module_params(environment={"LOG": "1"}))
    assert result["changed"] is True
    assert result["revision"] == 2
    assert result["changed_fields"] == ["containerDefinitions[triton].environment"]
    before = {e["name"] for e in result["diff"]["before"]["containerDefinitions"][0]["environment"]}
    after = {e["name"] for e in result["diff"]["after"]["containerDefinitions"][0]["environment"]}
    assert after - before == {"LOG"}
    assert len(fake.revisions["triton"]) == 2


def test_keep_revisions_deregisters_the_oldest_unused(fake):
    for i in range(5):
        present(module_params(environment={"I": str(i)}))
    fake.in_use = {ARN.format("triton", 1): ["prod/triton-blue"]}
    result = present(module_params(environment={"I": "5"}, keep_revisions=3))
    assert result["revision"] == 6
    statuses = [td["taskDefinition"]["status"] for td in fake.revisions["triton"]]
    assert statuses == ["ACTIVE", "INACTIVE", "INACTIVE", "ACTIVE", "ACTIVE", "ACTIVE"]
    assert result["kept_in_use"] == {ARN.format("triton", 1): ["prod/triton-blue"]}
    assert "deregistered triton:2" in result["actions"]


def test_keep_revisions_in_check_mode_counts_the_pending_revision_and_writes_nothing(fake):
    for i in range(3):
        present(module_params(environment={"I": str(i)}))
    result = present(module_params(environment={"I": "new"}, keep_revisions=3), check_mode=True)
    assert result["actions"] == ["would register a new revision of triton", "would deregister triton:1"]
    assert "register" not in fake.calls[-3:]
    assert all(td["taskDefinition"]["status"] == "ACTIVE" for td in fake.revisions["triton"])


def test_resolve_image_digest_pins_the_digest(fake):
    digest = "sha256:" + "d" * 64
    fake.digests["triton:24.08"] = digest
    image = "123456789012.dkr.ecr.us-east-1.amazonaws.com/triton:24.08"
    result = present(module_params(image=image, resolve_image_digest=True))
    assert result["image"] == f"123456789012.dkr.ecr.us-east-1.amazonaws.com/triton@{digest}"
    assert fake.calls == ["ecr", "describe", "register"]
    with pytest.raises(TaskDefinitionError, match="not found in ECR"):
        present(module_params(image=image.replace("24.08", "24.09"), resolve_image_digest=True))


def test_absent_deregisters_every_active_revision_and_is_idempotent(fake):
    present(module_params())
    present(module_params(environment={"X": "1"}))
    check = _task_definition_plan.absent(None, {"family": "triton"}, check_mode=True)
    assert check["changed"] is True
    assert all(td["taskDefinition"]["status"] == "ACTIVE" for td in fake.revisions["triton"])
    result = _task_definition_plan.absent(None, {"family": "triton"})
    assert result["changed"] is True
    assert result["actions"] == ["deregistered triton:2", "deregistered triton:1"]
    assert _task_definition_plan.absent(None, {"family": "triton"})["changed"] is False


def test_absent_refuses_before_any_write_when_a_service_uses_a_revision(fake):
    present(module_params())
    fake.in_use = {ARN.format("triton", 1): ["prod/triton-green"]}
    with pytest.raises(TaskDefinitionError, match="triton:1 by prod/triton-green"):
        _task_definition_plan.absent(None, {"family": "triton"})
    assert "deregister" not in fake.calls


def test_registered_definition_is_what_render_produced(fake):
    params = module_params(tags={"team": "ml"})
    present(params)
    stored = fake.revisions["triton"][0]
    assert stored["tags"] == [{"key": "team", "value": "ml"}]
    assert stored["taskDefinition"]["containerDefinitions"] == render(params, "us-east-1")["containerDefinitions"]


def test_a_tag_change_tags_the_latest_revision_and_registers_none(fake):
    present(module_params(tags={"team": "ml", "old": "1"}))
    fake.calls.clear()
    check = present(module_params(tags={"team": "inference"}), check_mode=True)
    assert check["changed"] and check["actions"] == ["would tag triton:1: team, old"]
    assert check["diff"]["after"]["tags"] == [{"key": "team", "value": "inference"}]
    assert fake.calls == ["describe"]
    applied = present(module_params(tags={"team": "inference"}))
    assert applied["changed"] and applied["revision"] == 1 and applied["tags"] == {"team": "inference"}
    assert fake.calls == ["describe", "describe", "untag", "tag"]
    assert len(fake.revisions["triton"]) == 1
    assert fake.revisions["triton"][0]["tags"] == [{"key": "team", "value": "inference"}]
    again = present(module_params(tags={"team": "inference"}))
    assert not again["changed"] and again["actions"] == []


def test_empty_tags_with_purge_remove_every_tag_of_the_revision(fake):
    """`tags: {}` is not `tags` omitted: with purge_tags (the default) the revision's tags go, and no revision is made."""
    present(module_params(tags={"team": "ml"}))
    emptied = present(module_params(tags={}))
    assert emptied["changed"] and emptied["actions"] == ["tagged triton:1: team"] and emptied["tags"] == {}
    assert fake.revisions["triton"][0]["tags"] == [] and len(fake.revisions["triton"]) == 1
    assert present(module_params(tags={}))["changed"] is False


def test_tags_omitted_are_left_alone_and_carried_to_a_new_revision(fake):
    present(module_params(tags={"team": "ml"}))
    assert present(module_params(tags=None))["changed"] is False
    changed = present(module_params(tags=None, memory=8192))
    assert changed["revision"] == 2
    assert fake.revisions["triton"][1]["tags"] == [{"key": "team", "value": "ml"}]
    kept = present(module_params(tags={"owner": "platform"}, memory=8192, purge_tags=False))
    assert kept["actions"] == ["tagged triton:2: owner"] and kept["tags"] == {"team": "ml", "owner": "platform"}
