# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The one place this collection calls the ECS API: clusters, services, tasks, capacity providers, container
instances and task definitions, one thin function per call. ECR image lookups are in `ecr.py`.

Every function takes a client made by `AnsibleAWSModule.client(..., retry_decorator=AWSRetry.jittered_backoff())`
and calls it with `aws_retry=True`; listings go through botocore's paginators (`pages.full_result`). Botocore
errors propagate for the module to report through `fail_json_aws`.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.amazon.aws.plugins.module_utils.botocore import is_boto3_error_code
from ansible_collections.amazon.aws.plugins.module_utils.tagging import ansible_dict_to_boto3_tag_list, boto3_tag_list_to_ansible_dict
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.pages import full_result


def ecs_tags(tags: dict[str, str]) -> list[dict[str, str]]:
    """ECS spells tag keys and values in lowercase (`key`, `value`)."""
    return ansible_dict_to_boto3_tag_list(dict(sorted(tags.items())), "key", "value")


def tags_of(resource: dict[str, Any] | None) -> dict[str, str]:
    """{key: value} of an ECS resource described with include=["TAGS"] (a task definition's answer too)."""
    return boto3_tag_list_to_ansible_dict((resource or {}).get("tags") or [], "key", "value")


# ---------------------------------------------------------------- clusters


def list_clusters(ecs: Any) -> list[str]:
    return full_result(ecs, "list_clusters").get("clusterArns", [])


def describe_cluster(
    ecs: Any, cluster: str, statuses: tuple[str, ...] = ("ACTIVE",), include: list[str] | None = None
) -> dict[str, Any] | None:
    """The cluster when its status is one of `statuses`, else None; `include` asks for more (e.g. ["SETTINGS"])."""
    kwargs: dict[str, Any] = {"clusters": [cluster]}
    if include:
        kwargs["include"] = include
    found = ecs.describe_clusters(aws_retry=True, **kwargs)["clusters"]
    return found[0] if found and found[0].get("status") in statuses else None


def create_cluster(ecs: Any, name: str, insights: str, tags: dict[str, str]) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"clusterName": name, "settings": [{"name": "containerInsights", "value": insights}]}
    if tags:
        kwargs["tags"] = ecs_tags(tags)
    return ecs.create_cluster(aws_retry=True, **kwargs)["cluster"]


def update_insights(ecs: Any, name: str, insights: str) -> dict[str, Any]:
    return ecs.update_cluster(aws_retry=True, cluster=name, settings=[{"name": "containerInsights", "value": insights}])["cluster"]


def put_cluster_providers(ecs: Any, cluster: str, providers: list[str], strategy: list[dict[str, Any]]) -> dict[str, Any]:
    return ecs.put_cluster_capacity_providers(
        aws_retry=True, cluster=cluster, capacityProviders=providers, defaultCapacityProviderStrategy=strategy
    )["cluster"]


# ---------------------------------------------------------------- services


def list_services(ecs: Any, cluster: str) -> list[str]:
    return full_result(ecs, "list_services", cluster=cluster).get("serviceArns", [])


def describe_services(ecs: Any, cluster: str, services: list[str], include: list[str] | None = None) -> list[dict[str, Any]]:
    """The services found; `include` asks for more (["TAGS"])."""
    extra: dict[str, Any] = {"include": include} if include else {}
    found: list[dict[str, Any]] = []
    for start in range(0, len(services), 10):  # the API takes at most 10 services a call
        found += ecs.describe_services(aws_retry=True, cluster=cluster, services=services[start : start + 10], **extra)["services"]
    return found


def create_service(ecs: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    return ecs.create_service(aws_retry=True, **kwargs)["service"]


def update_service(ecs: Any, cluster: str, service: str, fields: dict[str, Any]) -> dict[str, Any]:
    """Applies `fields` (update_service arguments: desiredCount, taskDefinition, ...) to the service."""
    return ecs.update_service(aws_retry=True, cluster=cluster, service=service, **fields)["service"]


# ---------------------------------------------------------------- tasks


def list_service_tasks(ecs: Any, cluster: str, service: str, desired_status: str = "RUNNING") -> list[str]:
    """The ARNs of a service's tasks whose desired status is `desired_status`."""
    return full_result(ecs, "list_tasks", cluster=cluster, serviceName=service, desiredStatus=desired_status).get("taskArns", [])


def describe_tasks(ecs: Any, cluster: str, tasks: list[str]) -> list[dict[str, Any]]:
    """The tasks found (a task stopped long ago is left out, as AWS lists it under failures)."""
    described: list[dict[str, Any]] = []
    for start in range(0, len(tasks), 100):  # the API takes at most 100 tasks a call
        described += ecs.describe_tasks(aws_retry=True, cluster=cluster, tasks=tasks[start : start + 100])["tasks"]
    return described


# ---------------------------------------------------------------- capacity


def describe_capacity_providers(ecs: Any, names: list[str], include: list[str] | None = None) -> list[dict[str, Any]]:
    """The providers found; `include` asks for more (["TAGS"])."""
    if not names:
        return []
    extra: dict[str, Any] = {"include": include} if include else {}
    return ecs.describe_capacity_providers(aws_retry=True, capacityProviders=names, **extra)["capacityProviders"]


def create_capacity_provider(ecs: Any, name: str, provider: dict[str, Any], tags: dict[str, str]) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"name": name, "autoScalingGroupProvider": provider}
    if tags:
        kwargs["tags"] = ecs_tags(tags)
    return ecs.create_capacity_provider(aws_retry=True, **kwargs)["capacityProvider"]


def update_capacity_provider(ecs: Any, name: str, provider: dict[str, Any]) -> dict[str, Any]:
    fields = {k: v for k, v in provider.items() if k != "autoScalingGroupArn"}
    return ecs.update_capacity_provider(aws_retry=True, name=name, autoScalingGroupProvider=fields)["capacityProvider"]


