"""Fixtures for the molecule verifiers whose create.yml starts a moto server (`python -m tests.harness.moto up`).

That server's endpoint, port and whatever prepare.yml created are in aws.json in the scenario's ephemeral directory.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.harness.moto import MotoServer


@pytest.fixture(scope="module")
def aws() -> dict:
    return json.loads((Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "aws.json").read_text())


@pytest.fixture(scope="module")
def aws_client(aws: dict) -> Callable[[str], object]:
    """aws_client("ecs") -> a boto3 client for the scenario's moto server, with moto's placeholder credentials."""
    return MotoServer.attached(aws["endpoint"]).client
