# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for gangplank.platform.health_wait: the probes as a plain Python script on the host
(plugins/plugin_utils/host_script.py: every site.yml probes every host's kept containers), the module as the fallback."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.gangplank.platform.plugins.module_utils.health import ARGUMENT_SPEC
from ansible_collections.gangplank.platform.plugins.plugin_utils import host_script

MODULE_UTILS = "ansible_collections.gangplank.platform.plugins.module_utils."


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        answer = host_script.run(self, task_vars or {}, [MODULE_UTILS + "messages", MODULE_UTILS + "health"],
                                 "wait_result", {"probes": args["probes"], "check_mode": bool(self._task.check_mode)})
        if answer is None or not isinstance(answer.get("changed"), bool):
            answer = self._execute_module(module_name="gangplank.platform.health_wait", module_args=self._task.args,
                                          task_vars=task_vars)
        result.update(answer)
        return result
