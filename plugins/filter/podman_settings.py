# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: podman_settings
short_description: The containers.conf settings a host needs, with the site's over them
version_added: 0.1.0
description:
  - The C(containers) and C(engine) tables of a C(containers.conf) drop-in - C(runtime = "runc") on a host without
    cgroup v2 (crun fails on hybrid cgroups), C(cgroup_manager = "cgroupfs") on a host without systemd, and no
    C(default_ulimits) where the engine lacks C(CAP_SYS_RESOURCE) (raising them fails there).
  - The site's settings are merged over them recursively, as C(combine(recursive=true)) does.
options:
  _input:
    description: What the host has, as booleans C(unified_cgroups), C(systemd) and C(sys_resource).
    type: dict
    required: true
  site:
    description: The site's settings (C(runtime_podman_settings)), table -> key -> value.
    type: dict
    required: true
author:
  - Gangplank maintainers (@gangplank)
"""

EXAMPLES = r"""
- name: Combine the detected settings with runtime_podman_settings
  vars:
    detected: {unified_cgroups: false, systemd: false, sys_resource: true}
  ansible.builtin.set_fact:
    settings: "{{ detected | gangplank.platform.podman_settings(runtime_podman_settings) }}"
"""

RETURN = r"""
_value:
  description: Table -> key -> value; a table with nothing to set is empty.
  type: dict
  sample: {containers: {}, engine: {runtime: runc, cgroup_manager: cgroupfs}}
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.gangplank.platform.plugins.module_utils.facts.runtime_host import (
    kind, podman_settings as _podman_settings)

_DETECTED = ("unified_cgroups", "systemd", "sys_resource")


def podman_settings(detected, site):
    if not isinstance(detected, Mapping) or not all(isinstance(detected.get(key), bool) for key in _DETECTED):
        raise AnsibleFilterError(f"podman_settings: expected the booleans {', '.join(_DETECTED)}")
    if not isinstance(site, Mapping):
        raise AnsibleFilterError(f"podman_settings: site: expected a mapping, got {kind(site)}")
    return _podman_settings(detected, site)


class FilterModule:
    def filters(self):
        return {"podman_settings": podman_settings}
