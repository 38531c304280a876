#!/usr/bin/env python3
"""GPU health of an ECS GPU container instance, installed by inferops.triton_ecs.gpu_health as /usr/libexec/inferops/gpu-health.

  gpu-health check-count  before the ECS agent starts: the GPUs nvidia-smi sees against the instance type's count.
                          A shortfall exits 1 (ecs.service requires this check, so the agent never registers) and
                          marks the instance Unhealthy in its Auto Scaling group, which replaces it.
  gpu-health watch        while the instance runs: Xid errors from the kernel log, and DCGM's health watches (NVLink,
                          PCIe replays, row remapping, memory, thermal) where nv-hostengine answers, else nvidia-smi's
                          double-bit ECC count, GPU list and thermal slowdown. A verdict drains the ECS container
                          instance and, once its tasks have moved or after a bound, marks the instance Unhealthy.

Settings come from /etc/inferops/gpu-health.json (written by the role); `region` and `instance_id` there, when set,
replace the instance metadata's (a drill off EC2), and `aws_endpoint_url` points the AWS calls at another endpoint.
`gpu-health check-settings` checks a settings file (`-` for stdin) and `check-instance-types` the instance-type table,
naming the bad value: the role runs both on the controller before it writes anything.
It runs on the instance with the system python3 (3.9 on Amazon Linux 2023),
imports nothing from the collection, and imports boto3 only for an AWS call.

What drains, and what does not (issue 28): a polled signal (a GPU missing from nvidia-smi, a risen double-bit ECC
count, thermal slowdown, a DCGM incident) counts only once the next good reading shows it again, and one episode (the
same signal on consecutive readings) counts once; a failed, hung or empty answer is re-read, never judged; only the
events a verdict needs are kept, so harmless Xids cannot push counted ones out; and that history is kept in a state
file, so a restart of the watcher in the same boot keeps it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

SETTINGS_PATH = "/etc/inferops/gpu-health.json"
BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"
ACTIONS = ("drain_and_replace", "drain", "log")

# NVIDIA's Xid catalogue, for the journal lines; which codes act is the policy's business, not this table's.
XID_MEANING = {
    13: "graphics engine exception (usually the application)",
    31: "GPU memory page fault (usually the application)",
    43: "GPU stopped processing (usually the application)",
    45: "preemptive cleanup after earlier errors",
    48: "double-bit ECC error",
    63: "ECC page retirement or row remapping recorded",
    64: "ECC page retirement or row remapping failure",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
}
# "NVRM: Xid (PCI:0000:00:1e): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
XID_LINE = re.compile(r"NVRM: Xid \((?P<gpu>[^)]*)\): (?P<code>\d+)\b")
SMI_QUERY = "index,pci.bus_id,ecc.errors.uncorrected.volatile.total,clocks_event_reasons.hw_thermal_slowdown"
# DCGM's health-watch systems as `dcgmi health --check --json` names them, with the category each incident becomes;
# memory and PCIe incidents are told apart further by DCGM's failure messages (dcgm_errors.h).
DCGM_SYSTEMS = {
    "pcie": "pcie",
    "nvlink": "nvlink",
    "memory": "memory",
    "mem": "memory",
    "sm": "sm",
    "inforom": "inforom",
    "thermal": "thermal",
    "power": "power",
    "driver": "driver",
    "nvswitch": "nvswitch",
    "pmu": "pmu",
    "mcu": "mcu",
}
DCGM_GROUP_ID = re.compile(r"group ID of (\d+)")
GRID_REASON = (
    "{type} has a fractional NVIDIA GPU that only NVIDIA's GRID (vGPU) driver drives; this AMI carries the datacenter "
    "driver, so the GPU never appears: run the fleet on whole-GPU types (g6 for L4, g6e for L40S), or bake an AMI with "
    "the GRID driver"
)


@dataclass(frozen=True)
class Event:
    """One GPU error: kind is xid, dbe (double-bit ECC count rose), gpu_lost (a GPU left nvidia-smi), thermal, or
    dcgm_<category> (an incident of DCGM's health watches: nvlink, pcie_replay, row_remap_failure, ...)."""

    kind: str
    at: float
    gpu: str = ""
    code: int = 0
    detail: str = ""


@dataclass(frozen=True)
class Policy:
    """What takes an instance out of service: one immediate event, or count_threshold counted ones within window_s."""

    immediate_xids: frozenset
    counted_xids: frozenset
    immediate_kinds: frozenset
    counted_kinds: frozenset
    count_threshold: int
    window_s: float
    # DCGM incidents: categories that act at once when DCGM says Failure, and categories counted like counted Xids.
    dcgm_immediate: frozenset = frozenset()
    dcgm_counted: frozenset = frozenset()


@dataclass(frozen=True)
class GpuReading:
    index: str
    bus_id: str
    uncorrected_ecc: int | None
    thermal_slowdown: bool


# Every number of the settings file: (lowest, highest, whole numbers only). The role's variable is gpu_health_<key>.
NUMBERS = {
    "count_threshold": (2, 100, True),  # at least 2: one transient error never drains an instance
    "window_s": (1, 86400, False),
    "poll_interval_s": (0.1, 3600, False),
    "probe_timeout_s": (1, 600, False),
    "replace_after_s": (0, 86400, False),
    "count_wait_s": (0, 3600, False),
    "count_poll_s": (0.1, 600, False),
}
XID_CODES = (1, 999)
CATEGORY = re.compile(r"^[a-z][a-z0-9_]*$")
# Settings the role has always written; newer ones fall back to these when a settings file lacks them.
SETTING_DEFAULTS = {"probe_timeout_s": 20, "state_path": "/var/lib/inferops/gpu-health-state.json"}


def number(settings: dict, key: str) -> float:
    """One number of the settings, in its range: an int, a float or a decimal string (a variable given with -e is a
    string); a bool, NaN, infinity or a value out of range raises ValueError naming the setting and the fix."""
    lowest, highest, whole = NUMBERS[key]
    value = settings.get(key, SETTING_DEFAULTS.get(key))
    try:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ValueError
        parsed = float(value)
    except ValueError:
        parsed = math.nan
    if not math.isfinite(parsed) or (whole and parsed != int(parsed)) or not lowest <= parsed <= highest:
        kind = "a whole number" if whole else "a number of seconds"
        raise ValueError(f"gpu_health_{key} is {value!r}: set {kind} from {lowest:g} to {highest:g}")
    return int(parsed) if whole else parsed


def xid_codes(settings: dict, key: str) -> frozenset:
    codes = settings.get(key)
    if not isinstance(codes, list) or any(isinstance(c, bool) or not isinstance(c, int) for c in codes):
        raise ValueError(f"gpu_health_{key} is {codes!r}: set a list of Xid codes (whole numbers, NVIDIA's Xid catalogue)")
    outside = [c for c in codes if not XID_CODES[0] <= c <= XID_CODES[1]]
    if outside:
        raise ValueError(f"gpu_health_{key} holds {outside}: Xid codes run from {XID_CODES[0]} to {XID_CODES[1]}")
    return frozenset(codes)


def categories(settings: dict, key: str) -> frozenset:
    names = settings.get(key, [])
    if not isinstance(names, list) or any(not isinstance(n, str) or not CATEGORY.match(n) for n in names):
        raise ValueError(f"gpu_health_{key} is {names!r}: set a list of DCGM categories in lower case (nvlink, pcie_replay, dbe, ...)")
    return frozenset(names)


def check_settings(settings: dict) -> dict:
    """The settings file, every value checked (type and range), with SETTING_DEFAULTS for the keys it lacks; the first
    problem raises ValueError naming the setting (gpu_health_<key>), its value and the fix."""
    if not isinstance(settings, dict):
        raise ValueError(f"the settings are {type(settings).__name__}, not a JSON object: rewrite them with the role")
    checked = {**SETTING_DEFAULTS, **settings}
    if checked.get("action") not in ACTIONS:
        raise ValueError(f"gpu_health_action is {checked.get('action')!r}: use one of {', '.join(ACTIONS)}")
    for key in NUMBERS:
        checked[key] = number(checked, key)
    if checked["poll_interval_s"] > checked["window_s"]:
        raise ValueError(
            f"gpu_health_poll_interval_s ({checked['poll_interval_s']:g}) is longer than gpu_health_window_s "
            f"({checked['window_s']:g}): a signal must be read twice within the window; poll more often"
        )
    overlap = xid_codes(checked, "immediate_xids") & xid_codes(checked, "counted_xids")
    if overlap:
        raise ValueError(f"Xid codes {sorted(overlap)} are both immediate_xids and counted_xids: list each code once")
    dcgm_overlap = categories(checked, "dcgm_immediate") & categories(checked, "dcgm_counted")
    if dcgm_overlap:
        raise ValueError(f"DCGM categories {sorted(dcgm_overlap)} are both dcgm_immediate and dcgm_counted: list each once")
    if not isinstance(checked.get("thermal_counts", True), bool):
        raise ValueError(f"gpu_health_thermal_counts is {checked['thermal_counts']!r}: set true or false")
    for key in ("nvidia_smi", "dcgmi", "dcgm_host", "dcgm_watches", "instance_types_file", "state_path"):
        if key in checked and not isinstance(checked[key], str):
            raise ValueError(f"gpu_health_{key} is {checked[key]!r}: set a string")
    for key in ("nvidia_smi", "instance_types_file", "state_path"):
        if key in checked and not checked[key].startswith("/"):
            raise ValueError(f"gpu_health_{key} is {checked[key]!r}: set an absolute path")
    if checked.get("dcgm_watches", "a") and not re.match(r"^[a-z]+$", checked.get("dcgm_watches", "a")):
        raise ValueError(f"gpu_health_dcgm_watches is {checked['dcgm_watches']!r}: set dcgmi health -s letters (a: all systems)")
    command = checked.get("kernel_log_command", ["journalctl"])
    if not isinstance(command, list) or not command or any(not isinstance(a, str) or not a for a in command):
        raise ValueError(f"gpu_health_kernel_log_command is {command!r}: set the command as a non-empty list of strings")
    for key in ("ecs_agent_metadata_url", "imds_url", "aws_endpoint_url"):
        url = checked.get(key, "")
        if not isinstance(url, str) or (url and not re.match(r"^https?://[^\s/]+", url)):
            raise ValueError(
                f"gpu_health_{key} is {url!r}: set an http:// or https:// URL" + (" or ''" if key == "aws_endpoint_url" else "")
            )
    return checked


def policy_from_settings(settings: dict) -> Policy:
    """The policy of the settings file (checked first: a threshold under 2 would drain on one transient error)."""
    checked = check_settings(settings)
    return Policy(
        immediate_xids=xid_codes(checked, "immediate_xids"),
        counted_xids=xid_codes(checked, "counted_xids"),
        immediate_kinds=frozenset(["dbe", "gpu_lost"]),
        counted_kinds=frozenset(["thermal"] if checked.get("thermal_counts", True) else []),
        count_threshold=checked["count_threshold"],
        window_s=float(checked["window_s"]),
        dcgm_immediate=categories(checked, "dcgm_immediate"),
        dcgm_counted=categories(checked, "dcgm_counted"),
    )


def parse_xid(line: str, at: float) -> Event | None:
    match = XID_LINE.search(line)
    if not match:
        return None
    return Event("xid", at, gpu=match.group("gpu"), code=int(match.group("code")))


def describe(event: Event) -> str:
    if event.kind.startswith("dcgm_"):
        return f"DCGM {event.kind[5:]} on GPU {event.gpu}" + (f": {event.detail}" if event.detail else "")
    if event.kind == "xid":
        return f"Xid {event.code} on {event.gpu} ({XID_MEANING.get(event.code, 'see NVIDIA Xid catalogue')})"
    what = {"dbe": "double-bit ECC errors rose", "gpu_lost": "GPU no longer listed by nvidia-smi", "thermal": "hardware thermal slowdown"}
    return f"{what.get(event.kind, event.kind)} on GPU {event.gpu}"


def is_immediate(event: Event, policy: Policy) -> bool:
    if event.kind.startswith("dcgm_"):
        # code 2 is DCGM's Failure; a Warning of an immediate category only counts (it may clear).
        return event.kind[5:] in policy.dcgm_immediate and event.code == 2
    return event.kind in policy.immediate_kinds or (event.kind == "xid" and event.code in policy.immediate_xids)


def is_counted(event: Event, policy: Policy) -> bool:
    if event.kind.startswith("dcgm_"):
        return event.kind[5:] in policy.dcgm_counted or event.kind[5:] in policy.dcgm_immediate
    return event.kind in policy.counted_kinds or (event.kind == "xid" and event.code in policy.counted_xids)


def assess(events: Iterable[Event], now: float, policy: Policy) -> str | None:
    """The reason to take the instance out of service, or None. Counted events older than the window are forgotten."""
    counted = []
    for event in events:
        if is_immediate(event, policy):
            return describe(event)
        if is_counted(event, policy) and now - event.at <= policy.window_s:
            counted.append(event)
    if len(counted) >= policy.count_threshold:
        return f"{len(counted)} GPU errors within {policy.window_s:g} s: " + "; ".join(describe(e) for e in counted)
    return None


def parse_smi_query(text: str) -> list:
    """Rows of `nvidia-smi --query-gpu=SMI_QUERY --format=csv,noheader,nounits`; ECC is None where it is N/A."""
    readings = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < 4 or not fields[0].isdigit():
            continue
        ecc = int(fields[2]) if fields[2].isdigit() else None
        readings.append(GpuReading(fields[0], fields[1], ecc, fields[3].lower() == "active"))
    return readings


def smi_baseline(baseline: Sequence[GpuReading], current: Sequence[GpuReading]) -> tuple:
    """Every GPU nvidia-smi has listed, with its double-bit ECC count as first read: a GPU missing later, or a count
    above this, is a signal; a GPU seen for the first time joins."""
    known = {r.bus_id: r for r in baseline}
    for reading in current:
        first = known.get(reading.bus_id)
        if first is None:
            known[reading.bus_id] = reading
        elif first.uncorrected_ecc is None and reading.uncorrected_ecc is not None:
            known[reading.bus_id] = replace(first, uncorrected_ecc=reading.uncorrected_ecc)
    return tuple(sorted(known.values(), key=lambda r: r.bus_id))


def smi_conditions(baseline: Sequence[GpuReading], current: Sequence[GpuReading], at: float) -> list:
    """What one nvidia-smi reading shows against the baseline: a GPU gone, a double-bit ECC count above its first
    reading, thermal slowdown now. A condition, not yet an event: `after_poll` decides what counts."""
    now_by_bus = {r.bus_id: r for r in current}
    events = [Event("gpu_lost", at, gpu=r.bus_id) for r in baseline if r.bus_id not in now_by_bus]
    for first in baseline:
        after = now_by_bus.get(first.bus_id)
        counts = (first.uncorrected_ecc, after.uncorrected_ecc if after else None)
        if None not in counts and counts[1] > counts[0]:
            events.append(Event("dbe", at, gpu=first.bus_id, detail=f"{counts[0]} -> {counts[1]}"))
    events += [Event("thermal", at, gpu=r.bus_id) for r in current if r.thermal_slowdown]
    return events


def dcgm_category(system: str, message: str) -> str:
    """The category of one DCGM incident, from its health-watch system and DCGM's failure message."""
    category = DCGM_SYSTEMS.get(system.strip().lower().replace(" ", ""), system.strip().lower() or "other")
    text = message.lower()
    if category == "pcie" and "replay" in text:
        return "pcie_replay"
    if category == "memory" and "remap" in text:
        return "row_remap_pending" if "pending" in text else "row_remap_failure" if "fail" in text else "row_remap"
    if category == "memory" and ("double" in text or "dbe" in text or "uncorrectable" in text):
        return "dbe"
    return category


def parse_dcgm_health(text: str, at: float) -> list:
    """Events of `dcgmi health --check --json`: per GPU ("GPU ID: <n>"), per system, each incident's message with
    DCGM's health (code 1 Warning, 2 Failure). A healthy answer has no incident."""
    health_code = {"warning": 1, "failure": 2, "fail": 2, "error": 2}
    events: list = []

    def walk(node, gpu: str, system: str, health: int) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("value"), str) and not node.get("children") and system and gpu:
                value = node["value"].strip()
                if value.lower() not in ("healthy", "pass", "ok", "") and value.lower() not in health_code:
                    events.append(Event("dcgm_" + dcgm_category(system, value), at, gpu=gpu, code=health or 1, detail=value))
                return
            own = health_code.get(str(node.get("value", "")).strip().lower(), health)
            for key, child in node.items():
                if key == "value":
                    continue
                match = re.match(r"^GPU(?: ID)?:?\s*(\d+)$", key.strip(), re.I)
                if match:
                    walk(child, match.group(1), "", 0)
                elif key.strip().lower() in health_code:
                    walk(child, gpu, system, health_code[key.strip().lower()])
                elif gpu and not system and key.strip().lower().replace(" ", "") in DCGM_SYSTEMS:
                    walk(child, gpu, key, own if own else 0)
                else:
                    walk(child, gpu, system, own)
        elif isinstance(node, list):
            for item in node:
                walk(item, gpu, system, health)

    walk(json.loads(text), "", "", 0)
    return events


