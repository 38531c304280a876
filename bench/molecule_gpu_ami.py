"""GPU AMI scenario benchmark: `molecule test -s gpu_ami` on the simulated AL2023 host, timed.

Prints, one per line as `name: value`:

  converge_seconds  the converge step (playbooks/build_ami.yml from a fresh container)
  scenario_seconds  the whole sequence: dependency, destroy, syntax, create, prepare, converge, idempotence,
                    verify, destroy

Exits non-zero when the scenario fails (the figures would not describe a working bake).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = REPO / ".venv" / "bin"
# "gpu_ami ➜ converge: Executing" (colour) or "[gpu_ami > converge] Executing" (NO_COLOR).
STEP = re.compile(r"gpu_ami\s*(?:➜|>)\s*(\w+)\]?:?\s+(Executing|Executed)")
ANSI = re.compile(r"\x1b\[[0-9;]*m|\x1b\]8;;[^\x1b]*\x1b\\")


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
    print(f"converge_seconds: {spent['converge']:.1f}")
    print(f"scenario_seconds: {total:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
