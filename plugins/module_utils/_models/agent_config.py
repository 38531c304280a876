# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The model agent's configuration file (written by the launch template's user data): read, defaulted, checked.

Runs on the instance without Ansible, like the agent.
"""

from __future__ import annotations

import json
import os
from typing import Any

CONFIG_PATH = "/etc/inferops/model-agent.json"
DEFAULTS: dict[str, Any] = {
    "prefix": "",
    "cluster": None,
    "host_path": "/mnt/models",
    "poll_interval_s": 30,
    "keep_versions": 2,
    "introspection_url": "http://127.0.0.1:51678",
    "imds_url": "http://169.254.169.254",
    "endpoint_url": None,
    "triton_container_name": "triton",
    "triton_http_port": 8000,
    "triton_metrics_port": 8002,
    "boot_attempts": 5,
    "boot_retry_delay_s": 10,
    "load_timeout_s": 300,
    "sync_threads": 4,
    "smoke_inference": True,
    # After the last failed boot attempt: mark the instance Unhealthy in its Auto Scaling group (instance_health.py).
    "mark_unhealthy_on_failed_boot": True,
    "autoscaling_endpoint_url": None,
    # S3 connections shared by every file of every model, the size of one ranged GET, and the memory for parts
    # waiting to be hashed in order (transfer.DownloadSettings; docs/models.md says how to size them).
    "download_concurrency": 64,
    "download_part_mib": 8,
    "download_buffer_mib": 256,
}
REQUIRED = ("bucket", "application", "region")
_INTEGERS = (
    "poll_interval_s",
    "keep_versions",
    "triton_http_port",
    "triton_metrics_port",
    "boot_attempts",
    "load_timeout_s",
    "sync_threads",
    "download_concurrency",
    "download_part_mib",
    "download_buffer_mib",
)


class ConfigError(ValueError):
    """The agent's configuration file is unusable; the message names the field, the value and the fix."""


def parse_config(raw: bytes, where: str) -> dict[str, Any]:
    """The agent's configuration: the file's values over DEFAULTS, each checked."""
    try:
        given = json.loads(raw)
    except ValueError as err:
        raise ConfigError(f"{where} is not JSON ({err}); rewrite it (the launch template's user data writes it)") from err
    if not isinstance(given, dict):
        raise ConfigError(f"{where} must hold a JSON object")
    unknown = sorted(set(given) - set(DEFAULTS) - set(REQUIRED))
    if unknown:
        raise ConfigError(f"{where}: unknown keys {unknown}; known: {sorted(set(DEFAULTS) | set(REQUIRED))}")
    config = dict(DEFAULTS, **given)
    for key in REQUIRED:
        if not isinstance(config.get(key), str) or not config[key]:
            raise ConfigError(f"{where}: {key}={config.get(key)!r}; set it to a non-empty string")
    for key in _INTEGERS:
        if isinstance(config[key], bool) or not isinstance(config[key], int) or config[key] < 1:
            raise ConfigError(f"{where}: {key}={config[key]!r}; expected a positive integer")
    if (
        isinstance(config["boot_retry_delay_s"], bool)
        or not isinstance(config["boot_retry_delay_s"], (int, float))
        or config["boot_retry_delay_s"] < 0
    ):
        raise ConfigError(f"{where}: boot_retry_delay_s={config['boot_retry_delay_s']!r}; expected seconds >= 0")
    for key in ("smoke_inference", "mark_unhealthy_on_failed_boot"):
        if not isinstance(config[key], bool):
            raise ConfigError(f"{where}: {key}={config[key]!r}; expected true or false")
    if config["download_buffer_mib"] < config["download_part_mib"]:
        raise ConfigError(
            f"{where}: download_buffer_mib={config['download_buffer_mib']} is smaller than download_part_mib="
            f"{config['download_part_mib']}; it holds the parts waiting to be hashed: give it at least one part"
        )
    if not os.path.isabs(str(config["host_path"])):
        raise ConfigError(f"{where}: host_path={config['host_path']!r}; expected an absolute path (the model host path)")
    return config


def load_config(path: str) -> dict[str, Any]:
    with open(path, "rb") as f:
        return parse_config(f.read(), path)
