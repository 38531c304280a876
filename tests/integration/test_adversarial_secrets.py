"""Adversarial secrets (issue 12, class 2): no secret value appears in any output of a real ansible-playbook run.

Stand-ins: a moto server for ECR (its GetAuthorizationToken returns a real-shaped token) and for ECS; the local
dockerd for the triton_image role's registry login, pointed at a closed loopback port. Each run plants fresh random
values in every place a run can carry one (a refused plain secret, a sidecar's `value`, an override's `valueFrom`, a
secret-looking environment variable, the registry password, the AWS secret key) and greps stdout and stderr of the
real ansible-playbook, at -vvv and -vvvv --diff with the default callback and with the json callback.
"""

from __future__ import annotations

import base64
import json
import secrets
import socket
import subprocess

import pytest

from tests.harness.ansible import REPO_ROOT, playbook_env

PLAYBOOK = REPO_ROOT / "tests" / "integration" / "playbooks" / "secrets_planted.yml"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(("callback", "flags"), [("default", ("-vvv",)), ("json", ("-vvv",)), ("default", ("-vvvv", "--diff"))])
def test_adversarial_no_planted_secret_in_playbook_output(moto_server, tmp_path, callback, flags):
    """Stand-ins: moto server (ECR, ECS), local dockerd, real ansible-playbook. Every planted value, the ECR password
    and its base64 token are absent from the whole output, while the run shows each case really ran: the registered
    token still logs in, the three plain values were refused, the environment variable was warned about."""
    planted = {
        key: f"planted-{key.replace('_', '-')}-{secrets.token_hex(8)}"
        for key in ("secret_value", "sidecar_value", "override_value", "env_value", "registry_password", "aws_secret_key")
    }
    ecr_password = moto_server.client("ecr").get_authorization_token()["authorizationData"][0]["authorizationToken"]
    forbidden = {**planted, "ecr_token": ecr_password, "ecr_password": base64.b64decode(ecr_password).decode().split(":", 1)[1]}
    env = playbook_env(moto_server.env())
    env["ANSIBLE_STDOUT_CALLBACK"] = callback
    # From a vars file, as secrets come (a vault file): at -vvvv Ansible echoes its own command line, -e values included.
    extra = tmp_path / "planted.json"
    extra.write_text(json.dumps({"planted": planted, "aws_endpoint_url": moto_server.endpoint, "closed_port": closed_port()}))
    playbook = str(REPO_ROOT / ".venv" / "bin" / "ansible-playbook")
    cmd = [playbook, str(PLAYBOOK), "-i", "localhost,", "-c", "local", "-e", f"@{extra}", *flags]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=600, check=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    assert "Log in to the registry" in output  # the role's login ran (and failed against the closed port)
    assert [name for name, value in forbidden.items() if value in output] == []
