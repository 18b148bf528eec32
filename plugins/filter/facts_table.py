# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: facts_table
short_description: A host's GPUs, NVMe devices and labels as table lines
version_added: 0.1.0
description:
  - Renders what M(gangplank.platform.gpu_facts) and M(gangplank.platform.nvme_facts) found on a host,
    and the node labels they imply, as lines a person reads.
  - Simulated devices are called out in the title line, so nobody mistakes them for hardware.
options:
  _input:
    description: One host's variables, C(hostvars[host]), after setup and the gangplank facts modules ran.
    type: dict
    required: true
author:
  - Gangplank maintainers (@gangplank)
"""

EXAMPLES = r"""
- name: Show what the facts imply
  ansible.builtin.debug:
    msg: "{{ hostvars[inventory_hostname] | gangplank.platform.facts_table }}"
"""

RETURN = r"""
_value:
  description: The table, one string per line.
  type: list
  elements: str
"""

from ansible_collections.gangplank.platform.plugins.plugin_utils.filter_errors import filter_errors


# ValueError: the facts' NodeFactsError is one; node_facts is imported when the filter runs (see plan_html.py).
@filter_errors(ValueError)
def facts_table(hostvars):
    from ansible_collections.gangplank.platform.plugins.module_utils.facts.node_facts import facts_table as _facts_table
    return _facts_table(hostvars).splitlines()


class FilterModule:
    def filters(self):
        return {"facts_table": facts_table}
