# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""The model agent's configuration file (written by the launch template's user data): read, defaulted, checked.

Runs on the instance without Ansible, like the agent.
"""

from __future__ import annotations

import json
import math
import os
import re
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
# Each integer key and its largest sensible value (a larger one is a typo that would overflow a sleep or exhaust memory).
_INTEGERS = {
    "poll_interval_s": 3600,
    "keep_versions": 1000,
    "triton_http_port": 65535,
    "triton_metrics_port": 65535,
    "boot_attempts": 1000,
    "load_timeout_s": 86400,
    "sync_threads": 256,
    "download_concurrency": 1024,
    "download_part_mib": 5120,
    "download_buffer_mib": 1048576,
}


_STRINGS = ("prefix", "triton_container_name")
_URLS = ("introspection_url", "imds_url", "endpoint_url", "autoscaling_endpoint_url")
_OPTIONAL_URLS = ("endpoint_url", "autoscaling_endpoint_url")  # null: the region's AWS endpoints
_APPLICATION = re.compile(r"[A-Za-z0-9_-]{1,255}")


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
    for key, largest in _INTEGERS.items():
        if isinstance(config[key], bool) or not isinstance(config[key], int) or not 1 <= config[key] <= largest:
            raise ConfigError(f"{where}: {key}={config[key]!r}; expected an integer from 1 to {largest}")
    if (
        isinstance(config["boot_retry_delay_s"], bool)
        or not isinstance(config["boot_retry_delay_s"], (int, float))
        or config["boot_retry_delay_s"] < 0
    ):
        raise ConfigError(f"{where}: boot_retry_delay_s={config['boot_retry_delay_s']!r}; expected seconds >= 0")
    if not math.isfinite(config["boot_retry_delay_s"]) or config["boot_retry_delay_s"] > 3600:
        raise ConfigError(f"{where}: boot_retry_delay_s={config['boot_retry_delay_s']!r}; expected seconds from 0 to 3600")
    for key in _STRINGS:
        if not isinstance(config[key], str):
            raise ConfigError(f"{where}: {key}={config[key]!r}; expected a string")
    for key in _URLS:
        value = config[key]
        if value is None and key in _OPTIONAL_URLS:
            continue
        if not isinstance(value, str) or not value.startswith(("http://", "https://")):
            raise ConfigError(
                f"{where}: {key}={value!r}; expected an http:// or https:// URL" + (" or null" if key in _OPTIONAL_URLS else "")
            )
    if config["cluster"] is not None and (not isinstance(config["cluster"], str) or not config["cluster"]):
        raise ConfigError(f"{where}: cluster={config['cluster']!r}; expected the ECS cluster's name, or null")
    if not _APPLICATION.fullmatch(config["application"]):
        raise ConfigError(
            f"{where}: application={config['application']!r}; expected the ECS service family (1-255 letters, digits, '_', '-')"
        )
    for key in ("smoke_inference", "mark_unhealthy_on_failed_boot"):
        if not isinstance(config[key], bool):
            raise ConfigError(f"{where}: {key}={config[key]!r}; expected true or false")
    if config["download_buffer_mib"] < config["download_part_mib"]:
        raise ConfigError(
            f"{where}: download_buffer_mib={config['download_buffer_mib']} is smaller than download_part_mib="
            f"{config['download_part_mib']}; it holds the parts waiting to be hashed: give it at least one part"
        )
    if not isinstance(config["host_path"], str) or not os.path.isabs(config["host_path"]) or "\0" in config["host_path"]:
        raise ConfigError(f"{where}: host_path={config['host_path']!r}; expected an absolute path (the model host path)")
    return config


def load_config(path: str) -> dict[str, Any]:
    with open(path, "rb") as f:
        return parse_config(f.read(), path)
