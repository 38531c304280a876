"""Pure decisions of the gpu_health script (roles/gpu_health/files/gpu_health.py), imported as the instance runs it.

Stand-ins: Xid lines, nvidia-smi CSV, DCGM answers and the instance-type lookup are given as values; EC2 is a
function; a hung nvidia-smi is this Python running `time.sleep` (and a path that does not exist is one that cannot
start); the state file is a pytest tmp_path. Property-style tests draw their inputs from seeded random.Random
generators (no hypothesis in the environment), so a failure names the seed and replays. The issue-28 findings are the
tests marked "issue 28".
"""

from __future__ import annotations

import importlib
import io
import json
import math
import random
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.fixtures.al2023.gpu_health_drill import role_settings

ROLE = Path(__file__).resolve().parents[2] / "roles" / "gpu_health"
sys.path.insert(0, str(ROLE / "files"))
gpu_health = importlib.import_module("gpu_health")

DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
# The settings file the role writes with its defaults.
SETTINGS = role_settings()
POLICY = gpu_health.policy_from_settings(SETTINGS)


def xid(code: int, at: float = 0.0):
    return gpu_health.Event("xid", at, gpu="PCI:0000:00:1e", code=code)


def test_parse_xid_reads_the_drivers_line():
    line = "[ 1234.5] NVRM: Xid (PCI:0000:10:1c): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    assert gpu_health.parse_xid(line, 5.0) == gpu_health.Event("xid", 5.0, gpu="PCI:0000:10:1c", code=79)
    assert gpu_health.parse_xid("NVRM: loading NVIDIA UNIX x86_64 Kernel Module  580.95.05", 5.0) is None


@pytest.mark.parametrize("code", [48, 79, 95])
def test_double_bit_ecc_fallen_off_the_bus_and_uncontained_ecc_act_at_once(code):
    assert gpu_health.assess([xid(code)], now=1.0, policy=POLICY)


@pytest.mark.parametrize("kind", ["dbe", "gpu_lost"])
def test_a_rising_dbe_count_or_a_lost_gpu_act_at_once(kind):
    assert gpu_health.assess([gpu_health.Event(kind, 0.0, gpu="00000000:00:1E.0")], now=1.0, policy=POLICY)


@pytest.mark.parametrize("code", [13, 31, 43, 45])
def test_application_errors_never_act_however_many(code):
    assert gpu_health.assess([xid(code, at=i) for i in range(50)], now=60.0, policy=POLICY) is None


@pytest.mark.parametrize("code", [63, 64, 74, 92, 94, 119, 120])
def test_one_counted_error_is_not_enough_but_the_threshold_within_the_window_is(code):
    assert gpu_health.assess([xid(code)], now=1.0, policy=POLICY) is None
    events = [xid(code, at=t) for t in (0.0, 100.0, 200.0)]
    reason = gpu_health.assess(events, now=200.0, policy=POLICY)
    assert reason and reason.startswith("3 GPU errors within 600 s")


def test_counted_errors_outside_the_window_are_forgotten():
    events = [xid(74, at=0.0), xid(74, at=300.0), xid(74, at=700.0)]
    assert gpu_health.assess(events, now=700.0, policy=POLICY) is None  # the first is 700 s old


def test_thermal_slowdown_counts_like_a_counted_xid():
    events = [gpu_health.Event("thermal", t, gpu="00000000:00:1E.0") for t in (0.0, 5.0)]
    assert gpu_health.assess(events, now=5.0, policy=POLICY) is None
    assert gpu_health.assess([*events, xid(94, at=6.0)], now=6.0, policy=POLICY)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"count_threshold": 1}, "gpu_health_count_threshold is 1: set a whole number from 2 to 100"),
        ({"window_s": 0}, "gpu_health_window_s is 0: set a number of seconds from 1 to 86400"),
        ({"immediate_xids": [79, 94]}, "both immediate_xids and counted_xids"),
    ],
)
def test_a_policy_that_would_drain_on_noise_is_refused(change, message):
    with pytest.raises(ValueError, match=message):
        gpu_health.policy_from_settings({**SETTINGS, **change})


def test_parse_smi_query_reads_values_and_not_available():
    text = "0, 00000000:00:1E.0, 0, Not Active\n1, 00000000:00:1F.0, [N/A], Active\n\nNo devices were found\n"
    assert gpu_health.parse_smi_query(text) == [
        gpu_health.GpuReading("0", "00000000:00:1E.0", 0, False),
        gpu_health.GpuReading("1", "00000000:00:1F.0", None, True),
    ]


