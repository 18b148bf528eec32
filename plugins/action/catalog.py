# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for gangplank.platform.catalog: the app catalog parsed once on the controller, handed to the later
steps of the run (gang_schedule, deploy_plan step=containers) as plain data."""

from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.planning.catalog import Catalog, catalog_data, read_catalog
from ansible_collections.gangplank.platform.plugins.module_utils.reader import ProblemError
from ansible_collections.gangplank.platform.plugins.plugin_utils.action_base import GangplankAction

ARGUMENT_SPEC = {
    "services": {"type": "dict", "required": True},
}


class ActionModule(GangplankAction):
    _requires_connection = False
    # It reads and changes nothing: check mode parses too.
    _supports_check_mode = True
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def act(self, args, task_vars, result):
        try:
            catalog = read_catalog(args["services"])
        except ProblemError as error:
            # More services than a catalog may hold: no service is read, and the mistake travels with the parse.
            catalog = Catalog({}, {}, list(error.errors))
        return dict(result, changed=False, catalog=catalog_data(catalog))
