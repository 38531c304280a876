# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""After a failed boot hydration: the instance marked Unhealthy in its Auto Scaling group, so it is replaced.

A GPU instance whose models never arrived keeps ECS stopped; left alone it stays EC2-healthy and billed while managed
scaling launches more. As roles/gpu_health's count check does for a short GPU count, the agent marks it Unhealthy
(SetInstanceHealth, not respecting the grace period) and says so in its status object. Runs on the instance with the
system python3 and boto3, without Ansible, like the agent.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import BotoCoreError, ClientError


def autoscaling_client(config: dict[str, Any]) -> Any:
    """The instance role's Auto Scaling client; botocore retries throttling itself (standard mode, as gpu-health)."""
    import boto3
    from botocore.config import Config

    retries = Config(retries={"max_attempts": 5, "mode": "standard"}, connect_timeout=5, read_timeout=10)
    return boto3.client("autoscaling", region_name=config["region"], endpoint_url=config["autoscaling_endpoint_url"], config=retries)


def _refusal(err: Exception) -> str:
    code = err.response.get("Error", {}).get("Code") if isinstance(err, ClientError) else None
    return f"{code}: {err}" if code else str(err)


def mark_unhealthy(autoscaling: Any, instance_id: str) -> str:
    """Marks the instance Unhealthy in its Auto Scaling group; returns what happened, one sentence for last_error.

    Never raises: an instance outside any group, or a refused call, is said so, and ECS stays stopped either way.
    """
    try:
        found = autoscaling.describe_auto_scaling_instances(InstanceIds=[instance_id]).get("AutoScalingInstances", [])
    except (BotoCoreError, ClientError) as err:
        return (
            f"could not find the Auto Scaling group of {instance_id} ({_refusal(err)}): not marked Unhealthy, ECS stays "
            "stopped; the instance role needs autoscaling:DescribeAutoScalingInstances (docs/iam.md)"
        )
    if not found:
        return f"{instance_id} is in no Auto Scaling group: not marked Unhealthy, ECS stays stopped; terminate it or fix its release"
    group = found[0].get("AutoScalingGroupName", "?")
    try:
        autoscaling.set_instance_health(InstanceId=instance_id, HealthStatus="Unhealthy", ShouldRespectGracePeriod=False)
    except (BotoCoreError, ClientError) as err:
        return (
            f"could not mark {instance_id} Unhealthy in Auto Scaling group {group} ({_refusal(err)}): ECS stays stopped; "
            "the instance role needs autoscaling:SetInstanceHealth on the group (docs/iam.md)"
        )
    return f"marked {instance_id} Unhealthy in Auto Scaling group {group}, which replaces it (docs/runbook.md, stuck hydration)"


def after_failed_boot(config: dict[str, Any], instance_id: str, autoscaling: Any = None) -> str:
    """What the agent does once its last boot attempt failed, per mark_unhealthy_on_failed_boot; one sentence back."""
    if not config["mark_unhealthy_on_failed_boot"]:
        return "mark_unhealthy_on_failed_boot is false: the instance stays in service with ECS stopped until someone acts"
    try:
        client = autoscaling if autoscaling is not None else autoscaling_client(config)
    except (BotoCoreError, ValueError) as err:  # no region, a malformed endpoint
        return f"could not reach Auto Scaling ({err}): not marked Unhealthy, ECS stays stopped"
    return mark_unhealthy(client, instance_id)
