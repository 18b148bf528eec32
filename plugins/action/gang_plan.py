# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for gangplank.platform.gang_plan: the scheduler core on the controller."""

from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.planning.planning import exact_seconds_error, plan_catalog
from ansible_collections.gangplank.platform.plugins.module_utils.reader import ProblemError
from ansible_collections.gangplank.platform.plugins.module_utils.planning.scale import scale_overrides
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.extender import ExtenderError
from ansible_collections.gangplank.platform.plugins.module_utils.extender.transport import HTTPTransport
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.profiles import load_profile
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.report import render_table
from ansible_collections.gangplank.platform.plugins.plugin_utils.action_base import GangplankAction, failed
from ansible_collections.gangplank.platform.plugins.plugin_utils.secret_lookup import UNREADABLE, secret_problems

ARGUMENT_SPEC = {
    "problem": {"type": "dict", "required": True},
    "fail_on_infeasible": {"type": "bool", "default": True},
    "exact_timeout": {"type": "float", "default": 5.0},
    "profile": {"type": "dict", "default": None},
    "scale": {"type": "dict", "default": None},
}


class ActionModule(GangplankAction):
    _requires_connection = False
    ARGUMENT_SPEC = ARGUMENT_SPEC
    ERRORS = (ProblemError, ExtenderError)

    @staticmethod
    def failure(error):
        if isinstance(error, ExtenderError):
            return {"msg": "A scheduler extender failed; no plan was made: %s" % error}
        return {"msg": "The %s is not valid:\n%s" % ("scale request" if error.errors and error.errors[0][0].startswith("scale.")
                                                     else "problem", error),
                "errors": [{"path": path, "message": message} for path, message in error.errors]}

    def act(self, args, task_vars, result):
        if exact_seconds_error(args["exact_timeout"]):
            return failed(result, "exact_timeout: " + exact_seconds_error(args["exact_timeout"]))
        services = args["problem"].get("services")
        unreadable = secret_problems(services, self._templar, task_vars)
        if unreadable:
            # A catalog's secrets are checked as the deploy reads them: a misspelt variable fails the plan.
            return failed(result, UNREADABLE + "\n".join("%s: %s" % entry for entry in unreadable),
                          errors=[{"path": path, "message": message} for path, message in unreadable])
        problem = _scaled(args["problem"], args["scale"])
        # Relative user_plugins paths start from the playbook's folder; extenders call over real HTTP(S).
        profile = load_profile(args["profile"], self._loader.get_basedir(), HTTPTransport())
        plan_result = plan_catalog(problem, exact_seconds=args["exact_timeout"], profile=profile)
        result.update(plan_result)
        result["changed"] = False
        result["table"] = render_table(plan_result).splitlines()
        if not plan_result["feasible"] and args["fail_on_infeasible"]:
            result["failed"] = True
            result["msg"] = render_table(plan_result)
        return result


def _scaled(problem, scale):
    """``problem`` with the scale request ({service, replicas}, as playbooks/scale.yml gives it) applied to its catalog:
    a preview of the scale, checked as scale.yml checks it (ProblemError naming scale.service or scale.replicas)."""
    if not scale:
        return problem
    services = problem.get("services")
    if not isinstance(services, dict):
        return problem
    overrides = scale_overrides(services, {}, scale)
    scaled = dict(services)
    for name, replicas in overrides.items():
        if name in scaled:
            scaled[name] = dict(scaled[name], replicas=replicas)
    return dict(problem, services=scaled)