def dcgm_events_per_poll(events: Sequence[Event]) -> list:
    """One event per GPU and category per poll, the worst health of them (DCGM lists each link or row separately)."""
    worst: dict = {}
    for event in events:
        key = (event.gpu, event.kind)
        if key not in worst or event.code > worst[key].code:
            worst[key] = event
    return list(worst.values())


@dataclass(frozen=True)
class Watched:
    """What the polled source (nvidia-smi or DCGM) has shown, carried from poll to poll. A signal is keyed by
    (kind, GPU, DCGM health): seen on one good reading it is pending; seen again on the next good reading it is
    confirmed, counted once, and ongoing until a good reading without it ends the episode."""

    baseline: tuple = ()  # nvidia-smi's GPUs (smi_baseline)
    pending: frozenset = field(default_factory=frozenset)
    ongoing: frozenset = field(default_factory=frozenset)


def signal_key(event: Event) -> tuple:
    return (event.kind, event.gpu, event.code)


def after_poll(watched: Watched, seen: Sequence[Event] | None, at: float) -> tuple:
    """(Watched, the events that count now) after one poll. None is a failed, hung or empty answer: re-read at the next
    poll, not judged (nothing pending is confirmed, nothing ongoing ends; the same Watched comes back). A signal
    counts on the re-read that shows it again, once per episode."""
    if seen is None:
        return watched, []
    by_key = {signal_key(e): replace(e, at=at) for e in seen}
    confirmed = [e for key, e in by_key.items() if key in watched.pending and key not in watched.ongoing]
    ongoing = frozenset(key for key in by_key if key in watched.ongoing or key in watched.pending)
    pending = frozenset(by_key) - ongoing
    return replace(watched, pending=pending, ongoing=ongoing), confirmed