def test_smi_conditions_lost_gpu_dbe_above_the_first_reading_and_thermal():
    baseline = gpu_health.parse_smi_query("0, A, 0, Not Active\n1, B, 2, Not Active\n2, C, [N/A], Not Active\n")
    after = gpu_health.parse_smi_query("0, A, 1, Not Active\n2, C, [N/A], Active\n")
    events = gpu_health.smi_conditions(baseline, after, 9.0)
    assert sorted((e.kind, e.gpu) for e in events) == [("dbe", "A"), ("gpu_lost", "B"), ("thermal", "C")]
    # The baseline keeps the first count: a count still above it is still a condition (one ongoing episode).
    assert gpu_health.smi_baseline(baseline, after) == tuple(baseline)


def test_expected_gpus_reads_the_table_first_and_asks_ec2_for_the_rest():
    asked = []

    def describe(instance_type):
        asked.append(instance_type)
        return 2, "tesla"

    table = {"g5.12xlarge": {"gpus": 4}, "g6f.large": {"gpus": 0, "flavour": "grid"}, "g5.xlarge": 1}
    assert gpu_health.expected_gpus("g5.12xlarge", table, describe) == (4, "tesla", "the AMI's instance-type table")
    assert gpu_health.expected_gpus("g6f.large", table, describe) == (0, "grid", "the AMI's instance-type table")
    assert gpu_health.expected_gpus("g5.xlarge", table, describe) == (1, "tesla", "the AMI's instance-type table")  # an older AMI's count
    assert asked == []
    assert gpu_health.expected_gpus("g6.4xlarge", table, describe) == (2, "tesla", "EC2 DescribeInstanceTypes")
    assert asked == ["g6.4xlarge"]


@pytest.mark.parametrize(
    ("running", "now", "expected"),
    [(3, 100.0, False), (0, 100.0, True), (None, 100.0, False), (3, 900.0, True), (None, 901.0, True)],
)
def test_the_instance_is_marked_unhealthy_once_its_tasks_are_gone_or_after_the_bound(running, now, expected):
    assert gpu_health.should_mark_unhealthy(drained_at=0.0, now=now, running_tasks=running, replace_after_s=900) is expected


class RecordingAws:
    """The Aws client functions, recorded (no AWS): the container instance has `running` tasks."""

    def __init__(self, running: int | None) -> None:
        self.running = running
        self.calls: list[str] = []

    def container_instance(self):
        return ("cluster", "arn:aws:ecs:us-east-1:111111111111:container-instance/cluster/abc")

    def drain(self, cluster, arn):
        self.calls.append("drain")

    def running_tasks(self, cluster, arn):
        return self.running

    def mark_unhealthy(self):
        self.calls.append("unhealthy")
        return "i-0123456789abcdef0"


@pytest.mark.parametrize(
    ("action", "running", "steps", "calls", "done"),
    [
        ("drain_and_replace", 0, [0.0], ["drain", "unhealthy"], True),
        ("drain_and_replace", 2, [0.0, 10.0], ["drain"], False),  # tasks still moving, bound not reached
        ("drain_and_replace", 2, [0.0, 900.0], ["drain", "unhealthy"], True),  # the bound
        ("drain", 0, [0.0, 900.0], ["drain"], True),
        ("log", 0, [0.0, 900.0], [], False),  # keeps watching, never acts
    ],
)
def test_the_responder_drains_once_then_replaces_as_the_action_says(action, running, steps, calls, done):
    aws = RecordingAws(running)
    responder = gpu_health.Responder({"action": action, "replace_after_s": 900}, aws)
    for now in steps:
        if not responder.done:
            responder.step("Xid 79 on PCI:0000:00:1e", now)
    assert aws.calls == calls
    assert responder.done is done


# ---------------------------------------------------------------- DCGM's health watches

DCGM_POLICY = gpu_health.policy_from_settings(
    {**SETTINGS, "dcgm_immediate": DEFAULTS["gpu_health_dcgm_immediate"], "dcgm_counted": DEFAULTS["gpu_health_dcgm_counted"]}
)


