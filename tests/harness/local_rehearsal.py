"""deploy.yml on inventories/local against a moto server on a free port: the local rehearsal as the tests run it.

Used by tests/integration/test_deploy_local.py (one deployment its cases share) and test_dry_run.py (an empty account);
the benchmarks on the local rehearsal (bench/deploy_local.py, dry_run.py, rollback_cutover.py) take `standby()`.
"""

from __future__ import annotations

from .ansible import REPO_ROOT, PlaybookRun, run_playbook
from .moto import MotoServer


def standby(container_name: str, port: int) -> dict:
    """`deploy_local_standby` (inventories/local): the standby container the cutover gates on, serving the example
    model repository; each test or benchmark names its own container and host port so that runs do not clash."""
    return {"container_name": container_name, "port": port, "model_repository": str(REPO_ROOT / "examples" / "model_repository")}


# The tests' standby; test_dry_run.py takes the next ports for its own.
STANDBY = standby("inferops-test-local-rehearsal-standby", 18100)


def extra_vars(moto: MotoServer) -> dict:
    return {
        "aws_endpoint_url": moto.endpoint,
        # A fixed image tag: the image's inputs, not the checkout's HEAD (a commit during the run), decide whether a
        # second run or a check run sees a change.
        "triton_image_revision": "local-rehearsal-test",
        "triton_image_version": "local-rehearsal-test",
        "deploy_local_standby": STANDBY,
    }


def deploy(moto: MotoServer, check: bool = False, **overrides) -> PlaybookRun:
    """deploy.yml on inventories/local; `check` adds --check --diff."""
    return run_playbook(
        REPO_ROOT / "deploy.yml",
        extra_vars={**extra_vars(moto), **overrides},
        inventory=str(REPO_ROOT / "inventories" / "local"),
        check=check,
        diff=check,
    )


def state(moto: MotoServer) -> dict:
    """What a write would move: task definition revisions, listener weights, each service's count and revision."""
    ecs, elbv2 = moto.client("ecs"), moto.client("elbv2")
    groups = {g["TargetGroupArn"]: g["TargetGroupName"] for g in elbv2.describe_target_groups()["TargetGroups"]}
    lb = elbv2.describe_load_balancers(Names=["triton-local"])["LoadBalancers"][0]
    listeners = elbv2.describe_listeners(LoadBalancerArn=lb["LoadBalancerArn"])["Listeners"]
    weights = {
        (li["Port"], groups[tg["TargetGroupArn"]]): tg["Weight"]
        for li in listeners
        for tg in li["DefaultActions"][0]["ForwardConfig"]["TargetGroups"]
    }
    services = ecs.describe_services(cluster="triton-local", services=["triton-blue", "triton-green"])["services"]
    attributes = {
        name: elbv2.describe_target_group_attributes(TargetGroupArn=arn)["Attributes"]
        for arn, name in sorted(groups.items(), key=lambda g: g[1])
    }
    return {
        "revisions": ecs.list_task_definitions(familyPrefix="triton-local")["taskDefinitionArns"],
        "weights": weights,
        "services": {s["serviceName"]: (s["desiredCount"], s["taskDefinition"]) for s in services},
        "target_group_attributes": attributes,
    }
