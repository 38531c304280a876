# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""Listings across pages through botocore's own paginators, as amazon.aws's `_elbv2/api.py` does.

A paginator's calls do not pass through the client's `aws_retry` wrapper, so the whole listing is retried
(AWSRetry.jittered_backoff) when AWS throttles a page.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.amazon.aws.plugins.module_utils.retries import AWSRetry


@AWSRetry.jittered_backoff()
def full_result(client: Any, operation: str, **query: Any) -> dict[str, Any]:
    """Every page of `operation` (a listing call of `client`) merged into one answer."""
    return client.get_paginator(operation).paginate(**query).build_full_result()
