"""Adversarial instance storage at boot (issue 28, classes "instance storage mounts over a non-empty directory and calls
a vanished device blank" and "instance storage crashes on some bad configs").

Stand-ins: what blkid, the device glob and /proc/self/mounts report, given as values to the pure decision; for the
probe, a path that is no block device (a vanished /dev node) and a regular file; for the settings, files in a
temporary directory. The settings cases are property-style: drawn from a seeded random generator.
"""

from __future__ import annotations

import dataclasses
import json
import random

import pytest

from tests.unit.test_instance_storage_decisions import MOUNT_MODE, ONE, OURS, SETTINGS, TWO, Signature, instance_storage, step


@pytest.mark.parametrize(
    ("settings", "devices", "signatures"),
    [
        (MOUNT_MODE, ONE, {}),
        (MOUNT_MODE, ONE, {ONE[0]: OURS}),
        (SETTINGS, TWO, {}),
    ],
    ids=["blank-device", "our-xfs", "raid0-blank"],
)
def test_adversarial_instance_storage_never_mounts_over_a_non_empty_directory(settings, devices, signatures):
    """Stand-in: observed values. The mount point holds files (models a root-volume fallback left, an operator's
    notes): refused before any mkfs, mdadm or mount, naming the directory, what it holds and the fix."""
    decided = step(settings, devices=devices, signatures=signatures, mount_point_exists=True, mount_point_entries=("resnet50", "notes.txt"))
    assert decided.action == "error"
    assert settings.mount_point in decided.reason and "resnet50, notes.txt" in decided.reason and "move it away" in decided.reason
    empty = step(settings, devices=devices, signatures=signatures, mount_point_exists=True)
    assert empty.action != "error"


@pytest.mark.parametrize(("settings", "devices"), [(MOUNT_MODE, ONE), (SETTINGS, TWO)], ids=["mount", "raid0"])
def test_adversarial_instance_storage_a_vanished_device_is_never_called_blank(settings, devices):
    """Stand-in: observed values. A device the glob listed is gone by the probe: an error naming it, no mkfs and no
    RAID creation (a blank device would be formatted)."""
    signatures = {devices[-1]: Signature(present=False)}
    decided = step(settings, devices=devices, signatures=signatures, mount_point_exists=True)
    assert decided.action == "error" and devices[-1] in decided.reason and "vanished" in decided.reason


def test_adversarial_instance_storage_the_probe_tells_a_vanished_device_from_a_blank_one(tmp_path):
    """Stand-ins: a path that does not exist (a /dev node gone) and a regular file: neither is a blank device."""
    assert instance_storage.probe(str(tmp_path / "nvme9n1")) == Signature(present=False)
    (tmp_path / "file").write_bytes(b"\0" * 4096)
    assert instance_storage.probe(str(tmp_path / "file")) == Signature(present=False)


def test_adversarial_instance_storage_bad_settings_are_named_never_a_crash(tmp_path, capsys):
    """Property: 400 settings files with hostile values (wrong JSON types, relative paths, '/', spaces in mount
    options, missing keys, a JSON array, no file): main() exits 1 naming the settings file, or the settings are
    valid; never an exception."""
    rng = random.Random(2802)
    good = {name: getattr(SETTINGS, name) for name in instance_storage.Settings.__dataclass_fields__}
    hostile = [None, 1, True, [], {}, "", "/", "relative", "a b", "raid5", "x" * 20, "/dev/md/x", "defaults,noatime", "/mnt/ok"]
    path = tmp_path / "settings.json"
    for case in range(400):
        given: object = dict(good)
        for name in rng.sample(list(good), rng.randint(1, 3)):
            if rng.random() < 0.15:
                given.pop(name)
            else:
                given[name] = rng.choice(hostile)
        if case % 50 == 0:
            given = [given]
        if case % 97 == 0:
            path.unlink(missing_ok=True)
        else:
            path.write_text(json.dumps(given))
        try:
            settings = instance_storage.Settings.from_dict(given)
        except (ValueError, TypeError):
            settings = None
        if settings is None or not path.exists():
            assert instance_storage.main(["--settings", str(path)]) == 1
            assert f"instance storage failed: {path}" in capsys.readouterr().err
        else:
            assert dataclasses.asdict(settings)["mount_point"].startswith("/")
