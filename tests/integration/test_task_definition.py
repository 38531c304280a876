"""inferops.triton_ecs.task_definition through ansible-playbook against a moto server.

The playbooks assert each step themselves (check, apply, check again, apply again); these tests also
read the results back and count the revisions in moto, so a passing playbook cannot hide a stray write.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ansible_collections.inferops.triton_ecs.plugins.module_utils._task_definition.canonical import canonicalise, from_describe
from tests.harness.ansible import run_playbook
from tests.harness.moto import moto_compatible

PLAYBOOKS = Path(__file__).parent / "playbooks"
CORPUS = sorted((Path(__file__).parents[1] / "unit" / "corpus").glob("*.yml"))


def revisions(moto_server, family: str, status: str = "ACTIVE") -> list[str]:
    return moto_server.client("ecs").list_task_definitions(familyPrefix=family, status=status)["taskDefinitionArns"]


def play(moto_server, name: str, **extra_vars):
    run = run_playbook(PLAYBOOKS / f"task_definition_{name}.yml", {"aws_endpoint_url": moto_server.endpoint, **extra_vars})
    return run


def test_lifecycle_four_steps_change_and_absent(moto_server):
    run = play(moto_server, "lifecycle", td_family="triton-life")
    assert run.rc == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert run.result("Register (check mode)")["changed"] is True
    assert run.result("Register")["revision"] == 1
    assert run.result("Register again (check mode)")["changed"] is False
    assert run.result("Register again")["changed"] is False
    assert run.result("Change one environment variable")["revision"] == 2
    assert run.result("Change one environment variable again")["changed"] is False
    assert run.result("Deregister the family")["changed"] is True
    assert run.result("Deregister the family again")["changed"] is False
    # Revisions 1 and 2 deregistered by state=absent, revision 3 registered after it: nothing else was written.
    assert [arn.rsplit(":", 1)[-1] for arn in revisions(moto_server, "triton-life", "INACTIVE")] == ["1", "2"]
    assert [arn.rsplit(":", 1)[-1] for arn in revisions(moto_server, "triton-life")] == ["3"]
    described = moto_server.client("ecs").describe_task_definition(taskDefinition="triton-life:3", include=["TAGS"])
    assert described["tags"] == [{"key": "service", "value": "triton"}]
    container = described["taskDefinition"]["containerDefinitions"][0]
    assert container["resourceRequirements"] == [{"type": "GPU", "value": "1"}]
    assert container["mountPoints"] == [{"sourceVolume": "model-repository", "containerPath": "/models", "readOnly": True}]


def test_diff_mode_shows_before_and_after(moto_server):
    run = run_playbook(
        PLAYBOOKS / "task_definition_lifecycle.yml",
        {"aws_endpoint_url": moto_server.endpoint, "td_family": "triton-diff"},
        diff=True,
    )
    assert run.rc == 0, run.stderr[-2000:]
    change = run.result("Change one environment variable (check mode)")
    before = {e["name"]: e["value"] for e in change["diff"]["before"]["containerDefinitions"][0]["environment"]}
    after = {e["name"]: e["value"] for e in change["diff"]["after"]["containerDefinitions"][0]["environment"]}
    assert before["TRITON_LOG_VERBOSE"] == "0"
    assert after["TRITON_LOG_VERBOSE"] == "1"
    assert {k: v for k, v in before.items() if k != "TRITON_LOG_VERBOSE"} == {k: v for k, v in after.items() if k != "TRITON_LOG_VERBOSE"}


def test_keep_revisions_spares_revisions_in_use(moto_server):
    ecs = moto_server.client("ecs")
    family = "triton-keep"
    for i in range(5):
        ecs.register_task_definition(
            family=family,
            containerDefinitions=[{"name": "triton", "image": f"old@sha256:{i:064d}", "memory": 512}],
        )
    ecs.create_cluster(clusterName="prod")
    ecs.create_service(cluster="prod", serviceName="triton-blue", taskDefinition=f"{family}:1", desiredCount=0)
    run = play(moto_server, "keep_revisions", td_family=family, td_existing=5)
    assert run.rc == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert run.result("Register a change keeping 3 revisions (check mode)")["actions"] == [
        f"would register a new revision of {family}",
        f"would deregister {family}:3",
        f"would deregister {family}:2",
    ]
    active = sorted(int(arn.rsplit(":", 1)[-1]) for arn in revisions(moto_server, family))
    # 6 registered; 3 kept (4, 5, 6) plus revision 1, which the service uses.
    assert active == [1, 4, 5, 6]


def test_bad_input_fails_before_any_write(moto_server):
    family = "triton-bad"
    run = play(moto_server, "bad_input", td_family=family)
    assert run.rc == 0, run.stdout[-4000:] + run.stderr[-2000:]
    # Validation runs before the first AWS call: no request reached moto at all.
    assert moto_server.request_count() == 0
    bad = [t["name"] for t in run.tasks if any(h.get("failed") for h in t["hosts"].values())]
    assert len(bad) == 8
    assert revisions(moto_server, family) == []
    assert revisions(moto_server, family, "INACTIVE") == []


def test_resolve_image_digest_through_ecr(moto_server):
    ecr = moto_server.client("ecr")
    repo = ecr.create_repository(repositoryName="inferops/triton")["repository"]["repositoryUri"]
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
            "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "size": 1, "digest": "sha256:" + "1" * 64},
            "layers": [],
        }
    )
    ecr.put_image(repositoryName="inferops/triton", imageManifest=manifest, imageTag="24.08-py3")
    digest = ecr.describe_images(repositoryName="inferops/triton")["imageDetails"][0]["imageDigest"]
    assert digest.startswith("sha256:")
    run = play(moto_server, "resolve_digest", td_family="triton-ecr", td_ecr_repository=repo, td_tag="24.08-py3", td_digest=digest)
    assert run.rc == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert len(revisions(moto_server, "triton-ecr")) == 1


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_corpus_round_trips_through_moto(shared_moto_server, path):
    """What moto stores and describes for each corpus input compares equal with the input itself."""
    sent = moto_compatible(yaml.safe_load(path.read_text())["input"])
    ecs = shared_moto_server.client("ecs")
    ecs.register_task_definition(**sent)
    described = ecs.describe_task_definition(taskDefinition=sent["family"], include=["TAGS"])
    assert canonicalise(from_describe(described)) == canonicalise(sent)
