"""Role gpu_health refuses a bad setting before it writes anything, with the watcher's own check (issue 28).

Stand-in: none needed; ansible-playbook runs the role against localhost in check mode. A bad value must fail at the
settings check, naming the variable, the value and the range, and no later task of the role may run (the install
would be its first write). The check runs the role's files/gpu_health.py check-settings with the controller's python.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness.ansible import run_playbook

PLAYBOOK = Path(__file__).parent / "playbooks" / "gpu_health_settings.yml"
ROLE = "inferops.triton_ecs.gpu_health : "
REFUSAL = ROLE + "Refuse GPU health settings the watcher would refuse"

BAD = [
    ("threshold-one", {"gpu_health_count_threshold": 1}, "gpu_health_count_threshold is 1: set a whole number from 2 to 100"),
    ("window-huge", {"gpu_health_window_s": 10**9}, "gpu_health_window_s is 1000000000: set a number of seconds from 1 to 86400"),
    ("probe-timeout-zero", {"gpu_health_probe_timeout_s": 0}, "gpu_health_probe_timeout_s is 0: set a number of seconds from 1 to 600"),
    ("poll-over-window", {"gpu_health_poll_interval_s": 900}, "gpu_health_poll_interval_s (900) is longer than gpu_health_window_s (600)"),
    ("state-path-relative", {"gpu_health_state_path": "state.json"}, "gpu_health_state_path is 'state.json': set an absolute path"),
    ("xid-out-of-range", {"gpu_health_counted_xids": [74, 4096]}, "gpu_health_counted_xids holds [4096]: Xid codes run from 1 to 999"),
    (
        "instance-type-gpus-negative",
        {"gpu_health_instance_type_gpus": {"g5.xlarge": {"gpus": -1}}},
        "gpu_health_instance_type_gpus.g5.xlarge.gpus is -1: set the type's whole GPUs, 0 to 64",
    ),
    (
        "instance-type-flavour-unknown",
        {"gpu_health_instance_type_gpus": {"g6f.large": {"gpus": 0, "flavour": "vgpu"}}},
        "gpu_health_instance_type_gpus.g6f.large.flavour is 'vgpu': use one of tesla, grid",
    ),
]


@pytest.mark.parametrize(("case_id", "variables", "message"), BAD, ids=[c[0] for c in BAD])
def test_a_bad_setting_is_refused_before_any_write(case_id, variables, message):
    run = run_playbook(PLAYBOOK, variables, check=True)
    assert run.rc != 0, run.stdout[-3000:]
    refusal = run.result(REFUSAL)
    assert refusal.get("failed") is True and message in refusal["msg"], refusal
    assert run.tasks[-1]["name"] == REFUSAL  # nothing after it ran: no package, no file, no unit


def test_the_defaults_and_a_number_given_as_a_string_pass():
    # -e gpu_health_count_threshold=4 arrives as the string "4": the check reads it as the number it names.
    run = run_playbook(PLAYBOOK, {"gpu_health_test_tasks_from": "settings", "gpu_health_count_threshold": "4"}, check=True)
    assert run.rc == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert not run.result(REFUSAL).get("failed")
    checks = run.result(ROLE + "Check the GPU health settings with the watcher's own checks")["results"]
    assert [c["stdout"].split(": ", 2)[-1] for c in checks] == ["every setting is valid", "every instance type is valid"]
