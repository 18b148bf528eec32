# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: hosts_where
short_description: The hosts whose variable (or a key inside one) is true
version_added: 0.1.0
description:
  - Keeps, in order, the hosts whose variable at a dotted path is true (Jinja's truth - a non-empty string or list
    counts); a host where it is not defined is left out.
extends_documentation_fragment:
  - gangplank.platform.hostvars_lookup
author:
  - Gangplank maintainers (@gangplank)
"""

EXAMPLES = r"""
- name: The play's hosts whose stored facts were found valid
  ansible.builtin.debug:
    msg: "{{ ansible_play_hosts | gangplank.platform.hosts_where(hostvars, 'facts__cache.valid') }}"
"""

RETURN = r"""
_value:
  description: The hosts, in the order given.
  type: list
  elements: str
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.gangplank.platform.plugins.filter.host_values import host_value


def hosts_where(hosts, hostvars, path):
    if isinstance(hosts, (str, Mapping)) or not isinstance(hostvars, Mapping) or not isinstance(path, str):
        raise AnsibleFilterError("hosts_where: expected a list of hosts, hostvars and a variable's name")
    return [host for host in hosts if host_value(hostvars, host, path, False, "hosts_where")]


class FilterModule:
    def filters(self):
        return {"hosts_where": hosts_where}
