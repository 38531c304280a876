# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""Tells a long-running module that the Ansible controller which started it is gone.

Ansible's workers run in their own session, so killing `ansible-playbook` (even its whole process group) leaves
the worker and the module running. A module that writes to AWS for minutes must notice and stop: at start it
records its ancestors up to the controller (`ansible-playbook`, or the first process of another session when no
ancestor is Ansible), each with its parent and start time; the controller is gone as soon as one of them has
exited or has been re-parented. Reads /proc (Linux); elsewhere only the module's own parent is watched.
"""

from __future__ import annotations

import os
from pathlib import Path

PROC = Path("/proc")


def process_stat(pid: int, proc: Path = PROC) -> tuple[int, int, int] | None:
    """(parent pid, session id, start time in clock ticks) of a live process, or None when it is gone."""
    try:
        text = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # the command name may hold spaces and parentheses
    if fields[0] in ("Z", "X"):  # a zombie has exited; only its parent has not reaped it yet
        return None
    return int(fields[1]), int(fields[3]), int(fields[19])


def is_ansible(pid: int, proc: Path = PROC) -> bool:
    try:
        argv = (proc / str(pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return any(os.path.basename(arg.decode("utf-8", "replace")).startswith("ansible") for arg in argv[:3])


def ancestry(pid: int, proc: Path = PROC) -> list[tuple[int, int, int, int]]:
    """(pid, parent, session, start) of `pid` and each of its ancestors, nearest first, up to pid 1."""
    chain = []
    while pid > 1:
        stat = process_stat(pid, proc)
        if stat is None:
            break
        chain.append((pid, *stat))
        pid = stat[0]
    return chain


def watched_chain(chain: list[tuple[int, int, int, int]], ansible: list[bool]) -> list[tuple[int, int, int, int]]:
    """The processes whose exit or re-parenting means the controller is gone: every ancestor below the controller.

    The controller is the top of the first run of Ansible processes (a worker is a fork of ansible-playbook, so
    both carry its command line); without one, the first ancestor in another session than the module's."""
    first = next((i for i, flag in enumerate(ansible) if flag), None)
    if first is not None:
        top = first
        while top + 1 < len(chain) and ansible[top + 1]:
            top += 1
        return chain[:top]
    session = chain[0][2] if chain else 0
    below = next((i for i, entry in enumerate(chain) if entry[2] != session), len(chain))
    return chain[:below]


class ControllerWatch:
    """`gone()` is '' while the controller that started this module runs, else why it is considered gone."""

    def __init__(self, pid: int | None = None, proc: Path = PROC) -> None:
        self.proc = proc
        pid = pid or os.getpid()
        chain = ancestry(pid, proc) if proc.is_dir() else []
        self.chain = watched_chain(chain, [is_ansible(entry[0], proc) for entry in chain])
        self.parent = os.getppid()

    def gone(self) -> str:
        if not self.chain:
            return "" if os.getppid() == self.parent else f"the module's parent (pid {self.parent}) has exited"
        for pid, parent, _session, start in self.chain:
            now = process_stat(pid, self.proc)
            if now is None or now[2] != start:
                return f"process {pid} between the module and the Ansible controller has exited"
            if now[0] != parent:
                return f"process {pid} lost its parent {parent}: the Ansible controller has exited"
        return ""
