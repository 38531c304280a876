"""Pure decisions of the gpu_health script (roles/gpu_health/files/gpu_health.py), imported as the instance runs it.

No stand-in needed: Xid lines, nvidia-smi CSV and the instance-type lookup are given as values; EC2 is a function.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest
import yaml

ROLE = Path(__file__).resolve().parents[2] / "roles" / "gpu_health"
sys.path.insert(0, str(ROLE / "files"))
gpu_health = importlib.import_module("gpu_health")

DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
SETTINGS = {
    "immediate_xids": DEFAULTS["gpu_health_immediate_xids"],
    "counted_xids": DEFAULTS["gpu_health_counted_xids"],
    "count_threshold": DEFAULTS["gpu_health_count_threshold"],
    "window_s": DEFAULTS["gpu_health_window_s"],
    "thermal_counts": DEFAULTS["gpu_health_thermal_counts"],
}
POLICY = gpu_health.policy_from_settings(SETTINGS)


def xid(code: int, at: float = 0.0):
    return gpu_health.Event("xid", at, gpu="PCI:0000:00:1e", code=code)


def test_parse_xid_reads_the_drivers_line():
    line = "[ 1234.5] NVRM: Xid (PCI:0000:10:1c): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    assert gpu_health.parse_xid(line, 5.0) == gpu_health.Event("xid", 5.0, gpu="PCI:0000:10:1c", code=79)
    assert gpu_health.parse_xid("NVRM: loading NVIDIA UNIX x86_64 Kernel Module  580.95.05", 5.0) is None


@pytest.mark.parametrize("code", [48, 79, 95])
def test_double_bit_ecc_fallen_off_the_bus_and_uncontained_ecc_act_at_once(code):
    assert gpu_health.assess([xid(code)], now=1.0, policy=POLICY)


@pytest.mark.parametrize("kind", ["dbe", "gpu_lost"])
def test_a_rising_dbe_count_or_a_lost_gpu_act_at_once(kind):
    assert gpu_health.assess([gpu_health.Event(kind, 0.0, gpu="00000000:00:1E.0")], now=1.0, policy=POLICY)


@pytest.mark.parametrize("code", [13, 31, 43, 45])
def test_application_errors_never_act_however_many(code):
    assert gpu_health.assess([xid(code, at=i) for i in range(50)], now=60.0, policy=POLICY) is None


@pytest.mark.parametrize("code", [63, 64, 74, 92, 94, 119, 120])
def test_one_counted_error_is_not_enough_but_the_threshold_within_the_window_is(code):
    assert gpu_health.assess([xid(code)], now=1.0, policy=POLICY) is None
    events = [xid(code, at=t) for t in (0.0, 100.0, 200.0)]
    reason = gpu_health.assess(events, now=200.0, policy=POLICY)
    assert reason and reason.startswith("3 GPU errors within 600 s")


def test_counted_errors_outside_the_window_are_forgotten():
    events = [xid(74, at=0.0), xid(74, at=300.0), xid(74, at=700.0)]
    assert gpu_health.assess(events, now=700.0, policy=POLICY) is None  # the first is 700 s old


def test_thermal_slowdown_counts_like_a_counted_xid():
    events = [gpu_health.Event("thermal", t, gpu="00000000:00:1E.0") for t in (0.0, 5.0)]
    assert gpu_health.assess(events, now=5.0, policy=POLICY) is None
    assert gpu_health.assess([*events, xid(94, at=6.0)], now=6.0, policy=POLICY)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"count_threshold": 1}, "at least 2"),
        ({"window_s": 0}, "must be positive"),
        ({"immediate_xids": [79, 94]}, "both immediate_xids and counted_xids"),
    ],
)
def test_a_policy_that_would_drain_on_noise_is_refused(change, message):
    with pytest.raises(ValueError, match=message):
        gpu_health.policy_from_settings({**SETTINGS, **change})


def test_parse_smi_query_reads_values_and_not_available():
    text = "0, 00000000:00:1E.0, 0, Not Active\n1, 00000000:00:1F.0, [N/A], Active\n\nNo devices were found\n"
    assert gpu_health.parse_smi_query(text) == [
        gpu_health.GpuReading("0", "00000000:00:1E.0", 0, False),
        gpu_health.GpuReading("1", "00000000:00:1F.0", None, True),
    ]


def test_smi_events_lost_gpu_rising_dbe_and_thermal():
    before = gpu_health.parse_smi_query("0, A, 0, Not Active\n1, B, 2, Not Active\n2, C, [N/A], Not Active\n")
    after = gpu_health.parse_smi_query("0, A, 1, Not Active\n2, C, [N/A], Active\n")
    events = gpu_health.smi_events(before, after, 9.0)
    assert sorted((e.kind, e.gpu) for e in events) == [("dbe", "A"), ("gpu_lost", "B"), ("thermal", "C")]
    assert gpu_health.smi_events(after, after, 10.0) == [gpu_health.Event("thermal", 10.0, gpu="C")]


def test_expected_gpus_reads_the_table_first_and_asks_ec2_for_the_rest():
    asked = []

    def describe(instance_type):
        asked.append(instance_type)
        return 2, "tesla"

    table = {"g5.12xlarge": {"gpus": 4}, "g6f.large": {"gpus": 0, "flavour": "grid"}, "g5.xlarge": 1}
    assert gpu_health.expected_gpus("g5.12xlarge", table, describe) == (4, "tesla", "the AMI's instance-type table")
    assert gpu_health.expected_gpus("g6f.large", table, describe) == (0, "grid", "the AMI's instance-type table")
    assert gpu_health.expected_gpus("g5.xlarge", table, describe) == (1, "tesla", "the AMI's instance-type table")  # an older AMI's count
    assert asked == []
    assert gpu_health.expected_gpus("g6.4xlarge", table, describe) == (2, "tesla", "EC2 DescribeInstanceTypes")
    assert asked == ["g6.4xlarge"]


@pytest.mark.parametrize(
    ("running", "now", "expected"),
    [(3, 100.0, False), (0, 100.0, True), (None, 100.0, False), (3, 900.0, True), (None, 901.0, True)],
)
def test_the_instance_is_marked_unhealthy_once_its_tasks_are_gone_or_after_the_bound(running, now, expected):
    assert gpu_health.should_mark_unhealthy(drained_at=0.0, now=now, running_tasks=running, replace_after_s=900) is expected


class RecordingAws:
    """The Aws client functions, recorded (no AWS): the container instance has `running` tasks."""

    def __init__(self, running: int | None) -> None:
        self.running = running
        self.calls: list[str] = []

    def container_instance(self):
        return ("cluster", "arn:aws:ecs:us-east-1:111111111111:container-instance/cluster/abc")

    def drain(self, cluster, arn):
        self.calls.append("drain")

    def running_tasks(self, cluster, arn):
        return self.running

    def mark_unhealthy(self):
        self.calls.append("unhealthy")
        return "i-0123456789abcdef0"


@pytest.mark.parametrize(
    ("action", "running", "steps", "calls", "done"),
    [
        ("drain_and_replace", 0, [0.0], ["drain", "unhealthy"], True),
        ("drain_and_replace", 2, [0.0, 10.0], ["drain"], False),  # tasks still moving, bound not reached
        ("drain_and_replace", 2, [0.0, 900.0], ["drain", "unhealthy"], True),  # the bound
        ("drain", 0, [0.0, 900.0], ["drain"], True),
        ("log", 0, [0.0, 900.0], [], False),  # keeps watching, never acts
    ],
)
def test_the_responder_drains_once_then_replaces_as_the_action_says(action, running, steps, calls, done):
    aws = RecordingAws(running)
    responder = gpu_health.Responder({"action": action, "replace_after_s": 900}, aws)
    for now in steps:
        if not responder.done:
            responder.step("Xid 79 on PCI:0000:00:1e", now)
    assert aws.calls == calls
    assert responder.done is done


# ---------------------------------------------------------------- DCGM's health watches

DCGM_POLICY = gpu_health.policy_from_settings(
    {**SETTINGS, "dcgm_immediate": DEFAULTS["gpu_health_dcgm_immediate"], "dcgm_counted": DEFAULTS["gpu_health_dcgm_counted"]}
)


def dcgm_answer(gpu: int, system: str, health: str, message: str) -> str:
    """`dcgmi health --check --json` with one incident (the shape the stand-in dcgmi prints: tests/fixtures/al2023)."""
    incident = {"children": {health: {"value": message}}}
    return json.dumps(
        {"body": {"Overall Health": {"value": health}, "GPU": {"children": {f"GPU ID: {gpu}": {"children": {system: incident}}}}}}
    )


@pytest.mark.parametrize(
    ("system", "message", "kind"),
    [
        ("NVLink", "Detected 12 NvLink recovery errors on GPU 3's NVLink (should be 0)", "dcgm_nvlink"),
        ("PCIe", "Detected more than 8 PCIe replays per minute for GPU 1 : 40", "dcgm_pcie_replay"),
        ("Memory", "GPU 0 had uncorrectable memory errors and row remapping failed", "dcgm_row_remap_failure"),
        ("Memory", "GPU 0 has pending row remaps: reset the GPU", "dcgm_row_remap_pending"),
        ("Memory", "Detected 2 volatile double-bit ECC error(s) in GPU 0", "dcgm_dbe"),
        ("Power", "Power usage is near the limit", "dcgm_power"),
    ],
)
def test_dcgm_incidents_are_classified_by_system_and_message(system, message, kind):
    events = gpu_health.parse_dcgm_health(dcgm_answer(3, system, "Failure", message), 7.0)
    assert events == [gpu_health.Event(kind, 7.0, gpu="3", code=2, detail=message)]


def test_a_healthy_dcgm_answer_has_no_incident():
    assert gpu_health.parse_dcgm_health(json.dumps({"body": {"Overall Health": {"value": "Healthy"}}}), 1.0) == []


def test_dcgm_row_remap_failure_acts_at_once_but_nvlink_and_pcie_replays_count():
    failure = gpu_health.parse_dcgm_health(dcgm_answer(0, "Memory", "Failure", "row remapping failed"), 0.0)
    assert gpu_health.assess(failure, 1.0, DCGM_POLICY).startswith("DCGM row_remap_failure on GPU 0")
    for system, message in (("NVLink", "NvLink errors"), ("PCIe", "PCIe replays per minute"), ("Memory", "pending row remaps")):
        one = gpu_health.parse_dcgm_health(dcgm_answer(0, system, "Warning", message), 0.0)
        assert gpu_health.assess(one, 1.0, DCGM_POLICY) is None  # one poll: not yet
        three = [gpu_health.Event(one[0].kind, t, gpu="0", code=1, detail=message) for t in (0.0, 5.0, 10.0)]
        assert gpu_health.assess(three, 11.0, DCGM_POLICY).startswith("3 GPU errors within 600 s")
    # A Warning of an immediate category only counts; an unlisted category never acts.
    warning = gpu_health.parse_dcgm_health(dcgm_answer(0, "Memory", "Warning", "row remapping failed"), 0.0)
    assert gpu_health.assess(warning, 1.0, DCGM_POLICY) is None
    power = [gpu_health.Event("dcgm_power", t, gpu="0", code=2) for t in range(10)]
    assert gpu_health.assess(power, 10.0, DCGM_POLICY) is None


def test_dcgm_repeats_an_ongoing_condition_once_per_poll():
    events = [gpu_health.Event("dcgm_nvlink", 0.0, gpu="0", code=1, detail=d) for d in ("link 1", "link 2")]
    assert len(gpu_health.dcgm_events_per_poll([*events, gpu_health.Event("dcgm_nvlink", 0.0, gpu="1", code=1)])) == 2


def test_a_dcgm_category_in_both_lists_is_refused():
    with pytest.raises(ValueError, match="both dcgm_immediate and dcgm_counted"):
        gpu_health.policy_from_settings({**SETTINGS, "dcgm_immediate": ["nvlink"], "dcgm_counted": ["nvlink"]})
