# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NodeResourcesFit: CPU and memory must fit; the score packs nodes full.

The score is kube-scheduler's MostAllocated strategy (noderesources/most_allocated.go):
the mean over CPU and memory of requested-after-placing / allocatable, times 100.
Packing few nodes full leaves whole nodes free for large work that comes later.

A profile may choose kube's LeastAllocated instead (plugin_config, strategy): the mean of
free-after-placing / allocatable, which spreads work over the nodes.

Except on GPU nodes when the catalog has GPU work: there a node's CPU and memory are what its
GPUs need, and packing them first strands the GPUs (on the openb trace, most rejected GPU pods
were "Insufficient cpu" with GPUs idle). Those nodes score 0 here and GPUFragmentation, which
weighs free CPU and memory against the GPU work expected, decides.

PreFilter writes the instance's request, its sidecars' CPU and memory included (model.pod_requests, as kube's
resource.PodRequests folds a pod's sidecar containers into its request), under this plugin's own cycle-state key
(kube's fit.go ``preFilterStateKey``); Filter, Score and Reserve read it there.
"""

from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.framework import (
    OK, FilterPlugin, PreFilterPlugin, ReservePlugin, ScorePlugin, Status,
)

# This plugin's cycle state (kube's "PreFilter" + plugin name): the instance's request, sidecars included.
STATE_KEY = "PreFilterNodeResourcesFit"


class NodeResourcesFit(PreFilterPlugin, FilterPlugin, ScorePlugin, ReservePlugin):
    name = "NodeResourcesFit"
    node_local = True

    def __init__(self, problem):
        super().__init__(problem)
        self.least_allocated = False
        self._requests = problem.requests()
        self._gpu_work = any(s.resources.gpu is not None and not s.sidecar for s in problem.services.values())

    def configure(self, args):
        # A profile's plugin_config: LeastAllocated spreads (kube's noderesources/least_allocated.go).
        self.least_allocated = args.get("strategy") == "LeastAllocated"

    def pre_filter(self, cycle, cluster, instance):
        cycle[STATE_KEY] = self._requests[instance.service.name]
        return OK

    def filter_static(self, instance, node, staying):
        requests = self._requests[instance.service.name]
        if requests.cpu > node.cpu:
            return Status.unschedulable("Insufficient cpu", self.name)
        if requests.memory > node.memory:
            return Status.unschedulable("Insufficient memory", self.name)
        return OK

    def filter(self, cycle, cluster, instance, node_state):
        requests = cycle[STATE_KEY]
        node = node_state.node
        if node_state.cpu_used + requests.cpu > node.cpu:
            return Status.unschedulable("Insufficient cpu", self.name)
        if node_state.memory_used + requests.memory > node.memory:
            return Status.unschedulable("Insufficient memory", self.name)
        return OK

    def score(self, cycle, cluster, instance, node_state):
        requests = cycle[STATE_KEY]
        node = node_state.node
        if node.gpus and self._gpu_work:
            return 0.0
        shares = []
        if node.cpu:
            shares.append((node_state.cpu_used + requests.cpu) / node.cpu)
        if node.memory:
            shares.append((node_state.memory_used + requests.memory) / node.memory)
        if not shares:
            return 0.0
        if self.least_allocated:
            return 100.0 * sum(1.0 - min(share, 1.0) for share in shares) / len(shares)
        return 100.0 * sum(shares) / len(shares)

    def reserve(self, cycle, cluster, instance, node_state, placement):
        requests = cycle[STATE_KEY]
        node_state.cpu_used += requests.cpu
        node_state.memory_used += requests.memory

    def unreserve(self, cycle, cluster, instance, node_state, placement):
        requests = cycle[STATE_KEY]
        node_state.cpu_used -= requests.cpu
        node_state.memory_used -= requests.memory
