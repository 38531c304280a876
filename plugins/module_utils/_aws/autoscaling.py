# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The one place this collection calls the EC2 Auto Scaling API: one thin function per call.

Every function takes a client made by `AnsibleAWSModule.client(..., retry_decorator=AWSRetry.jittered_backoff())`
and calls it with `aws_retry=True`; listings go through botocore's paginators (`pages.full_result`). Botocore
errors propagate for the module to report through `fail_json_aws`.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.pages import full_result


def describe_group(autoscaling: Any, name: str) -> dict[str, Any] | None:
    """The Auto Scaling group with its instances (LaunchTemplate, LifecycleState, HealthStatus each), or None."""
    found = autoscaling.describe_auto_scaling_groups(aws_retry=True, AutoScalingGroupNames=[name])["AutoScalingGroups"]
    return found[0] if found else None


def describe_instance_refreshes(autoscaling: Any, group: str) -> list[dict[str, Any]]:
    """The group's instance refreshes, newest first (one page: the newest is all a rollout reads)."""
    return autoscaling.describe_instance_refreshes(aws_retry=True, AutoScalingGroupName=group).get("InstanceRefreshes", [])


def start_instance_refresh(autoscaling: Any, group: str, desired: dict[str, Any], preferences: dict[str, Any]) -> str:
    """Starts a rolling refresh towards `desired` (DesiredConfiguration); returns its id."""
    return autoscaling.start_instance_refresh(
        aws_retry=True, AutoScalingGroupName=group, Strategy="Rolling", DesiredConfiguration=desired, Preferences=preferences
    )["InstanceRefreshId"]


def rollback_instance_refresh(autoscaling: Any, group: str) -> str:
    """Stops the refresh in progress and replaces the instances it replaced with the group's previous configuration."""
    return autoscaling.rollback_instance_refresh(aws_retry=True, AutoScalingGroupName=group)["InstanceRefreshId"]


def cancel_instance_refresh(autoscaling: Any, group: str) -> str:
    return autoscaling.cancel_instance_refresh(aws_retry=True, AutoScalingGroupName=group)["InstanceRefreshId"]


def describe_lifecycle_hooks(autoscaling: Any, group: str) -> list[dict[str, Any]]:
    return autoscaling.describe_lifecycle_hooks(aws_retry=True, AutoScalingGroupName=group).get("LifecycleHooks", [])


def describe_scaling_activities(autoscaling: Any, group: str) -> list[dict[str, Any]]:
    return full_result(autoscaling, "describe_scaling_activities", AutoScalingGroupName=group).get("Activities", [])


def update_group(autoscaling: Any, name: str, settings: dict[str, Any]) -> None:
    """Writes the given UpdateAutoScalingGroup settings (e.g. CapacityRebalance) and nothing else."""
    autoscaling.update_auto_scaling_group(aws_retry=True, AutoScalingGroupName=name, **settings)
