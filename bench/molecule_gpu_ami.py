"""GPU AMI scenario benchmark: `molecule test -s gpu_ami` on the simulated AL2023 host, timed.

Prints, one per line as `name: value`:

  converge_seconds           the converge step (playbooks/build_ami.yml from a fresh container)
  scenario_seconds           the whole sequence: dependency, destroy, syntax, create, prepare, converge,
                             idempotence, verify, destroy
  gpu_health_detect_seconds  from an injected Xid 79 (GPU fallen off the bus) to the container instance DRAINING
                             in moto (target <= 30)
  false_drains               single transient errors (Xid 13, 31, 43, one 94, one 63, one thermal reading) and
                             faulty readings (one thermal episode held for six polls, empty nvidia-smi answers, a
                             hung nvidia-smi) that drained the container instance (target 0)
  dcgm_health_detect_seconds from a failed row remap in DCGM's health check to the container instance DRAINING
                             (target <= 30)
  dcgm_false_drains          DCGM incidents that clear within one poll (a PCIe replay burst, one NVLink warning, a
                             row-remap warning) or that the policy does not act on (an ongoing power warning) and that
                             drained the container instance (target 0)

The last two come from the GPU-health drill (tests/fixtures/al2023/gpu_health_drill.py): the gpu_health watcher runs
on this machine, NOT in the molecule container (which cannot reach a moto server on the host), against a moto server
with a stand-in kernel log and a stand-in nvidia-smi (the dcgm_* figures: a stand-in dcgmi instead), with the role's
default thresholds.

Exits non-zero when the scenario or the drill fails (the figures would not describe a working bake).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.harness.figures import report  # noqa: E402

BIN = REPO / ".venv" / "bin"
# "gpu_ami ➜ converge: Executing" (colour) or "[gpu_ami > converge] Executing" (NO_COLOR).
STEP = re.compile(r"gpu_ami\s*(?:➜|>)\s*(\w+)\]?:?\s+(Executing|Executed)")
ANSI = re.compile(r"\x1b\[[0-9;]*m|\x1b\]8;;[^\x1b]*\x1b\\")


def gpu_health_drill(dcgm: bool = False) -> tuple[float, int]:
    """(seconds from a critical error to DRAINING, transient scenarios that drained) on a moto server of its own:
    an Xid 79 and the kernel-log / nvidia-smi scenarios, or with `dcgm` a failed row remap and DCGM's scenarios."""
    from tests.fixtures.al2023.gpu_health_drill import DCGM_CRITICAL, DCGM_TRANSIENT_SCENARIOS, TRANSIENT_SCENARIOS, drill_on_moto

    with tempfile.TemporaryDirectory(prefix="gpu_health-drill-") as tmp, drill_on_moto(Path(tmp), dcgm=dcgm) as drill:
        false_drains = 0
        for inject in (DCGM_TRANSIENT_SCENARIOS if dcgm else TRANSIENT_SCENARIOS).values():
            with drill.watching():
                inject(drill)
                false_drains += not drill.stays_active(settle_s=3 * drill.poll_interval_s + 1)
        with drill.watching():
            detect_s = drill.seconds_until_draining(drill.write_dcgm(*DCGM_CRITICAL) if dcgm else drill.inject_xid(79))
    return detect_s, false_drains


def main() -> int:
    env = dict(os.environ)
    env.update(
        {
            "PATH": f"{BIN}:{env.get('PATH', '')}",
            "ANSIBLE_COLLECTIONS_PATH": str(REPO / ".build" / "collections"),
            "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
            "NO_COLOR": "1",
            "PY_COLORS": "0",
        }
    )
    started: dict[str, float] = {}
    spent: dict[str, float] = {}
    log: list[str] = []
    begin = time.monotonic()
    proc = subprocess.Popen(
        [str(BIN / "molecule"), "test", "-s", "gpu_ami"], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        log.append(line)
        match = STEP.search(ANSI.sub("", line))
        if match and match.group(2) == "Executing":
            started[match.group(1)] = time.monotonic()
        elif match and match.group(1) in started:
            spent[match.group(1)] = time.monotonic() - started.pop(match.group(1))
    rc = proc.wait()
    total = time.monotonic() - begin
    if rc != 0 or "converge" not in spent:
        sys.stderr.write("".join(log[-80:]))
        sys.stderr.write(f"molecule test -s gpu_ami failed (rc={rc})\n")
        return 1
    detect_s, false_drains = gpu_health_drill()
    dcgm_detect_s, dcgm_false_drains = gpu_health_drill(dcgm=True)
    return report(
        {
            "converge_seconds": f"{spent['converge']:.1f}",
            "scenario_seconds": f"{total:.1f}",
            "gpu_health_detect_seconds": f"{detect_s:.1f}",
            "false_drains": false_drains,
            "dcgm_health_detect_seconds": f"{dcgm_detect_s:.1f}",
            "dcgm_false_drains": dcgm_false_drains,
        }
    )


if __name__ == "__main__":
    sys.exit(main())
