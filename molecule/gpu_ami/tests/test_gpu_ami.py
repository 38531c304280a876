"""Verifies the AMI baked by playbooks/build_ami.yml on the SIMULATED AL2023 host (molecule/gpu_ami).

Stand-ins (tests/fixtures/al2023/README.md): the RPMs, the kernel modules the kmod packages carry, nvidia-smi (told
how many GPUs to report through NVIDIA_SMI_STANDIN_STATE), nv-fabricmanager, and sysfs-like PCI trees
(NVIDIA_KMOD_LOAD_PCI_DEVICES) holding the device ids of old and new GPU generations and of an NVSwitch.
"""

from __future__ import annotations

import json

import pytest

from tests.fixtures.al2023.build import (
    DCGM_NEWER,
    DCGM_PINNED,
    DRIVER_NEWER,
    KERNEL_MODULE_FILES,
    MOUNT_POINT,
    NVLSM_VERSION,
    STANDIN_PCI_DEVICES,
)
from tests.fixtures.al2023.gpu_health_drill import dcgm_health_json

DRIVER_PACKAGES = (
    "nvidia-driver",
    "nvidia-driver-cuda",
    "nvidia-kmod-common",
    "nvidia-modprobe",
    "nvidia-persistenced",
    "libnvidia-ml",
    "libnvidia-cfg",
)
TOOLKIT_PACKAGES = ("nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools", "libnvidia-container1")
DRIVER_UNITS = ("nvidia-kmod-load.service", "nvidia-persistenced.service", "nvidia-fabricmanager.service")
KMOD_LOAD = "/usr/libexec/inferops/nvidia-kmod-load"
GPU_HEALTH = "/usr/libexec/inferops/gpu-health"


@pytest.fixture(scope="module")
def pins(host) -> dict:
    """The pinned versions molecule.yml passes, as Packer would."""
    return host.ansible.get_variables()


def rpm_versions(host, *names: str) -> dict[str, str]:
    out = host.check_output(f"rpm -q --queryformat '%{{NAME}} %{{VERSION}}\\n' {' '.join(names)}")
    return dict(line.split(" ") for line in out.splitlines())


def versionlocks(host) -> list[str]:
    return [
        line for line in host.file("/etc/dnf/plugins/versionlock.list").content_string.splitlines() if line and not line.startswith("#")
    ]


def systemd_props(host, unit: str, *props: str) -> dict[str, str]:
    out = host.check_output("systemctl show -p %s %s", ",".join(props), unit)
    return dict(line.split("=", 1) for line in out.splitlines())


def standin_pci_tree(host, name: str, *devices: str) -> str:
    """A sysfs-like PCI tree under /tmp holding the named STANDIN_PCI_DEVICES (vendor, device id, class)."""
    root = f"/tmp/gpu_ami-pci-{name}"
    host.check_output(f"rm -rf {root} && mkdir -p {root}")
    for slot, device in enumerate(devices):
        device_id, pci_class = STANDIN_PCI_DEVICES[device]
        path = f"{root}/0000:00:{slot + 16:02x}.0"
        host.check_output(
            f"mkdir -p {path} && echo 0x10de > {path}/vendor && echo {device_id} > {path}/device && echo {pci_class} > {path}/class"
        )
    return root


def test_pinned_driver_toolkit_docker_and_ecs_init_are_installed(host, pins):
    kmod = "kmod-nvidia-open-dkms"  # the resident flavour: the first of nvidia_driver_kmod_flavours
    versions = rpm_versions(host, *DRIVER_PACKAGES, "nvidia-fabricmanager", kmod, *TOOLKIT_PACKAGES, "docker", "ecs-init")
    for name in (*DRIVER_PACKAGES, "nvidia-fabricmanager", kmod):
        assert versions[name] == pins["nvidia_driver_version"], name
    for name in TOOLKIT_PACKAGES:
        assert versions[name] == pins["nvidia_container_toolkit_version"], name
    assert versions["docker"] == pins["ecs_agent_docker_version"]
    assert versions["ecs-init"] == pins["ecs_agent_ecs_init_version"]


def test_kernel_build_packages_match_the_running_kernel(host):
    uname_r = host.check_output("uname -r")
    for name in ("kernel-devel", "kernel-headers", "kernel-modules-extra", "dkms"):
        spec = name if name == "dkms" else f"{name}-{uname_r}"
        assert host.run(f"rpm -q --whatprovides {spec}").rc == 0, spec


