# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: host_values
short_description: One variable of each of some hosts, by host
version_added: 0.1.0
description:
  - Looks a variable (or a key inside one, as a dotted path) up in each host's variables and returns them by host,
    with a default for the hosts where it is not defined - what a task delegated to another host needs, since it sees
    the variables of the host it runs for.
options:
  default:
    description: The value where the variable (or a key on the path) is not defined.
    type: raw
extends_documentation_fragment:
  - gangplank.platform.hostvars_lookup
author:
  - Gangplank maintainers (@gangplank)
"""

EXAMPLES = r"""
- name: Each control host's state directory
  ansible.builtin.set_fact:
    state_dirs: >-
      {{ control_hosts | gangplank.platform.host_values(hostvars, 'gangplank_state_dir', '/var/lib/gangplank') }}
"""

RETURN = r"""
_value:
  description: Host -> the value, in the hosts' order.
  type: dict
  sample: {control-1: /var/lib/gangplank, control-2: /srv/gangplank}
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

_NOT_FOUND = object()


def host_value(hostvars, host, path, default, caller="host_values"):
    """The value at the dotted ``path`` in ``host``'s variables, or ``default`` where a step is not defined."""
    if not isinstance(host, str):
        raise AnsibleFilterError(f"{caller}: expected host names, got {type(host).__name__}")
    if host not in hostvars:
        raise AnsibleFilterError(f"{caller}: {host}: not a host of the inventory")
    value = hostvars[host]
    for name in path.split("."):
        value = value.get(name, _NOT_FOUND) if isinstance(value, Mapping) else _NOT_FOUND
        if value is _NOT_FOUND:
            return default
    return value


def host_values(hosts, hostvars, path, default=None):
    if isinstance(hosts, (str, Mapping)) or not isinstance(hostvars, Mapping) or not isinstance(path, str):
        raise AnsibleFilterError("host_values: expected a list of hosts, hostvars and a variable's name")
    return {host: host_value(hostvars, host, path, default) for host in hosts}


class FilterModule:
    def filters(self):
        return {"host_values": host_values}
