# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: scheduler_node
short_description: A host's entry in the gang scheduler's nodes mapping
version_added: 0.1.0
description:
  - Builds the scheduler's C(nodes.<host>) entry (the collection's docs/problem-format.md) from a host's
    facts and host variables.
  - CPU and memory come from the setup facts (C(processor_vcpus), C(memtotal_mb)) less the host variable
    C(gangplank_reserved) (C({cpu, memory}) kept for the system); labels from
    P(gangplank.platform.node_labels#filter); taints and unschedulable from C(gangplank_taints) and
    C(gangplank_unschedulable); GPUs from C(gangplank_gpus) less those with an NVML error or in MIG
    mode; NVMe devices from C(gangplank_nvme), the mounted ones only.
  - C(numa_cpus) (the CPUs of each NUMA node, for C(cpu_pinning) C(numa)) from the GPUs' C(numa_node) and
    C(cpu_affinity) facts, only when some are known; a NUMA node whose GPUs disagree, or whose CPUs overlap another's,
    is left out.
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
    msg: "{{ hostvars[inventory_hostname] | gangplank.platform.scheduler_node }}"
"""

RETURN = r"""
_value:
  description: The node entry, with cpu, memory, labels, taints, unschedulable, gpus, nvme and gpu_sharing; gpu_links and numa_cpus where known.
  type: dict
"""

from ansible_collections.gangplank.platform.plugins.plugin_utils.filter_errors import filter_errors


# ValueError: the facts' NodeFactsError is one; node_facts is imported when the filter runs (see plan_html.py).
@filter_errors(ValueError)
def scheduler_node(hostvars):
    from ansible_collections.gangplank.platform.plugins.module_utils.facts.node_facts import scheduler_node as _scheduler_node
    return _scheduler_node(hostvars)


class FilterModule:
    def filters(self):
        return {"scheduler_node": scheduler_node}
