# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""QueueSort: instances that already run somewhere first, then the highest priority, then the most
constrained, then the heaviest.

Constrained first: an instance that only a few nodes can take (a GPU model, a selector) goes before
work that fits almost anywhere, which could otherwise fill those few nodes first (the scheduler
gives the number of nodes passing each service's static filters, ``feasible_nodes``; it is bucketed
by powers of two, so only a clear difference reorders). Then heavy first, first-fit-decreasing, by
what is indivisible first: whole GPUs (their memory, then their count) and NVMe, placed while the
cluster is empty enough to take them; then everything else by CPU, memory and last the GPU memory
of a share. A share is a fraction of one device, so CPU, not its GPU memory, is what leaves it
nowhere to go once nodes fill: on the openb trace (benchmarks/trace_benchmark.py, gang mode) this
order places 95.05% of the GPUs where GPU memory first placed 91.95% (gpushare40, seed 42); the
fragmentation score (GPUFragmentation) decides which device a share takes. The name ends the key,
so the order is total and deterministic. No key depends on the cluster's totals: adding nodes that
a service cannot use never reorders it.
"""

from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.framework import QueueSortPlugin


class HeavyFirst(QueueSortPlugin):
    name = "HeavyFirst"

    def __init__(self, problem):
        super().__init__(problem)
        nodes = list(problem.nodes.values())
        self.feasible_nodes = {}        # service name -> nodes passing its static filters (set by the scheduler)
        self._largest = {}              # GPU models asked -> the largest matching device's memory
        self._weights = {}
        for name, service in problem.services.items():
            self._weights[name] = self._weight(service, nodes)

    def _largest_device(self, request, nodes):
        key = request.models
        if key not in self._largest:
            self._largest[key] = max([d.memory for n in nodes for d in n.gpus if request.matches(d)] or [0])
        return self._largest[key]

    def _weight(self, service, nodes):
        gpu = service.resources.gpu
        whole_memory = whole_count = shared_memory = 0
        if gpu is not None and gpu.memory is None:
            # A whole GPU weighs as much as the largest device it could take.
            whole_count = gpu.count
            whole_memory = gpu.count * self._largest_device(gpu, nodes)
        elif gpu is not None:
            shared_memory = gpu.count * gpu.memory
        nvme = service.resources.nvme.size if service.resources.nvme else 0
        requests = self.problem.requests()[service.name]
        return (whole_memory, whole_count, nvme, requests.cpu, requests.memory, shared_memory)

    def sort_key(self, instance, moves_allowed):
        if instance.pinned:
            first = 0
        elif instance.previous is not None and not moves_allowed:
            first = 1
        else:
            first = 2
        service = instance.service
        # An every-node instance has one node: the most constrained there is.
        feasible = 0 if service.every_node else self.feasible_nodes.get(service.name)
        constrained = feasible.bit_length() if feasible is not None else 0
        whole_memory, whole_count, nvme, cpu, memory, shared_memory = self._weights[service.name]
        return (first, -service.priority, constrained, -whole_memory, -whole_count, -nvme, -cpu, -memory, -shared_memory,
                instance.service.name, instance.ordinal)