def dcgm_answer(gpu: int, system: str, health: str, message: str) -> str:
    """`dcgmi health --check --json` with one incident (the shape the stand-in dcgmi prints: tests/fixtures/al2023)."""
    incident = {"children": {health: {"value": message}}}
    return json.dumps(
        {"body": {"Overall Health": {"value": health}, "GPU": {"children": {f"GPU ID: {gpu}": {"children": {system: incident}}}}}}
    )


@pytest.mark.parametrize(
    ("system", "message", "kind"),
    [
        ("NVLink", "Detected 12 NvLink recovery errors on GPU 3's NVLink (should be 0)", "dcgm_nvlink"),
        ("PCIe", "Detected more than 8 PCIe replays per minute for GPU 1 : 40", "dcgm_pcie_replay"),
        ("Memory", "GPU 0 had uncorrectable memory errors and row remapping failed", "dcgm_row_remap_failure"),
        ("Memory", "GPU 0 has pending row remaps: reset the GPU", "dcgm_row_remap_pending"),
        ("Memory", "Detected 2 volatile double-bit ECC error(s) in GPU 0", "dcgm_dbe"),
        ("Power", "Power usage is near the limit", "dcgm_power"),
    ],
)
def test_dcgm_incidents_are_classified_by_system_and_message(system, message, kind):
    events = gpu_health.parse_dcgm_health(dcgm_answer(3, system, "Failure", message), 7.0)
    assert events == [gpu_health.Event(kind, 7.0, gpu="3", code=2, detail=message)]


def test_a_healthy_dcgm_answer_has_no_incident():
    assert gpu_health.parse_dcgm_health(json.dumps({"body": {"Overall Health": {"value": "Healthy"}}}), 1.0) == []


def test_dcgm_row_remap_failure_acts_at_once_but_nvlink_and_pcie_replays_count():
    failure = gpu_health.parse_dcgm_health(dcgm_answer(0, "Memory", "Failure", "row remapping failed"), 0.0)
    assert gpu_health.assess(failure, 1.0, DCGM_POLICY).startswith("DCGM row_remap_failure on GPU 0")
    for system, message in (("NVLink", "NvLink errors"), ("PCIe", "PCIe replays per minute"), ("Memory", "pending row remaps")):
        one = gpu_health.parse_dcgm_health(dcgm_answer(0, system, "Warning", message), 0.0)
        assert gpu_health.assess(one, 1.0, DCGM_POLICY) is None  # one poll: not yet
        three = [gpu_health.Event(one[0].kind, t, gpu="0", code=1, detail=message) for t in (0.0, 5.0, 10.0)]
        assert gpu_health.assess(three, 11.0, DCGM_POLICY).startswith("3 GPU errors within 600 s")
    # A Warning of an immediate category only counts; an unlisted category never acts.
    warning = gpu_health.parse_dcgm_health(dcgm_answer(0, "Memory", "Warning", "row remapping failed"), 0.0)
    assert gpu_health.assess(warning, 1.0, DCGM_POLICY) is None
    power = [gpu_health.Event("dcgm_power", t, gpu="0", code=2) for t in range(10)]
    assert gpu_health.assess(power, 10.0, DCGM_POLICY) is None


def test_dcgm_repeats_an_ongoing_condition_once_per_poll():
    events = [gpu_health.Event("dcgm_nvlink", 0.0, gpu="0", code=1, detail=d) for d in ("link 1", "link 2")]
    assert len(gpu_health.dcgm_events_per_poll([*events, gpu_health.Event("dcgm_nvlink", 0.0, gpu="1", code=1)])) == 2


def test_a_dcgm_category_in_both_lists_is_refused():
    with pytest.raises(ValueError, match="both dcgm_immediate and dcgm_counted"):
        gpu_health.policy_from_settings({**SETTINGS, "dcgm_immediate": ["nvlink"], "dcgm_counted": ["nvlink"]})


# ---------------------------------------------------------------- issue 28: a health signal drains only on evidence
# that survives a re-read; a failed, hung or empty answer is read again, not judged; harmless Xids evict nothing.

GPU_A, GPU_B = "00000000:00:1E.0", "00000000:00:1F.0"


def smi(*rows: tuple) -> list:
    """nvidia-smi readings: (bus id, uncorrected ECC, thermal slowdown active)."""
    return [gpu_health.GpuReading(str(i), bus, ecc, hot) for i, (bus, ecc, hot) in enumerate(rows)]


HEALTHY = smi((GPU_A, 0, False), (GPU_B, 0, False))


