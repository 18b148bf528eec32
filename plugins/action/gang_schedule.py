# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for gangplank.platform.gang_schedule: plan the whole cluster from live facts.

Runs once on the controller. It reads, and changes, nothing on the hosts: the
gangplank.platform.schedule role takes the lock and the record before it and
writes the new record and each node's bindings after it. What it decides is
plugins/module_utils/planning/scheduling.py's schedule_cluster; this reads the options
and the hosts' variables, and writes the result.
"""

from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.planning.catalog import handed_catalog, read_catalog
from ansible_collections.gangplank.platform.plugins.module_utils.planning.down_hosts import DEFAULT_DOWN_GRACE
from ansible_collections.gangplank.platform.plugins.module_utils.reader import ProblemError
from ansible_collections.gangplank.platform.plugins.module_utils.planning.scheduling import (
    ScheduleError, ScheduleInputs, schedule_cluster,
)
from ansible_collections.gangplank.platform.plugins.plugin_utils.action_base import GangplankAction, failed
from ansible_collections.gangplank.platform.plugins.plugin_utils.secret_lookup import (
    UNREADABLE, secret_problems,
)

ARGUMENT_SPEC = {
    "services": {"type": "dict", "required": True},
    "quotas": {"type": "dict", "default": {}},
    "hosts": {"type": "list", "elements": "str", "required": True},
    "record": {"type": "dict", "default": {}},
    "fail_on_infeasible": {"type": "bool", "default": True},
    "exact_timeout": {"type": "float", "default": 5.0},
    "profile": {"type": "dict", "default": None},
    "scale": {"type": "dict", "default": None},
    "rebalance": {"type": "dict", "default": None},
    "down_hosts": {"type": "list", "elements": "str", "default": []},
    "down_grace": {"type": "raw", "default": DEFAULT_DOWN_GRACE},
    "move_stateful": {"type": "str", "default": None},
    "move_stateful_confirm": {"type": "str", "default": None},
    "remove_retained": {"type": "str", "default": None},
    "remove_retained_confirm": {"type": "str", "default": None},
    "volume_dir": {"type": "str", "default": None},
    "port_range": {"type": "list", "elements": "raw", "default": None},
    "now": {"type": "float", "default": None},
    "catalog": {"type": "dict", "default": None},
}


class ActionModule(GangplankAction):
    _requires_connection = False
    ARGUMENT_SPEC = ARGUMENT_SPEC
    ERRORS = (ScheduleError,)

    @staticmethod
    def failure(error):
        return error.result()

    def act(self, args, task_vars, result):
        # The catalog read once: as an earlier task of the run handed it along (gangplank.platform.catalog), or here.
        args = dict(args)
        handed = args.pop("catalog")
        if handed is not None:
            try:
                catalog = handed_catalog(handed)
            except ProblemError as error:
                return failed(result, "\n".join("%s: %s" % entry for entry in error.errors),
                              errors=[{"path": path, "message": message} for path, message in error.errors])
        else:
            catalog = _read_once(args["services"])
        # Every secret the catalog names must be readable, as the deploy reads it: a misspelt variable fails the plan
        # (and site.yml --check), with the deploy's message, not the deploy after the plan.
        unreadable = secret_problems(args["services"], self._templar, task_vars, catalog=catalog)
        if unreadable:
            return failed(result, UNREADABLE + "\n".join("%s: %s" % entry for entry in unreadable),
                          errors=[{"path": path, "message": message} for path, message in unreadable])
        hostvars = task_vars["hostvars"]
        # Only the listed hosts' variables; a host missing from the inventory is named by schedule_cluster.
        listed = {host: hostvars[host] for host in args["hosts"] if host in hostvars}
        # Relative user_plugins paths start from the playbook's folder.
        inputs = ScheduleInputs(hostvars=listed, profile_base=self._loader.get_basedir(), catalog=catalog, **args)
        outcome = schedule_cluster(inputs)
        result.update(outcome.result())
        if outcome.stats is not None:
            # An AWX job's artifacts carry the placement (set_stats semantics).
            result["ansible_stats"] = {"data": outcome.stats, "per_host": False, "aggregate": False}
        return result


def _read_once(services):
    """The catalog read once, for the secrets' check, the planner and the volumes; None when it is not a mapping of
    services (the planner reads it then, and names the mistake)."""
    try:
        return read_catalog(services)
    except ProblemError:
        return None
