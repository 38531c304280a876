"""Verifies the AMI baked by playbooks/build_ami.yml on the simulated AL2023 host (molecule/gpu_ami)."""

from __future__ import annotations

import json

import pytest

from tests.fixtures.al2023.build import DRIVER_NEWER, MOUNT_POINT

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
DRIVER_UNITS = ("nvidia-kmod-load.service", "nvidia-persistenced.service")


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


def test_pinned_driver_toolkit_docker_and_ecs_init_are_installed(host, pins):
    kmod = "kmod-nvidia-open-dkms" if pins["nvidia_driver_kmod_flavour"] == "open" else "kmod-nvidia-latest-dkms"
    versions = rpm_versions(host, *DRIVER_PACKAGES, kmod, *TOOLKIT_PACKAGES, "docker", "ecs-init")
    for name in (*DRIVER_PACKAGES, kmod):
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


def test_the_module_loader_runs_before_persistenced_docker_and_ecs(host):
    props = systemd_props(host, "nvidia-kmod-load.service", "Before", "UnitFileState")
    assert props["UnitFileState"] == "enabled"
    assert {"nvidia-persistenced.service", "docker.service", "ecs.service"} <= set(props["Before"].split())
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


def test_module_loader_does_load_when_an_nvidia_device_exists(host):
    # A fake PCI tree with an NVIDIA device: the loader must try modprobe (which fails here: no nvidia module).
    host.check_output("mkdir -p /tmp/gpu_ami-pci/0000:00:1e.0 && echo 0x10de > /tmp/gpu_ami-pci/0000:00:1e.0/vendor")
    result = host.run("NVIDIA_KMOD_LOAD_PCI_DEVICES=/tmp/gpu_ami-pci /usr/libexec/inferops/nvidia-kmod-load")
    assert result.rc != 0
    assert "nothing to load" not in result.stdout


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
