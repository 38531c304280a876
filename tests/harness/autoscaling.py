"""Application Auto Scaling of the blue/green application in a moto server: the bluegreen_autoscaling module's
arguments, and what Application Auto Scaling shows for each colour (what tests/integration/test_autoscaling.py and
bench/autoscale_cutover.py read).

moto implements scalable targets, policies, SuspendedState and the alarms of target-tracking policies; it does not
run the policies (nothing scales by itself) and, unlike AWS, keeps a deregistered target's policies, so a colour's
policies are read only while it has a target.
"""

from __future__ import annotations

from typing import Any

import yaml

from .ansible import REPO_ROOT
from .bluegreen import APP, CLUSTER, BlueGreenApp

AUTOSCALING_PLAYBOOK = REPO_ROOT / "tests" / "integration" / "playbooks" / "autoscaling_policies.yml"
SIDECAR_VARS = REPO_ROOT / "playbooks" / "vars" / "metrics_sidecar.yml"
DIMENSION = "ecs:service:DesiredCount"


def published_metrics() -> list[str]:
    """The metrics the sidecar publishes, as playbooks/vars/metrics_sidecar.yml lists them."""
    sidecar = yaml.safe_load(SIDECAR_VARS.read_text())
    return sidecar["deploy_metrics_sidecar_model_metrics"] + sidecar["deploy_metrics_sidecar_gpu_metrics"]


def scaling_args(app: BlueGreenApp, **overrides: Any) -> dict[str, Any]:
    args: dict[str, Any] = {
        "cluster": CLUSTER,
        "name": APP,
        "target_groups": dict(app.target_groups),
        "listener_arn": app.listener_arn,
        "min_capacity": 2,
        "max_capacity": 8,
        "target_tracking": {"metric": "nv_inference_request_success", "per": "task", "target": 600},
        "step_scaling": {"enabled": True},
        "metrics": {"dimensions": {"ClusterName": CLUSTER, "App": APP}, "published": published_metrics()},
    }
    args.update(overrides)
    return args


def targets(app: BlueGreenApp) -> dict[str, dict[str, Any]]:
    """Each colour's scalable target, by colour (absent when it has none)."""
    ids = {f"service/{CLUSTER}/{APP}-{c}": c for c in ("blue", "green")}
    found = app.moto.client("application-autoscaling").describe_scalable_targets(
        ServiceNamespace="ecs", ResourceIds=list(ids), ScalableDimension=DIMENSION
    )["ScalableTargets"]
    return {ids[t["ResourceId"]]: t for t in found}


def policies(app: BlueGreenApp, color: str) -> list[str]:
    """Names of the colour's policies while it has a scalable target ([] without one)."""
    if color not in targets(app):
        return []
    found = app.moto.client("application-autoscaling").describe_scaling_policies(
        ServiceNamespace="ecs", ResourceId=f"service/{CLUSTER}/{APP}-{color}", ScalableDimension=DIMENSION
    )["ScalingPolicies"]
    return sorted(p["PolicyName"] for p in found if p["ResourceId"] == f"service/{CLUSTER}/{APP}-{color}")


def scale_in_suspended(app: BlueGreenApp, color: str) -> bool:
    return bool((targets(app).get(color, {}).get("SuspendedState") or {}).get("DynamicScalingInSuspended"))


def scale_live(app: BlueGreenApp, color: str, desired: int) -> None:
    """Stand-in for Application Auto Scaling scaling a colour out: its desired count, and ECS registering the tasks."""
    app.ecs().update_service(cluster=CLUSTER, service=f"{APP}-{color}", desiredCount=desired)
    app.register_targets(color, desired)
