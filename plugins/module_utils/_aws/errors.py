# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""What an AWS call can raise (modules report it through fail_json_aws), the error code of a ClientError, and InputError."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

try:
    from botocore.exceptions import BotoCoreError, ClientError
except ImportError:  # pragma: no cover - AnsibleAWSModule reports the missing library

    class BotoCoreError(Exception):  # type: ignore[no-redef]
        """Stands in for botocore's class, so the except clauses still name an exception class."""

    ClientError = BotoCoreError  # type: ignore[assignment,misc]

__all__ = ["BotoCoreError", "ClientError", "InputError", "error_code", "input_report", "module_errors"]


def error_code(err: Exception) -> str:
    return getattr(err, "response", {}).get("Error", {}).get("Code", "")


class InputError(Exception):
    """Bad input, or an AWS state the module cannot start from; raised before any write."""

    def __init__(self, errors: list[str] | str) -> None:
        self.errors = [errors] if isinstance(errors, str) else list(errors)
        super().__init__("; ".join(self.errors))


def input_report(err: InputError) -> dict[str, Any]:
    """fail_json's arguments for bad input: the joined message and each error on its own."""
    return {"msg": str(err), "errors": err.errors}


@contextlib.contextmanager
def module_errors(
    module: Any,
    aws_msg: str | None = None,
    reports: dict[Any, Callable[[Any], dict[str, Any]]] | None = None,
    details: Callable[[], dict[str, Any]] = dict,
) -> Iterator[None]:
    """The end of every module's main(): what the work raises ends the module with failed=true, its reason named.

    An AWS call's error leaves through fail_json_aws(msg=aws_msg) (not caught without aws_msg); InputError through
    fail_json with its errors; `reports` maps the module's own exception classes (or tuples of them) to fail_json's
    arguments, first match wins. `details()`, read at failure time, adds what the run did so far to any of them.
    """
    reports = {InputError: input_report, **(reports or {})}
    try:
        yield
    except (BotoCoreError, ClientError) as e:
        if aws_msg is None:
            raise
        module.fail_json_aws(e, msg=aws_msg, **details())
    except Exception as e:  # matched against `reports` below; anything else propagates
        for error, report in reports.items():
            if isinstance(e, error):
                module.fail_json(**report(e), **details())
                return
        raise