def run_polls(answers, poll=gpu_health.poll_smi, policy=POLICY, poll_s=5.0):
    """Feeds answers (None: a failed or hung read) to the watcher's pure poll step every poll_s; (events kept, verdict)."""
    watched, history = gpu_health.Watched(), ()
    for i, answer in enumerate(answers):
        now = i * poll_s
        watched, confirmed = poll(watched, answer, now)
        history = gpu_health.remember(history, confirmed, now, policy)
    return history, gpu_health.assess(history, len(answers) * poll_s, policy)


def test_one_thermal_episode_counts_once_however_many_polls_it_lasts():
    # issue 28 (finding: one thermal-slowdown episode counted once per poll, so 15 s of slowdown drained).
    hot = smi((GPU_A, 0, True), (GPU_B, 0, False))
    history, verdict = run_polls([HEALTHY, *[hot] * 100, HEALTHY])
    assert [e.kind for e in history] == ["thermal"] and verdict is None
    # A failed read inside the episode neither ends it nor starts a new one.
    history, _verdict = run_polls([HEALTHY, hot, hot, None, hot, hot, HEALTHY])
    assert len(history) == 1
    # Three separate episodes within the window are three counted events: the threshold.
    _history, verdict = run_polls([HEALTHY, *([hot, hot, HEALTHY] * 3)])
    assert verdict and verdict.startswith("3 GPU errors within 600 s")


def test_one_slowdown_reading_is_read_again_and_never_counts():
    hot = smi((GPU_A, 0, True), (GPU_B, 0, False))
    history, _verdict = run_polls([HEALTHY, *([hot, HEALTHY] * 50)])
    assert history == ()


@pytest.mark.parametrize("bad_answer", [[], None], ids=["empty", "failed"])
def test_an_empty_or_failed_nvidia_smi_answer_is_not_a_lost_gpu(bad_answer):
    # issue 28 (finding: one empty nvidia-smi answer read as every GPU lost, which acts at once).
    watched, _events = gpu_health.poll_smi(gpu_health.Watched(), HEALTHY, 0.0)
    after, events = gpu_health.poll_smi(watched, bad_answer, 5.0)
    assert events == [] and after is watched  # not judged: nothing pending, nothing ended
    history, verdict = run_polls([HEALTHY, *[bad_answer] * 50, HEALTHY])
    assert history == () and verdict is None


def test_a_gpu_missing_from_one_answer_is_read_again_and_missing_twice_is_lost():
    one = smi((GPU_A, 0, False))
    assert run_polls([HEALTHY, one, HEALTHY, one, HEALTHY]) == ((), None)
    assert run_polls([HEALTHY, one, None, HEALTHY]) == ((), None)  # a failed read is not the re-read
    _history, verdict = run_polls([HEALTHY, one, None, one])
    assert verdict == f"GPU no longer listed by nvidia-smi on GPU {GPU_B}"


def test_a_double_bit_ecc_count_must_stay_up_on_the_re_read():
    blip = smi((GPU_A, 1, False), (GPU_B, 0, False))
    assert run_polls([HEALTHY, blip, HEALTHY]) == ((), None)
    _history, verdict = run_polls([HEALTHY, blip, blip])
    assert verdict == f"double-bit ECC errors rose on GPU {GPU_A}"


def dcgm(system: str = "", health: str = "", message: str = "") -> list:
    if not system:
        return []
    return gpu_health.parse_dcgm_health(dcgm_answer(0, system, health, message), 0.0)


def test_one_ongoing_dcgm_incident_is_one_episode_and_a_failure_after_a_warning_is_a_new_one():
    nvlink = dcgm("NVLink", "Failure", "NvLink recovery errors")
    history, verdict = run_polls([[], *[nvlink] * 40], poll=gpu_health.poll_dcgm, policy=DCGM_POLICY)
    assert len(history) == 1 and verdict is None
    _history, verdict = run_polls([[], *([nvlink, nvlink, []] * 3)], poll=gpu_health.poll_dcgm, policy=DCGM_POLICY)
    assert verdict and verdict.startswith("3 GPU errors")
    warning = dcgm("Memory", "Warning", "row remapping failed")
    failure = dcgm("Memory", "Failure", "row remapping failed")
    _history, verdict = run_polls([[], warning, warning, failure, failure], poll=gpu_health.poll_dcgm, policy=DCGM_POLICY)
    assert verdict and verdict.startswith("DCGM row_remap_failure on GPU 0")
    _history, verdict = run_polls([[], failure, None, None, []], poll=gpu_health.poll_dcgm, policy=DCGM_POLICY)
    assert verdict is None  # a Failure that the next good reading does not show again


