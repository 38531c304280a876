# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""How every AWS module of the collection starts and ends: AnsibleAWSModule with check mode (a check run given an
input known only after apply reports the change and stops: _aws/after_apply.py), a client per service whose calls
retry throttling and transient errors, and the work run under module_errors."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ansible_collections.amazon.aws.plugins.module_utils.modules import AnsibleAWSModule
from ansible_collections.amazon.aws.plugins.module_utils.retries import AWSRetry, RetryingBotoClientWrapper
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import after_apply
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import module_errors

__all__ = ["aws_module", "client", "converge", "retrying_client"]


def aws_module(argument_spec: dict[str, Any], **kwargs: Any) -> AnsibleAWSModule:
    """The module object; every module of the collection supports check mode. An input that is known only after
    apply (an earlier step of the run would create it) ends the module here, before any AWS call: in check mode with
    the change a real run would make, in a real run with a failure naming the input."""
    module = AnsibleAWSModule(argument_spec=argument_spec, supports_check_mode=True, **kwargs)
    unknown = after_apply.unknown_inputs(module.params)
    if unknown and module.check_mode:
        module.exit_json(**after_apply.check_mode_result(unknown))
    if unknown:
        module.fail_json(msg=after_apply.real_run_error(unknown))
    return module


def client(module: AnsibleAWSModule, service: str, max_pool_connections: int | None = None) -> Any:
    """A boto3 client for `service` (the module's region, endpoint and credentials), its calls retried with jittered
    backoff; `max_pool_connections` for a module that makes that many calls at once (botocore keeps 10)."""
    extra = {"config": {"max_pool_connections": max_pool_connections}} if max_pool_connections else {}
    return module.client(service, retry_decorator=AWSRetry.jittered_backoff(), **extra)


def converge(module: AnsibleAWSModule, services: Sequence[str], ensure: Callable[..., dict[str, Any]], aws_msg: str) -> dict[str, Any]:
    """ensure(client, ..., params, check_mode) with a client per service, in order: the result of a module that
    converges a resource. An AWS error fails the module with `aws_msg`, InputError with its errors."""
    clients = [client(module, service) for service in services]
    with module_errors(module, aws_msg):
        return ensure(*clients, module.params, module.check_mode)


def retrying_client(boto3_client: Any) -> Any:
    """Wraps a plain boto3 client the way `client` does, so `aws_retry=True` works the same outside a module (tests,
    benchmarks). Here, not in _aws/s3.py: the model agent imports that file and runs without Ansible."""
    return RetryingBotoClientWrapper(boto3_client, AWSRetry.jittered_backoff())