def test_every_pinned_package_is_versionlocked(host):
    locks = versionlocks(host)
    wanted = host.check_output(
        "rpm -qa --queryformat '%{NAME}-%{EPOCHNUM}:%{VERSION}-%{RELEASE}\\n' 'kernel*' 'nvidia*' 'kmod-nvidia*' 'libnvidia*' docker ecs-init"
    ).splitlines()
    assert len(wanted) >= 16
    assert sorted(f"{nevr}.*" for nevr in wanted if f"{nevr}.*" not in locks) == []


def test_the_newer_driver_in_the_repository_was_not_picked(host):
    offered = host.check_output(f"ls {MOUNT_POINT}/nvidia")
    assert f"nvidia-driver-{DRIVER_NEWER}-" in offered  # the repository does offer it ...
    installed = host.check_output("rpm -qa --queryformat '%{NAME}-%{VERSION}\\n' 'nvidia*' 'kmod-nvidia*' 'libnvidia*'")
    assert DRIVER_NEWER not in installed  # ... and it is not installed


def test_versionlock_holds_the_driver_against_an_upgrade(host):
    # Metadata goes to a throwaway directory; whatever dnf still writes under /var/cache/dnf is removed again, so
    # the image stays as ami_cleanup left it.
    cache_before = set(host.check_output("ls -A /var/cache/dnf").split())
    dnf = "dnf --setopt=cachedir=/tmp/gpu_ami-verify-cache --assumeno"
    locked = host.run(f"{dnf} upgrade nvidia-driver")
    unlocked = host.run(f"{dnf} --disableplugin=versionlock upgrade nvidia-driver")
    added = set(host.check_output("ls -A /var/cache/dnf").split()) - cache_before
    host.run("rm -rf /tmp/gpu_ami-verify-cache " + " ".join(f"/var/cache/dnf/{name}" for name in added))
    assert DRIVER_NEWER not in locked.stdout + locked.stderr
    assert DRIVER_NEWER in unlocked.stdout + unlocked.stderr  # the lock, not the repository, is what holds it


def test_docker_registers_the_nvidia_runtime_keeping_runc_and_the_users_keys(host):
    config = json.loads(host.file("/etc/docker/daemon.json").content_string)
    assert config["runtimes"]["nvidia"]["path"] == "/usr/bin/nvidia-container-runtime"
    assert config["default-runtime"] == "runc"
    # Seeded by prepare.yml before the bake.
    assert config["log-driver"] == "json-file"
    assert config["log-opts"] == {"max-size": "50m", "max-file": "3"}
    assert config["runtimes"]["crun"] == {"path": "/usr/bin/crun"}


def test_ecs_instance_config_enables_gpus_and_outlasts_tritons_exit(host, pins):
    lines = host.file("/var/lib/ecs/ecs.config").content_string.splitlines()
    config = dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))
    assert config["ECS_ENABLE_GPU_SUPPORT"] == "true"
    assert config["ECS_ENABLE_CONTAINER_METADATA"] == "true"
    assert config["ECS_IMAGE_PULL_BEHAVIOR"] == "prefer-cached"
    stop_timeout_s = int(config["ECS_CONTAINER_STOP_TIMEOUT"].removesuffix("s"))
    assert stop_timeout_s > pins.get("ecs_agent_triton_exit_timeout_s", 30) + pins.get("ecs_agent_triton_drain_s", 15)
    for key in ("ECS_ENGINE_TASK_CLEANUP_WAIT_DURATION", "ECS_IMAGE_CLEANUP_INTERVAL", "ECS_IMAGE_MINIMUM_CLEANUP_AGE"):
        assert config[key]
    # /etc/ecs/ecs.config belongs to user data: untouched.
    assert host.file("/etc/ecs/ecs.config").content_string == "ECS_CLUSTER=user-data-cluster\n"