def poll_smi(watched: Watched, readings: Sequence[GpuReading] | None, at: float) -> tuple:
    """after_poll for one nvidia-smi answer. An answer that lists no GPU is not judged: nvidia-smi answers so while
    the driver is busy or reloading, and a GPU that really fell off the bus also logs Xid 79."""
    if not readings:
        return after_poll(watched, None, at)
    baseline = smi_baseline(watched.baseline, readings)
    return after_poll(replace(watched, baseline=baseline), smi_conditions(baseline, readings, at), at)


def poll_dcgm(watched: Watched, incidents: Sequence[Event] | None, at: float) -> tuple:
    """after_poll for one `dcgmi health --check` answer (None: the check failed, hung or answered nothing readable)."""
    return after_poll(watched, None if incidents is None else dcgm_events_per_poll(incidents), at)


def remember(history: Sequence[Event], events: Iterable[Event], now: float, policy: Policy) -> tuple:
    """The events a verdict needs, bounded by design: the first count_threshold immediate ones and the newest
    count_threshold counted ones within the window. An event that neither acts nor counts is never kept, so no flood
    of harmless Xids can push a counted one out."""
    kept = [*history, *events]
    immediate = [e for e in kept if is_immediate(e, policy)][: policy.count_threshold]
    counted = [e for e in kept if not is_immediate(e, policy) and is_counted(e, policy) and 0 <= now - e.at <= policy.window_s]
    return (*immediate, *counted[-policy.count_threshold :])


