"""The gpu_health watcher drains the ECS container instance after a critical Xid, and not after a transient error.

Stand-ins (tests/fixtures/al2023/gpu_health_drill.py): a moto server for ECS, Auto Scaling and EC2; the watcher runs
on this machine with a stand-in kernel log (a file it follows) and a stand-in nvidia-smi (a script printing a CSV);
the ECS agent's introspection metadata is a loopback HTTP server. The thresholds are the role's defaults.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.fixtures.al2023.gpu_health_drill import DCGM_CRITICAL, DCGM_TRANSIENT_SCENARIOS, GpuHealthDrill
from tests.harness.moto import MotoServer


@pytest.fixture(scope="module")
def drill(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GpuHealthDrill]:
    workdir = tmp_path_factory.mktemp("gpu_health")
    moto = MotoServer(workdir).start()
    drill = GpuHealthDrill(moto, workdir)
    try:
        yield drill
    finally:
        drill.close()
        moto.stop()


@pytest.fixture
def watching(drill: GpuHealthDrill) -> Iterator[GpuHealthDrill]:
    drill.start()
    try:
        yield drill
    finally:
        drill.stop()


def test_an_xid_79_drains_the_container_instance_and_marks_the_instance_unhealthy(watching):
    injected = watching.inject_xid(79)  # GPU has fallen off the bus
    assert watching.seconds_until_draining(injected) <= 30, watching.log_text()
    # moto reports no running task on the instance, so the watcher marks it Unhealthy right after the drain (a moment
    # later, not in the same instant: read until it has, within the same bound).
    assert watching.seconds_until_unhealthy(injected) <= 30, watching.log_text()
    assert "GPU has fallen off the bus" in watching.log_text()


def test_a_rising_double_bit_ecc_count_drains(watching):
    since = time.monotonic()
    watching.write_gpus(uncorrected_ecc=1)
    assert watching.seconds_until_draining(since) <= 30, watching.log_text()
    assert "double-bit ECC errors rose" in watching.log_text()


@pytest.mark.parametrize("code", [13, 94])
def test_a_single_transient_error_does_not_drain(watching, code):
    # 13 is usually the application's fault and never counts; one contained ECC error (94) counts, below the threshold.
    watching.inject_xid(code)
    assert watching.stays_active(settle_s=3 * watching.poll_interval_s + 1), watching.log_text()
    assert f"Xid {code} on PCI:0000:00:1e" in watching.log_text()
    assert watching.instance_health().lower() == "healthy"


def test_repeated_nvlink_errors_within_the_window_drain(watching):
    first = watching.inject_xid(74)
    watching.inject_xid(74)
    assert watching.stays_active(settle_s=1.5), watching.log_text()  # two of three: not yet
    watching.inject_xid(74)
    assert watching.seconds_until_draining(first) <= 30, watching.log_text()
    assert "3 GPU errors within 600 s" in watching.log_text()


# ---------------------------------------------------------------- with DCGM (a stand-in dcgmi answering from a file)


@pytest.fixture(scope="module")
def dcgm_drill(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GpuHealthDrill]:
    workdir = tmp_path_factory.mktemp("gpu_health_dcgm")
    moto = MotoServer(workdir).start()
    drill = GpuHealthDrill(moto, workdir, dcgm=True)
    try:
        yield drill
    finally:
        drill.close()
        moto.stop()


@pytest.fixture
def dcgm_watching(dcgm_drill: GpuHealthDrill) -> Iterator[GpuHealthDrill]:
    dcgm_drill.start()
    try:
        yield dcgm_drill
    finally:
        dcgm_drill.stop()


def test_the_watcher_reads_dcgm_where_it_answers(dcgm_watching):
    assert "watching DCGM's health watches (group 2)" in dcgm_watching.log_text()


def test_a_failed_row_remap_in_dcgm_drains_and_replaces(dcgm_watching):
    since = dcgm_watching.write_dcgm(*DCGM_CRITICAL)
    assert dcgm_watching.seconds_until_draining(since) <= 30, dcgm_watching.log_text()
    assert dcgm_watching.seconds_until_unhealthy(since) <= 30, dcgm_watching.log_text()
    assert "DCGM row_remap_failure on GPU 0" in dcgm_watching.log_text()


def test_a_persistent_nvlink_error_drains_after_the_threshold(dcgm_watching):
    since = dcgm_watching.write_dcgm("NVLink", "Failure", "Detected 40 NvLink recovery errors on GPU 0's NVLink")
    assert dcgm_watching.seconds_until_draining(since) <= 30, dcgm_watching.log_text()
    assert "3 GPU errors within 600 s" in dcgm_watching.log_text()


@pytest.mark.parametrize("scenario", sorted(DCGM_TRANSIENT_SCENARIOS))
def test_a_transient_or_unlisted_dcgm_incident_does_not_drain(dcgm_watching, scenario):
    DCGM_TRANSIENT_SCENARIOS[scenario](dcgm_watching)
    assert dcgm_watching.stays_active(settle_s=3 * dcgm_watching.poll_interval_s + 1), dcgm_watching.log_text()
    assert dcgm_watching.instance_health().lower() == "healthy"
