# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU: per-device model, memory and cores. A GPU is shared by memory; no memory asks for whole GPUs.

A request takes ``count`` distinct devices of one node whose model matches one of
``models`` (case-insensitive substring) and that each have ``memory`` free; a whole-GPU
request takes devices nobody uses. Devices are chosen best-fit (least free memory
that still fits, then index), which keeps whole GPUs free for whole-GPU work; the
devices an instance used before come first when it stays on its node, so it is not
restarted on other GPUs.

Topology (scheduler/topology.py), on a node that lists its GPU links: a multi-GPU request takes the best-linked set of
the devices that fit (best fit breaking ties), with ``topology: required`` only a set whose every pair is NVLinked
(a node whose devices of the models asked, even all free, hold no such set is filtered statically: NEVER_NVLINKED_SET;
one whose free devices hold none, dynamically: NO_NVLINKED_SET). A single device is one that leaves every free NVLinked
group whole where one fits (before best fit: a 1-GPU instance does not take a GPU of the last free NVLinked pair while
another GPU fits, even a larger one), then best fit, then among devices that fit equally well the one whose taking
breaks the least of the free well-linked groups. A node without links chooses as before.

A share on a node with ``gpu_sharing: mps`` also needs room for its MPS server on each device
(model.gpu_overhead, kube's pod overhead); a share that asks ``cores`` fits a device only while the
shares there ask at most 100 in sum, and only on a node that can enforce them (mps).
"""

from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.framework import (
    OK, SKIPPED, FilterPlugin, PreFilterPlugin, ReservePlugin, ScorePlugin, Status,
)
from ansible_collections.gangplank.platform.plugins.module_utils.problem_format import (
    CPU_PINNING_NUMA, GPU_SHARING_MPS, GPU_TOPOLOGY_PREFERRED, GPU_TOPOLOGY_REQUIRED, MAX_GPU_CORES,
)
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.model import (
    GPUClaim, GPURequest, gpu_overhead, numa_capacity, pinnable,
)
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.topology import (
    NVLINK_SCORE, best_set, break_cost, largest_nvlinked_set, link_matrix,
)

INSUFFICIENT_MEMORY = "Insufficient GPU memory"
INSUFFICIENT_WHOLE = "Insufficient free GPUs"
INSUFFICIENT_CORES = "Insufficient GPU cores"
CANNOT_ENFORCE_CORES = "node(s) cannot enforce GPU cores (gpu_sharing none)"
NO_NVLINKED_SET = "node(s) had no free NVLinked set of %d GPU(s)"
NEVER_NVLINKED_SET = "node(s) had no NVLinked set of %d GPU(s)"
# The GPU plugin's cycle state: node name -> (node version, the devices chosen there), written by gpu_choice.
STATE_KEY = "GPU"


def choose_gpus(node_state, request, preferred=(), usable=None):
    """The device positions and bytes (the grant) an instance would take on this node, or None. ``usable`` (a
    predicate on a device position), when given, leaves the others out."""
    used = node_state.gpu_used
    wanted = request.memory
    models = request.models
    # A share's MPS server takes room beyond the grant (0 on nodes without MPS); its cores must fit beside the others'.
    needed = wanted if wanted is None else wanted + gpu_overhead(node_state.node, request)
    cores = request.cores
    taken_cores = node_state.gpu_cores
    candidates = []
    for position, device in enumerate(node_state.node.gpus):
        if models and not request.matches(device):
            continue
        if usable is not None and not usable(position):
            continue
        if wanted is None:
            if used[position] == 0:
                candidates.append((device.uuid not in preferred, device.memory, device.index, position, device.memory))
        else:
            free = device.memory - used[position]
            if free >= needed and (cores is None or taken_cores[position] + cores <= MAX_GPU_CORES):
                candidates.append((device.uuid not in preferred, free, device.index, position, wanted))
    if len(candidates) < request.count:
        return None
    matrix = link_matrix(node_state.node)
    if request.count == 1:
        best = min(candidates)
        if matrix is not None and len(candidates) > 1:
            # A device that would break a free NVLinked group only where every other device would too (the previous
            # device first still); then best fit; among the devices that fit as well, the one that breaks the least.
            best = min(candidates, key=lambda candidate: (
                candidate[0], break_cost(node_state, candidate[3])[0] >= NVLINK_SCORE, candidate[1],
                break_cost(node_state, candidate[3]), candidate[2]))
        return [(best[3], best[4])]
    candidates.sort()
    required = request.topology == GPU_TOPOLOGY_REQUIRED
    if matrix is None:
        if required:
            return None         # no link known: no pair is NVLinked
        return [(candidate[3], candidate[4]) for candidate in candidates[:request.count]]
    takes = {candidate[3]: candidate[4] for candidate in candidates}
    kept = [candidate[3] for candidate in candidates if not candidate[0]]
    found = None
    if len(kept) >= request.count:
        # More previous devices fit than the request asks (it asks fewer than before): the best set of them.
        found = best_set(matrix, kept, request.count, (), required)
        kept = []
    if found is None:
        found = best_set(matrix, [candidate[3] for candidate in candidates], request.count, kept, required)
    if found is None:
        return None
    return [(position, takes[position]) for position in found[0]]


def preferred_uuids(instance, node_name):
    previous = instance.previous
    return previous.gpu_uuids if previous is not None and previous.node == node_name else ()


def gpu_choice(cycle, instance, node_state):
    """choose_gpus for this instance, remembered in its cycle (under the GPU plugin's STATE_KEY) for the node's current
    version. Filter, Score and Reserve ask; so do Quota and GPUFragmentation, which count the devices GPU would take:
    this is how they read the GPU plugin's cycle state."""
    choices = cycle.get(STATE_KEY)
    if choices is None:
        choices = cycle[STATE_KEY] = {}
    cached = choices.get(node_state.name)
    if cached is not None and cached[0] == node_state.version:
        return cached[1]
    request, preferred = instance.service.resources.gpu, preferred_uuids(instance, node_state.name)
    chosen = None
    if instance.service.cpu_pinning == CPU_PINNING_NUMA:
        # Pinned: devices on a NUMA node whose CPUs still hold the instance first (kube's Topology Manager aligns the
        # devices with the CPUs), else any, which NUMAPinning's filter then judges exactly (a set may spread).
        chosen = choose_gpus(node_state, request, preferred, _numa_room(node_state, instance.service.resources.cpu))
    if chosen is None:
        chosen = choose_gpus(node_state, request, preferred)
    choices[node_state.name] = (node_state.version, chosen)
    return chosen


def _numa_room(node_state, cpu):
    """Device position -> whether its NUMA node is known and has ``cpu`` millicores left for pinned instances (what the
    pinned instances on that NUMA node alone ask; those spread over several are left to NUMAPinning's exact check)."""
    node = node_state.node
    asked = {}
    for numa_nodes, amount in node_state.numa_pinned.items():
        if len(numa_nodes) == 1:
            (numa_node,) = numa_nodes
            asked[numa_node] = asked.get(numa_node, 0) + amount

    def usable(position):
        device = node.gpus[position]
        return pinnable(node, device) and numa_capacity(node, device.numa_node) - asked.get(device.numa_node, 0) >= cpu
    return usable


class GPU(PreFilterPlugin, FilterPlugin, ScorePlugin, ReservePlugin):
    name = "GPU"
    node_local = True
    service_only = True

    def pre_filter(self, cycle, cluster, instance):
        return OK if instance.service.resources.gpu is not None else SKIPPED

    def filter_static(self, instance, node, staying):
        request = instance.service.resources.gpu
        if request is None:
            return OK
        models = [device for device in node.gpus if request.matches(device)]
        if len(models) < request.count:
            wanted = " or ".join(request.models) if request.models else "any model"
            return Status.unschedulable("node(s) had fewer than %d GPU(s) of %s" % (request.count, wanted),
                                        self.name)
        if request.cores is not None and node.gpu_sharing != GPU_SHARING_MPS:
            # Only an MPS server holds a client to a share of the SMs; elsewhere the cores asked would be a promise.
            return Status.unschedulable(CANNOT_ENFORCE_CORES, self.name)
        needed = None if request.memory is None else request.memory + gpu_overhead(node, request)
        large_enough = [device for device in models if needed is None or device.memory >= needed]
        if len(large_enough) < request.count:
            return Status.unschedulable(INSUFFICIENT_MEMORY, self.name)
        if request.topology == GPU_TOPOLOGY_REQUIRED and request.count > 1:
            # Even empty the node could not offer it: said apart from the dynamic "no free NVLinked set".
            positions = [position for position, device in enumerate(node.gpus) if request.matches(device) and (
                needed is None or device.memory >= needed)]
            if largest_nvlinked_set(node, positions) < request.count:
                return Status.unschedulable(NEVER_NVLINKED_SET % request.count, self.name)
        return OK

    def filter(self, cycle, cluster, instance, node_state):
        request = instance.service.resources.gpu
        if gpu_choice(cycle, instance, node_state) is None:
            reason = INSUFFICIENT_WHOLE if request.memory is None else INSUFFICIENT_MEMORY
            if request.cores is not None and choose_gpus(node_state, _without_cores(request)) is not None:
                reason = INSUFFICIENT_CORES      # memory would fit: the cores are what is short
            elif request.topology == GPU_TOPOLOGY_REQUIRED and request.count > 1 and \
                    choose_gpus(node_state, _without_topology(request)) is not None:
                reason = NO_NVLINKED_SET % request.count     # devices would fit: none of their sets is NVLinked
            return Status.unschedulable(reason, self.name)
        return OK

    def score(self, cycle, cluster, instance, node_state):
        request = instance.service.resources.gpu
        if request is None:
            # Keep GPU nodes for GPU work.
            return 0.0 if node_state.node.gpus else 100.0
        chosen = gpu_choice(cycle, instance, node_state)
        if not chosen:
            return 0.0
        # Best fit: the share of each chosen device's free memory this request fills (with its MPS server, if any).
        overhead = gpu_overhead(node_state.node, request)
        fills = [(take + overhead) / float(node_state.gpu_free(position)) for position, take in chosen]
        return 100.0 * sum(fills) / len(fills)

    def reserve(self, cycle, cluster, instance, node_state, placement):
        request = instance.service.resources.gpu
        if request is None:
            return
        chosen = gpu_choice(cycle, instance, node_state)
        # The claim is the grant; the device also carries the share's MPS server (kube's pod overhead) and its cores.
        overhead = gpu_overhead(node_state.node, request)
        cores = request.cores or 0
        claims = []
        for position, take in chosen:
            node_state.gpu_used[position] += take + overhead
            node_state.gpu_cores[position] += cores
            claims.append(GPUClaim(node_state.node.gpus[position], take))
        placement["gpus"] = tuple(sorted(claims, key=lambda claim: claim.device.index))

    def unreserve(self, cycle, cluster, instance, node_state, placement):
        request = instance.service.resources.gpu
        if request is not None:
            node_state.add_gpu_claims(placement.gpus, request, -1)


def _without_cores(request):
    """The request without its cores: to tell which of memory and cores a node is short of."""
    return GPURequest(request.count, request.memory, request.models, topology=request.topology)


def _without_topology(request):
    """The request with topology preferred: to tell whether devices or their links are what a node is short of."""
    return GPURequest(request.count, request.memory, request.models, request.cores, GPU_TOPOLOGY_PREFERRED)
