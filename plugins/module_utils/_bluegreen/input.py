# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""Every check of the bluegreen module's input that Ansible's argument spec cannot make, each rule written once: the
traffic steps, a range (minimum and maximum) for every interval, timeout, count and weight, the rules between
options (mode and old_color, the two colours' target groups), and the shape of the free-form options (URLs, smoke
inference, metrics URLs, canary, hooks, gRPC route). A value that would only fail after traffic has moved - a string
where a list of URLs is expected, a zero poll interval - is refused here, before the first write.
"""

from __future__ import annotations

import re
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import canary, grpc_route, hooks
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.colors import COLORS, target_group_arn_errors
from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen.lock import LOCK_TTL_S, OWNER

DAY_S = 86400
# option -> (minimum, maximum); dotted names are suboptions. The maxima are what a cutover sensibly waits.
RANGES: dict[str, tuple[int, int]] = {
    "desired_count": (1, 5000),  # ECS: at most 5000 tasks per service
    "batch_size": (1, 5000),  # tasks per batch of a capacity-paced cutover (more than the full count: one batch)
    "bake_time_s": (0, DAY_S),
    "watch_interval_s": (1, 3600),
    "termination_wait_s": (0, DAY_S),
    "lock_ttl_s": LOCK_TTL_S,
    "gates.timeout_s": (0, 3600),
    "gates.interval_s": (1, 300),
    "gates.request_timeout_s": (1, 300),
    "drain.timeout_s": (0, 3600),
    "drain.quiet_period_s": (0, 3600),
    "drain.metrics_port": (1, 65535),
    "timeouts.standby_up_s": (1, DAY_S),
    "timeouts.poll_interval_s": (1, 300),
}
# What else a user can do about an option out of range.
RANGE_HINTS = {"batch_size": "; or leave batch_size out for what one spare instance holds"}
MAX_TRAFFIC_STEPS = 20
MAX_ALARMS = 100  # CloudWatch DescribeAlarms takes at most 100 names
TENSOR_TYPES = frozenset(
    {"BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FP16", "FP32", "FP64", "BYTES", "BF16"}
)
_URL = re.compile(r"^https?://[^\s/]+(/\S*)?$")


def _lookup(params: dict[str, Any], dotted: str) -> Any:
    value: Any = params
    for part in dotted.split("."):
        value = (value or {}).get(part) if isinstance(value, dict) else None
    return value


def step_errors(steps: list[int]) -> list[str]:
    """traffic_steps: the new colour's weight at each step, increasing, ending at 100."""
    if not steps:
        return ["traffic_steps is empty: give the new colour's weight at each step, ending at 100, e.g. [10, 50, 100]"]
    errors = []
    if len(steps) > MAX_TRAFFIC_STEPS:
        errors.append(f"traffic_steps has {len(steps)} steps: at most {MAX_TRAFFIC_STEPS}, e.g. [10, 50, 100]")
    if any(not 1 <= s <= 100 for s in steps):
        errors.append(f"traffic_steps {steps}: every step is a weight in percent between 1 and 100")
    if any(steps[i + 1] <= steps[i] for i in range(len(steps) - 1)):
        errors.append(f"traffic_steps {steps}: steps must increase strictly, e.g. [10, 50, 100]")
    if steps[-1] != 100:
        errors.append(f"traffic_steps {steps}: the last step must be 100 (the new colour takes all traffic), e.g. {[*steps, 100]}")
    return errors


def combination_errors(params: dict[str, Any]) -> list[str]:
    """Options that are each valid but do not go together, or a colour key that is not one."""
    errors = []
    if params.get("state", "present") == "present" and params.get("desired_count") is None:
        errors.append("desired_count is missing: give the new colour's task count (state present)")
    if params.get("mode") == "capacity_paced" and params.get("old_color") == "keep":
        errors.append(
            "old_color is keep with mode capacity_paced: the old colour shrinks batch by batch, so it cannot be kept at "
            "full size; set old_color scale_down, or mode blue_green to keep it for an instant rollback"
        )
    errors += target_group_arn_errors(params.get("target_groups") or {})
    for option, keyed in (
        ("test_route_urls", params.get("test_route_urls")),
        ("drain.metrics_urls", (params.get("drain") or {}).get("metrics_urls")),
    ):
        errors += [f"{option} has key {color!r}: the keys are blue and green" for color in keyed or {} if color not in COLORS]
    smoke = (params.get("gates") or {}).get("smoke")
    if isinstance(smoke, dict) and not smoke.get("model"):
        errors.append("gates.smoke needs model: the model to send the smoke inference to")
    return errors


