"""Local base images for the Docker-based tests: no registry can be pulled from, so build from debootstrap.

`python -m tests.harness.images` builds the Debian base once (about 30 s); later calls find it in dockerd.
"""

from __future__ import annotations

import fcntl
import hashlib
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
DEBIAN_BASE = "inferops-test/debian-base:bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
TRITON_CPU_BASE_DOCKERFILE = """\
FROM {debian}
# The python-backend stub links libpython3.11; test models import numpy. python3 runs the role's scripts.
RUN apt-get update \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 python3-numpy libpython3.11 \\
 && rm -rf /var/lib/apt/lists/*
# NGC's image user: triton-server, uid/gid 1000.
RUN groupadd --gid 1000 triton-server && useradd --uid 1000 --gid 1000 --create-home --shell /bin/bash triton-server
# Like NGC, the tree belongs to triton-server: the python backend chmods its stub at model load.
COPY --chown=1000:1000 . /opt/tritonserver/
ENV PATH=/opt/tritonserver/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
WORKDIR /opt/tritonserver
LABEL org.opencontainers.image.title="tritonserver-cpu (test base)" org.opencontainers.image.version="2.51"
"""
# The wheel's tritonserver 2.51 on Debian, laid out like NGC's tritonserver:<yy.mm>-py3 (CPU only). The tag carries a
# hash of the recipe, so a changed recipe never reuses a stale cached image.
TRITON_CPU_BASE = "inferops-test/tritonserver-cpu:2.51-bookworm-" + hashlib.sha256(TRITON_CPU_BASE_DOCKERFILE.encode()).hexdigest()[:8]


def image_exists(ref: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", ref], capture_output=True, check=False).returncode == 0


@contextmanager
def build_lock() -> Iterator[None]:
    """One base-image build at a time across processes: pytest-xdist workers share dockerd and the rootfs directory."""
    path = REPO_ROOT / ".cache" / "images.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def debian_base() -> str:
    """A minimal Debian bookworm image made with debootstrap and `docker import`."""
    if image_exists(DEBIAN_BASE):
        return DEBIAN_BASE
    with build_lock():
        if not image_exists(DEBIAN_BASE):  # another worker may have built it while this one waited
            _debootstrap_import()
    return DEBIAN_BASE


def _debootstrap_import() -> None:
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


def triton_cpu_base() -> str:
    """A CPU stand-in for NGC's tritonserver image: the Debian base plus the wheel's server tree at /opt/tritonserver.

    Like NGC: bin/, lib/, backends/python (with the 3.11 stub), caches/ under /opt/tritonserver, user triton-server
    (uid 1000), python3. Unlike NGC: no CUDA, no nvidia-smi. Cached in dockerd once built (about a minute).
    """
    if image_exists(TRITON_CPU_BASE):
        return TRITON_CPU_BASE
    from .triton import triton_home

    home = triton_home()
    dockerfile = TRITON_CPU_BASE_DOCKERFILE.format(debian=debian_base())  # before the lock: debian_base takes it too
    with build_lock():
        if image_exists(TRITON_CPU_BASE):
            return TRITON_CPU_BASE
        build = subprocess.run(
            ["docker", "build", "--quiet", "-t", TRITON_CPU_BASE, "-f", "-", str(home)],
            input=dockerfile.encode(),
            check=False,
            capture_output=True,
        )
    if build.returncode != 0:
        raise RuntimeError(f"building {TRITON_CPU_BASE} failed:\n{build.stderr.decode(errors='replace')[-3000:]}")
    return TRITON_CPU_BASE


# The CPU base with Triton's libraries in the loader cache, as the triton_image role's Dockerfile registers them (the
# python-backend stub finds them there): what the awsvpc task stand-in runs, its scripts bind-mounted from the checkout.
TASK_IMAGE_DOCKERFILE = """\
FROM {base}
USER root
RUN printf '%s\\n' {library_dirs} > /etc/ld.so.conf.d/inferops-triton.conf && ldconfig
USER 1000
WORKDIR /opt/tritonserver
"""


def task_image() -> str:
    """The image of the awsvpc task stand-in (tests/harness/awsvpc.py): the CPU base, libraries registered with the
    loader from the role's `triton_image_library_dirs`. Cached in dockerd; the tag carries a hash of the recipe."""
    defaults = yaml.safe_load((REPO_ROOT / "roles" / "triton_image" / "defaults" / "main.yml").read_text())
    dockerfile = TASK_IMAGE_DOCKERFILE.format(
        base=triton_cpu_base(), library_dirs=" ".join(shlex.quote(d) for d in defaults["triton_image_library_dirs"])
    )
    ref = "inferops-test/triton-task:" + hashlib.sha256(dockerfile.encode()).hexdigest()[:12]
    if image_exists(ref):
        return ref
    with build_lock():
        if image_exists(ref):
            return ref
        build = subprocess.run(["docker", "build", "--quiet", "-t", ref, "-"], input=dockerfile.encode(), check=False, capture_output=True)
    if build.returncode != 0:
        raise RuntimeError(f"building {ref} failed:\n{build.stderr.decode(errors='replace')[-3000:]}")
    return ref


# `make deploy-local` builds the rehearsal's image on the CPU base under this stable name.
LOCAL_REHEARSAL_BASE = "inferops-local/tritonserver-cpu:2.51"


def local_rehearsal_base() -> str:
    """The CPU base under the tag inventories/local builds the Triton image on."""
    subprocess.run(["docker", "tag", triton_cpu_base(), LOCAL_REHEARSAL_BASE], check=True)
    return LOCAL_REHEARSAL_BASE


if __name__ == "__main__":  # make deploy-local
    print(local_rehearsal_base())
