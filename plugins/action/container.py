# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for gangplank.platform.container: one container spec, started or removed by the engine's module
(containers.podman.podman_container or community.docker.docker_container), as ansible.builtin.package runs the host's
package module. The arguments come from plugins/module_utils/engine.py.

A GPU share's MPS control daemon and its instance (module_utils/mps.py) need one step each on the host around the
engine: before a daemon starts, its directories are made (0700, with pipe, shm and log 1777) and an earlier daemon's
ready file is removed; before an instance starts, the action waits for its daemon's ready file (its limits are set),
at most the spec's timeout, and fails without starting the instance when it does not come. Not in check mode."""

from __future__ import annotations

import shlex

from ansible.plugins.action import ActionBase

from ansible_collections.gangplank.platform.plugins.module_utils import mps
from ansible_collections.gangplank.platform.plugins.module_utils.deploy import redact
from ansible_collections.gangplank.platform.plugins.module_utils.engine import (
    MODULES, EngineError, remove_call, start_call,
)
from ansible_collections.gangplank.platform.plugins.module_utils.validation import one_line

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
# The log lines of an MPS daemon quoted when its instance waited for it in vain.
MPS_LOG_LINES = 10


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
        if args["state"] == "started" and not self._task.check_mode:
            failure = self._mps_step(args["engine"], args["spec"])
            if failure:
                return dict(result, failed=True, changed=False, msg="%s: %s" % (args["spec"].get("name"), failure))
        # Check mode and --diff reach the module as the task's (_execute_module passes them on).
        result.update(self._execute_module(module_name=module, module_args=module_args, task_vars=task_vars))
        if result.get("failed") and args["state"] == "started":
            result["msg"] = failure_message(args["spec"], result, args["secret_values"])
        return result

    def _mps_step(self, engine, spec):
        """What an MPS daemon or client needs on the host before it starts (module docstring); a message when it fails."""
        try:
            if spec.get("mps_daemon"):
                done = self._low_level_execute_command(mps.prepare_command(spec))
                if done.get("rc") != 0:
                    return "cannot make the MPS directory %s: %s" % (
                        spec["mps_daemon"]["dir"], one_line(_output(done), STDERR_TAIL))
            if spec.get("mps_client"):
                done = self._low_level_execute_command(mps.wait_command(spec))
                if done.get("rc") != 0:
                    daemon = spec["mps_client"]["daemon"]
                    logs = self._low_level_execute_command(
                        "%s logs --tail %d %s 2>&1" % (shlex.quote(engine), MPS_LOG_LINES, shlex.quote(daemon)))
                    return ("its MPS control daemon %s did not set its limits (%s: %s); not started; the daemon's last log "
                            "lines: %s" % (daemon, spec["mps_client"]["ready"], one_line(_output(done), 200),
                                           one_line(_output(logs), STDERR_TAIL)))
        except mps.MpsError as error:
            return str(error)
        return ""


def _output(done):
    return ((done.get("stdout") or "") + (done.get("stderr") or "")).strip() or "no output"


def failure_message(spec, result, secret_values):
    """``<name>: <the module's message>[ stderr: <its end>]``, each catalog env value and secret masked: an engine's
    error may quote the container's arguments. Only the message and stderr, never the inspect data it returns."""
    text = str(result["msg"]) if "msg" in result else "no message"
    if result.get("stderr"):
        text += " stderr: " + str(result["stderr"])[-STDERR_TAIL:]
    return "%s: %s" % (spec.get("name"), redact(text, [spec], secret_values))
