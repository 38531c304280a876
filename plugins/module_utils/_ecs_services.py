# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""ECS service, cluster and capacity calls for the blue/green cutover: one thin function per call.

Task-definition calls (and describe_services) live in `_ecs.py`; this file holds the rest of what a cutover
asks ECS. Every function takes a client made by `AnsibleAWSModule.client(..., retry_decorator=AWSRetry.jittered_backoff())`
and calls it with `aws_retry=True`; botocore errors propagate for the module to report through `fail_json_aws`.
"""

from __future__ import annotations

from typing import Any


def update_service(ecs: Any, cluster: str, service: str, desired_count: int, task_definition: str | None = None) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"cluster": cluster, "service": service, "desiredCount": desired_count}
    if task_definition:
        kwargs["taskDefinition"] = task_definition
    return ecs.update_service(aws_retry=True, **kwargs)["service"]


def describe_cluster(ecs: Any, cluster: str) -> dict[str, Any] | None:
    found = ecs.describe_clusters(aws_retry=True, clusters=[cluster])["clusters"]
    return found[0] if found and found[0].get("status") == "ACTIVE" else None


def container_instances(ecs: Any, cluster: str) -> list[dict[str, Any]]:
    """Every ACTIVE container instance of the cluster, described (remainingResources included)."""
    arns: list[str] = []
    kwargs: dict[str, Any] = {"cluster": cluster, "status": "ACTIVE"}
    while True:
        page = ecs.list_container_instances(aws_retry=True, **kwargs)
        arns += page.get("containerInstanceArns", [])
        if not page.get("nextToken"):
            break
        kwargs["nextToken"] = page["nextToken"]
    described: list[dict[str, Any]] = []
    for start in range(0, len(arns), 100):  # the API takes at most 100 instances a call
        described += ecs.describe_container_instances(aws_retry=True, cluster=cluster, containerInstances=arns[start : start + 100])[
            "containerInstances"
        ]
    return described


def describe_capacity_providers(ecs: Any, names: list[str]) -> list[dict[str, Any]]:
    if not names:
        return []
    return ecs.describe_capacity_providers(aws_retry=True, capacityProviders=names)["capacityProviders"]
