# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The one place this collection calls the Application Auto Scaling API, for the desired count of ECS services:
one thin function per call.

Every function takes a client made by `AnsibleAWSModule.client(..., retry_decorator=AWSRetry.jittered_backoff())`
and calls it with `aws_retry=True`; listings go through botocore's paginators (`pages.full_result`). Botocore
errors propagate for the module to report through `fail_json_aws`.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.pages import full_result

NAMESPACE = "ecs"
DIMENSION = "ecs:service:DesiredCount"
# Policy type -> the key that holds its configuration, in put_scaling_policy and in describe_scaling_policies.
CONFIG_KEYS = {"TargetTrackingScaling": "TargetTrackingScalingPolicyConfiguration", "StepScaling": "StepScalingPolicyConfiguration"}


def resource_id(cluster: str, service: str) -> str:
    """The Application Auto Scaling resource id of an ECS service (the cluster by name, also when given an ARN)."""
    return f"service/{cluster.rsplit('/', 1)[-1]}/{service}"


# ---------------------------------------------------------------- scalable targets


def describe_targets(aas: Any, resource_ids: list[str]) -> dict[str, dict[str, Any]]:
    """The scalable targets of these services that exist, by resource id."""
    listed = full_result(
        aas, "describe_scalable_targets", ServiceNamespace=NAMESPACE, ResourceIds=resource_ids, ScalableDimension=DIMENSION
    )
    return {t["ResourceId"]: t for t in listed.get("ScalableTargets") or []}


def register_target(aas: Any, rid: str, min_capacity: int, max_capacity: int, suspended: dict[str, bool] | None = None) -> None:
    kwargs: dict[str, Any] = {"MinCapacity": min_capacity, "MaxCapacity": max_capacity}
    if suspended is not None:
        kwargs["SuspendedState"] = suspended
    aas.register_scalable_target(aws_retry=True, ServiceNamespace=NAMESPACE, ResourceId=rid, ScalableDimension=DIMENSION, **kwargs)


def set_suspended(aas: Any, rid: str, suspended: dict[str, bool]) -> None:
    """Changes only the suspended state of an existing target (min and max are left as they are)."""
    aas.register_scalable_target(
        aws_retry=True, ServiceNamespace=NAMESPACE, ResourceId=rid, ScalableDimension=DIMENSION, SuspendedState=suspended
    )


def deregister_target(aas: Any, rid: str) -> None:
    aas.deregister_scalable_target(aws_retry=True, ServiceNamespace=NAMESPACE, ResourceId=rid, ScalableDimension=DIMENSION)


# ---------------------------------------------------------------- scaling policies


def describe_policies(aas: Any, rid: str) -> list[dict[str, Any]]:
    listed = full_result(aas, "describe_scaling_policies", ServiceNamespace=NAMESPACE, ResourceId=rid, ScalableDimension=DIMENSION)
    return listed.get("ScalingPolicies") or []


def put_policy(aas: Any, rid: str, policy: dict[str, Any]) -> str:
    """Creates or replaces a policy ({PolicyName, PolicyType, <type>Configuration}); returns its ARN."""
    fields = {k: v for k, v in policy.items() if k in ("PolicyName", "PolicyType", *CONFIG_KEYS.values())}
    answer = aas.put_scaling_policy(aws_retry=True, ServiceNamespace=NAMESPACE, ResourceId=rid, ScalableDimension=DIMENSION, **fields)
    return answer["PolicyARN"]


def delete_policy(aas: Any, rid: str, name: str) -> None:
    aas.delete_scaling_policy(aws_retry=True, ServiceNamespace=NAMESPACE, ResourceId=rid, ScalableDimension=DIMENSION, PolicyName=name)
