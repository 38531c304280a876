"""The corpus: what we register and what real AWS describes for it must compare equal (no phantom revision)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from ansible_collections.inferops.triton_ecs.plugins.module_utils._task_definition.canonical import canonicalise, diff, from_describe

CORPUS = sorted((Path(__file__).parent / "corpus").glob("*.yml"))


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def test_corpus_has_at_least_15_cases_of_every_kind():
    cases = [load(p) for p in CORPUS]
    assert len(cases) >= 15
    containers = [c for case in cases for c in case["input"]["containerDefinitions"]]
    assert any(c.get("resourceRequirements") for c in containers), "GPU cases"
    assert any(not c.get("resourceRequirements") for c in containers), "non-GPU cases"
    assert any(c.get("healthCheck") for c in containers)
    assert any(c.get("secrets") for c in containers)
    assert any(case["input"].get("volumes") for case in cases)
    assert any(len(case["input"]["containerDefinitions"]) > 1 for case in cases), "sidecars"
    assert any(case["input"].get("tags") for case in cases)


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_registered_input_equals_what_aws_describes(path):
    case = load(path)
    registered = canonicalise(case["input"])
    described = canonicalise(from_describe(case["response"]))
    assert described == registered
    assert diff(from_describe(case["response"]), case["input"])["paths"] == []


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_a_real_change_is_still_seen(path):
    """The canonical form must not hide changes: a new image and a new env var are differences."""
    case = load(path)
    changed = copy.deepcopy(case["input"])
    container = changed["containerDefinitions"][0]
    container["image"] = container["image"].rsplit("@", 1)[0] + "@sha256:" + "0" * 64
    container.setdefault("environment", []).append({"name": "ADDED", "value": "1"})
    paths = diff(from_describe(case["response"]), changed)["paths"]
    name = container["name"]
    assert f"containerDefinitions[{name}].image" in paths
    assert f"containerDefinitions[{name}].environment" in paths or any(
        p.startswith(f"containerDefinitions[{name}].environment") for p in paths
    )


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_read_only_fields_never_reach_the_canonical_form(path):
    described = canonicalise(from_describe(load(path)["response"]))
    for field in ("taskDefinitionArn", "revision", "status", "requiresAttributes", "compatibilities", "registeredAt", "registeredBy"):
        assert field not in described


def test_first_case_is_what_the_module_renders():
    """Case 01 is the module's own output, so the AWS-shaped comparison covers what we really register."""
    from ansible_collections.inferops.triton_ecs.plugins.module_utils._task_definition.render import render

    from .task_definition_params import ROLE, module_params

    case = load(CORPUS[0])
    params = module_params(
        image=case["input"]["containerDefinitions"][0]["image"],
        memory=30000,
        memory_reservation=28000,
        triton={"models": ["resnet50"], "model_repository_host_path": "/mnt/nvme/models", "pinned_memory_pool_bytes": 268435456},
        execution_role_arn=ROLE,
        tags={"service": "triton", "owner": "ml-platform"},
    )
    assert canonicalise(render(params, "us-east-1")) == canonicalise(case["input"])
