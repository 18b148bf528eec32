# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for gangplank.platform.facts_cache. The read (every host, on every run) is one shell on the host, as
ansible.builtin.raw runs it (plugins/module_utils/facts/facts_cache.py, SHELL_READ), whose output is hashed here into the
same fingerprint the module computes; the write, and a read whose shell did not finish, run the module.
With check_roles, the inputs of those roles are checked first, on the controller, by gangplank.platform.role_inputs:
the read is the first task of site.yml and scale.yml on every host, and a check of its own would be one more task per
host (a worker each)."""

from __future__ import annotations

import json
import re

from ansible_collections.gangplank.platform.plugins.module_utils.facts.facts_cache import (
    ARGUMENT_SPEC, ReadError, parse_read, read_command, state_of)
from ansible_collections.gangplank.platform.plugins.plugin_utils.action_base import GangplankAction


MODULE = "gangplank.platform.facts_cache"


class ActionModule(GangplankAction):
    # A read, or a module that supports check mode.
    _supports_check_mode = True
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def _check_role_inputs(self, args, task_vars):
        """A failed result when a checked input is bad, else None."""
        if not args["check_roles"]:
            return None
        try:
            re.compile(args["check_reject"] or "")
        except re.error as error:
            return {"failed": True, "changed": False,
                    "msg": "check_reject is not a regular expression (%s): %r" % (error, args["check_reject"])}
        # As Ansible's template action runs copy: the role_inputs action on a copy of this task, with its arguments.
        task = self._task.copy()
        task.args = {"roles": args["check_roles"], "reject": args["check_reject"]}
        check = self._shared_loader_obj.action_loader.get(
            "gangplank.platform.role_inputs", task=task, connection=self._connection, play_context=self._play_context,
            loader=self._loader, templar=self._templar, shared_loader_obj=self._shared_loader_obj)
        checked = check.run(task_vars=task_vars)
        return checked if checked.get("failed") else None

    def _read(self, args, host):
        """read_state's result from one shell on the host, or None (the module then reads); a failed result when the
        host printed what the read does not print."""
        # As raw runs its command: no Python on the host, the connection's shell as it is, with become where the task
        # has it. An unreachable host raises, as a module run would.
        done = self._low_level_execute_command(read_command(args["path"], args["bindings_path"]), executable=False)
        try:
            read = (parse_read(done.get("stdout") or "", args["path"], args["bindings_path"], host=host)
                    if done.get("rc") == 0 else None)
        except ReadError as error:
            return {"failed": True, "changed": False, "msg": str(error)}
        if read is None:
            return None
        view, content, bindings = read
        # The inputs as the module gets them (through JSON), so that both hash the same bytes.
        inputs = json.loads(json.dumps(args["inputs"]))
        return state_of(view, content, bindings, inputs, bool(args["bindings_path"]))

    def act(self, args, task_vars, result):
        answer = self._check_role_inputs(args, task_vars)
        if answer is None and args["state"] == "read":
            answer = self._read(args, task_vars.get("inventory_hostname", ""))
        if answer is None:
            answer = self._execute_module(module_name=MODULE, module_args=self._task.args, task_vars=task_vars)
        result.update(answer)
        return result
