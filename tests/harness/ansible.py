"""Run ansible-playbook against the collection from this checkout and read back each task's result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .moto import clean_aws_env

REPO_ROOT = Path(__file__).resolve().parents[2]
COLLECTIONS_PATH = REPO_ROOT / ".build" / "collections"


def ensure_collection_link() -> None:
    link = COLLECTIONS_PATH / "ansible_collections" / "inferops" / "triton_ecs"
    if not link.exists():
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(REPO_ROOT)


@dataclass
class PlaybookRun:
    rc: int
    stdout: str
    stderr: str
    tasks: list[dict] = field(default_factory=list)

    def results(self, name: str) -> list[dict]:
        """Per-host results of every task with this name, in run order."""
        return [host_result for task in self.tasks if task["name"] == name for host_result in task["hosts"].values()]

    def result(self, name: str) -> dict:
        found = self.results(name)
        if len(found) != 1:
            raise KeyError(f"expected one result for task {name!r}, found {len(found)}; rc={self.rc}\n{self.stderr[-2000:]}")
        return found[0]

    @property
    def changed_tasks(self) -> list[str]:
        return [t["name"] for t in self.tasks if any(h.get("changed") for h in t["hosts"].values())]

    @property
    def deprecations(self) -> list[str]:
        """Each deprecation the run would show once (Ansible shows a message once): those the modules returned, which
        the default callback prints and the json callback only records, and those the controller printed itself."""
        found: set[str] = set()

        def walk(value) -> None:
            if isinstance(value, dict):
                found.update(d.get("msg", "") for d in value.get("deprecations") or [])
                for item in value.get("results") or []:
                    walk(item)

        for task in self.tasks:
            for host_result in task["hosts"].values():
                walk(host_result)
        printed = [line for line in self.stderr.splitlines() + self.stdout.splitlines() if "[DEPRECATION WARNING]" in line]
        return sorted(found) + printed

    @property
    def failed_tasks(self) -> list[str]:
        """Tasks that failed on some host, failures the play ignored left out."""
        return [t["name"] for t in self.tasks if any(h.get("failed") and not h.get("ignore_errors") for h in t["hosts"].values())]


def playbook_env(extra_env: dict[str, str] | None = None) -> dict[str, str]:
    ensure_collection_link()
    env = clean_aws_env()
    env.update(
        {
            "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS_PATH),
            "ANSIBLE_CONFIG": str(REPO_ROOT / "ansible.cfg"),
            "ANSIBLE_ROLES_PATH": str(REPO_ROOT / "roles"),
            "ANSIBLE_FORCE_COLOR": "0",
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
            "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
        }
    )
    env.update(extra_env or {})
    return env


def run_playbook(
    playbook: Path | str,
    extra_vars: dict | None = None,
    inventory: str = "localhost,",
    check: bool = False,
    diff: bool = False,
    env: dict[str, str] | None = None,
    args: tuple[str, ...] = (),
    timeout_s: int = 900,
) -> PlaybookRun:
    """ansible-playbook with the json callback; `tasks` lists {name, hosts: {host: result}}."""
    cmd = [str(Path(sys.executable).with_name("ansible-playbook")), str(playbook), "-i", inventory]
    if inventory == "localhost,":
        cmd += ["-c", "local"]
    if extra_vars:
        cmd += ["-e", json.dumps(extra_vars)]
    if check:
        cmd.append("--check")
    if diff:
        cmd.append("--diff")
    cmd += list(args)
    full_env = playbook_env(env)
    full_env["ANSIBLE_STDOUT_CALLBACK"] = "json"
    proc = subprocess.run(cmd, capture_output=True, text=True, env=full_env, cwd=REPO_ROOT, timeout=timeout_s, check=False)
    tasks: list[dict] = []
    try:
        report = json.loads(proc.stdout)
        for play in report.get("plays", []):
            for task in play.get("tasks", []):
                tasks.append({"name": task["task"]["name"], "hosts": task["hosts"]})
    except json.JSONDecodeError:
        pass
    return PlaybookRun(proc.returncode, proc.stdout, proc.stderr, tasks)
