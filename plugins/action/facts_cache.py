# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for gangplank.platform.facts_cache: the read as a plain Python script on the host
(plugins/plugin_utils/host_script.py: on every run, for every host), the write and any fallback as the module."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.gangplank.platform.plugins.module_utils.facts_cache import ARGUMENT_SPEC
from ansible_collections.gangplank.platform.plugins.plugin_utils import host_script

MODULE_UTILS = "ansible_collections.gangplank.platform.plugins.module_utils."


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        if args["state"] == "read":
            answer = host_script.run(self, task_vars or {}, [MODULE_UTILS + "state_files", MODULE_UTILS + "facts_cache"],
                                     "read_state", {"path": args["path"], "inputs": args["inputs"],
                                                    "bindings_path": args["bindings_path"]})
            if answer is not None and isinstance(answer.get("valid"), bool):
                result.update(answer)
                return result
        result.update(self._execute_module(module_name="gangplank.platform.facts_cache", module_args=self._task.args,
                                           task_vars=task_vars))
        return result
