# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: gpu_watchdog_wanted
short_description: Whether a host runs the GPU watchdog, from its bindings and its GPU facts
version_added: 0.1.0
description:
  - True when the host has GPUs (its C(gangplank_gpus) facts list one) or one of its bound instances has GPUs
    (a run of deploy.yml alone has the bindings but no facts). The deploy role's C(tasks/watchdog.yml) runs only there
    (docs/gpu-sharing.md).
options:
  _input:
    description: The host's bound instances (instance name to binding, each with an optional C(gpus) list).
    type: dict
    required: true
  gpus:
    description: The host's C(gangplank_gpus) facts; empty when they were not gathered in this run.
    type: list
    elements: dict
    default: []
author:
  - Gangplank maintainers (@gangplank)
"""

EXAMPLES = r"""
- name: Run the GPU watchdog where there are GPUs
  ansible.builtin.include_tasks: watchdog.yml
  when: deploy__read.settings.instances | gangplank.platform.gpu_watchdog_wanted(gangplank_gpus | default([]))
"""

RETURN = r"""
_value:
  description: Whether the host runs the watchdog.
  type: bool
"""

from ansible.errors import AnsibleFilterError


def gpu_watchdog_wanted(instances, gpus=None):
    if not isinstance(instances, dict) or not isinstance(gpus or [], list):
        raise AnsibleFilterError("gpu_watchdog_wanted: expected the bound instances (a mapping) and the GPU facts (a list)")
    if gpus:
        return True
    return any(isinstance(binding, dict) and bool(binding.get("gpus")) for binding in instances.values())


class FilterModule:
    def filters(self):
        return {"gpu_watchdog_wanted": gpu_watchdog_wanted}
