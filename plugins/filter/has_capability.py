# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: has_capability
short_description: Whether a process holds a Linux capability, from its /proc status
version_added: 0.1.0
description:
  - Reads the C(CapEff) line (the effective capabilities, in hexadecimal) of a C(/proc/<pid>/status) text and tells
    whether the named capability's bit is set.
options:
  _input:
    description: The text of C(/proc/<pid>/status).
    type: str
    required: true
  name:
    description: The capability, with or without C(CAP_), in either case (C(sys_resource), C(CAP_SYS_RESOURCE)).
    type: str
    required: true
author:
  - Gangplank maintainers (@gangplank)
"""

EXAMPLES = r"""
- name: Read this host's effective capabilities
  ansible.builtin.slurp:
    src: /proc/self/status
  register: status

- name: Tell whether containers may raise their ulimits
  ansible.builtin.set_fact:
    sys_resource: "{{ status.content | b64decode | gangplank.platform.has_capability('sys_resource') }}"
"""

RETURN = r"""
_value:
  description: Whether the capability is effective.
  type: bool
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gangplank.platform.plugins.module_utils.facts.runtime_host import (
    RuntimeHostError, has_capability as _has)
from ansible_collections.gangplank.platform.plugins.plugin_utils.filter_errors import filter_errors


@filter_errors(RuntimeHostError, name="has_capability")
def has_capability(proc_status, name):
    if not isinstance(proc_status, str) or not isinstance(name, str):
        raise AnsibleFilterError("has_capability: expected the status text and a capability name")
    return _has(proc_status, name)


class FilterModule:
    def filters(self):
        return {"has_capability": has_capability}