def state_text(boot_id: str, history: Sequence[Event], watched: Watched) -> str:
    """The watcher's state file: the kept events and the watched signals, for this boot (times are CLOCK_MONOTONIC)."""
    return json.dumps(
        {
            "boot_id": boot_id,
            "history": [[e.kind, e.at, e.gpu, e.code, e.detail] for e in history],
            "baseline": [[r.index, r.bus_id, r.uncorrected_ecc, r.thermal_slowdown] for r in watched.baseline],
            "pending": sorted(list(k) for k in watched.pending),
            "ongoing": sorted(list(k) for k in watched.ongoing),
        }
    )


def state_from_text(text: str, boot_id: str, now: float, policy: Policy) -> tuple:
    """(history, Watched, why it starts afresh or "") from a state file. A file of another boot (GPUs reset since; an
    AMI baked on a GPU builder) or one that does not parse is set aside."""
    try:
        state = json.loads(text)
        if state.get("boot_id") != boot_id:
            return (), Watched(), "the state file is of another boot"
        history = [Event(str(k), float(at), str(g), int(c), str(d)) for k, at, g, c, d in state["history"]]
        watched = Watched(
            baseline=tuple(GpuReading(str(i), str(b), e if isinstance(e, int) else None, bool(t)) for i, b, e, t in state["baseline"]),
            pending=frozenset((str(k), str(g), int(c)) for k, g, c in state["pending"]),
            ongoing=frozenset((str(k), str(g), int(c)) for k, g, c in state["ongoing"]),
        )
    except (ValueError, TypeError, KeyError, AttributeError) as error:
        return (), Watched(), f"the state file does not parse ({error})"
    return remember((), history, now, policy), watched, ""