@pytest.mark.parametrize("unit", ["docker.service", "ecs.service"])
def test_docker_and_ecs_start_after_the_driver_units_without_requiring_them(host, unit):
    props = systemd_props(host, unit, "After", "Wants", "Requires", "UnitFileState")
    assert props["UnitFileState"] == "enabled"
    for driver_unit in DRIVER_UNITS:
        assert driver_unit in props["After"].split(), (unit, props["After"])
        assert driver_unit in props["Wants"].split(), (unit, props["Wants"])
        assert driver_unit not in props["Requires"].split()  # CPU instances must still boot
    if unit == "ecs.service":
        assert "docker.service" in props["After"].split()


def test_the_module_loader_runs_before_persistenced_fabricmanager_docker_and_ecs(host):
    props = systemd_props(host, "nvidia-kmod-load.service", "Before", "UnitFileState")
    assert props["UnitFileState"] == "enabled"
    assert {"nvidia-persistenced.service", "nvidia-fabricmanager.service", "docker.service", "ecs.service"} <= set(props["Before"].split())
    assert systemd_props(host, "nvidia-persistenced.service", "UnitFileState")["UnitFileState"] == "enabled"


def test_module_loader_exits_0_without_an_nvidia_device(host):
    vendors = host.run("cat /sys/bus/pci/devices/*/vendor").stdout.split()
    assert "0x10de" not in vendors, "this check needs a host without an NVIDIA GPU"
    host.check_output("systemctl start nvidia-kmod-load.service")
    props = systemd_props(host, "nvidia-kmod-load.service", "ActiveState", "Result", "ExecMainStatus")
    assert props == {"ActiveState": "active", "Result": "success", "ExecMainStatus": "0"}
    # persistenced is skipped, not failed, without the device nodes.
    host.run("systemctl start nvidia-persistenced.service")
    assert systemd_props(host, "nvidia-persistenced.service", "Result", "ConditionResult") == {"Result": "success", "ConditionResult": "no"}


def test_both_kernel_module_flavours_are_archived_for_the_running_kernel(host):
    uname_r = host.check_output("uname -r")
    for flavour in ("open", "proprietary"):
        for module in KERNEL_MODULE_FILES:
            archived = host.file(f"/usr/lib/modules/{uname_r}/inferops-nvidia-{flavour}/{module}")
            assert archived.exists, archived.path
            assert f"{flavour} flavour" in archived.content_string  # the stand-in module names the package it came from
    # The packages conflict: only the resident (open) one stays installed, and it is the one locked.
    assert host.run("rpm -q kmod-nvidia-latest-dkms").rc != 0
    assert any(line.startswith("kmod-nvidia-open-dkms-0:") for line in versionlocks(host))


@pytest.mark.parametrize(
    ("gpus", "flavour"),
    [
        (("v100",), "proprietary"),  # Volta (p3): below Turing, the open modules cannot drive it
        (("t4",), "open"),  # Turing (g4dn), the oldest generation the open modules drive
        (("a10g", "a10g"), "open"),
        (("h100", "nvswitch"), "open"),  # an NVSwitch does not count as a GPU
    ],
)
def test_the_module_loader_picks_the_flavour_by_gpu_generation(host, gpus, flavour):
    pci = standin_pci_tree(host, "-".join(gpus), *gpus)
    result = host.run(f"NVIDIA_KMOD_LOAD_PCI_DEVICES={pci} {KMOD_LOAD}")
    assert f"-> the {flavour} kernel module" in result.stdout, result.stdout + result.stderr
    uname_r = host.check_output("uname -r")
    depmod_conf = host.file("/etc/depmod.d/inferops-nvidia.conf").content_string
    assert f"override nvidia {uname_r} inferops-nvidia-{flavour}" in depmod_conf
    # Loading itself fails here: the stand-in modules are not kernel modules, and the container has no GPU.
    assert result.rc != 0
    host.run("rm -f /etc/depmod.d/inferops-nvidia.conf")


def test_fabric_manager_starts_after_the_driver_and_before_docker_and_ecs(host):
    props = systemd_props(host, "nvidia-fabricmanager.service", "After", "Before", "UnitFileState", "ExecCondition")
    assert props["UnitFileState"] == "enabled"
    assert {"nvidia-kmod-load.service", "nvidia-persistenced.service"} <= set(props["After"].split())
    assert {"docker.service", "ecs.service"} <= set(props["Before"].split())
    assert "/usr/libexec/inferops/nvidia-has-nvswitch" in props["ExecCondition"]


