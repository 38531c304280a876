"""A tritonserver in a Docker container, as the tests read it: whether it runs, its log and exit code, and when its
/v2/health/ready answers 200. The base of `awsvpc.AwsvpcTask` (a task on its own address) and
`triton_image.TritonContainer` (the role's image with published ports); each starts and stops its container."""

from __future__ import annotations

import subprocess
import time
import urllib.error
import urllib.request

from .ports import wait_until


class TritonInDocker:
    """Reads of the container named `name`. A subclass sets `name`, `started_at` (time.monotonic() at `docker run`),
    `what` (how a message names it) and `http_url` (Triton's HTTP endpoint, `http://host:port`)."""

    name: str
    started_at: float | None
    ready_interval_s = 0.1

    @property
    def what(self) -> str:
        return f"container {self.name}"

    @property
    def http_url(self) -> str:
        raise NotImplementedError("a TritonInDocker subclass says where Triton's HTTP endpoint is")

    def running(self) -> bool:
        return self._inspect("{{.State.Running}}") == "true"

    def exit_code(self) -> int:
        return int(self._inspect("{{.State.ExitCode}}"))

    def logs(self) -> str:
        proc = subprocess.run(["docker", "logs", self.name], check=False, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        return proc.stdout

    def _inspect(self, template: str) -> str:
        out = subprocess.run(["docker", "inspect", "--format", template, self.name], check=False, capture_output=True, text=True)
        return out.stdout.strip()

    def _http_status(self, path: str) -> int:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback and bridge addresses, no proxy
        try:
            with opener.open(f"{self.http_url}{path}", timeout=2) as resp:
                return resp.status
        except urllib.error.HTTPError as err:
            return err.code

    def wait_ready(self, timeout_s: float = 120) -> float:
        """Seconds from `docker run` until /v2/health/ready answers 200; raises with the log tail if the container exits."""

        def ready() -> bool:
            if not self.running():
                raise RuntimeError(f"{self.what} exited:\n{self.logs()[-3000:]}")
            return self._http_status("/v2/health/ready") == 200

        wait_until(ready, timeout_s, f"tritonserver of {self.what}", interval_s=self.ready_interval_s)
        assert self.started_at is not None
        return time.monotonic() - self.started_at