FLAVOURS = ("tesla", "grid")
INSTANCE_TYPE = re.compile(r"^[a-z][a-z0-9-]*\.[a-z0-9-]+$")


def check_instance_types(table) -> dict:
    """The AMI's instance-type table (gpu_health_instance_type_gpus), every entry checked: a type name, {gpus: 0 to
    64, flavour: tesla or grid} or a plain count; the first problem raises ValueError naming the entry and the fix."""
    where = "gpu_health_instance_type_gpus"
    if not isinstance(table, dict):
        raise ValueError(f"{where} is {type(table).__name__}: set a mapping of instance type to {{gpus, flavour}}")
    for name, entry in table.items():
        if not isinstance(name, str) or not INSTANCE_TYPE.match(name):
            raise ValueError(f"{where}: {name!r} is not an instance type: name it family.size, as g5.12xlarge")
        value = entry if isinstance(entry, dict) else {"gpus": entry}
        gpus = value.get("gpus")
        if isinstance(gpus, bool) or not isinstance(gpus, int) or not 0 <= gpus <= 64:
            raise ValueError(f"{where}.{name}.gpus is {gpus!r}: set the type's whole GPUs, 0 to 64 (EC2 DescribeInstanceTypes GpuInfo)")
        if value.get("flavour", "tesla") not in FLAVOURS:
            raise ValueError(f"{where}.{name}.flavour is {value['flavour']!r}: use one of {', '.join(FLAVOURS)}")
        unknown = sorted(set(value) - {"gpus", "flavour"})
        if unknown:
            raise ValueError(f"{where}.{name} has {unknown}: an entry holds only gpus and flavour")
    return table


def table_entry(value) -> tuple:
    """(GPU count, driver flavour) of one entry of the AMI's table: {gpus, flavour} or, as older AMIs wrote it, a count."""
    if isinstance(value, dict):
        return int(value.get("gpus", 0)), str(value.get("flavour", "tesla"))
    return int(value), "tesla"


def expected_gpus(instance_type: str, table: dict, describe_instance_type: Callable[[str], tuple]) -> tuple:
    """(count, flavour, source) for the instance type: the AMI's table first, EC2 DescribeInstanceTypes for a type it
    lacks (a fractional GPU there means the GRID flavour)."""
    if instance_type in table:
        return (*table_entry(table[instance_type]), "the AMI's instance-type table")
    count, flavour = describe_instance_type(instance_type)
    return count, flavour, "EC2 DescribeInstanceTypes"


def should_mark_unhealthy(drained_at: float, now: float, running_tasks: int | None, replace_after_s: float) -> bool:
    """After the drain: once no task runs on the instance any more, or replace_after_s later at the latest."""
    return running_tasks == 0 or now - drained_at >= replace_after_s


# --- what runs on the instance -------------------------------------------------------------------------------


def read_json(path: str) -> dict:
    with open(path) as handle:
        return json.load(handle)


def log(message: str) -> None:
    """One journal line (systemd captures stdout)."""
    print(f"gpu-health: {message}", flush=True)