@pytest.mark.parametrize("stdout", ["", "   ", "Error: host engine unreachable", "[1, 2"])
def test_a_dcgm_answer_that_is_empty_or_not_json_is_not_judged(monkeypatch, stdout):
    answer = gpu_health.subprocess.CompletedProcess(["dcgmi"], 0, stdout, "")
    monkeypatch.setattr(gpu_health, "dcgmi", lambda settings, *args: answer)
    assert gpu_health.read_dcgm({}, "2", 0.0) is None


def test_a_hung_probe_is_stopped_and_reads_as_a_failed_answer():
    # issue 28 (finding: a hung nvidia-smi raised TimeoutExpired out of the watch loop; the watcher died with its history).
    started = time.monotonic()
    assert gpu_health.probe([sys.executable, "-c", "import time; time.sleep(60)"], timeout_s=0.5) is None
    assert time.monotonic() - started < 10
    assert gpu_health.probe(["/nonexistent/nvidia-smi"], timeout_s=1) is None
    hung = {**SETTINGS, "nvidia_smi": sys.executable, "probe_timeout_s": 0.5}
    assert gpu_health.count_gpus(hung) == 0  # python3 --query-gpu=... fails: no GPU, read again until the bound
    assert gpu_health.read_gpus({**hung, "nvidia_smi": "/nonexistent/nvidia-smi"}) is None


def test_a_restart_keeps_the_counted_history_and_the_watched_episodes(tmp_path):
    # issue 28: the state file of this boot brings back the counted events and the ongoing episodes.
    hot = smi((GPU_A, 0, True), (GPU_B, 0, False))
    watched, history = gpu_health.Watched(), ()
    for now, answer in ((0.0, HEALTHY), (5.0, hot), (10.0, hot)):
        watched, confirmed = gpu_health.poll_smi(watched, answer, now)
        history = gpu_health.remember(history, [*confirmed, *([xid(74, at=now)] if now == 0.0 else [])], now, POLICY)
    assert [e.kind for e in history] == ["xid", "thermal"]
    path = tmp_path / "state" / "gpu-health-state.json"
    gpu_health.save_state(str(path), gpu_health.state_text("boot-1", history, watched))
    kept, kept_watched = gpu_health.load_state(str(path), "boot-1", 12.0, POLICY)
    assert kept == history and kept_watched == watched
    # The same episode after the restart is not counted again; a third counted error acts.
    kept_watched, confirmed = gpu_health.poll_smi(kept_watched, hot, 15.0)
    assert confirmed == []
    assert gpu_health.assess(gpu_health.remember(kept, [], 15.0, POLICY), 15.0, POLICY) is None
    kept = gpu_health.remember(kept, [xid(94, at=16.0)], 16.0, POLICY)
    assert gpu_health.assess(kept, 16.0, POLICY).startswith("3 GPU errors")
    # Another boot (GPUs reset; an AMI baked on a GPU builder) or a broken file starts afresh.
    assert gpu_health.load_state(str(path), "boot-2", 12.0, POLICY) == ((), gpu_health.Watched())
    path.write_text("{not json")
    assert gpu_health.load_state(str(path), "boot-1", 12.0, POLICY) == ((), gpu_health.Watched())
    assert gpu_health.load_state(str(tmp_path / "absent.json"), "boot-1", 12.0, POLICY) == ((), gpu_health.Watched())


