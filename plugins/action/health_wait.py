# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for gangplank.platform.health_wait: the probes as a plain Python script on the host
(plugins/plugin_utils/host_script.py: every site.yml probes every host's kept containers), the module as the fallback."""

from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.health import ARGUMENT_SPEC
from ansible_collections.gangplank.platform.plugins.plugin_utils.host_script import MODULE_UTILS, HostScriptAction


class ActionModule(HostScriptAction):
    MODULE = "gangplank.platform.health_wait"
    ARGUMENT_SPEC = ARGUMENT_SPEC
    MODULE_UTILS = [MODULE_UTILS + "messages", MODULE_UTILS + "health"]
    FUNCTION = "wait_result"

    def script_arguments(self, args):
        return {"probes": args["probes"], "check_mode": bool(self._task.check_mode)}

    def is_answer(self, answer):
        return isinstance(answer.get("changed"), bool)