def container_instances(ecs: Any, cluster: str) -> list[dict[str, Any]]:
    """Every ACTIVE container instance of the cluster, described (remainingResources included)."""
    arns = full_result(ecs, "list_container_instances", cluster=cluster, status="ACTIVE").get("containerInstanceArns", [])
    described: list[dict[str, Any]] = []
    for start in range(0, len(arns), 100):  # the API takes at most 100 instances a call
        described += ecs.describe_container_instances(aws_retry=True, cluster=cluster, containerInstances=arns[start : start + 100])[
            "containerInstances"
        ]
    return described


def container_instance_of(ecs: Any, cluster: str, ec2_instance_id: str) -> dict[str, Any] | None:
    """The container instance (any status but INACTIVE, health included) an EC2 instance registered, or None."""
    arns = full_result(ecs, "list_container_instances", cluster=cluster, filter=f"ec2InstanceId == {ec2_instance_id}").get(
        "containerInstanceArns", []
    )
    if not arns:
        return None
    found = ecs.describe_container_instances(
        aws_retry=True, cluster=cluster, containerInstances=arns[:100], include=["CONTAINER_INSTANCE_HEALTH"]
    )["containerInstances"]
    return next((c for c in found if c.get("ec2InstanceId") == ec2_instance_id), None)


def container_instances_by_ec2_id(ecs: Any, cluster: str, statuses: tuple[str, ...] = ("ACTIVE", "DRAINING")) -> dict[str, dict[str, Any]]:
    """EC2 instance id -> its container instance, for the container instances of the cluster in `statuses`."""
    arns: list[str] = []
    for status in statuses:
        arns += full_result(ecs, "list_container_instances", cluster=cluster, status=status).get("containerInstanceArns", [])
    found: dict[str, dict[str, Any]] = {}
    for start in range(0, len(arns), 100):  # the API takes at most 100 instances a call
        for described in ecs.describe_container_instances(aws_retry=True, cluster=cluster, containerInstances=arns[start : start + 100])[
            "containerInstances"
        ]:
            found[described.get("ec2InstanceId", "")] = described
    return found


def drain_container_instance(ecs: Any, cluster: str, container_instance_arn: str) -> None:
    """DRAINING: ECS places no new task there and moves the service tasks elsewhere."""
    ecs.update_container_instances_state(aws_retry=True, cluster=cluster, containerInstances=[container_instance_arn], status="DRAINING")


def run_task_on(
    ecs: Any, cluster: str, task_definition: str, ec2_instance_id: str, network: dict[str, Any] | None, started_by: str
) -> dict[str, Any]:
    """One task of `task_definition` placed on one EC2 instance (placement constraint memberOf ec2InstanceId)."""
    kwargs: dict[str, Any] = {
        "cluster": cluster,
        "taskDefinition": task_definition,
        "count": 1,
        "launchType": "EC2",
        "startedBy": started_by,
        "placementConstraints": [{"type": "memberOf", "expression": f"ec2InstanceId == {ec2_instance_id}"}],
    }
    if network:
        kwargs["networkConfiguration"] = network
    answer = ecs.run_task(aws_retry=True, **kwargs)
    if not answer.get("tasks"):
        reasons = ", ".join(f"{f.get('arn', '')}: {f.get('reason', '')}" for f in answer.get("failures") or []) or "no reason given"
        raise RuntimeError(f"ECS placed no task of {task_definition} on {ec2_instance_id} ({reasons})")
    return answer["tasks"][0]


def stop_task(ecs: Any, cluster: str, task_arn: str, reason: str) -> None:
    ecs.stop_task(aws_retry=True, cluster=cluster, task=task_arn, reason=reason[:255])


# ---------------------------------------------------------------- task definitions


def describe_task_definition(ecs: Any, task_definition: str) -> dict[str, Any] | None:
    """The task definition (latest ACTIVE revision for a bare family) with its tags, or None when there is none."""
    try:
        return ecs.describe_task_definition(aws_retry=True, taskDefinition=task_definition, include=["TAGS"])
    except is_boto3_error_code("ClientException") as e:
        # ECS answers a family with no ACTIVE revision with ClientException "Unable to describe task definition."
        if "unable to describe task definition" not in e.response.get("Error", {}).get("Message", "").lower():
            raise
        return None


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
    for cluster in clusters if clusters is not None else list_clusters(ecs):
        services = list_services(ecs, cluster)
        if not services:
            continue
        for service in describe_services(ecs, cluster, services):
            if service.get("status") == "INACTIVE":
                continue
            arns = {service.get("taskDefinition")} | {d.get("taskDefinition") for d in service.get("deployments") or []}
            for arn in arns - {None}:
                used.setdefault(arn, []).append(f"{cluster.rsplit('/', 1)[-1]}/{service.get('serviceName')}")
    return used


# ---------------------------------------------------------------- tags (clusters, services, capacity providers, task definitions)


def tag_resource(ecs: Any, arn: str, tags: dict[str, str]) -> None:
    """Adds or overwrites these tags; other keys stay as they are."""
    ecs.tag_resource(aws_retry=True, resourceArn=arn, tags=ecs_tags(tags))


def untag_resource(ecs: Any, arn: str, keys: list[str]) -> None:
    ecs.untag_resource(aws_retry=True, resourceArn=arn, tagKeys=keys)


def update_tags(ecs: Any, arn: str, to_set: dict[str, str], to_remove: list[str]) -> None:
    """A tag plan carried out: the keys to remove first, then the ones to add or change; an empty side makes no call."""
    if to_remove:
        untag_resource(ecs, arn, to_remove)
    if to_set:
        tag_resource(ecs, arn, to_set)
