# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""What an AWS call can raise (modules report it through fail_json_aws), the error code of a ClientError, and InputError."""

from __future__ import annotations

try:
    from botocore.exceptions import BotoCoreError, ClientError
except ImportError:  # pragma: no cover - AnsibleAWSModule reports the missing library

    class BotoCoreError(Exception):  # type: ignore[no-redef]
        """Stands in for botocore's class, so the except clauses still name an exception class."""

    ClientError = BotoCoreError  # type: ignore[assignment,misc]

__all__ = ["BotoCoreError", "ClientError", "InputError", "error_code"]


def error_code(err: Exception) -> str:
    return getattr(err, "response", {}).get("Error", {}).get("Code", "")


class InputError(Exception):
    """Bad input, or an AWS state the module cannot start from; raised before any write."""

    def __init__(self, errors: list[str] | str) -> None:
        self.errors = [errors] if isinstance(errors, str) else list(errors)
        super().__init__("; ".join(self.errors))
