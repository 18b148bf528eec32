# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for gangplank.platform.container: one container spec, started or removed by the engine's module
(containers.podman.podman_container or community.docker.docker_container), as ansible.builtin.package runs the host's
package module. The arguments come from plugins/module_utils/engine.py."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.gangplank.platform.plugins.module_utils.deploy import redact
from ansible_collections.gangplank.platform.plugins.module_utils.engine import (
    MODULES, EngineError, remove_call, start_call,
)

ARGUMENT_SPEC = {
    "engine": {"type": "str", "required": True, "choices": sorted(MODULES)},
    "state": {"type": "str", "default": "started", "choices": ["started", "absent"]},
    "spec": {"type": "dict"},
    "name": {"type": "str"},
    "recreate": {"type": "bool", "default": False},
    "secret_values": {"type": "dict", "default": {}, "no_log": True},
}
# The end of the engine's error output that a failure message quotes.
STDERR_TAIL = 500


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        _validation, args = self.validate_argument_spec(
            argument_spec=ARGUMENT_SPEC, required_if=[("state", "started", ["spec"]), ("state", "absent", ["name"])])
        try:
            if args["state"] == "absent":
                module, module_args = remove_call(args["engine"], args["name"])
            else:
                module, module_args = start_call(args["engine"], args["spec"], args["secret_values"], args["recreate"])
        except (EngineError, KeyError) as error:
            # A spec without a key it needs: the key's name, never a value.
            return dict(result, failed=True, changed=False, msg="spec: %s" % (
                error if isinstance(error, EngineError) else "has no %s" % error))
        # Check mode and --diff reach the module as the task's (_execute_module passes them on).
        result.update(self._execute_module(module_name=module, module_args=module_args, task_vars=task_vars))
        if result.get("failed") and args["state"] == "started":
            result["msg"] = failure_message(args["spec"], result, args["secret_values"])
        return result


def failure_message(spec, result, secret_values):
    """``<name>: <the module's message>[ stderr: <its end>]``, each catalog env value and secret masked: an engine's
    error may quote the container's arguments. Only the message and stderr, never the inspect data it returns."""
    text = str(result["msg"]) if "msg" in result else "no message"
    if result.get("stderr"):
        text += " stderr: " + str(result["stderr"])[-STDERR_TAIL:]
    return "%s: %s" % (spec.get("name"), redact(text, [spec], secret_values))