def test_fabric_manager_is_skipped_without_an_nvswitch_and_runs_with_one(host):
    host.run("systemctl stop nvidia-fabricmanager.service")
    host.check_output("systemctl start nvidia-fabricmanager.service")  # no NVSwitch here: skipped, not failed
    assert systemd_props(host, "nvidia-fabricmanager.service", "ActiveState", "Result")["ActiveState"] == "inactive"
    assert systemd_props(host, "nvidia-fabricmanager.service", "Result")["Result"] != "failed"
    pci = standin_pci_tree(host, "p4d", "h100", "nvswitch")
    host.check_output(f"systemctl set-environment NVIDIA_KMOD_LOAD_PCI_DEVICES={pci}")
    try:
        host.check_output("systemctl start nvidia-fabricmanager.service")
        assert systemd_props(host, "nvidia-fabricmanager.service", "ActiveState")["ActiveState"] == "active"
    finally:
        host.run("systemctl stop nvidia-fabricmanager.service")
        host.run("systemctl unset-environment NVIDIA_KMOD_LOAD_PCI_DEVICES")


def test_the_newer_fabric_manager_was_not_picked(host, pins):
    assert f"nvidia-fabricmanager-{DRIVER_NEWER}-" in host.check_output(f"ls {MOUNT_POINT}/nvidia")
    assert rpm_versions(host, "nvidia-fabricmanager")["nvidia-fabricmanager"] == pins["nvidia_driver_version"]
    assert any(line.startswith(f"nvidia-fabricmanager-0:{pins['nvidia_driver_version']}-") for line in versionlocks(host))


def test_the_ecs_agent_requires_the_gpu_count_check(host):
    ecs = systemd_props(host, "ecs.service", "Requires", "After")
    assert "gpu-count-check.service" in ecs["Requires"].split()
    assert "gpu-count-check.service" in ecs["After"].split()
    check = systemd_props(host, "gpu-count-check.service", "After", "UnitFileState")
    assert {"nvidia-kmod-load.service", "nvidia-fabricmanager.service"} <= set(check["After"].split())
    watch = systemd_props(host, "gpu-health-watch.service", "UnitFileState")
    assert watch["UnitFileState"] == "enabled"
    counts = json.loads(host.file("/etc/inferops/gpu-instance-types.json").content_string)
    assert counts["g5.48xlarge"] == {"gpus": 8} and counts["p5.48xlarge"] == {"gpus": 8} and counts["g5g.16xlarge"] == {"gpus": 2}
    assert counts["p6-b200.48xlarge"] == {"gpus": 8} and counts["g6e.12xlarge"] == {"gpus": 4}
    assert counts["g6f.large"] == {"gpus": 0, "flavour": "grid"}


@pytest.mark.parametrize(("gpus_seen", "rc"), [(3, 1), (4, 0)])
def test_the_gpu_count_check_refuses_a_short_instance(host, gpus_seen, rc):
    # The stand-in nvidia-smi reports gpus_seen GPUs; g5.12xlarge has 4 (the AMI's table). No AWS here: action drain.
    settings = json.loads(host.file("/etc/inferops/gpu-health.json").content_string)
    settings.update(action="drain", count_wait_s=1, count_poll_s=0.2)
    host.check_output(f"echo '{json.dumps(settings)}' > /tmp/gpu_ami-health.json")
    state = "/tmp/gpu_ami-gpus.csv"
    host.check_output(f'rm -f {state}; for i in $(seq 0 {gpus_seen - 1}); do echo "$i, 00000000:00:1$i.0, 0, Not Active" >> {state}; done')
    result = host.run(
        f"NVIDIA_SMI_STANDIN_STATE={state} {GPU_HEALTH} check-count --settings /tmp/gpu_ami-health.json --instance-type g5.12xlarge"
    )
    assert result.rc == rc, result.stdout + result.stderr
    if rc:
        assert "g5.12xlarge should have 4 GPUs (the AMI's instance-type table) but nvidia-smi sees 3" in result.stdout
        assert "keeping the ECS agent from registering" in result.stdout
    else:
        assert "has 4 of 4 GPUs" in result.stdout


