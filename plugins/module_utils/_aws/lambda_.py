# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The one place this collection calls the Lambda API: one thin function per call.

Every function takes a client made by `AnsibleAWSModule.client("lambda", retry_decorator=AWSRetry.jittered_backoff())`
and calls with `aws_retry=True` (throttling is retried; a function's own error is an answer, not a retry);
botocore errors propagate for the module to report through `fail_json_aws`.
"""

from __future__ import annotations

import json
from typing import Any

from ansible_collections.amazon.aws.plugins.module_utils.botocore import is_boto3_error_code


def invoke(lambda_client: Any, function: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Invokes `function` (name or ARN) synchronously with `payload` as JSON. Returns {status_code, function_error,
    payload}: `function_error` is Lambda's X-Amz-Function-Error ("Unhandled" when the function raised), `payload` the
    decoded answer (its raw text when it is not JSON)."""
    answer = lambda_client.invoke(
        aws_retry=True, FunctionName=function, InvocationType="RequestResponse", Payload=json.dumps(payload, sort_keys=True, default=str)
    )
    raw = answer["Payload"].read() if answer.get("Payload") is not None else b""
    try:
        decoded: Any = json.loads(raw) if raw else None
    except ValueError:
        decoded = raw.decode(errors="replace")
    return {"status_code": answer.get("StatusCode"), "function_error": answer.get("FunctionError"), "payload": decoded}


def get_function(lambda_client: Any, function: str) -> dict[str, Any] | None:
    """The function's configuration, or None when it does not exist."""
    try:
        return lambda_client.get_function(aws_retry=True, FunctionName=function).get("Configuration") or {}
    except is_boto3_error_code("ResourceNotFoundException"):
        return None
