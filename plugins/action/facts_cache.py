# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for gangplank.platform.facts_cache: the read as a plain Python script on the host
(plugins/plugin_utils/host_script.py: on every run, for every host), the write and any fallback as the module."""

from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.facts_cache import ARGUMENT_SPEC
from ansible_collections.gangplank.platform.plugins.plugin_utils.host_script import MODULE_UTILS, HostScriptAction


class ActionModule(HostScriptAction):
    MODULE = "gangplank.platform.facts_cache"
    ARGUMENT_SPEC = ARGUMENT_SPEC
    MODULE_UTILS = [MODULE_UTILS + "state_files", MODULE_UTILS + "facts_cache"]
    FUNCTION = "read_state"

    def script_arguments(self, args):
        if args["state"] != "read":
            return None
        return {"path": args["path"], "inputs": args["inputs"], "bindings_path": args["bindings_path"]}

    def is_answer(self, answer):
        return isinstance(answer.get("valid"), bool)
