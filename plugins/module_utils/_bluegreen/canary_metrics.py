# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""Where the canary verdict's figures come from: CloudWatch, per colour, over one window.

- The load balancer publishes each target group's `RequestCount`, `HTTPCode_Target_5XX_Count` and `TargetResponseTime`
  (namespace AWS/ApplicationELB, dimensions LoadBalancer and TargetGroup): a colour's target groups (HTTP, and gRPC
  when it has one) are its figures, summed (p99: the highest).
- The metrics sidecar publishes Triton's counters with a `Color` dimension read from the task metadata endpoint
  (playbooks/vars/metrics_sidecar.yml): `nv_inference_request_success`, `_failure`, `nv_inference_queue_duration_us`
  and `nv_inference_compute_infer_duration_us`, summed over the window (they cover HTTP and gRPC alike).

Queries are built here (pure); the one call is `_aws/cloudwatch.get_metric_data`. CloudWatch rounds a window's start
down to its period, and the load balancer's figures arrive a minute or so late: a window too fresh shows too few
requests, which the verdict reads as "wait", not as a pass.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import cloudwatch as cw
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import BotoCoreError, ClientError, error_code
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.canary import ColorFigures

ALB_NAMESPACE = "AWS/ApplicationELB"
ALB_SUMS = {"requests": "RequestCount", "target_5xx": "HTTPCode_Target_5XX_Count"}
TRITON_SUMS = {
    "success": "nv_inference_request_success",
    "failure": "nv_inference_request_failure",
    "queue_us": "nv_inference_queue_duration_us",
    "compute_us": "nv_inference_compute_infer_duration_us",
}
COLOR_DIMENSION = "Color"


def target_group_dimension(arn: str) -> str:
    """`targetgroup/<name>/<id>`, the TargetGroup dimension of an ALB target group's metrics."""
    return arn.split(":")[-1]


def load_balancer_dimension(arn: str) -> str:
    """`app/<name>/<id>`, the LoadBalancer dimension."""
    return arn.split(":loadbalancer/")[-1]


def _id(*parts: str) -> str:
    return "_".join(re.sub(r"[^a-z0-9]", "", p.lower()) for p in parts)


def _stat(query_id: str, namespace: str, name: str, dimensions: dict[str, str], stat: str, period: int) -> dict[str, Any]:
    metric = {"Namespace": namespace, "MetricName": name, "Dimensions": [{"Name": k, "Value": v} for k, v in sorted(dimensions.items())]}
    return {"Id": query_id, "MetricStat": {"Metric": metric, "Period": period, "Stat": stat}, "ReturnData": True}


def queries(color: str, target_groups: list[dict[str, str]], triton: dict[str, Any] | None, period: int) -> list[dict[str, Any]]:
    """The GetMetricData queries of one colour. `target_groups`: [{arn, load_balancer_arn}]; `triton`: {namespace,
    dimensions} of the sidecar's metrics, or None when they carry no colour."""
    out = []
    for i, group in enumerate(target_groups):
        dims = {"LoadBalancer": load_balancer_dimension(group["load_balancer_arn"]), "TargetGroup": target_group_dimension(group["arn"])}
        for key, name in ALB_SUMS.items():
            out.append(_stat(_id(color, f"tg{i}", key), ALB_NAMESPACE, name, dims, "Sum", period))
        out.append(_stat(_id(color, f"tg{i}", "p99"), ALB_NAMESPACE, "TargetResponseTime", dims, "p99", period))
    if triton:
        dims = {**triton["dimensions"], COLOR_DIMENSION: color}
        for key, name in TRITON_SUMS.items():
            out.append(_stat(_id(color, "triton", key), triton["namespace"], name, dims, "Sum", period))
    return out


def figures(color: str, values: dict[str, list[float]], groups: int, window: dict[str, str]) -> ColorFigures:
    """One colour's figures from GetMetricData's values (query id -> values per period)."""

    def total(key: str) -> float | None:
        found = values.get(_id(color, *key.split(":")))
        return sum(found) if found else None

    requests = sum(total(f"tg{i}:requests") or 0.0 for i in range(groups))
    errors = sum(total(f"tg{i}:target_5xx") or 0.0 for i in range(groups))
    p99s = [max(values[k]) for k in (_id(color, f"tg{i}", "p99") for i in range(groups)) if values.get(k)]
    success, failure = total("triton:success"), total("triton:failure")
    inferences = None if success is None and failure is None else (success or 0.0) + (failure or 0.0)
    queue, compute = total("triton:queue_us"), total("triton:compute_us")
    return ColorFigures(
        requests=requests,
        target_5xx=errors,
        p99_s=max(p99s) if p99s else None,
        inferences=inferences,
        inference_failures=None if inferences is None else failure or 0.0,
        queue_compute_us=None if queue is None and compute is None else (queue or 0.0) + (compute or 0.0),
        window=window,
    )


def read(
    cloudwatch: Any,
    colors: dict[str, tuple[list[dict[str, str]], dict[str, Any] | None]],
    start: datetime,
    end: datetime,
    period: int,
) -> dict[str, ColorFigures]:
    """Each colour's figures over [start, end), in one call. `colors`: colour -> (its target groups, the sidecar's
    namespace and dimensions or None)."""
    if end - start < timedelta(seconds=1):
        end = start + timedelta(seconds=1)
    wanted = [q for color, (groups, triton) in colors.items() for q in queries(color, groups, triton, period)]
    sums = [q for q in wanted if q["MetricStat"]["Stat"] == "Sum"]
    values = cw.get_metric_data(cloudwatch, sums, start, end)
    window = {"start": start.isoformat(timespec="seconds"), "end": end.isoformat(timespec="seconds")}
    try:
        # Percentiles in a call of their own: a CloudWatch stand-in without them (moto) leaves p99 without data.
        values.update(cw.get_metric_data(cloudwatch, [q for q in wanted if q not in sums], start, end))
    except (BotoCoreError, ClientError) as e:
        window["p99"] = f"not read ({error_code(e) or type(e).__name__}): the latency check uses Triton's figures alone"
    return {color: figures(color, values, len(groups), window) for color, (groups, _triton) in colors.items()}
