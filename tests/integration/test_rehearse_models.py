"""`make rehearse-models` end to end: `python -m tests.harness.rehearse_models`, run twice, as a user would.

Stand-ins: a fresh moto server on a free port (S3, EC2, ECS; passed with --endpoint-url, so the shared 127.0.0.1:5100
server is not touched); two simulated container instances (moto EC2 instances registered in the inventory's cluster),
each running the real model agent as a process against the harness's stand-in ECS introspection and IMDSv2
endpoints, and one real tritonserver task. The playbooks are the real sync_models.yml and rollback_models.yml on
inventories/local. The versions served are the ones the rehearsal read back by inference.
"""

from __future__ import annotations

import re
import subprocess
import sys

from tests.harness.ansible import REPO_ROOT
from tests.harness.moto import MotoServer
from tests.harness.rehearse_models import inventory_settings

SUMMARY_LINE = re.compile(r"^  after (?P<step>.+?): release (?P<release>r-[0-9a-f]{12}); (?P<serving>.+)$", re.MULTILINE)
SERVES = re.compile(r"(i-[0-9a-f]+) serves (\d+)")


def rehearse(moto: MotoServer, workdir) -> list[tuple[str, str, list[int]]]:
    """One rehearsal; its summary as [(step, release id, version served by each instance)]."""
    command = [sys.executable, "-m", "tests.harness.rehearse_models", "--endpoint-url", moto.endpoint, "--workdir", str(workdir)]
    proc = subprocess.run(command, capture_output=True, text=True, cwd=REPO_ROOT, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    summary = [
        (m["step"], m["release"], [int(version) for _instance, version in SERVES.findall(m["serving"])])
        for m in SUMMARY_LINE.finditer(proc.stdout)
    ]
    assert len(summary) == 3, proc.stdout[-3000:]
    return summary


def test_release_then_rollback_twice_leaves_no_instance(tmp_path):
    settings = inventory_settings()
    model, cluster = settings["models"][0]["name"], settings["cluster"]
    moto = MotoServer(tmp_path).start()
    try:
        releases = set()
        for run in ("first", "second"):  # the second finds the first's bucket and records
            summary = rehearse(moto, tmp_path / run)
            assert [(step, serving) for step, _release, serving in summary] == [
                (f"release of {model} version 1", [1, 1]),
                (f"release of {model} version 2", [2, 2]),
                ("rollback", [1, 1]),
            ]
            first, second, rolled_back = (release for _step, release, _serving in summary)
            assert rolled_back == first != second
            releases.add((first, second))

            ecs, ec2 = moto.client("ecs"), moto.client("ec2")
            assert ecs.list_container_instances(cluster=cluster)["containerInstanceArns"] == []
            states = {i["State"]["Name"] for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]}
            assert states == {"terminated"}
        assert len(releases) == 1  # release ids derive from the models: the same on the second run
    finally:
        moto.stop()
