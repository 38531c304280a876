# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The one place this collection calls the ECS API for task definitions, and ECR for images: one thin function
per call. Clusters, services and capacity calls are in `_ecs_services.py`.

Every function takes a client made by `AnsibleAWSModule.client(..., retry_decorator=AWSRetry.jittered_backoff())`
and calls with `aws_retry=True`; errors propagate as botocore exceptions for the module to report
through `fail_json_aws`. Grouped by resource: task definitions, the services using them, ECR images.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import ecs as _ecs_services
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import ClientError, error_code
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.pages import full_result

# ---------------------------------------------------------------- task definitions


def describe_task_definition(ecs: Any, task_definition: str) -> dict[str, Any] | None:
    """The task definition (latest ACTIVE revision for a bare family) with its tags, or None when there is none."""
    try:
        return ecs.describe_task_definition(aws_retry=True, taskDefinition=task_definition, include=["TAGS"])
    except ClientError as e:
        message = e.response.get("Error", {}).get("Message", "")
        # ECS answers a family with no ACTIVE revision with ClientException "Unable to describe task definition."
        if error_code(e) == "ClientException" and "unable to describe task definition" in message.lower():
            return None
        raise


def latest_active_task_definition(ecs: Any, family: str) -> dict[str, Any] | None:
    """The latest ACTIVE revision of a family with its tags: one call, whatever the number of revisions.

    AWS answers a bare family with its latest ACTIVE revision. moto answers with the highest revision even
    when it is INACTIVE; only then do we fall back to listing the ACTIVE revisions.
    """
    found = describe_task_definition(ecs, family)
    if found is None or found["taskDefinition"].get("status", "ACTIVE") == "ACTIVE":
        return found
    active = list_task_definitions(ecs, family)
    return describe_task_definition(ecs, active[0]) if active else None


def register_task_definition(ecs: Any, definition: dict[str, Any]) -> dict[str, Any]:
    """Registers `definition` (register_task_definition arguments, tags included); returns the describe-shaped answer."""
    return ecs.register_task_definition(aws_retry=True, **definition)


def deregister_task_definition(ecs: Any, task_definition_arn: str) -> dict[str, Any]:
    return ecs.deregister_task_definition(aws_retry=True, taskDefinition=task_definition_arn)["taskDefinition"]


def list_task_definitions(ecs: Any, family: str, status: str = "ACTIVE") -> list[str]:
    """Every revision ARN of a family, newest first. Used only where all revisions matter (keep_revisions, absent)."""
    listed = full_result(ecs, "list_task_definitions", familyPrefix=family, status=status, sort="DESC").get("taskDefinitionArns", [])
    # familyPrefix matches by prefix; keep this family's own revisions only.
    arns = [arn for arn in listed if arn.rsplit("/", 1)[-1].rsplit(":", 1)[0] == family]
    return sorted(arns, key=revision_of, reverse=True)


def revision_of(task_definition_arn: str) -> int:
    return int(task_definition_arn.rsplit(":", 1)[-1])


# ---------------------------------------------------------------- the services using a task definition


def task_definitions_in_use(ecs: Any, clusters: list[str] | None = None) -> dict[str, list[str]]:
    """Task definition ARN -> services (cluster/service) whose primary or any running deployment uses it."""
    used: dict[str, list[str]] = {}
    for cluster in clusters if clusters is not None else _ecs_services.list_clusters(ecs):
        services = _ecs_services.list_services(ecs, cluster)
        if not services:
            continue
        for service in _ecs_services.describe_services(ecs, cluster, services):
            if service.get("status") == "INACTIVE":
                continue
            arns = {service.get("taskDefinition")} | {d.get("taskDefinition") for d in service.get("deployments") or []}
            for arn in arns - {None}:
                used.setdefault(arn, []).append(f"{cluster.rsplit('/', 1)[-1]}/{service.get('serviceName')}")
    return used


# ---------------------------------------------------------------- ECR images


def image_digest(ecr: Any, registry_id: str, repository: str, tag: str) -> str | None:
    """sha256 digest of `repository:tag` in ECR, or None when the tag does not exist."""
    try:
        images = ecr.describe_images(aws_retry=True, registryId=registry_id, repositoryName=repository, imageIds=[{"imageTag": tag}])[
            "imageDetails"
        ]
    except ClientError as e:
        if error_code(e) in ("ImageNotFoundException", "RepositoryNotFoundException"):
            return None
        raise
    return images[0]["imageDigest"] if images else None
