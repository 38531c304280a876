#!/usr/bin/python3
"""Puts the instance's NVMe instance store at the model host path at boot (inferops-instance-storage.service).

Modes (as the EKS AMI's setup-local-disks): raid0 (several devices: one mdadm RAID0 array), mount (the first
device only), none (no instance store). Without devices, or in mode none, the model host path is a directory on the
root volume. Blank devices (a new instance, or a stop/start that wiped the instance store) are formatted XFS with
our label; an XFS with our label is mounted as it is. Anything else on a device is refused, never overwritten.

The decision is `next_step`, a pure function of what was observed; the loop observes, decides, runs one command.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import stat
import subprocess
import sys
from dataclasses import dataclass, field

DEFAULT_SETTINGS_PATH = "/etc/inferops/instance-storage.json"
MODES = ("raid0", "mount", "none")
RAID_MEMBER = "linux_raid_member"
# Observe-decide-run rounds before giving up: create, mkfs, mkdir, mount is the longest path.
MAX_STEPS = 8


@dataclass(frozen=True)
class Settings:
    mode: str
    mount_point: str
    device_glob: str
    label: str
    raid_device: str
    raid_name: str
    mount_options: str

    @classmethod
    def from_dict(cls, raw: dict) -> Settings:
        if not isinstance(raw, dict):
            raise ValueError(f"expected a JSON object of settings, got {type(raw).__name__}: run the instance_storage role again")
        missing = sorted(set(cls.__dataclass_fields__) - set(raw))
        if missing:
            raise ValueError(f"settings {', '.join(missing)} are missing: run the instance_storage role again")
        for name in cls.__dataclass_fields__:
            if not isinstance(raw[name], str):
                raise ValueError(f"{name}={raw[name]!r} must be a string: set instance_storage_{name}")
        settings = cls(**{name: raw[name] for name in cls.__dataclass_fields__})
        for name in ("mount_point", "device_glob", "raid_device"):
            value = getattr(settings, name)
            if not value.startswith("/") or value.rstrip("/") == "" or "\0" in value or "\n" in value:
                raise ValueError(f"{name}={value!r} must be an absolute path other than /: set instance_storage_{name}")
        if not settings.mount_options or any(c.isspace() for c in settings.mount_options):
            raise ValueError(
                f"mount_options={settings.mount_options!r} must be mount -o options without spaces: set instance_storage_mount_options"
            )
        if settings.mode not in MODES:
            raise ValueError(f"mode {settings.mode!r} is not one of {', '.join(MODES)}: set instance_storage_mode to one of them")
        # mkfs.xfs refuses labels over 12 characters.
        if not 0 < len(settings.label) <= 12:
            raise ValueError(f"label {settings.label!r} must be 1 to 12 characters (an XFS label): set instance_storage_label")
        return settings


@dataclass(frozen=True)
class Signature:
    """What blkid finds on a block device: fstype '' means blank."""

    fstype: str = ""
    label: str = ""
    present: bool = True  # False: the device the glob listed is gone (detached, failing): never "blank"


@dataclass(frozen=True)
class Observed:
    devices: tuple[str, ...]
    signatures: dict[str, Signature] = field(default_factory=dict)
    raid_present: bool = False
    # The resolved source mounted at the mount point, or None.
    mounted_source: str | None = None
    mount_point_exists: bool = False
    # What the mount point directory holds when nothing is mounted on it (a mount would hide it).
    mount_point_entries: tuple[str, ...] = ()


@dataclass(frozen=True)
class Step:
    """One action: done, error, mkdir, create_raid, assemble_raid, mkfs, mount."""

    action: str
    reason: str
    target: str = ""
    devices: tuple[str, ...] = ()


def next_step(settings: Settings, observed: Observed) -> Step:
    """The next thing to do to have the model host path in place, given what is on the instance now."""
    devices = observed.devices
    if settings.mode == "none" or not devices:
        why = "mode none" if settings.mode == "none" else f"no instance store device matches {settings.device_glob}"
        if observed.mount_point_exists:
            return Step("done", f"{why}: {settings.mount_point} is a directory on the root volume")
        return Step("mkdir", f"{why}: a directory on the root volume", settings.mount_point)

    vanished = [d for d in devices if not observed.signatures.get(d, Signature()).present]
    if vanished:
        return Step(
            "error",
            f"{', '.join(vanished)} vanished after the device listing (the instance store is detached or failing): nothing "
            "was formatted; replace the instance",
            vanished[0],
        )
    if observed.mounted_source is None and observed.mount_point_entries:
        shown = ", ".join(observed.mount_point_entries[:5]) + (", ..." if len(observed.mount_point_entries) > 5 else "")
        return Step(
            "error",
            f"{settings.mount_point} is not empty ({shown}): a mount would hide what it holds; move it away, or set "
            "instance_storage_mount_point to an empty directory",
            settings.mount_point,
        )

    if settings.mode == "raid0" and len(devices) > 1:
        target = settings.raid_device
        if not observed.raid_present:
            return _raid_step(settings, observed)
    else:
        target = devices[0]

    if observed.mounted_source == target:
        return Step("done", f"{target} is mounted at {settings.mount_point}", target)
    if observed.mounted_source is not None:
        return Step(
            "error",
            f"{settings.mount_point} already holds {observed.mounted_source}, not {target}: unmount it, or set "
            "instance_storage_mount_point to a free path",
            target,
        )
    signature = observed.signatures.get(target, Signature())
    if not signature.present:
        return Step("error", f"{target} vanished (the array or device is gone): nothing was formatted; replace the instance", target)
    if not signature.fstype:
        return Step("mkfs", f"{target} is blank (a new instance, or a stop/start wiped the instance store)", target)
    if signature.fstype != "xfs" or signature.label != settings.label:
        return Step(
            "error",
            f"{target} holds {signature.fstype} labelled {signature.label!r}, not XFS labelled {settings.label!r}: refusing to "
            "overwrite it; wipe it (wipefs -a) if its data is not needed, or set instance_storage_mode: none",
            target,
        )
    if not observed.mount_point_exists:
        return Step("mkdir", f"the mount point of {target}", settings.mount_point)
    return Step("mount", f"{target} holds our XFS (label {settings.label})", target)


def _raid_step(settings: Settings, observed: Observed) -> Step:
    """The array is not there: assemble it from our members after a reboot, or create it on blank devices."""
    types = {device: observed.signatures.get(device, Signature()).fstype for device in observed.devices}
    if all(fstype == RAID_MEMBER for fstype in types.values()):
        return Step(
            "assemble_raid", "every device is a RAID member (a reboot kept the instance store)", settings.raid_device, observed.devices
        )
    if not any(types.values()):
        return Step(
            "create_raid",
            f"{len(observed.devices)} blank devices (a new instance, or a stop/start wiped them)",
            settings.raid_device,
            observed.devices,
        )
    found = ", ".join(f"{device}: {fstype or 'blank'}" for device, fstype in sorted(types.items()))
    return Step(
        "error",
        f"the instance store devices are neither all blank nor all RAID members ({found}): refusing to overwrite them; wipe "
        "them (wipefs -a) if their data is not needed, or set instance_storage_mode: mount or none",
        settings.raid_device,
        observed.devices,
    )


def find_devices(device_glob: str) -> tuple[str, ...]:
    """Instance store devices, resolved and deduplicated (by-id holds several links per device), partitions left out."""
    links = [path for path in glob.glob(device_glob) if "-part" not in os.path.basename(path)]
    return tuple(sorted({os.path.realpath(path) for path in links}))


def is_block_device(path: str) -> bool:
    try:
        return stat.S_ISBLK(os.stat(path).st_mode)
    except OSError:
        return False


def probe(device: str) -> Signature:
    """blkid's low-level probe (no cache): exit 2 means no signature at all, on a device that is still there (blkid
    answers 2 for a path that cannot be opened too: a vanished device is never taken for a blank one)."""
    if not is_block_device(device):
        return Signature(present=False)
    result = subprocess.run(["blkid", "-p", "-o", "export", device], capture_output=True, text=True, check=False)
    if result.returncode == 2:
        return Signature() if is_block_device(device) else Signature(present=False)
    if result.returncode != 0:
        raise RuntimeError(f"blkid -p {device} failed ({result.returncode}): {result.stderr.strip()}")
    values = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
    return Signature(values.get("TYPE", ""), values.get("LABEL", ""))


def mounted_source(mount_point: str) -> str | None:
    """The device mounted at mount_point (the last mount on top wins), resolved."""
    wanted = os.path.realpath(mount_point)
    source = None
    with open("/proc/self/mounts", encoding="utf-8") as mounts:
        for line in mounts:
            fields = line.split()
            # /proc/self/mounts escapes spaces as \040.
            if len(fields) > 1 and fields[1].replace("\\040", " ") == wanted:
                source = os.path.realpath(fields[0]) if fields[0].startswith("/") else fields[0]
    return source


def observe(settings: Settings) -> Observed:
    devices = find_devices(settings.device_glob)
    raid_present = os.path.exists(settings.raid_device)
    signatures = {device: probe(device) for device in devices}
    if raid_present:
        signatures[settings.raid_device] = probe(settings.raid_device)
    source = mounted_source(settings.mount_point)
    # The array is known by its /dev/md/<name> link; /proc/self/mounts names the node behind it.
    if raid_present and source == os.path.realpath(settings.raid_device):
        source = settings.raid_device
    is_dir = os.path.isdir(settings.mount_point)
    entries = tuple(sorted(os.listdir(settings.mount_point))) if is_dir and source is None else ()
    return Observed(devices, signatures, raid_present, source, is_dir, entries)


def command_for(settings: Settings, step: Step) -> list[str] | None:
    """The command a step runs (None for mkdir, done by Python)."""
    if step.action == "create_raid":
        return [
            "mdadm",
            "--create",
            step.target,
            "--level=0",
            f"--name={settings.raid_name}",
            f"--raid-devices={len(step.devices)}",
            "--run",
            *step.devices,
        ]
    if step.action == "assemble_raid":
        return ["mdadm", "--assemble", step.target, *step.devices]
    if step.action == "mkfs":
        # -K: no discard pass; an instance store reads as zeros once wiped, and a discard of terabytes delays boot.
        return ["mkfs.xfs", "-K", "-L", settings.label, step.target]
    if step.action == "mount":
        return ["mount", "-t", "xfs", "-o", settings.mount_options, step.target, settings.mount_point]
    return None


def run(settings: Settings) -> int:
    taken: list[Step] = []
    for _attempt in range(MAX_STEPS):
        step = next_step(settings, observe(settings))
        if step.action == "done":
            print(f"instance storage ready: {step.reason}", flush=True)
            return 0
        if step.action == "error":
            print(f"instance storage failed: {step.reason}", file=sys.stderr, flush=True)
            return 1
        if step in taken:
            print(f"instance storage failed: {step.action} {step.target} took no effect ({step.reason})", file=sys.stderr, flush=True)
            return 1
        taken.append(step)
        print(f"instance storage: {step.action} {step.target}: {step.reason}", flush=True)
        command = command_for(settings, step)
        if command is None:
            os.makedirs(step.target, mode=0o755, exist_ok=True)
            continue
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            print(
                f"instance storage failed: {' '.join(command)} exited {result.returncode}: {result.stderr.strip()}",
                file=sys.stderr,
                flush=True,
            )
            return 1
    print(
        f"instance storage failed: not in place after {MAX_STEPS} steps: {', '.join(s.action for s in taken)}", file=sys.stderr, flush=True
    )
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", default=DEFAULT_SETTINGS_PATH, help="JSON settings written by the instance_storage role")
    args = parser.parse_args(argv)
    try:
        with open(args.settings, encoding="utf-8") as handle:
            settings = Settings.from_dict(json.load(handle))
    except (OSError, ValueError) as e:  # ValueError: bad JSON (JSONDecodeError, UnicodeDecodeError) or a bad setting
        print(f"instance storage failed: {args.settings}: {e}", file=sys.stderr)
        return 1
    return run(settings)


if __name__ == "__main__":
    sys.exit(main())
