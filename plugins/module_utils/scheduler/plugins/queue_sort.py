# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""QueueSort: instances that already run somewhere first, then the heaviest first.

Heavy first is first-fit-decreasing: big GPU and NVMe requests are placed while
the cluster is empty enough to take them. The weight order is GPU memory, GPU
count, NVMe size, then the dominant CPU/memory share (DRF's dominant share,
Ghodsi et al. 2011), then the name, so the order is total and deterministic.
"""

from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.framework import QueueSortPlugin
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.sidecars import pod_requests


class HeavyFirst(QueueSortPlugin):
    name = "HeavyFirst"

    def __init__(self, problem):
        super().__init__(problem)
        nodes = list(problem.nodes.values())
        self._cpu = sum(node.cpu for node in nodes) or 1
        self._memory = sum(node.memory for node in nodes) or 1
        self._weights = {}
        for name, service in problem.services.items():
            self._weights[name] = self._weight(service, nodes)

    def _weight(self, service, nodes):
        gpu = service.resources.gpu
        gpu_memory = gpu_count = 0
        if gpu is not None:
            gpu_count = gpu.count
            per_device = gpu.memory
            if per_device is None:
                # A whole GPU weighs as much as the largest device it could take.
                per_device = max([d.memory for n in nodes for d in n.gpus if gpu.matches(d)] or [0])
            gpu_memory = gpu.count * per_device
        nvme = service.resources.nvme.size if service.resources.nvme else 0
        requests = pod_requests(self.problem.services, service)
        share = max(requests.cpu / self._cpu, requests.memory / self._memory)
        return (gpu_memory, gpu_count, nvme, share)

    def sort_key(self, instance, moves_allowed):
        if instance.pinned:
            first = 0
        elif instance.previous is not None and not moves_allowed:
            first = 1
        else:
            first = 2
        gpu_memory, gpu_count, nvme, share = self._weights[instance.service.name]
        return (first, -gpu_memory, -gpu_count, -nvme, -share, instance.service.name, instance.ordinal)
