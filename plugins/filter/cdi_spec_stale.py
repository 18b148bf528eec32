# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: cdi_spec_stale
short_description: Whether the NVIDIA CDI spec must be generated again
version_added: 0.1.0
description:
  - True when C(nvidia-ctk cdi list) failed, when it lacks C(nvidia.com/gpu=<uuid>) for one of the host's GPUs (a new
    or replaced GPU), or when it lists no GPU at all.
options:
  _input:
    description: The registered result of C(nvidia-ctk cdi list) (C(rc), C(stdout_lines)).
    type: dict
    required: true
  gpus:
    description: The host's GPUs (C(gangplank_gpus)), each with its C(uuid).
    type: list
    elements: dict
    required: true
author:
  - Gangplank maintainers (@gangplank)
"""

EXAMPLES = r"""
- name: Generate the CDI spec
  ansible.builtin.command:
    argv: [nvidia-ctk, cdi, generate, --output=/etc/cdi/nvidia.yaml, --device-name-strategy=uuid]
  when: cdi_list | gangplank.platform.cdi_spec_stale(gangplank_gpus | default([]))
"""

RETURN = r"""
_value:
  description: Whether to generate the spec.
  type: bool
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.gangplank.platform.plugins.module_utils.facts.runtime_host import (
    kind, RuntimeHostError, cdi_spec_stale as _stale)
from ansible_collections.gangplank.platform.plugins.plugin_utils.filter_errors import filter_errors


@filter_errors(RuntimeHostError, name="cdi_spec_stale")
def cdi_spec_stale(cdi_list, gpus):
    if not isinstance(cdi_list, Mapping):
        raise AnsibleFilterError(f"cdi_spec_stale: expected the registered result, got {kind(cdi_list)}")
    if isinstance(gpus, (str, Mapping)):
        raise AnsibleFilterError(f"cdi_spec_stale: gpus: expected a list, got {kind(gpus)}")
    return _stale(cdi_list, gpus)


class FilterModule:
    def filters(self):
        return {"cdi_spec_stale": cdi_spec_stale}
