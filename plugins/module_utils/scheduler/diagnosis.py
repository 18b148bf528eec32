# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Why an instance fits nowhere: kube's FitError, "0/N nodes are available: 3 Insufficient cpu, ...".

Every node is asked again, its first refusal counted (framework.reasons_histogram). The instances of one class fail
the same way until something is bound, so a class keeps its last message (Candidates.diagnosis) and the next
instance that fails with nothing bound since reuses it.
"""

from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.problem_format import MAX_GPU_CORES
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.framework import reasons_histogram
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.model import gpu_overhead
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.gpu import (
    INSUFFICIENT_CORES, INSUFFICIENT_MEMORY, INSUFFICIENT_WHOLE,
)
from ansible_collections.gangplank.platform.plugins.module_utils.quantity import format_cpu, format_size

INSUFFICIENT_CPU = "Insufficient cpu"
INSUFFICIENT_RAM = "Insufficient memory"
INSUFFICIENT_NVME = "Insufficient NVMe space (%s)"


def unschedulable_message(attempt, instance, status, cycle, filters):
    """The message for ``instance``, which fits on no node of ``attempt``; ``status``, ``cycle`` and ``filters`` are
    its PreFilter's (a failed PreFilter speaks for every node)."""
    nodes = len(attempt.cluster.nodes)
    if not status.ok:
        return "0/%d nodes are available: %s." % (nodes, "; ".join(status.reasons))
    shared = cycle.node_names is None and instance.previous is None
    candidates = attempt._candidates_for(instance.service) if shared else None  # pylint: disable=protected-access
    if shared and candidates.diagnosis is not None and candidates.diagnosis[0] == len(attempt.bound):
        return candidates.diagnosis[1]
    statuses = node_statuses(attempt, instance, cycle, filters)
    message = "0/%d nodes are available: %s." % (nodes, reasons_histogram(statuses, amounts(attempt, instance, statuses)))
    if shared:
        # Nothing was bound since: the next instance of the class fails the same way.
        candidates.diagnosis = (len(attempt.bound), message)
    return message


def node_statuses(attempt, instance, cycle, filters):
    """(node name, the first refusal there) for every node of the attempt."""
    framework, cluster = attempt.framework, attempt.cluster
    statuses = []
    previous = instance.previous_node()
    for name, node_state in cluster.nodes.items():
        if cycle.node_names is not None and name not in cycle.node_names:
            statuses.append((name, _Reason(cycle.outside_reason)))
            continue
        status = framework.run_static_filters(filters, instance, node_state.node, name == previous)
        if status.ok:
            status = framework.run_filters(filters.dynamic, cycle, cluster, instance, node_state)
        statuses.append((name, status))
    return statuses


def amounts(attempt, instance, statuses):
    """Per "Insufficient ..." reason among ``statuses``: what the instance asked and the most one of the nodes that gave
    that reason had free (``asked 96Gi per GPU; the largest free device has 48Gi``), so the user sees how far off it is."""
    by_reason = {}
    for name, status in statuses:
        for reason in status.reasons:
            by_reason.setdefault(reason, []).append(attempt.cluster.nodes[name])
    requests = attempt.problem.requests()[instance.service.name]
    resources = instance.service.resources
    details = {}
    if INSUFFICIENT_CPU in by_reason:
        most = max(state.node.cpu - state.cpu_used for state in by_reason[INSUFFICIENT_CPU])
        details[INSUFFICIENT_CPU] = "asked %s; the most free on a node is %s" % (_cpus(requests.cpu), _cpus(max(most, 0)))
    if INSUFFICIENT_RAM in by_reason:
        most = max(state.node.memory - state.memory_used for state in by_reason[INSUFFICIENT_RAM])
        details[INSUFFICIENT_RAM] = "asked %s of memory; the most free on a node is %s" % (
            format_size(requests.memory), format_size(max(most, 0)))
    gpu = resources.gpu
    if gpu is not None:
        devices = {reason: [(state, position) for state in by_reason.get(reason, ())
                            for position, device in enumerate(state.node.gpus) if gpu.matches(device)]
                   for reason in (INSUFFICIENT_MEMORY, INSUFFICIENT_WHOLE, INSUFFICIENT_CORES)}
        if devices[INSUFFICIENT_MEMORY] and gpu.memory is not None:
            largest = max(state.gpu_free(position) for state, position in devices[INSUFFICIENT_MEMORY])
            text = "asked %s per GPU" % format_size(gpu.memory) if gpu.count == 1 else \
                "asked %d GPUs with %s each" % (gpu.count, format_size(gpu.memory))
            overhead = max(gpu_overhead(state.node, gpu) for state in by_reason[INSUFFICIENT_MEMORY])
            if overhead:
                text += " and %s for its MPS server on a node with gpu_sharing mps" % format_size(overhead)
            details[INSUFFICIENT_MEMORY] = "%s; the largest free device has %s" % (text, format_size(max(largest, 0)))
            if gpu.count > 1:
                most = max(sum(1 for other, position in devices[INSUFFICIENT_MEMORY] if other is state and
                               state.gpu_free(position) >= gpu.memory + gpu_overhead(state.node, gpu))
                           for state in by_reason[INSUFFICIENT_MEMORY])
                details[INSUFFICIENT_MEMORY] += ", and at most %d device(s) of a node have that free" % most
        if INSUFFICIENT_WHOLE in by_reason:
            most = max(sum(1 for other, position in devices[INSUFFICIENT_WHOLE] if other is state and
                           state.gpu_used[position] == 0) for state in by_reason[INSUFFICIENT_WHOLE])
            details[INSUFFICIENT_WHOLE] = "asked %d whole GPU(s)%s; the most free on a node is %d" % (
                gpu.count, " of %s" % "|".join(gpu.models) if gpu.models else "", most)
        if devices[INSUFFICIENT_CORES] and gpu.cores is not None:
            most = max(MAX_GPU_CORES - state.gpu_cores[position] for state, position in devices[INSUFFICIENT_CORES])
            details[INSUFFICIENT_CORES] = "asked %d%% of a GPU's cores; the most free on a device is %d%%" % (
                gpu.cores, max(most, 0))
    nvme = resources.nvme
    if nvme is not None and INSUFFICIENT_NVME % nvme.label in by_reason:
        free = [state.nvme_free(position) for state in by_reason[INSUFFICIENT_NVME % nvme.label]
                for position, device in enumerate(state.node.nvme) if nvme.label in device.labels]
        details[INSUFFICIENT_NVME % nvme.label] = "asked %s; the largest free device has %s" % (
            format_size(nvme.size), format_size(max(free + [0])))
    return details


def _cpus(millicores):
    """8 CPUs, 1 CPU, 500m CPU."""
    return "%s CPU%s" % (format_cpu(millicores), "s" if millicores % 1000 == 0 and millicores != 1000 else "")


class _Reason:
    def __init__(self, reason):
        self.reasons = (reason,)
