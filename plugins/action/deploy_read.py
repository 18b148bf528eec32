# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for gangplank.platform.deploy_read: one shell on the host (as ansible.builtin.raw runs it), its output
read on the controller by plugins/module_utils/deploy/deploy_read.py."""

from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.deploy import deploy_read
from ansible_collections.gangplank.platform.plugins.plugin_utils.action_base import GangplankAction

ARGUMENT_SPEC = {
    "engine": {"type": "str", "required": True, "choices": list(deploy_read.ENGINES)},
    "name_prefix": {"type": "str", "required": True},
    "state_file": {"type": "path", "required": True},
    "limit_probe": {"type": "list", "elements": "str", "default": []},
    "fact_file": {"type": "path"},
    "settings": {"type": "dict"},
    "instances": {"type": "dict", "default": {}},
    "ranks": {"type": "list", "elements": "list", "default": []},
    "proxy_config": {"type": "path"},
}


class ActionModule(GangplankAction):
    # A read: check mode reads too, so that it shows what would change.
    _supports_check_mode = True
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def act(self, args, task_vars, result):
        if not args["name_prefix"]:
            return dict(result, failed=True, msg="name_prefix must not be empty: it keeps other hosts' containers out")
        # As raw runs its command: no module, no Python on the host, the connection's shell as it is (over SSH on a
        # terminal), with become where the task has it.
        done = self._low_level_execute_command(
            deploy_read.command(args["engine"], args["name_prefix"], args["state_file"], args["fact_file"],
                                args["limit_probe"], secret_dir=(args["settings"] or {}).get("secret_dir") or "",
                                proxy_config=args["proxy_config"] or ""),
            executable=False)
        try:
            found = deploy_read.parse(done.get("rc"), done.get("stdout") or "", args["engine"], args["name_prefix"],
                                      limits_asked=bool(args["limit_probe"]),
                                      host=task_vars.get("inventory_hostname", ""))
        except deploy_read.ReadError as error:
            return dict(result, failed=True, changed=False, msg=str(error), rc=done.get("rc"))
        result.update(found, changed=False)
        if args["settings"] is not None:
            result.update(deploy_read.deploy_entry(
                task_vars.get("inventory_hostname", ""), found, args["settings"],
                args["instances"], args["ranks"], fact_file=args["fact_file"] or "",
                limits=bool(args["limit_probe"]), check_mode=bool(self._task.check_mode)))
        return result
