"""module_errors, the end of every module's main(): which error leaves through which call, with what; and converge,
the whole main() of a module that converges one resource.

Stand-in: a recording module (fail_json / fail_json_aws raise SystemExit as Ansible's do; client() records the
service and its retry decorator instead of reaching AWS); botocore's real ClientError.
"""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import InputError, module_errors
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.module import converge


class RecordingModule:
    def __init__(self) -> None:
        self.failed: dict | None = None
        self.params = {"name": "triton"}
        self.check_mode = True

    def client(self, service, retry_decorator=None):
        return {"service": service, "retried": retry_decorator is not None}

    def fail_json(self, **kwargs):
        self.failed = dict(kwargs, call="fail_json")
        raise SystemExit(1)

    def fail_json_aws(self, exception, **kwargs):
        self.failed = dict(kwargs, call="fail_json_aws", exception=exception)
        raise SystemExit(1)


class Refused(Exception):
    pass


class Gone(Exception):
    pass


def throttled() -> ClientError:
    return ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "DescribeServices")


def fail(error: Exception, *args, **kwargs) -> dict:
    module = RecordingModule()
    with pytest.raises(SystemExit), module_errors(module, *args, **kwargs):
        raise error
    return module.failed


def test_an_aws_error_leaves_through_fail_json_aws_with_the_subject():
    error = throttled()
    failed = fail(error, "ECS cluster c: AWS call failed")
    assert failed == {"call": "fail_json_aws", "exception": error, "msg": "ECS cluster c: AWS call failed"}


def test_bad_input_reports_the_message_and_each_error():
    failed = fail(InputError(["name: '' is empty; give one", "cluster: missing; give one"]), "x: AWS call failed")
    assert failed == {
        "call": "fail_json",
        "msg": "name: '' is empty; give one; cluster: missing; give one",
        "errors": ["name: '' is empty; give one", "cluster: missing; give one"],
    }


def test_the_module_s_own_errors_are_reported_as_it_says_first_match_wins():
    reports = {
        (Refused, Gone): lambda err: {"msg": f"model m: {err}", "model": "m"},
        Exception: lambda err: {"msg": "never reached for Refused or Gone"},
    }
    assert fail(Gone("vanished"), "s3: failed", reports) == {"call": "fail_json", "msg": "model m: vanished", "model": "m"}
    assert fail(Refused("no"), "s3: failed", reports)["msg"] == "model m: no"


def test_details_are_read_when_the_run_fails_and_go_with_every_kind_of_failure():
    timeline: list = []
    writes = ["planned"]

    def details() -> dict:
        return {"timeline": timeline, "actions": writes}

    module = RecordingModule()
    with pytest.raises(SystemExit), module_errors(module, "cutover: AWS call failed", details=details):
        timeline.append({"phase": "shift"})
        writes = ["set weights"]  # rebound after entry, as the runner does in check mode
        raise throttled()
    assert module.failed["timeline"] == [{"phase": "shift"}] and module.failed["actions"] == ["set weights"]
    assert fail(InputError("bad"), "x", details=details)["actions"] == ["set weights"]


def test_what_is_not_reported_propagates():
    with pytest.raises(KeyError), module_errors(RecordingModule(), "x: AWS call failed"):
        raise KeyError("a bug, not a failure to report")
    # Without aws_msg (a module that makes no AWS call) an AWS error is not caught either.
    with pytest.raises(ClientError), module_errors(RecordingModule(), reports={Refused: lambda err: {"msg": str(err)}}):
        raise throttled()


def test_a_run_that_raises_nothing_reports_nothing():
    module = RecordingModule()
    with module_errors(module, "x: AWS call failed"):
        result = {"changed": False}
    assert result == {"changed": False} and module.failed is None


def test_converge_hands_ensure_a_retried_client_per_service_in_order_then_the_params_and_check_mode():
    module = RecordingModule()
    seen = []

    def ensure(ecs, autoscaling, params, check_mode):
        seen.append((ecs, autoscaling, params, check_mode))
        return {"changed": False}

    assert converge(module, ["ecs", "autoscaling"], ensure, "capacity provider triton: AWS call failed") == {"changed": False}
    assert seen == [({"service": "ecs", "retried": True}, {"service": "autoscaling", "retried": True}, {"name": "triton"}, True)]


def test_converge_reports_an_aws_error_with_its_subject_and_bad_input_with_its_errors():
    error = throttled()

    def ensure_raising(raised):
        def ensure(ecs, params, check_mode):
            raise raised

        return ensure

    module = RecordingModule()
    with pytest.raises(SystemExit):
        converge(module, ["ecs"], ensure_raising(error), "ECS cluster triton: AWS call failed")
    assert module.failed == {"call": "fail_json_aws", "exception": error, "msg": "ECS cluster triton: AWS call failed"}
    module = RecordingModule()
    with pytest.raises(SystemExit):
        converge(module, ["ecs"], ensure_raising(InputError("tags: not a dict")), "x")
    assert module.failed == {"call": "fail_json", "msg": "tags: not a dict", "errors": ["tags: not a dict"]}
