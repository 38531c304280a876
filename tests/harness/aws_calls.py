"""The AWS API calls a moto server received, by action name, from moto's request recorder; which of them write."""

from __future__ import annotations

import base64
import json
import urllib.parse
import urllib.request

from .moto import MotoServer

# Calls that only read although their name does not say so.
_READ_ACTIONS = {"BatchGetImage", "SimulatePrincipalPolicy"}
_READ_PREFIXES = ("Describe", "List", "Get")


def _post(server: MotoServer, path: str) -> bytes:
    request = urllib.request.Request(f"{server.endpoint}/moto-api/recorder/{path}", method="POST", data=b"")
    with urllib.request.urlopen(request, timeout=10) as resp:
        return resp.read()


def start_recording(server: MotoServer) -> None:
    """Forget what was recorded so far and record every request from now on."""
    _post(server, "reset-recording")
    _post(server, "start-recording")


def action_of(entry: dict) -> str:
    """The API action of one recorded request: JSON protocols name it in X-Amz-Target, query protocols in Action=,
    REST ones (S3) by method and path."""
    headers = {k.lower(): v for k, v in entry.get("headers", {}).items()}
    if "x-amz-target" in headers:
        return headers["x-amz-target"].rsplit(".", 1)[-1]
    body = entry.get("body") or ""
    if entry.get("body_encoded"):
        body = base64.b64decode(body).decode("utf-8", errors="replace")
    query = urllib.parse.parse_qs(body) or urllib.parse.parse_qs(urllib.parse.urlparse(entry["url"]).query)
    if "Action" in query:
        return query["Action"][0]
    return f"{entry['method']} {urllib.parse.urlparse(entry['url']).path}"


def recorded_actions(server: MotoServer) -> list[str]:
    with urllib.request.urlopen(f"{server.endpoint}/moto-api/recorder/download-recording", timeout=10) as resp:
        lines = resp.read().decode().splitlines()
    return [action_of(json.loads(line)) for line in lines if line.strip()]


def is_write(action: str) -> bool:
    if " " in action:  # REST: only GET and HEAD read
        return action.split(" ", 1)[0] not in ("GET", "HEAD")
    return action not in _READ_ACTIONS and not action.startswith(_READ_PREFIXES)


def writes(server: MotoServer) -> list[str]:
    """The write calls recorded since start_recording."""
    return [action for action in recorded_actions(server) if is_write(action)]
