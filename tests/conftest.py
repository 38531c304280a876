"""Fixtures shared by every test suite: moto server, the real tritonserver, ansible-playbook runs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.harness.awsvpc import AwsvpcNetwork
from tests.harness.moto import MotoServer
from tests.harness.s3_proxy import TEST_BYTES_PER_S, TEST_SINGLE_PUT_LIMIT, ProxiedMoto, S3Proxy
from tests.harness.triton import TritonServer


@pytest.fixture
def moto_server(tmp_path: Path) -> Iterator[MotoServer]:
    """A fresh moto server on a free loopback port, stopped after the test."""
    server = MotoServer(tmp_path).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def shared_moto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    """One moto server for a whole test module (state carries across its tests)."""
    server = MotoServer(tmp_path_factory.mktemp("moto")).start()
    yield server
    server.stop()


@pytest.fixture
def s3_moto_server(moto_server: MotoServer, tmp_path: Path) -> Iterator[ProxiedMoto]:
    """A fresh moto server behind the S3-shaped proxy (tests/harness/s3_proxy.py): S3's single-PUT limit and
    per-connection throughput cap, scaled down (5 MiB, 8 MiB/s)."""
    proxy = S3Proxy(moto_server.endpoint, tmp_path, bytes_per_s=TEST_BYTES_PER_S, single_put_limit=TEST_SINGLE_PUT_LIMIT).start()
    yield ProxiedMoto(moto_server, proxy)
    proxy.stop()


@pytest.fixture(scope="module")
def shared_s3_moto_server(shared_moto_server: MotoServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxiedMoto]:
    """One moto server behind the S3-shaped proxy for a whole test module."""
    proxy = S3Proxy(
        shared_moto_server.endpoint,
        tmp_path_factory.mktemp("s3-proxy"),
        bytes_per_s=TEST_BYTES_PER_S,
        single_put_limit=TEST_SINGLE_PUT_LIMIT,
    ).start()
    yield ProxiedMoto(shared_moto_server, proxy)
    proxy.stop()


@pytest.fixture
def triton_server(tmp_path: Path) -> Iterator[Callable[..., TritonServer]]:
    """Factory: start the real tritonserver on free ports over a repository; every server stops after the test."""
    started: list[TritonServer] = []

    def start(
        model_repository: Path, models: tuple[str, ...] = (), wait_ready: bool = True, extra_args: tuple[str, ...] = ()
    ) -> TritonServer:
        server = TritonServer(model_repository, tmp_path, models=models, extra_args=extra_args)
        started.append(server)
        return server.start(wait_ready=wait_ready)

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def awsvpc_network() -> Iterator[AwsvpcNetwork]:
    """A Docker bridge network standing in for a VPC subnet (tests/harness/awsvpc.py), created with its first task;
    it and every task container on it are removed after the test, also when the test fails."""
    network = AwsvpcNetwork()
    try:
        yield network
    finally:
        network.remove()