def range_errors(params: dict[str, Any]) -> list[str]:
    errors = []
    for name, (low, high) in RANGES.items():
        if name == "desired_count" and params.get("state", "present") != "present":
            continue
        value = _lookup(params, name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            errors.append(f"{name} is {value!r}: give a whole number between {low} and {high}")
        elif not low <= value <= high:
            errors.append(f"{name} is {value}: give a value between {low} and {high}{RANGE_HINTS.get(name, '')}")
    alarms = params.get("alarm_names") or []
    if len(alarms) > MAX_ALARMS:
        errors.append(f"alarm_names has {len(alarms)} alarms: at most {MAX_ALARMS}")
    for i, alarm in enumerate(alarms):
        if not isinstance(alarm, str) or not 1 <= len(alarm) <= 255:
            errors.append(f"alarm_names[{i}] is {alarm!r}: a CloudWatch alarm name, 1-255 characters")
    return errors


def url_errors(option: str, value: Any) -> list[str]:
    if not isinstance(value, str) or not _URL.match(value):
        return [f"{option} is {value!r}: give an http:// or https:// URL, e.g. http://triton-test.internal:8080"]
    return []


def route_errors(params: dict[str, Any]) -> list[str]:
    errors = []
    if params.get("test_route_url") is not None:
        errors += url_errors("test_route_url", params["test_route_url"])
    for color, url in (params.get("test_route_urls") or {}).items():
        if color in COLORS:
            errors += url_errors(f"test_route_urls.{color}", url)
    metrics = (params.get("drain") or {}).get("metrics_urls") or {}
    for color, urls in metrics.items():
        if color not in COLORS:
            continue
        if not isinstance(urls, list):
            errors.append(
                f"drain.metrics_urls.{color} is {urls!r}: give a list of Triton metrics URLs, e.g. [http://10.0.1.10:8002/metrics]"
            )
            continue
        for i, url in enumerate(urls):
            errors += url_errors(f"drain.metrics_urls.{color}[{i}]", url)
    return errors


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def smoke_errors(smoke: Any) -> list[str]:
    """The smoke inference: model, KServe v2 input tensors, expected outputs, tolerance."""
    if smoke is None:
        return []
    errors = []
    if smoke.get("model") and not isinstance(smoke["model"], str):
        errors.append(f"gates.smoke.model is {smoke.get('model')!r}: the name of the model to send the smoke inference to")
    version = smoke.get("version")
    if version is not None and not (
        isinstance(version, str) or (isinstance(version, int) and not isinstance(version, bool) and version > 0)
    ):
        errors.append(f"gates.smoke.version is {version!r}: a model version number, e.g. 1")
    inputs = smoke.get("inputs")
    if not isinstance(inputs, list) or not inputs:
        errors.append(
            f"gates.smoke.inputs is {inputs!r}: give a list of input tensors, e.g. [{{name: INPUT0, shape: [1], datatype: FP32, data: [1.0]}}]"
        )
    else:
        for i, tensor in enumerate(inputs):
            where = f"gates.smoke.inputs[{i}]"
            if not isinstance(tensor, dict):
                errors.append(f"{where} is {tensor!r}: give {{name, shape, datatype, data}}")
                continue
            if not isinstance(tensor.get("name"), str) or not tensor.get("name"):
                errors.append(f"{where}.name is {tensor.get('name')!r}: the input's name in the model config")
            shape = tensor.get("shape")
            if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
                errors.append(f"{where}.shape is {shape!r}: a list of dimensions, e.g. [1, 4]")
            if tensor.get("datatype") not in TENSOR_TYPES:
                errors.append(f"{where}.datatype is {tensor.get('datatype')!r}: one of {', '.join(sorted(TENSOR_TYPES))}")
            if not isinstance(tensor.get("data"), list):
                errors.append(f"{where}.data is {tensor.get('data')!r}: a list of values")
    outputs = smoke.get("expected_outputs")
    if outputs is not None:
        if not isinstance(outputs, list):
            errors.append(f"gates.smoke.expected_outputs is {outputs!r}: give a list of {{name, data}}")
        else:
            for i, output in enumerate(outputs):
                where = f"gates.smoke.expected_outputs[{i}]"
                if not isinstance(output, dict) or not isinstance(output.get("name"), str) or not output.get("name"):
                    errors.append(f"{where} is {output!r}: give {{name, data}}")
                elif not isinstance(output.get("data"), list) or not all(_number(v) for v in output["data"]):
                    errors.append(f"{where}.data is {output.get('data')!r}: a list of numbers")
    tolerance = smoke.get("tolerance")
    if tolerance is not None and (not _number(tolerance) or not 0 <= tolerance <= 1e9):
        errors.append(f"gates.smoke.tolerance is {tolerance!r}: a number, 0 or more")
    return errors


def input_errors(params: dict[str, Any]) -> list[str]:
    """Every problem the argument spec cannot catch but the ranges, each naming the option, the value and the fix."""
    errors = route_errors(params)
    smoke = (params.get("gates") or {}).get("smoke")
    if smoke is not None and not isinstance(smoke, dict):
        errors.append(f"gates.smoke is {smoke!r}: give {{model, inputs, expected_outputs}}")
    else:
        errors += smoke_errors(smoke)
    for model, version in ((params.get("gates") or {}).get("expected_versions") or {}).items():
        if not str(version).isdigit() or isinstance(version, bool) or int(version) < 1:
            errors.append(f"gates.expected_versions.{model} is {version!r}: give the release's version number (1, 2, ...)")
    errors += canary.option_errors(params.get("canary"))
    errors += hooks.option_errors(params.get("hooks"))
    errors += grpc_route.option_errors(params.get("grpc"), params.get("target_groups") or {})
    owner = params.get("lock_owner")
    if owner is not None and not OWNER.match(owner):
        errors.append(f"lock_owner is {owner!r}: lower-case letters, digits and hyphens, at most 64, e.g. deploy-20261130-1342")
    return errors


def input_warnings(params: dict[str, Any]) -> list[str]:
    """Input that is valid but has no effect, said once."""
    if params.get("batch_size") is not None and params.get("mode", "blue_green") == "blue_green":
        return [
            f"batch_size {params['batch_size']} is ignored with mode blue_green (the standby starts at its full count): "
            "set mode capacity_paced to change colour batch by batch, or leave batch_size out"
        ]
    return []


def all_input_errors(params: dict[str, Any]) -> list[str]:
    """Every problem with the module's input, each once, naming the option, the value and the fix."""
    return step_errors(params.get("traffic_steps") or []) + combination_errors(params) + range_errors(params) + input_errors(params)
