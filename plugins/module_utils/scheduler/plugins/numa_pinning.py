# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NUMAPinning: an instance with ``cpu_pinning: numa`` runs on the CPUs of its GPUs' NUMA node(s).

kube's Topology Manager (single-numa-node / restricted) aligns a pod's CPUs with its devices; here the instance's
containers get the CPUs and memory node(s) of the NUMA nodes of the GPUs the GPU plugin chose (``cpuset_cpus`` and
``cpuset_mems`` in the plan, from DefaultBinder), and the node is refused where those CPUs cannot hold its CPU request.

Accounting: the pinned instances of a node share the CPUs of their NUMA nodes. Each asks its CPU request (sidecars
included) from the NUMA nodes of its GPUs, and they fit together when the requests can be spread so that no NUMA node
gives more than its CPUs (1,000 millicores each): a transportation problem, decided by a max-flow over the few sets of
NUMA nodes in use (an instance whose GPUs sit on one NUMA node asks it alone, the common case: a sum per NUMA node).
``NodeState.numa_pinned`` holds what each set of NUMA nodes asks; Reserve adds, Unreserve takes away. Unpinned
instances ask nothing here (their CPU is NodeResourcesFit's), so they plan as before.

Filter (dynamic, node-local): reads the GPU plugin's device choice through ``gpu.gpu_choice``, so it runs after GPU. A
node whose GPUs' NUMA node is unknown (no ``numa_node``, or no ``numa_cpus`` entry for it) is refused statically where
too few of the GPUs that match are known, else dynamically when the GPU plugin chose such a GPU.
"""

from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.problem_format import CPU_PINNING_NUMA
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.framework import (
    OK, SKIPPED, FilterPlugin, PreFilterPlugin, ReservePlugin, Status,
)
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.model import (
    numa_capacity, numa_nodes_of, pinnable,
)
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.gpu import gpu_choice

NO_NUMA_FACTS = "node(s) had no NUMA facts for CPU pinning"
INSUFFICIENT_NUMA_CPU = "Insufficient CPUs on the GPUs' NUMA node"


def numa_fits(node, demands):
    """Whether ``demands`` ({frozenset of NUMA node ids: millicores}) can be spread over those NUMA nodes of ``node``
    without any giving more than its CPUs."""
    needed = [(numa_nodes, amount) for numa_nodes, amount in sorted(demands.items(), key=lambda item: sorted(item[0]))
              if amount > 0]
    free = {}
    for numa_nodes, _amount in needed:
        for numa_node in numa_nodes:
            free[numa_node] = numa_capacity(node, numa_node)
    if all(len(numa_nodes) == 1 for numa_nodes, _amount in needed):
        for numa_nodes, amount in needed:
            (numa_node,) = numa_nodes
            free[numa_node] -= amount
        return all(left >= 0 for left in free.values())
    # Max-flow (augmenting paths): flow[numa node][demand position] is what that demand takes there.
    flow = {numa_node: {} for numa_node in free}
    for position, (numa_nodes, amount) in enumerate(needed):
        while amount:
            pushed = _augment(needed, flow, free, position, amount)
            if not pushed:
                return False
            amount -= pushed
    return True


def _augment(needed, flow, free, position, amount):
    """Move up to ``amount`` of demand ``position`` onto the NUMA nodes along one shortest path of the residual graph
    (from its NUMA nodes, through demands that may take their share elsewhere, to a NUMA node with CPUs free); the
    amount moved, 0 when no path is left."""
    parent = {}
    queue = []
    for numa_node in sorted(needed[position][0]):
        parent[numa_node] = (None, position)
        queue.append(numa_node)
    position_read = 0
    while position_read < len(queue):       # grows while it is read: breadth first
        numa_node = queue[position_read]
        position_read += 1
        if free[numa_node] > 0:
            steps = []
            here = numa_node
            while here is not None:
                before, via = parent[here]
                steps.append((before, via, here))
                here = before
            pushed = min([amount, free[numa_node]] + [flow[before][via] for before, via, _here in steps if before is not None])
            for before, via, here in steps:
                flow[here][via] = flow[here].get(via, 0) + pushed
                if before is not None:
                    flow[before][via] -= pushed
            free[numa_node] -= pushed
            return pushed
        for via, taken in sorted(flow[numa_node].items()):
            if taken > 0:
                for other in sorted(needed[via][0]):
                    if other not in parent:
                        parent[other] = (numa_node, via)
                        queue.append(other)
    return 0


def _demand(node_state, numa_nodes, amount, sign):
    pinned = node_state.numa_pinned
    left = pinned.get(numa_nodes, 0) + sign * amount
    if left:
        pinned[numa_nodes] = left
    else:
        pinned.pop(numa_nodes, None)


class NUMAPinning(PreFilterPlugin, FilterPlugin, ReservePlugin):
    name = "NUMAPinning"
    node_local = True
    service_only = True

    def __init__(self, problem):
        super().__init__(problem)
        self._requests = problem.requests()

    def pre_filter(self, cycle, cluster, instance):
        return OK if instance.service.cpu_pinning == CPU_PINNING_NUMA else SKIPPED

    def filter_static(self, instance, node, staying):
        service = instance.service
        if service.cpu_pinning != CPU_PINNING_NUMA:
            return OK
        request = service.resources.gpu
        known = sum(1 for device in node.gpus if request.matches(device) and pinnable(node, device))
        if known < request.count:
            return Status.unschedulable(NO_NUMA_FACTS, self.name)
        return OK

    def filter(self, cycle, cluster, instance, node_state):
        chosen = gpu_choice(cycle, instance, node_state)
        if chosen is None:
            return OK       # the GPU plugin's filter, which runs first, says why
        node = node_state.node
        devices = [node.gpus[position] for position, _take in chosen]
        if not all(pinnable(node, device) for device in devices):
            return Status.unschedulable(NO_NUMA_FACTS, self.name)
        demands = dict(node_state.numa_pinned)
        numa_nodes = numa_nodes_of(devices)
        demands[numa_nodes] = demands.get(numa_nodes, 0) + self._requests[instance.service.name].cpu
        if not numa_fits(node, demands):
            return Status.unschedulable(INSUFFICIENT_NUMA_CPU, self.name)
        return OK

    def reserve(self, cycle, cluster, instance, node_state, placement):
        if instance.service.cpu_pinning == CPU_PINNING_NUMA:
            numa_nodes = numa_nodes_of(claim.device for claim in placement["gpus"])
            _demand(node_state, numa_nodes, self._requests[instance.service.name].cpu, 1)

    def unreserve(self, cycle, cluster, instance, node_state, placement):
        if instance.service.cpu_pinning == CPU_PINNING_NUMA:
            numa_nodes = numa_nodes_of(claim.device for claim in placement.gpus)
            _demand(node_state, numa_nodes, self._requests[instance.service.name].cpu, -1)
