# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The scheduler's options that gang_plan and gang_schedule share."""

from __future__ import annotations


class ModuleDocFragment:  # pylint: disable=too-few-public-methods
    DOCUMENTATION = r"""
options:
  exact_timeout:
    description:
      - Seconds the exact solver (OR-Tools CP-SAT) may search when the greedy pass cannot place the gang; 0 turns it off.
      - It either finds a plan (with the fewest stateless moves), proves that none exists, or reports
        C(no plan found within N s); the result's C(exact.status) says which.
    type: float
    default: 5.0
  profile:
    description:
      - A scheduler profile (the collection's C(docs/problem-format.md), section Profiles), like kube-scheduler's profiles.
      - C(plugins) enables or disables plugins per extension point (C(pre_filter), C(filter), C(score)) and sets score
        weights; C(plugin_config) picks the C(NodeResourcesFit) strategy (C(MostAllocated) or C(LeastAllocated));
        C(user_plugins) lists Python files of the operator's own plugins, relative to the playbook's folder.
      - C(extenders) lists HTTP scheduler extenders with kube-scheduler's field names (C(urlPrefix), C(filterVerb),
        C(prioritizeVerb), C(weight), C(nodeCacheCapable), C(httpTimeout), C(ignorable), C(managedResources),
        C(enableHTTPS), C(tlsConfig)) plus C(bearerToken) (e.g. from a vaulted variable; never shown) or
        C(bearerTokenFile). They are called once per service and verb with kube's C(ExtenderArgs); a failure fails
        the task (nothing changes) unless the extender is C(ignorable), which is then left out of the plan with a
        warning. The result's C(extenders) lists the calls and the seconds spent. See the collection's
        C(docs/extenders.md).
      - Omitted or empty, the default profile. A bad profile fails the task naming C(profile.<path>).
    type: dict
"""
