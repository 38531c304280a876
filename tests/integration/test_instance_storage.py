"""The instance storage boot script (roles/instance_storage/files/instance_storage.py) against real block devices.

Stand-ins: loop devices over sparse files for the NVMe instance store (linked under a temporary directory named like
/dev/disk/by-id/nvme-Amazon_EC2_NVMe_Instance_Storage_*), real blkid, mkfs.xfs and mount on this machine's kernel. The
kernel here has no md RAID (no /proc/mdstat), so the RAID0 case runs a stand-in `mdadm` that records its arguments and
links the array path to a third loop device; mdadm itself is not exercised. Skipped, saying why, where loop devices,
mkfs.xfs or mount are not permitted (not root, a container without loop devices).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "roles" / "instance_storage" / "files" / "instance_storage.py"
# mkfs.xfs refuses filesystems under 300 MiB; the files are sparse.
DEVICE_BYTES = 320 * 1024 * 1024
LABEL = "inferops"
STANDIN_MDADM = """#!/bin/sh
# Stand-in mdadm (no md RAID in this kernel): records its arguments, links the array path to the stand-in array device.
echo "$@" >> "{log}"
[ "$1" = --create ] || [ "$1" = --assemble ] || exit 1
mkdir -p "$(dirname "$2")" && ln -sfn "{array}" "$2"
"""


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, check=check)


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "loop devices and mount need root"
    for tool in ("losetup", "mkfs.xfs", "blkid", "mount", "wipefs"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (xfsprogs, util-linux: requirements-debian.txt)"
    return None


class LoopDevices:
    """Loop devices over sparse files, detached at the end."""

    def __init__(self, root: Path):
        self.root = root
        self.devices: list[str] = []

    def add(self) -> str:
        image = self.root / f"disk{len(self.devices)}.img"
        with image.open("wb") as handle:
            handle.truncate(DEVICE_BYTES)
        result = _run("losetup", "-f", "--show", str(image), check=False)
        if result.returncode != 0:
            pytest.skip(f"losetup is not permitted here: {result.stderr.strip()}")
        self.devices.append(result.stdout.strip())
        return self.devices[-1]

    def detach(self) -> None:
        for device in self.devices:
            _run("losetup", "-d", device, check=False)


@pytest.fixture
def storage(tmp_path):
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    loops = LoopDevices(tmp_path)
    by_id = tmp_path / "by-id"
    by_id.mkdir()
    mount_point = tmp_path / "models"
    yield loops, by_id, mount_point
    _run("umount", str(mount_point), check=False)
    loops.detach()


def _link(by_id: Path, device: str, serial: str) -> None:
    (by_id / f"nvme-Amazon_EC2_NVMe_Instance_Storage_{serial}").symlink_to(device)


def _boot(tmp_path: Path, by_id: Path, mount_point: Path, mode: str = "raid0", path_prefix: str = "") -> subprocess.CompletedProcess:
    """One boot's run of the script, as the unit runs it."""
    settings = tmp_path / "instance-storage.json"
    settings.write_text(
        json.dumps(
            {
                "mode": mode,
                "mount_point": str(mount_point),
                "device_glob": str(by_id / "nvme-Amazon_EC2_NVMe_Instance_Storage_*"),
                "label": LABEL,
                "raid_device": str(tmp_path / "md" / "inferops-models"),
                "raid_name": "inferops-models",
                "mount_options": "defaults,noatime",
            }
        )
    )
    env = {**os.environ, "PATH": f"{path_prefix}{os.environ['PATH']}"}
    return subprocess.run([sys.executable, str(SCRIPT), "--settings", str(settings)], capture_output=True, text=True, env=env, check=False)


def _mounted(mount_point: Path) -> tuple[str, str]:
    """(source, fstype) at mount_point from findmnt."""
    out = _run("findmnt", "-n", "-o", "SOURCE,FSTYPE", "--mountpoint", str(mount_point), check=False).stdout.split()
    return (out[0], out[1]) if out else ("", "")


def test_one_device_formatted_mounted_kept_on_reboot_and_formatted_again_after_a_wipe(storage, tmp_path):
    loops, by_id, mount_point = storage
    device = loops.add()
    _link(by_id, device, "AWS1")

    first = _boot(tmp_path, by_id, mount_point)
    if first.returncode != 0 and "mount" in first.stderr and "permission" in first.stderr.lower():
        pytest.skip(f"mount is not permitted here: {first.stderr.strip()}")
    assert first.returncode == 0, first.stderr
    assert "mkfs" in first.stdout
    assert _mounted(mount_point) == (device, "xfs")
    assert _run("blkid", "-p", "-o", "value", "-s", "LABEL", device).stdout.strip() == LABEL
    (mount_point / "model.plan").write_text("weights")

    # A reboot keeps the instance store: mounted again, not reformatted.
    _run("umount", str(mount_point))
    again = _boot(tmp_path, by_id, mount_point)
    assert again.returncode == 0, again.stderr
    assert "mkfs" not in again.stdout
    assert (mount_point / "model.plan").read_text() == "weights"

    # A stop/start wipes the instance store: formatted again, the old files gone.
    _run("umount", str(mount_point))
    _run("wipefs", "-a", device)
    wiped = _boot(tmp_path, by_id, mount_point)
    assert wiped.returncode == 0, wiped.stderr
    assert "stop/start wiped" in wiped.stdout
    assert _mounted(mount_point) == (device, "xfs")
    assert not (mount_point / "model.plan").exists()

    # Already in place: nothing to do.
    settled = _boot(tmp_path, by_id, mount_point)
    assert settled.returncode == 0 and settled.stdout.startswith("instance storage ready"), settled.stdout


def test_foreign_filesystem_is_refused_and_not_mounted(storage, tmp_path):
    loops, by_id, mount_point = storage
    device = loops.add()
    _link(by_id, device, "AWS1")
    _run("mkfs.xfs", "-q", "-L", "someone", device)

    refused = _boot(tmp_path, by_id, mount_point)
    assert refused.returncode == 1
    assert "'someone'" in refused.stderr and "wipefs -a" in refused.stderr
    assert _mounted(mount_point) == ("", "")
    assert _run("blkid", "-p", "-o", "value", "-s", "LABEL", device).stdout.strip() == "someone"


def test_several_devices_become_one_raid0_array_through_mdadm(storage, tmp_path):
    """RAID0 through a STAND-IN mdadm: the array path is linked to a third loop device."""
    loops, by_id, mount_point = storage
    members = [loops.add(), loops.add()]
    for serial, device in zip(("AWS1", "AWS2"), members, strict=True):
        _link(by_id, device, serial)
    array = loops.add()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "mdadm.log"
    (bin_dir / "mdadm").write_text(STANDIN_MDADM.format(log=log, array=array))
    (bin_dir / "mdadm").chmod(0o755)

    booted = _boot(tmp_path, by_id, mount_point, path_prefix=f"{bin_dir}:")
    assert booted.returncode == 0, booted.stderr
    raid_device = tmp_path / "md" / "inferops-models"
    assert log.read_text().split() == [
        "--create",
        str(raid_device),
        "--level=0",
        "--name=inferops-models",
        "--raid-devices=2",
        "--run",
        *sorted(members),
    ]
    assert _mounted(mount_point) == (array, "xfs")

    # mode none leaves the devices alone: the path is a directory on the root volume.
    _run("umount", str(mount_point))
    left_alone = _boot(tmp_path, by_id, mount_point, mode="none", path_prefix=f"{bin_dir}:")
    assert left_alone.returncode == 0 and "mode none" in left_alone.stdout
    assert _mounted(mount_point) == ("", "") and mount_point.is_dir()