def http(url: str, method: str = "GET", headers: dict | None = None, timeout_s: float = 2) -> str:
    request = urllib.request.Request(url, method=method, headers=headers or {})
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        return response.read().decode()


def imds(settings: dict, path: str) -> str:
    """An instance metadata value through IMDSv2 (a session token first)."""
    base = settings["imds_url"].rstrip("/")
    token = http(f"{base}/latest/api/token", "PUT", {"X-aws-ec2-metadata-token-ttl-seconds": "60"})
    return http(f"{base}/latest/{path}", headers={"X-aws-ec2-metadata-token": token})


class Aws:
    """The instance's AWS calls (with its instance role), each in one place; boto3 retries throttling itself."""

    def __init__(self, settings: dict) -> None:
        self.settings = settings
        self._clients: dict = {}

    def client(self, service: str):
        if service not in self._clients:
            import boto3
            from botocore.config import Config

            region = self.settings.get("region") or imds(self.settings, "meta-data/placement/region")
            self._clients[service] = boto3.client(
                service,
                region_name=region,
                endpoint_url=self.settings.get("aws_endpoint_url") or None,
                config=Config(retries={"mode": "standard", "max_attempts": 5}, connect_timeout=5, read_timeout=10),
            )
        return self._clients[service]

    def instance_id(self) -> str:
        return self.settings.get("instance_id") or imds(self.settings, "meta-data/instance-id")

    def gpus_of_instance_type(self, instance_type: str) -> tuple:
        """(whole GPUs, driver flavour): a GPU partition under 1 (g6f) needs the GRID flavour."""
        answer = self.client("ec2").describe_instance_types(InstanceTypes=[instance_type])
        types = answer.get("InstanceTypes", [])
        if not types:
            return None, "tesla"
        gpus = types[0].get("GpuInfo", {}).get("Gpus", [])
        fractional = any(float(gpu.get("GpuPartitionSize", 1.0)) < 1.0 for gpu in gpus)
        return sum(gpu.get("Count", 0) for gpu in gpus), "grid" if fractional else "tesla"

    def container_instance(self) -> tuple:
        """(cluster, container instance ARN) from the ECS agent's introspection API on this instance."""
        metadata = json.loads(http(self.settings["ecs_agent_metadata_url"]))
        return metadata["Cluster"], metadata["ContainerInstanceArn"]

    def drain(self, cluster: str, arn: str) -> None:
        answer = self.client("ecs").update_container_instances_state(cluster=cluster, containerInstances=[arn], status="DRAINING")
        if answer.get("failures"):
            raise RuntimeError(f"ECS refused to drain {arn}: {answer['failures']}")

    def running_tasks(self, cluster: str, arn: str) -> int | None:
        answer = self.client("ecs").describe_container_instances(cluster=cluster, containerInstances=[arn])
        instances = answer.get("containerInstances", [])
        return instances[0].get("runningTasksCount") if instances else None

    def mark_unhealthy(self) -> str:
        instance_id = self.instance_id()
        self.client("autoscaling").set_instance_health(InstanceId=instance_id, HealthStatus="Unhealthy", ShouldRespectGracePeriod=False)
        return instance_id


def probe(argv: Sequence[str], timeout_s: float) -> subprocess.CompletedProcess | None:
    """Runs nvidia-smi or dcgmi; None when it hangs past timeout_s (it is killed; one stuck in the driver is left
    behind rather than waited for) or cannot start: a failed answer, read again at the next poll, never a crash that
    would lose the watcher's state."""
    try:
        proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except OSError as error:
        log(f"{argv[0]} could not run ({error})")
        return None
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        try:
            proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            log(f"{argv[0]} (pid {proc.pid}) did not stop when killed (stuck in the driver); left behind")
        log(f"{argv[0]} {' '.join(argv[1:3])} did not answer within {timeout_s:g} s; it was stopped")
        return None
    return subprocess.CompletedProcess(list(argv), proc.returncode, stdout, stderr)


def nvidia_smi(settings: dict, *args: str) -> subprocess.CompletedProcess | None:
    return probe([settings["nvidia_smi"], *args], float(settings["probe_timeout_s"]))


def count_gpus(settings: dict) -> int:
    """GPUs nvidia-smi lists now; 0 when it fails or hangs (the count check reads again until its bound)."""
    result = nvidia_smi(settings, "--query-gpu=pci.bus_id", "--format=csv,noheader")
    if result is None or result.returncode != 0:
        return 0
    return len([line for line in result.stdout.splitlines() if line.strip()])


def dcgmi(settings: dict, *args: str) -> subprocess.CompletedProcess | None:
    return probe([settings["dcgmi"], *args, "--host", settings["dcgm_host"]], float(settings["probe_timeout_s"]))


