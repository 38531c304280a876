"""Tags converged on every run by the modules that create resources, against a moto server (the AWS stand-in):
each resource is created with tags, then a value changes, a key is added and one is purged; check mode writes
nothing, a second run changes and writes nothing, `tags` omitted leaves them alone, and the cutover lock and record
that bluegreen keeps in the production listener's tags survive the purge. The steps and their asserts are in
playbooks/tags_modules.yml; this test prepares the account, plants the lock between the phases and reads AWS back."""

from __future__ import annotations

from pathlib import Path

from tests.harness.ansible import run_playbook
from tests.harness.infrastructure import module_resources
from tests.harness.moto import MotoServer

PLAYBOOK = Path(__file__).parent / "playbooks" / "tags_modules.yml"
TAGS_AFTER = {"team": "ml", "cost": "gpu", "owner": "platform"}
LOCK_TAGS = {
    "inferops:cutover-lock:ci-1": "since=1 expires=600 by=ci@host 1",
    "inferops:cutover": "from=blue to=green task_definition=triton:1",
}


def ecs_tags(resource: dict) -> dict[str, str]:
    return {t["key"]: t["value"] for t in resource.get("tags") or []}


def elbv2_tags(elbv2, arn: str) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in elbv2.describe_tags(ResourceArns=[arn])["TagDescriptions"][0]["Tags"]}


def test_tags_converge_on_every_module_and_purge_keeps_the_cutover_lock(moto_server: MotoServer) -> None:
    variables = module_resources(moto_server, "tags")
    created = run_playbook(PLAYBOOK, extra_vars={**variables, "phase": "create"}, env=moto_server.env())
    assert created.rc == 0, f"{created.failed_tasks}\n{created.stdout[-4000:]}"

    elbv2 = moto_server.client("elbv2")
    listeners = {
        listener["Port"]: listener["ListenerArn"]
        for listener in elbv2.describe_listeners(LoadBalancerArn=variables["alb_arn"])["Listeners"]
    }
    elbv2.add_tags(ResourceArns=[listeners[80]], Tags=[{"Key": k, "Value": v} for k, v in LOCK_TAGS.items()])

    converged = run_playbook(PLAYBOOK, extra_vars={**variables, "phase": "converge"}, env=moto_server.env())
    assert converged.rc == 0, f"{converged.failed_tasks}\n{converged.stdout[-4000:]}"

    ecs = moto_server.client("ecs")
    assert ecs_tags(ecs.describe_clusters(clusters=["tags"], include=["TAGS"])["clusters"][0]) == TAGS_AFTER
    assert ecs_tags(ecs.describe_capacity_providers(capacityProviders=["gpu-tags"], include=["TAGS"])["capacityProviders"][0]) == TAGS_AFTER
    services = ecs.describe_services(cluster="tags", services=["tagapp-blue", "tagapp-green"], include=["TAGS"])["services"]
    assert [ecs_tags(service) for service in services] == [{**TAGS_AFTER, "inferops:color": color} for color in ("blue", "green")]
    assert ecs.list_task_definitions(familyPrefix="tagtd")["taskDefinitionArns"] == [
        f"{variables['task_definition'].rsplit('/', 1)[0]}/tagtd:1"
    ]
    assert ecs_tags(ecs.describe_task_definition(taskDefinition="tagtd:1", include=["TAGS"])) == TAGS_AFTER
    assert elbv2_tags(elbv2, listeners[80]) == {**TAGS_AFTER, **LOCK_TAGS}
    assert elbv2_tags(elbv2, listeners[8080]) == TAGS_AFTER