def test_an_unwritable_state_file_is_logged_not_fatal(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    gpu_health.save_state(str(blocker / "state.json"), "{}")
    assert "could not write the state file" in capsys.readouterr().out


def test_a_flood_of_harmless_xids_never_evicts_the_counted_ones():
    # issue 28 (finding: the history kept the last 1000 events of any kind; 1000 Xid 13 evicted the counted ones).
    history = gpu_health.remember((), [xid(74, at=0.0), xid(74, at=1.0)], 1.0, POLICY)
    for i in range(100_000):
        history = gpu_health.remember(history, [xid(13, at=2.0 + i / 1000)], 2.0 + i / 1000, POLICY)
    assert len(history) == 2
    history = gpu_health.remember(history, [xid(74, at=200.0)], 200.0, POLICY)
    assert gpu_health.assess(history, 200.0, POLICY).startswith("3 GPU errors within 600 s")


@pytest.mark.parametrize("seed", range(40))
def test_property_the_bounded_history_reaches_the_verdict_of_every_event(seed):
    """For random streams of Xids (harmless, counted, immediate), DCGM incidents and thermal events, remembering
    incrementally gives the verdict that assessing the whole stream gives, with at most 2 x count_threshold events."""
    rng = random.Random(seed)
    policy = gpu_health.policy_from_settings({**SETTINGS, "count_threshold": rng.randint(2, 6), "window_s": rng.choice([30, 600])})
    codes = [13, 31, 43, 45, 63, 74, 94, 119] + ([79] if rng.random() < 0.3 else [])
    history, every, now = (), [], 0.0
    for _round in range(rng.randint(0, 400)):
        now += rng.expovariate(1 / rng.choice([0.01, 5, 60]))
        event = rng.choice([xid(rng.choice(codes), at=now), gpu_health.Event("thermal", now, gpu=GPU_A)])
        every.append(event)
        history = gpu_health.remember(history, [event], now, policy)
        assert len(history) <= 2 * policy.count_threshold
        assert bool(gpu_health.assess(history, now, policy)) == bool(gpu_health.assess(every, now, policy)), seed


# ---------------------------------------------------------------- every option's type and range (property-style)


def test_the_settings_the_role_writes_by_default_pass_and_name_documented_variables():
    assert gpu_health.check_settings(SETTINGS)["count_threshold"] == 3
    specs = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    internal = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())["gpu_health__settings"]
    for key, value in internal.items():
        variable = value.split("{{ ")[1].split(" ")[0]
        assert variable in specs or variable.startswith("gpu_health__") or variable == "dcgm_socket", key
        if key in gpu_health.NUMBERS or key in gpu_health.SETTING_DEFAULTS:
            assert variable == f"gpu_health_{key}", key  # the error message names the variable to set
    for key, default in gpu_health.SETTING_DEFAULTS.items():
        assert DEFAULTS[f"gpu_health_{key}"] == default, key


@pytest.mark.parametrize("key", sorted(gpu_health.NUMBERS))
@pytest.mark.parametrize("seed", range(5))
def test_property_every_number_is_checked_for_type_and_range(key, seed):
    rng = random.Random(f"{key}-{seed}")
    lowest, highest, whole = gpu_health.NUMBERS[key]

    def checked(value):
        settings = {**SETTINGS, key: value}
        if key == "window_s":
            settings["poll_interval_s"] = 0.1  # the window may not be shorter than the poll
        if key == "poll_interval_s":
            settings["window_s"] = 86400
        return gpu_health.check_settings(settings)[key]

    for _round in range(50):
        inside = rng.randint(math.ceil(lowest), int(highest)) if whole else rng.uniform(lowest, highest)
        assert checked(inside) == inside
        assert checked(str(inside)) == inside  # a variable given with -e arrives as a string
        outside = rng.choice([lowest - rng.uniform(0.001, 1e6), highest + rng.uniform(0.001, 1e6)])
        with pytest.raises(ValueError, match=f"gpu_health_{key} is .*: set .* from {lowest:g} to {highest:g}"):
            checked(outside)
    for bad in (math.nan, math.inf, -math.inf, "nan", "inf", True, False, None, "", "five", [5], {"s": 5}):
        with pytest.raises(ValueError, match=f"gpu_health_{key} is "):
            checked(bad)
    if whole:
        with pytest.raises(ValueError, match="a whole number"):
            checked(lowest + 0.5)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"action": "reboot"}, "gpu_health_action is 'reboot': use one of drain_and_replace, drain, log"),
        ({"action": None}, "gpu_health_action is None"),
        ({"immediate_xids": [48, "79"]}, "gpu_health_immediate_xids is .*: set a list of Xid codes"),
        ({"immediate_xids": [48, True]}, "gpu_health_immediate_xids is"),
        ({"counted_xids": 74}, "gpu_health_counted_xids is 74"),
        ({"counted_xids": [0, 74]}, r"gpu_health_counted_xids holds \[0\]: Xid codes run from 1 to 999"),
        ({"counted_xids": [74, 100000]}, r"gpu_health_counted_xids holds \[100000\]"),
        ({"dcgm_counted": ["NVLink"]}, "gpu_health_dcgm_counted is .*lower case"),
        ({"dcgm_immediate": "dbe"}, "gpu_health_dcgm_immediate is 'dbe'"),
        ({"dcgm_counted": [""]}, "gpu_health_dcgm_counted is"),
        ({"thermal_counts": "false"}, "gpu_health_thermal_counts is 'false': set true or false"),
        ({"poll_interval_s": 700, "window_s": 600}, "poll_interval_s .* is longer than gpu_health_window_s"),
        ({"state_path": "gpu-health-state.json"}, "gpu_health_state_path is 'gpu-health-state.json': set an absolute path"),
        ({"state_path": 5}, "gpu_health_state_path is 5: set a string"),
        ({"nvidia_smi": "nvidia-smi"}, "gpu_health_nvidia_smi is 'nvidia-smi': set an absolute path"),
        ({"dcgm_watches": "a; reboot"}, "gpu_health_dcgm_watches is"),
        ({"kernel_log_command": []}, "gpu_health_kernel_log_command is"),
        ({"kernel_log_command": "journalctl -k -f"}, "gpu_health_kernel_log_command is"),
        ({"ecs_agent_metadata_url": "localhost:51678"}, "gpu_health_ecs_agent_metadata_url is 'localhost:51678'"),
        ({"aws_endpoint_url": "ftp://moto"}, "gpu_health_aws_endpoint_url is 'ftp://moto': set an http:// or https:// URL or ''"),
    ],
)
def test_every_other_setting_is_checked_and_named(change, message):
    with pytest.raises(ValueError, match=message):
        gpu_health.check_settings({**SETTINGS, **change})