def test_ecs_waits_for_the_gpu_device_and_gives_up_after_a_bound(host):
    wait = "/usr/libexec/inferops/ecs-wait-nvidia-device"
    assert host.run(f"{wait} 1").rc == 0  # no NVIDIA device: no wait
    host.check_output("mkdir -p /tmp/gpu_ami-pci/0000:00:1e.0 && echo 0x10de > /tmp/gpu_ami-pci/0000:00:1e.0/vendor")
    gone = host.run(f"NVIDIA_KMOD_LOAD_PCI_DEVICES=/tmp/gpu_ami-pci ECS_WAIT_NVIDIA_DEVICE=/tmp/gpu_ami-missing {wait} 2")
    assert gone.rc == 1
    assert "did not appear within 2s" in gone.stderr
    present = host.run(f"NVIDIA_KMOD_LOAD_PCI_DEVICES=/tmp/gpu_ami-pci ECS_WAIT_NVIDIA_DEVICE=/tmp/gpu_ami-pci {wait} 2")
    assert present.rc == 0
    drop_in = host.file("/etc/systemd/system/ecs.service.d/10-inferops-gpu.conf").content_string
    assert f"ExecStartPre={wait} 120" in drop_in


def test_nouveau_is_blacklisted(host):
    assert "blacklist nouveau" in host.file("/etc/modprobe.d/inferops-blacklist-nouveau.conf").content_string


def test_the_manifest_records_every_pin(host, pins):
    manifest = json.loads(host.file("/etc/inferops/ami-manifest.json").content_string)
    assert manifest["build_id"] == pins["ami_cleanup_build_id"]
    assert manifest["nvidia_driver_version"] == pins["nvidia_driver_version"]
    assert manifest["kernel"] == host.check_output("uname -r")
    # The model host path the instance storage was baked with: what the fleet must mount (roles/fleet_capacity).
    instance_storage = json.loads(host.file("/etc/inferops/instance-storage.json").content_string)
    assert manifest["model_host_path"] == instance_storage["mount_point"] == "/mnt/models"
    packages = manifest["packages"]
    assert packages["nvidia-driver"].startswith(pins["nvidia_driver_version"] + "-")
    assert packages["kmod-nvidia-open-dkms"].startswith(pins["nvidia_driver_version"] + "-")
    assert packages["docker"].startswith(pins["ecs_agent_docker_version"] + "-")
    assert packages["ecs-init"].startswith(pins["ecs_agent_ecs_init_version"] + "-")
    assert set(manifest["versionlock"]) == set(versionlocks(host))


def test_per_instance_state_was_removed(host):
    for path in (
        "/etc/ssh/ssh_host_ed25519_key",
        "/etc/ssh/ssh_host_ed25519_key.pub",
        "/root/.ssh/authorized_keys",
        "/home/ec2-user/.ssh/authorized_keys",
        "/root/.bash_history",
        "/home/ec2-user/.bash_history",
        "/var/lib/cloud/instances",
        "/var/log/cloud-init.log",
        "/var/lib/ecs/data/agent.db",
    ):
        assert not host.file(path).exists, path
    assert host.file("/var/lib/cloud/seed/nocloud/meta-data").exists  # the seed stays
    assert host.check_output("ls -A /var/cache/dnf") == ""
    assert host.file("/etc/machine-id").content_string == ""


