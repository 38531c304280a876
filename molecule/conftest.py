"""Fixtures for the molecule verifiers whose create.yml starts a moto server (`python -m tests.harness.bluegreen up`).

That server's endpoint, port and whatever prepare.yml created are in aws.json in the scenario's ephemeral directory.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import boto3
import pytest


@pytest.fixture(scope="module")
def aws() -> dict:
    return json.loads((Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "aws.json").read_text())


@pytest.fixture(scope="module")
def aws_client(aws: dict) -> Callable[[str], object]:
    """aws_client("ecs") -> a boto3 client for the scenario's moto server, with moto's placeholder credentials."""

    def client(service: str):
        return boto3.client(
            service, region_name="us-east-1", endpoint_url=aws["endpoint"], aws_access_key_id="testing", aws_secret_access_key="testing"
        )

    return client
