# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for gangplank.platform.facts_cache: the read as a plain Python script on the host
(plugins/plugin_utils/host_script.py: on every run, for every host), the write and any fallback as the module.
With check_roles, the inputs of those roles are checked first, on the controller, by gangplank.platform.role_inputs:
the read is the first task of site.yml and scale.yml on every host, and a check of its own would be one more task per
host (a worker each, about 0.5 s of a day-2 run at 30 hosts)."""

from __future__ import annotations

import re

from ansible_collections.gangplank.platform.plugins.module_utils.facts_cache import ARGUMENT_SPEC
from ansible_collections.gangplank.platform.plugins.plugin_utils.host_script import MODULE_UTILS, HostScriptAction


class ActionModule(HostScriptAction):
    MODULE = "gangplank.platform.facts_cache"
    ARGUMENT_SPEC = ARGUMENT_SPEC
    MODULE_UTILS = [MODULE_UTILS + "state_files", MODULE_UTILS + "facts_cache"]
    FUNCTION = "read_state"

    def before_host(self, args, task_vars):
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

    def script_arguments(self, args):
        if args["state"] != "read":
            return None
        return {"path": args["path"], "inputs": args["inputs"], "bindings_path": args["bindings_path"]}

    def is_answer(self, answer):
        return isinstance(answer.get("valid"), bool)
