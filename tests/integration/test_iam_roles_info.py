"""inferops.triton_ecs.iam_roles_info against a moto server (the AWS stand-in): found roles give their ARNs, a missing
one is listed, not an error; an ARN given as a name fails naming the field; no run prints a deprecation warning (what
it replaces, amazon.aws.iam_role_info, announces one on every call)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.harness.ansible import run_playbook
from tests.harness.moto import ACCOUNT_ID, MotoServer

PLAYBOOK = Path(__file__).parent / "playbooks" / "iam_roles_info_module.yml"
TASK = "Look the roles up"
TRUST = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Principal": {"Service": "ecs-tasks.amazonaws.com"}, "Action": "sts:AssumeRole"}],
}


def test_found_missing_and_a_bad_name(moto_server: MotoServer) -> None:
    moto_server.client("iam").create_role(RoleName="triton-task", Path="/inference/", AssumeRolePolicyDocument=json.dumps(TRUST))
    run = run_playbook(PLAYBOOK, extra_vars={"aws_endpoint_url": moto_server.endpoint, "iam_role_names": ["triton-task", "triton-absent"]})
    assert run.rc == 0, run.stdout[-3000:]
    result = run.result(TASK)
    arn = f"arn:aws:iam::{ACCOUNT_ID}:role/inference/triton-task"
    assert result["changed"] is False
    assert result["roles"] == [{"name": "triton-task", "arn": arn, "path": "/inference/"}]
    assert result["arns"] == {"triton-task": arn}
    assert result["missing"] == ["triton-absent"]
    assert run.deprecations == []

    bad = run_playbook(PLAYBOOK, extra_vars={"aws_endpoint_url": moto_server.endpoint, "iam_role_names": [arn]})
    assert bad.rc != 0
    assert bad.result(TASK)["msg"].startswith("names: ") and "not ARNs" in bad.result(TASK)["msg"]
