# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The one place this collection calls the EventBridge API: one thin function per call.

Every function takes a client made by `AnsibleAWSModule.client("events", retry_decorator=AWSRetry.jittered_backoff())`
and calls with `aws_retry=True`; botocore errors propagate for the module to report through `fail_json_aws`.
"""

from __future__ import annotations

import json
from typing import Any


class EventRejected(Exception):
    """EventBridge answered PutEvents but did not take the event (its error code and message)."""


def put_event(events: Any, event_bus_name: str, source: str, detail_type: str, detail: dict[str, Any]) -> str:
    """Sends one event; returns its id. PutEvents reports a refused entry in its answer, not as an error: raise it."""
    answer = events.put_events(
        aws_retry=True,
        Entries=[
            {"EventBusName": event_bus_name, "Source": source, "DetailType": detail_type, "Detail": json.dumps(detail, sort_keys=True)}
        ],
    )
    entry = (answer.get("Entries") or [{}])[0]
    if answer.get("FailedEntryCount") or "EventId" not in entry:
        raise EventRejected(f"EventBridge refused the event on bus {event_bus_name}: {entry.get('ErrorCode')} {entry.get('ErrorMessage')}")
    return entry["EventId"]
