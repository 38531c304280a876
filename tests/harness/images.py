"""Local base images for the Docker-based tests: no registry can be pulled from, so build from debootstrap.

`python -m tests.harness.images` builds the Debian base once (about 30 s); later calls find it in dockerd.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
DEBIAN_BASE = "inferops-test/debian-base:bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"


def image_exists(ref: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", ref], capture_output=True).returncode == 0


def debian_base() -> str:
    """A minimal Debian bookworm image made with debootstrap and `docker import`."""
    if image_exists(DEBIAN_BASE):
        return DEBIAN_BASE
    rootfs = REPO_ROOT / ".cache" / "debian-rootfs"
    shutil.rmtree(rootfs, ignore_errors=True)
    rootfs.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["debootstrap", "--variant=minbase", "--include=ca-certificates", "bookworm", str(rootfs), DEBIAN_MIRROR],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
    subprocess.run(
        ["docker", "import", "--change", 'CMD ["/bin/bash"]', "-", DEBIAN_BASE], stdin=tar.stdout, check=True, stdout=subprocess.DEVNULL
    )
    if tar.wait() != 0:
        raise RuntimeError("tar of the debootstrap rootfs failed")
    shutil.rmtree(rootfs, ignore_errors=True)
    return DEBIAN_BASE


if __name__ == "__main__":
    print(debian_base())
