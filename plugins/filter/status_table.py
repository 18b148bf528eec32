# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: status_table
short_description: The deployment status of every host's containers as a table
version_added: 0.1.0
description:
  - Given each host's containers (from P(gangplank.platform.deploy_containers#filter)), the engine's inspect data
    and a round of health probes, returns one row per container (rank, node, instance, service, container, state,
    health, ports) and renders all hosts' rows as lines of a table, by rank, then node.
  - With O(existing) and O(probes) it returns the rows of one host; without them, it renders rows already made.
options:
  _input:
    description: One host's containers, or with neither O(existing) nor O(probes), the rows of every host.
    type: list
    elements: dict
    required: true
  host:
    description: The host's inventory name.
    type: str
  existing:
    description: The engine's inspect data of every container.
    type: list
    elements: dict
  probes:
    description: The C(probes) result of M(gangplank.platform.health_wait) on the host.
    type: dict
author:
  - Gangplank maintainers (@gangplank)
"""

EXAMPLES = r"""
- name: Show the status of every host
  ansible.builtin.debug:
    msg: "{{ ansible_play_hosts | map('extract', hostvars, 'status_rows') | flatten | gangplank.platform.status_table }}"
  run_once: true
"""

RETURN = r"""
_value:
  description: One host's rows (dicts), or the table's lines (strings) ending with a count of healthy containers.
  type: list
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gangplank.platform.plugins.module_utils.deploy import render_status, status_rows


def status_table(items, host=None, existing=None, probes=None):
    if existing is None and probes is None:
        return render_status(items)
    if host is None:
        raise AnsibleFilterError("status_table: host is required with existing and probes")
    return status_rows(host, items, existing or [], probes or {})


class FilterModule:
    def filters(self):
        return {"status_table": status_table}
