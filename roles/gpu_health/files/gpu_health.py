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
replace the instance metadata's (a drill off EC2), and `aws_endpoint_url` points the AWS calls at another endpoint. It runs on the instance with the system
python3 (3.9 on Amazon Linux 2023), imports nothing from the collection, and imports boto3 only for an AWS call.
"""

from __future__ import annotations

import argparse
import json
import queue
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

SETTINGS_PATH = "/etc/inferops/gpu-health.json"
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


def policy_from_settings(settings: dict) -> Policy:
    """The policy of the settings file; a threshold under 2 would drain on one transient error, so it is refused."""
    threshold = int(settings["count_threshold"])
    window_s = float(settings["window_s"])
    if threshold < 2:
        raise ValueError(f"count_threshold is {threshold}: it must be at least 2, or one transient error drains the instance")
    if window_s <= 0:
        raise ValueError(f"window_s is {window_s}: it must be positive")
    overlap = set(settings["immediate_xids"]) & set(settings["counted_xids"])
    if overlap:
        raise ValueError(f"Xid codes {sorted(overlap)} are both immediate_xids and counted_xids: list each code once")
    dcgm_overlap = set(settings.get("dcgm_immediate", [])) & set(settings.get("dcgm_counted", []))
    if dcgm_overlap:
        raise ValueError(f"DCGM categories {sorted(dcgm_overlap)} are both dcgm_immediate and dcgm_counted: list each once")
    return Policy(
        immediate_xids=frozenset(int(c) for c in settings["immediate_xids"]),
        counted_xids=frozenset(int(c) for c in settings["counted_xids"]),
        immediate_kinds=frozenset(["dbe", "gpu_lost"]),
        counted_kinds=frozenset(["thermal"] if settings.get("thermal_counts", True) else []),
        count_threshold=threshold,
        window_s=window_s,
        dcgm_immediate=frozenset(settings.get("dcgm_immediate", [])),
        dcgm_counted=frozenset(settings.get("dcgm_counted", [])),
    )


def parse_xid(line: str, at: float) -> Event | None:
    match = XID_LINE.search(line)
    if not match:
        return None
    return Event("xid", at, gpu=match.group("gpu"), code=int(match.group("code")))


def describe(event: Event) -> str:
    if event.kind.startswith("dcgm_"):
        return f"DCGM {event.kind[5:]} on GPU {event.gpu}: {event.detail}"
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


def smi_events(previous: Sequence[GpuReading], current: Sequence[GpuReading], at: float) -> list:
    """Events between two nvidia-smi readings: a GPU gone, a double-bit ECC count that rose, thermal slowdown now."""
    now_by_bus = {r.bus_id: r for r in current}
    events = [Event("gpu_lost", at, gpu=r.bus_id) for r in previous if r.bus_id not in now_by_bus]
    for before in previous:
        after = now_by_bus.get(before.bus_id)
        counts = (before.uncorrected_ecc, after.uncorrected_ecc if after else None)
        if None not in counts and counts[1] > counts[0]:
            events.append(Event("dbe", at, gpu=before.bus_id))
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
    """One event per GPU and category per poll (DCGM repeats an ongoing condition in each check)."""
    seen, kept = set(), []
    for event in events:
        if (event.gpu, event.kind) not in seen:
            seen.add((event.gpu, event.kind))
            kept.append(event)
    return kept


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


def nvidia_smi(settings: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([settings["nvidia_smi"], *args], capture_output=True, text=True, timeout=30, check=False)


def count_gpus(settings: dict) -> int:
    result = nvidia_smi(settings, "--query-gpu=pci.bus_id", "--format=csv,noheader")
    return len([line for line in result.stdout.splitlines() if line.strip()]) if result.returncode == 0 else 0


def dcgmi(settings: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [settings["dcgmi"], *args, "--host", settings["dcgm_host"]], capture_output=True, text=True, timeout=30, check=False
    )


def dcgm_watch_group(settings: dict) -> str | None:
    """A DCGM group of every GPU with every health watch set; None where DCGM is absent or does not answer."""
    if not settings.get("dcgmi") or not shutil.which(settings["dcgmi"]):
        return None
    created = dcgmi(settings, "group", "-c", "inferops-gpu-health", "--default")
    match = DCGM_GROUP_ID.search(created.stdout)
    if created.returncode != 0 or not match:
        log(f"watch: DCGM does not answer ({(created.stderr or created.stdout).strip()[:200]}); reading nvidia-smi instead")
        return None
    watches = dcgmi(settings, "health", "-g", match.group(1), "-s", settings.get("dcgm_watches", "a"))
    if watches.returncode != 0:
        log(f"watch: DCGM refused the health watches ({watches.stderr.strip()[:200]}); reading nvidia-smi instead")
        return None
    return match.group(1)


def read_dcgm(settings: dict, group: str, at: float) -> list | None:
    """The incidents of DCGM's health watches now; None when the check itself failed."""
    result = dcgmi(settings, "health", "-g", group, "-c", "-j")
    if result.returncode != 0:
        return None
    try:
        return dcgm_events_per_poll(parse_dcgm_health(result.stdout, at))
    except ValueError:
        return None