def test_instance_storage_runs_before_docker_and_ecs_and_falls_back_to_a_directory(host):
    """The simulated host has no instance store (no loop device is passed in): the directory fallback is what runs here.

    Formatting and mounting real block devices is tests/integration/test_instance_storage.py (loop devices on the CI
    machine); the decisions per mode and device count are tests/unit/test_instance_storage_decisions.py.
    """
    unit = "inferops-instance-storage.service"
    props = systemd_props(host, unit, "Before", "After", "UnitFileState")
    assert {"inferops-model-agent.service", "docker.service", "ecs.service"} <= set(props["Before"].split())
    assert "local-fs.target" in props["After"].split()
    assert props["UnitFileState"] == "enabled"
    assert unit in systemd_props(host, "ecs.service", "Requires")["Requires"].split()
    settings = json.loads(host.file("/etc/inferops/instance-storage.json").content_string)
    assert settings["mode"] == "raid0" and settings["mount_point"] == "/mnt/models"

    # A boot in miniature: Docker (the stand-in dockerd) starting pulls the storage unit in and waits for it.
    host.run(f"systemctl stop docker.service ecs.service {unit}")
    host.run("rm -rf /mnt/models")
    try:
        host.check_output("systemctl start docker.service")
        storage = systemd_props(host, unit, "ActiveState", "Result", "ExecMainExitTimestampMonotonic")
        docker = systemd_props(host, "docker.service", "ExecMainStartTimestampMonotonic")
        assert (storage["ActiveState"], storage["Result"]) == ("active", "success")
        assert 0 < int(storage["ExecMainExitTimestampMonotonic"]) <= int(docker["ExecMainStartTimestampMonotonic"])
        assert host.file("/mnt/models").is_directory
        assert not host.mount_point("/mnt/models").exists  # a directory on the root volume, nothing mounted
        # Run again by hand (journald keeps nothing in this container): nothing left to do, and it says why.
        again = host.check_output("/usr/libexec/inferops/instance-storage")
        assert again == (
            "instance storage ready: no instance store device matches /dev/disk/by-id/nvme-Amazon_EC2_NVMe_Instance_Storage_*: "
            "/mnt/models is a directory on the root volume"
        )
    finally:
        # Leave the image as baked.
        host.run(f"systemctl stop docker.service {unit}")
        host.run("rm -rf /mnt/models")


def test_a_fractional_gpu_type_is_refused_with_the_reason(host):
    settings = json.loads(host.file("/etc/inferops/gpu-health.json").content_string)
    settings.update(action="drain", count_wait_s=1, count_poll_s=0.2)
    host.check_output(f"echo '{json.dumps(settings)}' > /tmp/gpu_ami-health.json")
    result = host.run(f"{GPU_HEALTH} check-count --settings /tmp/gpu_ami-health.json --instance-type g6f.large")
    assert result.rc == 1, result.stdout + result.stderr
    assert "g6f.large has a fractional NVIDIA GPU that only NVIDIA's GRID (vGPU) driver drives" in result.stdout
    assert "keeping the ECS agent from registering" in result.stdout


def test_dcgm_is_pinned_locked_and_the_newer_one_not_picked(host):
    assert rpm_versions(host, "datacenter-gpu-manager-4-core")["datacenter-gpu-manager-4-core"] == DCGM_PINNED
    assert f"datacenter-gpu-manager-4-core-{DCGM_NEWER}-" in host.check_output(f"ls {MOUNT_POINT}/nvidia")
    assert any(line.startswith(f"datacenter-gpu-manager-4-core-0:{DCGM_PINNED}-") for line in versionlocks(host))
    manifest = json.loads(host.file("/etc/inferops/ami-manifest.json").content_string)
    assert manifest["packages"]["datacenter-gpu-manager-4-core"].startswith(DCGM_PINNED + "-")


def test_dcgm_starts_after_the_driver_and_before_the_ecs_agent_on_its_socket(host):
    props = systemd_props(host, "nvidia-dcgm.service", "After", "Before", "UnitFileState", "ExecStart")
    assert props["UnitFileState"] == "enabled"
    assert {"nvidia-kmod-load.service", "nvidia-persistenced.service"} <= set(props["After"].split())
    assert "ecs.service" in props["Before"].split()
    assert "--domain-socket /run/nvidia-dcgm/nv-hostengine" in props["ExecStart"]
    # ecs-init's DCGM hook (the ECS agent's GPU health reporting) is on, ordered before the agent too.
    assert systemd_props(host, "dcgm-init.service", "UnitFileState")["UnitFileState"] == "enabled"
    ecs_after = systemd_props(host, "ecs.service", "After")["After"].split()
    assert {"nvidia-dcgm.service", "dcgm-init.service"} <= set(ecs_after)
    # No GPU here: skipped, not failed (a CPU instance boots the same AMI).
    host.run("systemctl start nvidia-dcgm.service")
    assert systemd_props(host, "nvidia-dcgm.service", "Result", "ConditionResult") == {"Result": "success", "ConditionResult": "no"}


