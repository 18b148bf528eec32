# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for gangplank.platform.deploy_status: the deploy role's status action (tasks/status.yml) in two
steps, one per host (its containers, one probe of each on the host, its rows) and one over every host (the table,
the hosts that are down, the picture), worked out in plugins/module_utils/deploy/status.py."""

from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.planning.catalog import handed_catalog
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.deploy import DeployError, desired_containers, parse_catalog
from ansible_collections.gangplank.platform.plugins.module_utils.planning.placement_html import PictureError
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.status import (
    down_instances, gpu_status, has_gpu_instances, host_status, state_read, state_read_command, status_probes,
    status_report,
)
from ansible_collections.gangplank.platform.plugins.plugin_utils.action_base import GangplankAction

SETTINGS = {
    "data_dir": {"type": "str", "required": True},
    "publish_address": {"type": "str", "default": ""},
    "probe_address": {"type": "str", "default": "127.0.0.1"},
    "gpu_mode": {"type": "str", "default": "cdi", "choices": ["cdi", "simulated"]},
    "engine": {"type": "str", "default": "podman", "choices": ["podman", "docker"]},
    "volume_dir": {"type": "str", "default": None},
}
ARGUMENT_SPEC = {
    "step": {"type": "str", "required": True, "choices": ["catalog", "host", "report"]},
    "instances": {"type": "dict", "default": {}},
    "existing": {"type": "list", "elements": "dict", "default": []},
    "hardware": {"type": "str", "default": ""},
    "services": {"type": "dict"},
    "catalog": {"type": "dict"},
    "settings": {"type": "dict", "options": SETTINGS},
    "hosts": {"type": "list", "elements": "str"},
    "inventory": {"type": "list", "elements": "str", "default": []},
    "record": {"type": "dict", "default": {}},
    "picture": {"type": "bool", "default": False},
    "statuses": {"type": "dict", "default": {}},
    "watchdog_state": {"type": "str", "default": ""},
    "sharing": {"type": "str", "default": "none", "choices": ["mps", "none"]},
}


class ActionModule(GangplankAction):
    # A look: it changes nothing, and probes in check mode too.
    _supports_check_mode = True
    ARGUMENT_SPEC = ARGUMENT_SPEC
    ARGUMENT_RULES = {"required_if": [("step", "catalog", ["services"]), ("step", "host", ["services", "catalog"], True),
                                      ("step", "host", ["settings"]), ("step", "report", ["hosts"])],
                      "mutually_exclusive": [("services", "catalog")]}
    ERRORS = (DeployError, PictureError)

    def act(self, args, task_vars, result):
        if args["step"] == "catalog":
            scheduling, specs = parse_catalog(args["services"])
            result["catalog"] = {"scheduling": scheduling, "deploy": specs}
        elif args["step"] == "host":
            result.update(self._host(args, task_vars))
        else:
            result.update(_report(args))
        return dict(result, changed=False)

    @staticmethod
    def failure(error):
        if isinstance(error, PictureError):
            return {"msg": "the status picture cannot be drawn: %s" % error}
        return {"msg": str(error)}

    def _host(self, args, task_vars):
        host = task_vars.get("inventory_hostname", "")
        settings = args["settings"]
        catalog = None
        if args["catalog"] is not None:
            try:
                catalog = handed_catalog(args["catalog"])[:2]
            except ValueError as error:
                raise DeployError(str(error)) from None
        containers = desired_containers(host, args["instances"], args["services"], settings["data_dir"], catalog=catalog,
                                        publish_address=settings["publish_address"],
                                        probe_address=settings["probe_address"], gpu_mode=settings["gpu_mode"],
                                        engine=settings["engine"], volume_dir=settings["volume_dir"])
        probes = status_probes(containers)
        # A probe that fails is a row that says so, not a failed status: the result is read whatever it is.
        checked = self._execute_module(module_name="gangplank.platform.health_wait", module_args={"probes": probes},
                                       task_vars=task_vars) if probes else {}
        status = host_status(host, containers, args["existing"], checked.get("probes") or {}, args["instances"],
                             args["hardware"])
        if args["watchdog_state"] and has_gpu_instances(args["instances"]):
            # The GPU watchdog's last poll (docs/gpu-sharing.md), read only where an instance has GPUs, and at most one
            # byte more than a state file may hold.
            read = state_read(self._low_level_execute_command(state_read_command(args["watchdog_state"])))
            status.update(gpu_status(host, args["instances"], read, args["watchdog_state"], args["sharing"]))
        return status


def _report(args):
    statuses = {}
    for host in args["hosts"]:
        if args["statuses"].get(host) is None:
            raise DeployError("%s: not in statuses (the step=host task runs on every host first)" % host)
        statuses[host] = args["statuses"][host]
    down = down_instances(args["record"], args["hosts"], args["inventory"])
    return status_report(args["hosts"], statuses, down, picture=args["picture"], record=args["record"])
