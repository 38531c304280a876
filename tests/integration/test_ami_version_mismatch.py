"""The AMI bake fails, naming the packages, when the driver and its kernel module disagree on the version.

Runs the roles on the SIMULATED AL2023 host (tests/fixtures/al2023) against the `mismatch` stand-in repository,
whose kernel-module packages exist only at another version than the userspace driver.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.al2023.build import DRIVER_OLD_KMOD, DRIVER_PINNED, MOUNT_POINT, build_image, build_repository
from tests.harness.ansible import PlaybookRun, run_playbook

OS_REPO = f"[amazonlinux]\nname=Amazon Linux 2023 (test stand-in)\nbaseurl=file://{MOUNT_POINT}/amazonlinux\ngpgcheck=0\n"


@pytest.fixture(scope="module")
def mismatch_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    repo = build_repository(tmp_path_factory.mktemp("gpu_ami") / "repo", variant="mismatch")
    image = build_image()
    name = f"gpu_ami-mismatch-{uuid.uuid4().hex[:8]}"
    subprocess.run(
        ["docker", "run", "-d", "--name", name, "-v", f"{repo}:{MOUNT_POINT}:ro", image, "sleep", "infinity"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    try:
        subprocess.run(
            ["docker", "exec", "-i", name, "sh", "-c", "cat > /etc/yum.repos.d/amazonlinux.repo"], input=OS_REPO, text=True, check=True
        )
        yield name
    finally:
        subprocess.run(["docker", "rm", "-f", name], check=False, capture_output=True)


def run_role(host: str, tmp_path: Path, role: str, tasks_from: str = "main") -> PlaybookRun:
    playbook = tmp_path / "play.yml"
    playbook.write_text(
        f"- hosts: all\n  tasks:\n    - {{ansible.builtin.include_role: {{name: inferops.triton_ecs.{role}, tasks_from: {tasks_from}}}}}\n"
    )
    return run_playbook(
        playbook,
        inventory=f"{host},",
        extra_vars={"nvidia_driver_version": DRIVER_PINNED},
        args=("-c", "community.docker.docker"),
        env={"ANSIBLE_PYTHON_INTERPRETER": "/usr/bin/python3"},
    )


def failure(run: PlaybookRun) -> tuple[str, str]:
    """(task name, message) of the one failed task."""
    failed = [(task["name"], result.get("msg", "")) for task in run.tasks for result in task["hosts"].values() if result.get("failed")]
    assert len(failed) == 1, (run.rc, failed, run.stderr[-2000:])
    return failed[0]


def test_nvidia_driver_refuses_a_repository_without_the_kernel_module_at_the_driver_version(mismatch_host, tmp_path):
    run = run_role(mismatch_host, tmp_path, "nvidia_driver")
    assert run.rc != 0
    task, msg = failure(run)
    assert task.endswith("nvidia_driver : Check that every pinned package is offered at nvidia_driver_version")
    # Both flavours of nvidia_driver_kmod_flavours are needed at the driver version; the repository has neither.
    assert f"do not offer kmod-nvidia-open-dkms, kmod-nvidia-latest-dkms at nvidia_driver_version {DRIVER_PINNED}" in msg
    assert f"kmod-nvidia-open-dkms {DRIVER_OLD_KMOD}" in msg  # what the repository does offer
    assert "NVRM: API mismatch" in msg
    installed = subprocess.run(
        ["docker", "exec", mismatch_host, "rpm", "-qa", "kmod-nvidia*", "nvidia-driver*"], capture_output=True, text=True, check=True
    )
    assert installed.stdout == ""  # nothing half-installed


def test_the_in_build_validation_fails_when_installed_driver_and_kmod_disagree(mismatch_host, tmp_path):
    # What a half-applied `dnf upgrade` leaves: userspace at one version, the kernel module at another.
    rpms = [
        f"{MOUNT_POINT}/nvidia/nvidia-driver-{DRIVER_PINNED}-1.amzn2023.x86_64.rpm",
        f"{MOUNT_POINT}/nvidia/nvidia-kmod-common-{DRIVER_PINNED}-1.amzn2023.x86_64.rpm",
        f"{MOUNT_POINT}/nvidia/kmod-nvidia-open-dkms-{DRIVER_OLD_KMOD}-1.amzn2023.x86_64.rpm",
    ]
    subprocess.run(["docker", "exec", mismatch_host, "rpm", "-i", "--nodeps", *rpms], check=True)
    try:
        run = run_role(mismatch_host, tmp_path, "ami_cleanup", tasks_from="validate")
    finally:
        subprocess.run(
            ["docker", "exec", mismatch_host, "rpm", "-e", "--nodeps", "nvidia-driver", "nvidia-kmod-common", "kmod-nvidia-open-dkms"],
            check=True,
        )
    assert run.rc != 0
    task, msg = failure(run)
    assert task.endswith("ami_cleanup : Check that every driver package carries the same version")
    assert f"NVIDIA driver packages disagree on the version: kmod-nvidia-open-dkms={DRIVER_OLD_KMOD}, nvidia-driver={DRIVER_PINNED}" in msg
    assert "NVRM: API mismatch" in msg