def watch_with_standin_dcgm(host, answer: str, seconds: int = 6) -> str:
    """The AMI's watcher for a few seconds against the stand-in dcgmi answering `answer`; its journal lines."""
    settings = json.loads(host.file("/etc/inferops/gpu-health.json").content_string)
    # A state file of its own, removed first: each call is a fresh instance (the watcher keeps its verdict otherwise).
    settings.update(
        action="drain",
        poll_interval_s=1,
        kernel_log_command=["sleep", "60"],
        ecs_agent_metadata_url="http://127.0.0.1:9/v1/metadata",
        state_path="/tmp/gpu_ami-watch-state.json",
    )
    host.check_output("rm -f /tmp/gpu_ami-watch-state.json")
    host.check_output(f"echo '{json.dumps(settings)}' > /tmp/gpu_ami-watch.json")
    host.check_output(f"echo '{answer}' > /tmp/gpu_ami-dcgm.json")
    result = host.run(f"DCGM_STANDIN_HEALTH=/tmp/gpu_ami-dcgm.json timeout {seconds} {GPU_HEALTH} watch --settings /tmp/gpu_ami-watch.json")
    return result.stdout


def test_the_watcher_reads_dcgm_and_a_failed_row_remap_drives_a_drain(host):
    # The drain itself (ECS DRAINING, then Unhealthy) runs against moto in tests/integration/test_gpu_health_watcher.py:
    # this container reaches no AWS, so the ECS agent's endpoint is refused and the watcher keeps trying.
    out = watch_with_standin_dcgm(
        host, dcgm_health_json(0, "Memory", "Failure", "GPU 0 had uncorrectable memory errors and row remapping failed")
    )
    assert "watching DCGM's health watches (group 2)" in out, out
    assert "UNHEALTHY: DCGM row_remap_failure on GPU 0" in out, out
    assert "could not drain the container instance yet" in out, out


def test_a_dcgm_incident_the_policy_does_not_act_on_drains_nothing(host):
    out = watch_with_standin_dcgm(host, dcgm_health_json(0, "Power", "Warning", "GPU 0 power usage is near its limit"))
    assert "DCGM power on GPU 0" in out and "is not counted" in out, out
    assert "UNHEALTHY" not in out and "could not drain" not in out, out


def test_nvlink5_packages_and_ib_umad_only_where_the_hardware_needs_them(host):
    assert rpm_versions(host, "nvlsm")["nvlsm"] == NVLSM_VERSION
    assert host.run("rpm -q libibumad infiniband-diags").rc == 0
    assert any(line.startswith(f"nvlsm-0:{NVLSM_VERSION}-") for line in versionlocks(host))
    props = systemd_props(host, "nvidia-ib-umad.service", "Before", "UnitFileState", "ExecCondition")
    assert props["UnitFileState"] == "enabled"
    assert "nvidia-fabricmanager.service" in props["Before"].split()
    assert "nvidia-ib-umad.service" in systemd_props(host, "nvidia-fabricmanager.service", "After")["After"].split()
    p6 = standin_pci_tree(host, "p6", "b200", "b200")
    p5 = standin_pci_tree(host, "p5", "h100", "nvswitch")
    g5 = standin_pci_tree(host, "g5", "a10g")
    assert host.run(f"NVIDIA_KMOD_LOAD_PCI_DEVICES={p6} /usr/libexec/inferops/nvidia-has-nvlink5").rc == 0
    assert host.run(f"NVIDIA_KMOD_LOAD_PCI_DEVICES={p5} /usr/libexec/inferops/nvidia-has-nvlink5").rc == 1
    # Fabric Manager: NVSwitches on the PCI bus (p5), or an NVLink 5 GPU (p6); not a single-board GPU.
    assert host.run(f"NVIDIA_KMOD_LOAD_PCI_DEVICES={p6} /usr/libexec/inferops/nvidia-has-nvswitch").rc == 0
    assert host.run(f"NVIDIA_KMOD_LOAD_PCI_DEVICES={p5} /usr/libexec/inferops/nvidia-has-nvswitch").rc == 0
    assert host.run(f"NVIDIA_KMOD_LOAD_PCI_DEVICES={g5} /usr/libexec/inferops/nvidia-has-nvswitch").rc == 1
    # Here (no NVIDIA device): skipped by its ExecCondition (systemd's Result "exec-condition"), not failed.
    host.run("systemctl start nvidia-ib-umad.service")
    props = systemd_props(host, "nvidia-ib-umad.service", "ActiveState", "Result")
    assert props["ActiveState"] == "inactive" and props["Result"] in ("success", "exec-condition"), props
