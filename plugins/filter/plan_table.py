# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: plan_table
short_description: Render a gang plan as table lines
version_added: 0.1.0
description:
  - Turns the result of M(gangplank.platform.gang_plan) (or of the scheduler core) into lines of a table
    a person reads; per node its CPU, memory, per-GPU memory and NVMe used/total and its instances, then a summary.
  - An infeasible result renders as the reason each unplaced instance could not be placed.
options:
  _input:
    description: A plan result, with at least C(feasible), and C(placements), C(usage), C(moves), C(ranks) when feasible.
    type: dict
    required: true
author:
  - Gangplank maintainers (@gangplank)
"""

EXAMPLES = r"""
- name: Print a plan as a table
  ansible.builtin.debug:
    msg: "{{ gangplank_plan | gangplank.platform.plan_table }}"
"""

RETURN = r"""
_value:
  description: The table, one string per line.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError


def plan_table(result):
    if not isinstance(result, dict) or "feasible" not in result:
        raise AnsibleFilterError("plan_table expects a plan result (a mapping with 'feasible'), got %r"
                                 % type(result).__name__)
    from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.report import render_table
    try:
        return render_table(result).splitlines()
    except (KeyError, TypeError) as error:
        raise AnsibleFilterError("plan_table: the plan result is incomplete: missing %s" % error) from None


class FilterModule:
    def filters(self):
        return {"plan_table": plan_table}