def read_gpus(settings: dict) -> list | None:
    """The GPUs nvidia-smi lists now; None when nvidia-smi itself failed (a lost GPU can make it fail outright)."""
    result = nvidia_smi(settings, f"--query-gpu={SMI_QUERY}", "--format=csv,noheader,nounits")
    return parse_smi_query(result.stdout) if result.returncode == 0 else None


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


def watch(settings: dict, aws: Aws) -> int:
    policy = policy_from_settings(settings)
    incoming: queue.Queue = queue.Queue()
    threading.Thread(target=follow_kernel_log, args=(settings["kernel_log_command"], incoming), daemon=True).start()
    poll_s = float(settings["poll_interval_s"])
    history: deque = deque(maxlen=1000)
    responder = Responder(settings, aws)
    dcgm_group = dcgm_watch_group(settings)
    previous = [] if dcgm_group else read_gpus(settings) or []
    source = f"DCGM's health watches (group {dcgm_group})" if dcgm_group else f"{len(previous)} GPUs in nvidia-smi"
    log(f"watch: watching {source} every {poll_s:g} s; policy {policy}")
    next_poll = time.monotonic() + poll_s
    reason: str | None = None
    while not responder.done:
        try:
            event = incoming.get(timeout=max(0.0, next_poll - time.monotonic()))
            history.append(event)
            verb = "acts at once" if is_immediate(event, policy) else "counts" if is_counted(event, policy) else "is not counted"
            log(f"watch: {describe(event)} {verb}")
        except queue.Empty:
            pass
        now = time.monotonic()
        if now >= next_poll and dcgm_group:
            incidents = read_dcgm(settings, dcgm_group, now)
            if incidents is None:
                log("watch: the DCGM health check failed; keeping the previous answer")
            for event in incidents or []:
                history.append(event)
                verb = "acts at once" if is_immediate(event, policy) else "counts" if is_counted(event, policy) else "is not counted"
                log(f"watch: {describe(event)} {verb}")
            next_poll = now + poll_s
        elif now >= next_poll:
            current = read_gpus(settings)
            if current is None:
                # Not an event by itself (nvidia-smi can time out on a busy host); a GPU off the bus also logs Xid 79.
                log("watch: nvidia-smi failed; keeping the previous reading")
            else:
                for event in smi_events(previous, current, now):
                    history.append(event)
                    log(f"watch: {describe(event)}")
                previous = current
            next_poll = now + poll_s
        reason = reason or assess(history, now, policy)
        if reason:
            responder.step(reason, now)
            if not responder.done:
                time.sleep(min(poll_s, 5.0))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=("check-count", "watch"))
    parser.add_argument("--settings", default=SETTINGS_PATH, help=f"settings file (default {SETTINGS_PATH})")
    parser.add_argument("--instance-type", help="check-count: this type instead of the instance metadata's")
    args = parser.parse_args(argv)
    settings = read_json(args.settings)
    if settings["action"] not in ACTIONS:
        log(f"{args.settings}: action is {settings['action']!r}; use one of {', '.join(ACTIONS)}")
        return 2
    aws = Aws(settings)
    if args.command == "check-count":
        return check_count(settings, aws, args.instance_type or imds(settings, "meta-data/instance-type"))
    return watch(settings, aws)


if __name__ == "__main__":
    sys.exit(main())
