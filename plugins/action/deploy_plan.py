# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for gangplank.platform.deploy_plan: the deploy of every host at once, decided on the controller
(plugins/module_utils/deploy/deploy_plan.py). Runs once (run_once), with each host's read (and, for the rollout, its
rendered files) handed in by the role."""

from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.deploy.deploy import DeployError
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.deploy_plan import containers_step, rollout_step
from ansible_collections.gangplank.platform.plugins.module_utils.planning.proxy import ProxyError
from ansible_collections.gangplank.platform.plugins.plugin_utils.action_base import GangplankAction

ARGUMENT_SPEC = {
    "step": {"type": "str", "required": True, "choices": ["containers", "rollout"]},
    "hosts": {"type": "list", "elements": "str", "required": True},
    "services": {"type": "dict"},
    "catalog": {"type": "dict", "default": None},
    "reads": {"type": "dict", "required": True},
    "rendered": {"type": "dict", "default": {}},
    "containers": {"type": "dict"},
    "secret_hashes": {"type": "dict", "default": {}},
    "hash_key": {"type": "str", "no_log": True},
    "probe_kept": {"type": "bool", "default": True},
    "plan_instances": {"type": "dict", "default": None},
    "proxy": {"type": "dict", "default": None},
    "in_place_reads": {"type": "dict", "default": {}},
}


class ActionModule(GangplankAction):
    _requires_connection = False
    # It decides and changes nothing: check mode decides too (the lines then say "would").
    _supports_check_mode = True
    ARGUMENT_SPEC = ARGUMENT_SPEC
    ARGUMENT_RULES = {"required_if": [("step", "containers", ["services"]), ("step", "rollout", ["containers"])]}
    ERRORS = (DeployError, ProxyError)

    def act(self, args, task_vars, result):
        hostvars = task_vars.get("hostvars") or {}
        hosts = args["hosts"]
        reads = {host: _of_host(args["reads"], host, "reads", "the deploy role's read of the host runs first")
                 for host in hosts}
        if args["step"] == "containers":
            everywhere = None
            if args["plan_instances"] is not None:
                # The whole plan of this run (every host's instances), for the endpoints: the deploy may run on some
                # hosts only (scale.yml), and the other hosts' instances are endpoints too.
                everywhere = {host: {"instances": instances, "publish_address": _publish_address(hostvars, host)}
                              for host, instances in args["plan_instances"].items()}
            result.update(containers_step(hosts, reads, args["services"], everywhere, catalog=args["catalog"],
                                          proxy=args["proxy"]))
        else:
            rendered = {host: args["rendered"].get(host) or {} for host in hosts}
            result.update(rollout_step(hosts, reads, rendered, args["containers"],
                                       secret_hashes=args["secret_hashes"], hash_key=args["hash_key"],
                                       check_mode=bool(self._task.check_mode), probe_kept=args["probe_kept"],
                                       in_place_reads=args["in_place_reads"]))
        return dict(result, changed=False)


def _publish_address(hostvars, host):
    """A host's gangplank_publish_address (cluster_publish_address's default), or None."""
    values = hostvars[host] if host in hostvars else {}
    return values.get("gangplank_publish_address") if hasattr(values, "get") else None


def _of_host(values, host, option, why):
    """``host``'s entry of ``values`` (the option ``option``: host -> its value), or DeployError saying ``why``."""
    value = values.get(host)
    if value is None:
        raise DeployError("%s: not in %s (%s)" % (host, option, why))
    return value