def dcgm_watch_group(settings: dict) -> str | None:
    """A DCGM group of every GPU with every health watch set; None where DCGM is absent or does not answer."""
    if not settings.get("dcgmi") or not shutil.which(settings["dcgmi"]):
        return None
    created = dcgmi(settings, "group", "-c", "inferops-gpu-health", "--default")
    match = DCGM_GROUP_ID.search(created.stdout) if created else None
    if created is None or created.returncode != 0 or not match:
        answer = (created.stderr or created.stdout).strip()[:200] if created else "no answer"
        log(f"watch: DCGM does not answer ({answer}); reading nvidia-smi instead")
        return None
    watches = dcgmi(settings, "health", "-g", match.group(1), "-s", settings.get("dcgm_watches", "a"))
    if watches is None or watches.returncode != 0:
        log(
            f"watch: DCGM refused the health watches ({watches.stderr.strip()[:200] if watches else 'no answer'}); reading nvidia-smi instead"
        )
        return None
    return match.group(1)


def read_dcgm(settings: dict, group: str, at: float) -> list | None:
    """The incidents of DCGM's health watches now; None when the check failed, hung or printed nothing readable."""
    result = dcgmi(settings, "health", "-g", group, "-c", "-j")
    if result is None or result.returncode != 0:
        return None
    try:
        return parse_dcgm_health(result.stdout, at)
    except (ValueError, AttributeError):
        return None


def read_gpus(settings: dict) -> list | None:
    """The GPUs nvidia-smi lists now; None when nvidia-smi failed or hung (a lost GPU can make it fail outright)."""
    result = nvidia_smi(settings, f"--query-gpu={SMI_QUERY}", "--format=csv,noheader,nounits")
    return parse_smi_query(result.stdout) if result is not None and result.returncode == 0 else None


def boot_id() -> str:
    try:
        with open(BOOT_ID_PATH) as handle:
            return handle.read().strip()
    except OSError:
        return ""


def load_state(path: str, boot: str, now: float, policy: Policy) -> tuple:
    """(history, Watched) from the state file; empty where there is none, it is of another boot, or it is broken."""
    try:
        with open(path) as handle:
            text = handle.read()
    except FileNotFoundError:
        return (), Watched()
    except OSError as error:
        log(f"watch: could not read the state file {path} ({error}); starting afresh")
        return (), Watched()
    history, watched, fresh = state_from_text(text, boot, now, policy)
    if fresh:
        log(f"watch: {fresh}; starting afresh ({path})")
    elif history or watched.ongoing:
        log(f"watch: kept from before the restart: {'; '.join(describe(e) for e in history) or 'no counted event'}")
    return history, watched


def save_state(path: str, text: str) -> None:
    """Writes the state file whole (a temporary file renamed over it); a failure is logged, never fatal."""
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(f"{path}.tmp", "w") as handle:
            handle.write(text)
        os.replace(f"{path}.tmp", path)
    except OSError as error:
        log(f"watch: could not write the state file {path} ({error}); a restart would start afresh")


def check_count(settings: dict, aws: Aws, instance_type: str) -> int:
    table = read_json(settings["instance_types_file"])
    try:
        expected, flavour, source = expected_gpus(instance_type, table, aws.gpus_of_instance_type)
    except Exception as error:
        log(f"check-count: {instance_type} is not in the AMI's table and EC2 DescribeInstanceTypes failed ({error}); not checked")
        return 0
    if flavour == "grid":
        log(f"check-count: {GRID_REASON.format(type=instance_type)} ({source}); keeping the ECS agent from registering")
        return refuse(settings, aws)
    if not expected:
        log(f"check-count: {instance_type} has no GPU according to {source}; nothing to check")
        return 0
    deadline = time.monotonic() + float(settings["count_wait_s"])
    seen = count_gpus(settings)
    while seen < expected and time.monotonic() < deadline:
        time.sleep(float(settings["count_poll_s"]))
        seen = count_gpus(settings)
    if seen >= expected:
        log(f"check-count: {instance_type} has {seen} of {expected} GPUs ({source}); the ECS agent may register")
        return 0
    log(
        f"check-count: {instance_type} should have {expected} GPUs ({source}) but nvidia-smi sees {seen} after "
        f"{settings['count_wait_s']} s; keeping the ECS agent from registering"
    )
    return refuse(settings, aws)


def refuse(settings: dict, aws: Aws) -> int:
    """The count check's failure: exit 1 (ecs.service requires the check) and, with drain_and_replace, mark the
    instance Unhealthy for its Auto Scaling group to replace."""
    if settings["action"] == "drain_and_replace":
        try:
            log(f"check-count: marked {aws.mark_unhealthy()} Unhealthy in its Auto Scaling group, to be replaced")
        except Exception as error:
            log(f"check-count: could not mark the instance Unhealthy ({error})")
    return 1


