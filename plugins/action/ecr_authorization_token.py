# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""Runs the ecr_authorization_token module and marks its result no_log.

The result carries the registry password. Marked `_ansible_no_log`, every callback prints it censored, at any
verbosity and with any stdout callback (json included), even when the task itself forgot `no_log: true`; the
registered variable still holds the password for `docker_login`.
"""

from __future__ import annotations

from typing import Any

from ansible.plugins.action import ActionBase


class ActionModule(ActionBase):
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        result.update(self._execute_module(module_name=self._task.action, module_args=self._task.args, task_vars=task_vars))
        result["_ansible_no_log"] = True
        return result
