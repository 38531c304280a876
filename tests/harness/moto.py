"""A moto server on a free loopback port: the same HTTP code path as real AWS, through endpoint_url."""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

from .ports import free_port, stop_detached, wait_until

REGION = "us-east-1"
# moto's fixed account id; not a real account.
ACCOUNT_ID = "123456789012"
_REQUEST_LINE = re.compile(r'"(GET|POST|PUT|DELETE|HEAD|PATCH) [^"]*" \d{3}')


class MotoServer:
    def __init__(self, workdir: Path, port: int | None = None, env: dict[str, str] | None = None) -> None:
        """`env`: moto's own settings, e.g. MOTO_IAM_LOAD_MANAGED_POLICIES=true (AWS managed policies loaded)."""
        self.port = port or free_port()
        self.server_env = env or {}
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log_path = workdir / f"moto-{self.port}.log"
        self._proc: subprocess.Popen | None = None

    @classmethod
    def attached(cls, endpoint: str) -> MotoServer:
        """A handle on a server another process started (a molecule scenario's create step): clients only."""
        return cls(Path("."), port=int(endpoint.rsplit(":", 1)[1]))

    def start(self, detach: bool = False) -> MotoServer:
        """Start the server; `detach` puts it in a session of its own, so it outlives the process that started it."""
        moto = Path(sys.executable).with_name("moto_server")
        log = self.log_path.open("w")
        # The request recorder (off until /moto-api/recorder/start-recording) writes beside the log, not in the cwd.
        env = dict(os.environ, MOTO_RECORDER_FILEPATH=str(self.log_path.with_suffix(".recording.jsonl")), **self.server_env)
        self._proc = subprocess.Popen(
            [str(moto), "-H", "127.0.0.1", "-p", str(self.port)], stdout=log, stderr=subprocess.STDOUT, start_new_session=detach, env=env
        )
        wait_until(self.is_up, 30, "moto server")
        return self

    def is_up(self) -> bool:
        with urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=1) as resp:
            return resp.status == 200

    def stop(self) -> None:
        if self._proc:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:  # a loaded machine: its state is thrown away anyway
                self._proc.kill()
                self._proc.wait(10)
            self._proc = None

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


def moto_compatible(definition: dict) -> dict:
    """moto wants `memory` on every container of an EC2 task without task memory; AWS accepts memoryReservation alone."""
    definition = copy.deepcopy(definition)
    if "EC2" in definition.get("requiresCompatibilities", []) and not definition.get("memory"):
        for container in definition["containerDefinitions"]:
            container.setdefault("memory", container.get("memoryReservation", 512))
    return definition


def clean_aws_env() -> dict[str, str]:
    """The caller's environment without AWS settings that could point a test at a real account."""
    return {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}


def main(argv: list[str] | None = None) -> int:
    """`up` starts a detached moto server and records it in the state file; `down` stops it and removes the file.

    Molecule's create/prepare/converge/verify/destroy steps share the server through that file (endpoint, port, pid,
    plus whatever prepare adds)."""
    import argparse
    import json

    parser = argparse.ArgumentParser(prog="python -m tests.harness.moto")
    parser.add_argument("command", choices=["up", "down"])
    parser.add_argument("--state-file", required=True, type=Path)
    args = parser.parse_args(argv)
    state = json.loads(args.state_file.read_text()) if args.state_file.exists() else {}
    if args.command == "up":
        if not state.get("pid"):
            server = MotoServer(args.state_file.parent).start(detach=True)
            pid = server._proc.pid  # type: ignore[union-attr]
            args.state_file.write_text(json.dumps({"pid": pid, "port": server.port, "endpoint": server.endpoint}, indent=1))
        return 0
    stop_detached(args.state_file, grace_s=0.5)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