def follow_kernel_log(command: Sequence[str], events: queue.Queue) -> None:
    """Feeds Xid events from the kernel log (journalctl -k -f, or a stand-in) into the queue."""
    with subprocess.Popen(list(command), stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            event = parse_xid(line, time.monotonic())
            if event:
                events.put(event)
    log(f"watch: the kernel log command {command[0]} ended")


class Responder:
    """Acts on a verdict: drain once, then mark the instance Unhealthy when its tasks are gone or after the bound."""

    def __init__(self, settings: dict, aws: Aws) -> None:
        self.settings = settings
        self.aws = aws
        self.verdict_at: float | None = None
        self.drained_at: float | None = None
        self.ecs_instance: tuple | None = None
        self.done = False

    def step(self, reason: str, now: float) -> None:
        action = self.settings["action"]
        if self.verdict_at is None:
            self.verdict_at = now
            log(f"watch: UNHEALTHY: {reason}; action {action}")
        if action == "log":
            return  # keeps watching: every later event is still logged
        if self.drained_at is None:
            try:
                self.ecs_instance = self.aws.container_instance()
                self.aws.drain(*self.ecs_instance)
                self.drained_at = now
                log(f"watch: set container instance {self.ecs_instance[1]} to DRAINING; its tasks move to healthy instances")
            except Exception as error:
                log(f"watch: could not drain the container instance yet ({error})")
        if action != "drain_and_replace":
            self.done = self.drained_at is not None
            return
        running = None
        if self.ecs_instance and self.drained_at is not None:
            try:
                running = self.aws.running_tasks(*self.ecs_instance)
            except Exception as error:
                log(f"watch: could not count the running tasks ({error})")
        start = self.drained_at if self.drained_at is not None else self.verdict_at
        if should_mark_unhealthy(start, now, running, float(self.settings["replace_after_s"])):
            try:
                log(f"watch: marked {self.aws.mark_unhealthy()} Unhealthy in its Auto Scaling group ({running} tasks running)")
                self.done = True
            except Exception as error:
                log(f"watch: could not mark the instance Unhealthy yet ({error})")


def verb(event: Event, policy: Policy) -> str:
    return "acts at once" if is_immediate(event, policy) else "counts" if is_counted(event, policy) else "is not counted"


def watch(settings: dict, aws: Aws) -> int:
    policy = policy_from_settings(settings)
    incoming: queue.Queue = queue.Queue()
    threading.Thread(target=follow_kernel_log, args=(settings["kernel_log_command"], incoming), daemon=True).start()
    poll_s = float(settings["poll_interval_s"])
    state_path, boot = settings["state_path"], boot_id()
    history, watched = load_state(state_path, boot, time.monotonic(), policy)
    responder = Responder(settings, aws)
    dcgm_group = dcgm_watch_group(settings)
    source = f"DCGM's health watches (group {dcgm_group})" if dcgm_group else "nvidia-smi"
    log(f"watch: watching {source} every {poll_s:g} s; policy {policy}")
    next_poll = time.monotonic()
    failed_reads = 0
    reason: str | None = None
    while not responder.done:
        arrived = []
        try:
            arrived.append(incoming.get(timeout=max(0.0, next_poll - time.monotonic())))
            while True:
                arrived.append(incoming.get_nowait())
        except queue.Empty:
            pass
        for event in arrived:
            log(f"watch: {describe(event)} {verb(event, policy)}")
        now = time.monotonic()
        before = (history, watched)
        history = remember(history, arrived, now, policy)
        if now >= next_poll:
            if dcgm_group:
                watched_next, confirmed = poll_dcgm(watched, read_dcgm(settings, dcgm_group, now), now)
            else:
                watched_next, confirmed = poll_smi(watched, read_gpus(settings), now)
            judged = watched_next is not watched  # an answer after_poll did not judge gives back the same Watched
            failed_reads = 0 if judged else failed_reads + 1
            if not judged:
                log(f"watch: {source} gave no readable answer ({failed_reads} in a row); re-reading, not judging")
            for kind, gpu, code in sorted(watched_next.pending - watched.pending):
                log(f"watch: {describe(Event(kind, now, gpu, code))} seen once; it counts only if the next reading shows it again")
            for event in confirmed:
                log(f"watch: {describe(event)} (seen again) {verb(event, policy)}")
            watched = watched_next
            history = remember(history, confirmed, now, policy)
            next_poll = time.monotonic() + poll_s  # from the end of the read: a slow answer never brings polls closer
        if (history, watched) != before:
            save_state(state_path, state_text(boot, history, watched))
        reason = reason or assess(history, now, policy)
        if reason:
            responder.step(reason, now)
            if not responder.done:
                time.sleep(min(poll_s, 5.0))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=("check-count", "watch", "check-settings", "check-instance-types"))
    parser.add_argument("--settings", default=SETTINGS_PATH, help=f"settings file, - for stdin (default {SETTINGS_PATH})")
    parser.add_argument("--table", default="-", help="check-instance-types: the instance-type table, - for stdin (the default)")
    parser.add_argument("--instance-type", help="check-count: this type instead of the instance metadata's")
    args = parser.parse_args(argv)
    path = args.table if args.command == "check-instance-types" else args.settings
    source = "stdin" if path == "-" else path
    try:
        document = json.load(sys.stdin) if path == "-" else read_json(path)
        if args.command == "check-instance-types":
            check_instance_types(document)
            log(f"{source}: every instance type is valid")
            return 0
        settings = check_settings(document)
    except (OSError, ValueError) as error:
        log(f"{source}: {error}")
        return 2
    if args.command == "check-settings":
        log(f"{source}: every setting is valid")
        return 0
    aws = Aws(settings)
    if args.command == "check-count":
        return check_count(settings, aws, args.instance_type or imds(settings, "meta-data/instance-type"))
    return watch(settings, aws)


if __name__ == "__main__":
    sys.exit(main())
