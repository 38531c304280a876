"""`get_paginator` for the in-memory fake clients of the unit tests: a listing is one page, the fake's own answer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class OnePageListings:
    """Mixed into a fake client: `get_paginator(op).paginate(**query).build_full_result()` answers `op(**query)`."""

    def get_paginator(self, operation: str) -> _OnePage:
        return _OnePage(getattr(self, operation))


class _OnePage:
    def __init__(self, call: Callable[..., dict[str, Any]]) -> None:
        self.call = call
        self.query: dict[str, Any] = {}

    def paginate(self, **query: Any) -> _OnePage:
        self.query = query
        return self

    def build_full_result(self) -> dict[str, Any]:
        return self.call(aws_retry=True, **self.query)