def test_check_settings_on_the_command_line_names_the_variable(tmp_path, capsys, monkeypatch):
    bad = tmp_path / "settings.json"
    bad.write_text(json.dumps({**SETTINGS, "count_threshold": 1}))
    assert gpu_health.main(["check-settings", "--settings", str(bad)]) == 2
    assert "gpu_health_count_threshold is 1: set a whole number from 2 to 100" in capsys.readouterr().out
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(SETTINGS)))
    assert gpu_health.main(["check-settings", "--settings", "-"]) == 0
    assert gpu_health.main(["watch", "--settings", str(bad)]) == 2  # the watcher refuses it too, before any AWS call


def test_the_default_instance_type_table_passes_its_check():
    assert gpu_health.check_instance_types(DEFAULTS["gpu_health_instance_type_gpus"])


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ([["g5.xlarge", 1]], "gpu_health_instance_type_gpus is list: set a mapping"),
        ({"G5.XLARGE": {"gpus": 1}}, "'G5.XLARGE' is not an instance type: name it family.size"),
        ({"g5": {"gpus": 1}}, "'g5' is not an instance type"),
        ({"g5.xlarge": {"gpus": "one"}}, "gpu_health_instance_type_gpus.g5.xlarge.gpus is 'one'"),
        ({"g5.xlarge": {"gpus": True}}, "gpu_health_instance_type_gpus.g5.xlarge.gpus is True"),
        ({"g5.xlarge": {"gpus": 65}}, "gpus is 65: set the type's whole GPUs, 0 to 64"),
        ({"g5.xlarge": -1}, "gpus is -1"),
        ({"g5.xlarge": {"flavour": "tesla"}}, "gpus is None"),
        ({"g6f.large": {"gpus": 0, "flavour": "vgpu"}}, "flavour is 'vgpu': use one of tesla, grid"),
        ({"g5.xlarge": {"gpus": 1, "count": 1}}, r"g5.xlarge has \['count'\]: an entry holds only gpus and flavour"),
    ],
)
def test_every_entry_of_the_instance_type_table_is_checked(table, message):
    with pytest.raises(ValueError, match=message):
        gpu_health.check_instance_types(table)


@pytest.mark.parametrize("seed", range(5))
def test_property_gpu_counts_are_checked_for_type_and_range(seed):
    rng = random.Random(seed)
    for _round in range(100):
        inside = rng.randint(0, 64)
        assert gpu_health.check_instance_types({"p5.48xlarge": {"gpus": inside}})
        assert gpu_health.check_instance_types({"p5.48xlarge": inside})  # an older AMI's plain count
        outside = rng.choice([rng.randint(-(10**9), -1), rng.randint(65, 10**9), rng.uniform(0.1, 63.9), str(inside)])
        with pytest.raises(ValueError, match=r"gpu_health_instance_type_gpus\.p5\.48xlarge\.gpus is "):
            gpu_health.check_instance_types({"p5.48xlarge": {"gpus": outside}})
