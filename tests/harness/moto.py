"""A moto server on a free loopback port: the same HTTP code path as real AWS, through endpoint_url."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

from .ports import free_port, wait_until

REGION = "us-east-1"
# moto's fixed account id; not a real account.
ACCOUNT_ID = "123456789012"
_REQUEST_LINE = re.compile(r'"(GET|POST|PUT|DELETE|HEAD|PATCH) [^"]*" \d{3}')


class MotoServer:
    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log_path = workdir / f"moto-{self.port}.log"
        self._proc: subprocess.Popen | None = None

    def start(self) -> MotoServer:
        moto = Path(sys.executable).with_name("moto_server")
        log = self.log_path.open("w")
        self._proc = subprocess.Popen([str(moto), "-H", "127.0.0.1", "-p", str(self.port)], stdout=log, stderr=subprocess.STDOUT)
        wait_until(self._is_up, 30, "moto server")
        return self

    def _is_up(self) -> bool:
        with urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=1) as resp:
            return resp.status == 200

    def stop(self) -> None:
        if self._proc:
            self._proc.terminate()
            self._proc.wait(10)
            self._proc = None

    def reset(self) -> None:
        req = urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST")
        urllib.request.urlopen(req, timeout=5).close()

    def request_count(self) -> int:
        """AWS API requests served so far (moto's access log, one line each; moto-api calls excluded)."""
        text = self.log_path.read_text()
        return sum(1 for line in text.splitlines() if _REQUEST_LINE.search(line) and "/moto-api/" not in line)

    def env(self) -> dict[str, str]:
        """Environment for boto3, the AWS CLI and amazon.aws modules to reach this server."""
        return {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": REGION,
            "AWS_REGION": REGION,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_URL": self.endpoint,
        }

    def client(self, service: str):
        import boto3

        return boto3.client(
            service,
            region_name=REGION,
            endpoint_url=self.endpoint,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )


def clean_aws_env() -> dict[str, str]:
    """The caller's environment without AWS settings that could point a test at a real account."""
    return {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
