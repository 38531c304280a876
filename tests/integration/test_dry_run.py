"""`deploy.yml --check --diff` on an empty account: the plan of the local rehearsal, shown without failing or writing.

Stand-ins: a moto server on a free port for AWS (its request recorder counts the write calls), the real dockerd and
local registry for the image. The dry runs of a deployed rehearsal are in test_deploy_local.py, which shares one
deployment between its cases.
"""

from __future__ import annotations

from tests.harness.aws_calls import start_recording, writes
from tests.harness.images import local_rehearsal_base
from tests.harness.local_rehearsal import STANDBY, deploy
from tests.harness.moto import MotoServer

KNOWN_AFTER_APPLY = "(known after apply)"


def test_check_on_an_empty_account_shows_the_plan_without_failing_or_writing(tmp_path):
    local_rehearsal_base()
    empty = MotoServer(tmp_path).start()
    try:
        start_recording(empty)
        standby = {**STANDBY, "container_name": STANDBY["container_name"] + "-fresh", "port": STANDBY["port"] + 2}
        run = deploy(empty, check=True, deploy_local_standby=standby)
        actions = writes(empty)
    finally:
        empty.stop()
    assert run.rc == 0, run.stderr[-3000:] + run.stdout[-3000:]
    assert actions == []
    assert KNOWN_AFTER_APPLY in run.stdout
    # The collection's modules given a value known only after apply report the change themselves, naming it.
    for task in (
        "inferops.triton_ecs.fleet_load_balancing : Target groups, health-checked on Triton's readiness, with slow start and the deregistration delay",
        "inferops.triton_ecs.fleet_services : Blue and green services, created when missing",
        "inferops.triton_ecs.task_definition : Register the Triton task definition",
    ):
        assert task in run.changed_tasks, run.changed_tasks
        assert run.result(task)["known_after_apply"], run.result(task)
    # The steps other collections' modules or several roles take, named by the play.
    for task in (
        "inferops.triton_ecs.fleet_capacity : Auto Scaling group changes a real run would make (check mode)",
        "The cutover a real run would make (check mode; the fleet is created first)",
    ):
        assert task in run.changed_tasks, run.changed_tasks
