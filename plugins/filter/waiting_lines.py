# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: waiting_lines
short_description: One line per host that is down, naming the instances that wait for it
version_added: 0.1.0
description:
  - Takes the hosts that are down, each mapped to the instances that wait for it (the gangplank.platform.schedule
    role's C(schedule_waiting), a list per host, or a mapping of instance to placement per host), and returns
    C(<host><separator><instance>, <instance>) for each, in the order given.
options:
  _input:
    description: Each host that is down mapped to its waiting instances (a list of names, or a mapping keyed by name).
    type: dict
    required: true
  separator:
    description: What goes between the host and its instances.
    type: str
    default: ' is down; waiting for it: '
author:
  - Gangplank maintainers (@gangplank)
"""

EXAMPLES = r"""
- name: Name each host that is down and the instances that wait for it
  ansible.builtin.debug:
    msg: "{{ schedule_waiting | gangplank.platform.waiting_lines }}"
  when: schedule_waiting | length > 0
"""

RETURN = r"""
_value:
  description: One line per host that is down.
  type: list
  elements: str
  sample: ["node-3 is down; waiting for it: db-0, worker-2"]
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError


def waiting_lines(waiting, separator=None):
    from ansible_collections.gangplank.platform.plugins.module_utils.deploy.status import DOWN_SEPARATOR, waiting_lines as lines
    if waiting is not None and not isinstance(waiting, Mapping):
        raise AnsibleFilterError("waiting_lines: expected a mapping of host to its waiting instances, got %s"
                                 % type(waiting).__name__)
    return lines(waiting, DOWN_SEPARATOR if separator is None else str(separator))


class FilterModule:
    def filters(self):
        return {"waiting_lines": waiting_lines}
