# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: node_labels
short_description: Node labels implied by a host's hardware facts
version_added: 0.1.0
description:
  - The labels a host's facts imply, named as NVIDIA GPU Feature Discovery names them where it has a
    name (C(nvidia.com/gpu.present), C(nvidia.com/gpu.product) with spaces as dashes,
    C(nvidia.com/gpu.memory) in MiB, C(nvidia.com/gpu.count), C(nvidia.com/gpu.family),
    C(nvidia.com/gpu.compute.major) and C(.minor), C(nvidia.com/mig.capable)), plus
    C(gangplank.io/nvme.<label>) for the labels of mounted NVMe devices, C(gangplank.io/hostname),
    C(gangplank.io/arch), C(gangplank.io/os), and C(gangplank.io/gpu.simulated) for simulated GPUs.
  - The operator's C(gangplank_labels) host variable is merged in last and wins on the same key.
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
    msg: "{{ hostvars[inventory_hostname] | gangplank.platform.node_labels }}"
"""

RETURN = r"""
_value:
  description: A mapping of label to string value.
  type: dict
"""

from ansible_collections.gangplank.platform.plugins.plugin_utils.filter_errors import filter_errors


# ValueError: the facts' NodeFactsError is one; node_facts is imported when the filter runs (see plan_html.py).
@filter_errors(ValueError)
def node_labels(hostvars):
    from ansible_collections.gangplank.platform.plugins.module_utils.facts.node_facts import node_labels as _node_labels
    return _node_labels(hostvars)


class FilterModule:
    def filters(self):
        return {"node_labels": node_labels}
