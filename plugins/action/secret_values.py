# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for gangplank.platform.secret_values: the values of the catalog's secrets, read on the controller."""

from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.planning.catalog import handed_secrets, split_catalog
from ansible_collections.gangplank.platform.plugins.module_utils.reader import ProblemError
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.secrets import SecretError, read_values
from ansible_collections.gangplank.platform.plugins.plugin_utils.action_base import GangplankAction
from ansible_collections.gangplank.platform.plugins.plugin_utils.secret_lookup import UNREADABLE, variable_lookup

ARGUMENT_SPEC = {
    "services": {"type": "dict"},
    "secret_specs": {"type": "dict"},
    "hash_key": {"type": "str", "required": True, "no_log": True},
}


class ActionModule(GangplankAction):
    _requires_connection = False
    ARGUMENT_SPEC = ARGUMENT_SPEC
    ARGUMENT_RULES = {"required_one_of": [("services", "secret_specs")],
                      "mutually_exclusive": [("services", "secret_specs")]}

    def act(self, args, task_vars, result):
        result.update(changed=False, secrets={}, hashes={}, errors=[])
        try:
            if args["secret_specs"] is not None:
                specs = handed_secrets(args["secret_specs"], "secret_specs")
            else:
                _scheduling, specs = split_catalog(args["services"])
        except ProblemError as error:
            result.update(errors=[{"path": path, "message": message} for path, message in error.errors])
            return self._summed_up(result)
        lookup = variable_lookup(self._templar, task_vars)
        try:
            values, hashes, errors = read_values(specs, lookup, args["hash_key"])
        except SecretError as error:
            result.update(errors=[{"path": "cluster_secret_hash_key", "message": str(error)}])
            return self._summed_up(result)
        result.update(secrets=values, hashes=hashes, errors=[{"path": path, "message": message} for path, message in errors])
        return self._summed_up(result)

    @staticmethod
    def _summed_up(result):
        if result["errors"]:
            result.update(secrets={}, hashes={})
            result["msg"] = UNREADABLE + "\n".join(
                "%s: %s" % (entry["path"], entry["message"]) for entry in result["errors"])
        return result
