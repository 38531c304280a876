"""Pure decisions of the instance storage boot script (roles/instance_storage/files/instance_storage.py).

No stand-in needed: what blkid, the device glob and /proc/self/mounts would report is given as values.
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
from pathlib import Path

import pytest
import yaml

ROLE = Path(__file__).resolve().parents[2] / "roles" / "instance_storage"
sys.path.insert(0, str(ROLE / "files"))
instance_storage = importlib.import_module("instance_storage")
Observed = instance_storage.Observed
Signature = instance_storage.Signature

DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
SETTINGS = instance_storage.Settings.from_dict(
    {name: DEFAULTS[f"instance_storage_{name}"] for name in instance_storage.Settings.__dataclass_fields__}
)
MOUNT_MODE = dataclasses.replace(SETTINGS, mode="mount")
NONE_MODE = dataclasses.replace(SETTINGS, mode="none")
ARRAY = SETTINGS.raid_device
ONE = ("/dev/nvme1n1",)
TWO = ("/dev/nvme1n1", "/dev/nvme2n1")
OURS = Signature("xfs", SETTINGS.label)
MEMBER = Signature("linux_raid_member", "ip-10-0-0-1:inferops-models")


def step(settings, **observed):
    return instance_storage.next_step(settings, Observed(**observed))


def test_defaults_match_the_model_host_path():
    model_defaults = yaml.safe_load((ROLE.parent / "model_repository" / "defaults" / "main.yml").read_text())
    assert SETTINGS.mount_point == model_defaults["model_repository_host_path"]
    assert SETTINGS.mode == "raid0"


@pytest.mark.parametrize("settings", [SETTINGS, MOUNT_MODE, NONE_MODE])
def test_no_device_is_a_directory_on_the_root_volume(settings):
    first = step(settings, devices=())
    assert (first.action, first.target) == ("mkdir", SETTINGS.mount_point)
    assert "a directory on the root volume" in first.reason
    assert step(settings, devices=(), mount_point_exists=True).action == "done"


def test_mode_none_leaves_the_devices_alone():
    first = step(NONE_MODE, devices=TWO, signatures={d: Signature() for d in TWO})
    assert (first.action, first.target) == ("mkdir", SETTINGS.mount_point)
    assert "mode none" in first.reason


@pytest.mark.parametrize("settings", [SETTINGS, MOUNT_MODE])
def test_one_blank_device_is_formatted_then_mounted(settings):
    device = ONE[0]
    assert (step(settings, devices=ONE).action, step(settings, devices=ONE).target) == ("mkfs", device)
    formatted = {device: OURS}
    assert step(settings, devices=ONE, signatures=formatted).action == "mkdir"
    mount = step(settings, devices=ONE, signatures=formatted, mount_point_exists=True)
    assert (mount.action, mount.target) == ("mount", device)
    assert step(settings, devices=ONE, signatures=formatted, mount_point_exists=True, mounted_source=device).action == "done"


def test_several_blank_devices_become_one_raid0_array():
    create = step(SETTINGS, devices=TWO, signatures={d: Signature() for d in TWO})
    assert (create.action, create.target, create.devices) == ("create_raid", ARRAY, TWO)
    assert instance_storage.command_for(SETTINGS, create) == [
        "mdadm",
        "--create",
        ARRAY,
        "--level=0",
        "--name=inferops-models",
        "--raid-devices=2",
        "--run",
        *TWO,
    ]
    members = {d: MEMBER for d in TWO}
    mkfs = step(SETTINGS, devices=TWO, signatures={**members, ARRAY: Signature()}, raid_present=True)
    assert (mkfs.action, mkfs.target) == ("mkfs", ARRAY)
    assert instance_storage.command_for(SETTINGS, mkfs) == ["mkfs.xfs", "-K", "-L", SETTINGS.label, ARRAY]
    mount = step(SETTINGS, devices=TWO, signatures={**members, ARRAY: OURS}, raid_present=True, mount_point_exists=True)
    assert (mount.action, mount.target) == ("mount", ARRAY)
    assert instance_storage.command_for(SETTINGS, mount) == ["mount", "-t", "xfs", "-o", "defaults,noatime", ARRAY, SETTINGS.mount_point]


def test_mount_mode_uses_the_first_device_of_several():
    first = step(MOUNT_MODE, devices=TWO, signatures={d: Signature() for d in TWO})
    assert (first.action, first.target) == ("mkfs", TWO[0])


def test_reboot_assembles_the_array_and_mounts_it_without_formatting():
    """A reboot keeps the instance store: the members carry our array, the array carries our XFS."""
    assemble = step(SETTINGS, devices=TWO, signatures={d: MEMBER for d in TWO})
    assert (assemble.action, assemble.devices) == ("assemble_raid", TWO)
    assert instance_storage.command_for(SETTINGS, assemble) == ["mdadm", "--assemble", ARRAY, *TWO]
    after = step(SETTINGS, devices=TWO, signatures={**{d: MEMBER for d in TWO}, ARRAY: OURS}, raid_present=True, mount_point_exists=True)
    assert after.action == "mount"


def test_one_device_already_formatted_is_mounted_not_reformatted():
    mount = step(SETTINGS, devices=ONE, signatures={ONE[0]: OURS}, mount_point_exists=True)
    assert mount.action == "mount"


def test_stop_start_wiped_devices_are_formatted_again():
    """After a stop/start the instance store is blank again while the mount point directory stays on the root volume."""
    wiped = step(SETTINGS, devices=TWO, signatures={d: Signature() for d in TWO}, mount_point_exists=True)
    assert wiped.action == "create_raid"
    assert "wiped" in wiped.reason
    single = step(SETTINGS, devices=ONE, mount_point_exists=True)
    assert single.action == "mkfs"


@pytest.mark.parametrize(
    ("signature", "shown"),
    [(Signature("ext4", "data"), "ext4"), (Signature("xfs", "someone"), "'someone'"), (MEMBER, "linux_raid_member")],
)
def test_foreign_data_on_a_device_is_refused(signature, shown):
    refused = step(SETTINGS, devices=ONE, signatures={ONE[0]: signature}, mount_point_exists=True)
    assert refused.action == "error"
    assert shown in refused.reason and "wipefs -a" in refused.reason


def test_mixed_raid_members_are_refused():
    refused = step(SETTINGS, devices=TWO, signatures={TWO[0]: MEMBER, TWO[1]: Signature()})
    assert refused.action == "error"
    assert f"{TWO[1]}: blank" in refused.reason and "linux_raid_member" in refused.reason


def test_another_filesystem_at_the_mount_point_is_refused():
    refused = step(SETTINGS, devices=ONE, signatures={ONE[0]: OURS}, mount_point_exists=True, mounted_source="/dev/nvme0n1p1")
    assert refused.action == "error"
    assert "/dev/nvme0n1p1" in refused.reason and "instance_storage_mount_point" in refused.reason


@pytest.mark.parametrize(
    ("field", "value", "fix"), [("mode", "raid1", "instance_storage_mode"), ("label", "x" * 13, "instance_storage_label")]
)
def test_bad_settings_name_the_variable(field, value, fix):
    raw = {**dataclasses.asdict(SETTINGS), field: value}
    with pytest.raises(ValueError, match=fix):
        instance_storage.Settings.from_dict(raw)


def test_find_devices_resolves_links_and_leaves_out_partitions(tmp_path):
    target = tmp_path / "nvme1n1"
    target.touch()
    for name in ("nvme-Amazon_EC2_NVMe_Instance_Storage_AWS1", "nvme-Amazon_EC2_NVMe_Instance_Storage_AWS1_1"):
        (tmp_path / name).symlink_to(target)
    (tmp_path / "nvme-Amazon_EC2_NVMe_Instance_Storage_AWS1-part1").symlink_to(target)
    (tmp_path / "nvme-Amazon_Elastic_Block_Store_vol0").symlink_to(target)
    assert instance_storage.find_devices(str(tmp_path / "nvme-Amazon_EC2_NVMe_Instance_Storage_*")) == (str(target),)
