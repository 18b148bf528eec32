# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPUFragmentation (Score): place where the free GPU shapes left behind still fit the expected work.

Fragmentation Gradient Descent (Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing
Workloads with Fragmentation Gradient Descent", USENIX ATC'23). For one expected request shape, a
node's fragment is the free GPU memory that shape cannot use: all of it when the shape does not fit
the node at all (too little free CPU or memory, too few matching devices with room), otherwise the
free memory of the devices too full (or, for whole-GPU shapes, not wholly free) for one share of it.
The node's fragmentation is the mean over the expected mix of shapes, weighted by how often each
occurs; the score is how little placing the instance grows it (a decrease scores highest).

The expected mix is the problem's own catalog: every GPU service's replicas, with their CPU and
memory (sidecars included), GPU count, memory per device and models. The catalog is what a platform
runs, and the replicas already placed (recorded placements) are part of it, so no history is needed.

Units are GPUs: a device's free memory counts as the share of its memory that is free, so nodes of
different GPU sizes compare. The raw score is fragmentation before minus after, in GPUs; it is mapped
onto 0..100 with the logistic function, as the paper's simulator does (a change of 0 scores 50).

CPU-only work is scored too: taking a GPU node's last free cores leaves its GPUs stranded, which
this score sees as all of that node's free GPU memory turning into fragment.
"""

from __future__ import annotations

import math

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.framework import NormalizeScorePlugin, ScorePlugin
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.gpu import gpu_choice
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.sidecars import pod_requests

MEMO_SIZE = 100000      # fragmentation values remembered at most (a few tens of MB)


def expected_mix(problem):
    """The catalog's GPU request shapes: [(GPURequest, share of all GPU instances, ((cpu, memory, share), ...)), ...].

    Shapes with the same GPU request are one group, so the per-device work is done once per group;
    within a group the (cpu, memory) thresholds keep their own shares. Ordered for determinism.
    """
    groups = {}
    total = 0
    for service in problem.services.values():
        request = service.resources.gpu
        if service.sidecar or request is None or service.replicas <= 0:
            continue
        requests = pod_requests(problem.services, service)
        shapes = groups.setdefault(request, {})
        shapes[requests.cpu, requests.memory] = shapes.get((requests.cpu, requests.memory), 0) + service.replicas
        total += service.replicas
    mix = []
    for request in sorted(groups, key=lambda r: (r.count, -1 if r.memory is None else r.memory, r.models)):
        shapes = groups[request]
        weight = sum(shapes.values()) / float(total)
        mix.append((request, weight, tuple((cpu, memory, count / float(total))
                                           for (cpu, memory), count in sorted(shapes.items()))))
    return mix


def _scarcity(problem, mix):
    """Per GPU request of the mix: its weight over the share of the cluster's GPUs its models match
    (its weight when it accepts every model)."""
    devices = [device for node in problem.nodes.values() for device in node.gpus]
    scarcity = {}
    for request, weight, _shapes in mix:
        matching = sum(1 for device in devices if request.matches(device))
        scarcity[request] = weight * len(devices) / float(matching) if matching else weight
    return scarcity


class GPUFragmentation(ScorePlugin, NormalizeScorePlugin):
    name = "GPUFragmentation"

    def __init__(self, problem):
        super().__init__(problem)
        self._mix = expected_mix(problem)
        self._requests = {name: pod_requests(problem.services, s) for name, s in problem.services.items()}
        self._layouts = {}      # node name -> per group, the positions of the devices its models match
        self._needs = {}        # node name -> (CPU, memory) per GPU the mix asks
        self._scarcity = _scarcity(problem, self._mix)
        self._kinds = {}        # node name -> the name of the first node with the same devices
        self._kind_names = {}   # devices (model, memory) -> that first node's name
        self._compiled_kinds = {}   # node kind -> what _compiled returns
        self._memo = {}         # (node kind, free CPU, free memory, free per device) -> fragmentation
        # The most CPU and memory any expected shape asks: with that much left, every shape that fits still fits.
        self._largest = (max([cpu for _r, _w, shapes in self._mix for cpu, _m, _s in shapes] or [0]),
                         max([memory for _r, _w, shapes in self._mix for _c, memory, _s in shapes] or [0]))
        self._current = {}      # node name -> (node state, its version, fragmentation): attempts have their own states

    def _layout(self, node):
        """Per group of the mix, the positions of this node's devices whose model it accepts (static, cached)."""
        layout = self._layouts.get(node.name)
        if layout is None:
            layout = self._layouts[node.name] = [
                tuple(position for position, device in enumerate(node.gpus) if request.matches(device))
                for request, _weight, _shapes in self._mix]
        return layout

    def _compiled(self, node):
        """Per node kind: the summed scarcity of the shapes that cannot use it, and the others merged by what
        they ask of it ((count, memory per device, usable positions) -> weight and (cpu, memory) shares)."""
        kind = self._kind(node)
        compiled = self._compiled_kinds.get(kind)
        if compiled is None:
            absent = 0.0
            merged = {}
            for (request, weight, shapes), positions in zip(self._mix, self._layout(node)):
                if not positions:
                    absent += self._scarcity[request]
                    continue
                entry = merged.setdefault((request.count, request.memory, positions), [0.0, {}])
                entry[0] += weight
                for cpu, memory, share in shapes:
                    entry[1][cpu, memory] = entry[1].get((cpu, memory), 0.0) + share
            groups = [(count, wanted, positions, weight, tuple((cpu, memory, share) for (cpu, memory), share in sorted(shapes.items())))
                      for (count, wanted, positions), (weight, shapes) in sorted(
                          merged.items(), key=lambda item: (item[0][0], -1 if item[0][1] is None else item[0][1], item[0][2]))]
            compiled = self._compiled_kinds[kind] = (absent, groups)
        return compiled

    def _per_gpu(self, node):
        """(CPU, memory) the expected work asks per GPU it takes on this node: what idle GPUs will need."""
        cached = self._needs.get(node.name)
        if cached is None:
            cpu = memory = gpus = 0.0
            for (request, _weight, shapes), positions in zip(self._mix, self._layout(node)):
                if not positions:
                    continue
                size = float(max(node.gpus[position].memory for position in positions))
                taken = request.count * (1.0 if request.memory is None else min(1.0, request.memory / size))
                for shape_cpu, shape_memory, share in shapes:
                    cpu += share * shape_cpu
                    memory += share * shape_memory
                    gpus += share * taken
            cached = self._needs[node.name] = (cpu / gpus, memory / gpus) if gpus else (0.0, 0.0)
        return cached

    def fragmentation(self, node, cpu_free, memory_free, gpu_free):
        """Expected fragment, in GPUs, of a node with this much free CPU, memory and memory per device."""
        devices = node.gpus
        if not devices or not self._mix:
            return 0.0
        # Nodes of one kind pass through the same states (all of them start empty): remember each state's value.
        key = (self._kind(node), cpu_free, memory_free, tuple(gpu_free))
        value = self._memo.get(key)
        if value is None:
            if len(self._memo) >= MEMO_SIZE:
                self._memo.clear()      # bounded: early states (the shared ones) are the ones worth keeping
            value = self._memo[key] = self._fragmentation(node, cpu_free, memory_free, gpu_free)
        return value

    def _kind(self, node):
        """Nodes whose devices are alike have the same layout and needs: one name stands for them all."""
        kind = self._kinds.get(node.name)
        if kind is None:
            signature = tuple((device.model, device.memory) for device in node.gpus)
            kind = self._kinds[node.name] = self._kind_names.setdefault(signature, node.name)
        return kind

    def _fragmentation(self, node, cpu_free, memory_free, gpu_free):
        devices = node.gpus
        sizes = [device.memory for device in devices]
        shares = [free / float(size) for free, size in zip(gpu_free, sizes)]
        idle = sum(shares)
        if idle <= 0.0:
            return 0.0
        # Beyond FGD, which asks only whether one more request of each shape fits: the idle GPUs that the
        # node's free CPU and memory cannot feed at the mix's CPU and memory per GPU are stranded too.
        cpu_per_gpu, memory_per_gpu = self._per_gpu(node)
        result = 0.0
        if cpu_per_gpu > 0:
            result = max(result, idle - max(cpu_free, 0) / cpu_per_gpu)
        if memory_per_gpu > 0:
            result = max(result, idle - max(memory_free, 0) / memory_per_gpu)
        absent, groups = self._compiled(node)
        # A shape that cannot use this node's models at all counts its idle GPUs in proportion to how scarce its
        # own models are (its share of the mix over its share of the cluster's GPUs), so work that fits anywhere
        # leaves a scarce model to the work that needs it.
        result += absent * idle
        for count, wanted, positions, weight, shapes in groups:
            usable = 0
            usable_share = 0.0
            for position in positions:
                free = gpu_free[position]
                if (free == sizes[position]) if wanted is None else (free >= wanted):
                    usable += 1
                    usable_share += shares[position]
            if usable < count:
                result += weight * idle
                continue
            fitting = 0.0
            for cpu, memory, share in shapes:
                if cpu <= cpu_free and memory <= memory_free:
                    fitting += share
            # The shapes that fit leave stranded only the devices too full for them; the others, all idle GPUs.
            result += fitting * (idle - usable_share) + (weight - fitting) * idle
        return result

    def _now(self, node_state):
        """(free memory per device, fragmentation) of the node as it is, cached per node state and version."""
        cached = self._current.get(node_state.name)
        if cached is not None and cached[0] is node_state and cached[1] == node_state.version:
            return cached[2], cached[3]
        node = node_state.node
        free = tuple(device.memory - used for device, used in zip(node.gpus, node_state.gpu_used))
        value = self.fragmentation(node, node.cpu - node_state.cpu_used, node.memory - node_state.memory_used, free)
        self._current[node_state.name] = (node_state, node_state.version, free, value)
        return free, value

    def score(self, cycle, cluster, instance, node_state):
        node = node_state.node
        if not node.gpus or not self._mix:
            return 0.0
        requests = self._requests[instance.service.name]
        if instance.service.resources.gpu is None:
            idle = sum((device.memory - used) / float(device.memory) for device, used in zip(node.gpus, node_state.gpu_used))
            if idle <= 0.0:
                return 0.0      # no GPU memory left to strand: CPU work changes nothing here
            # CPU work that leaves enough for every shape and for feeding every idle GPU changes nothing either.
            cpu_per_gpu, memory_per_gpu = self._per_gpu(node)
            if node.cpu - node_state.cpu_used - requests.cpu >= max(self._largest[0], idle * cpu_per_gpu) and \
                    node.memory - node_state.memory_used - requests.memory >= max(self._largest[1], idle * memory_per_gpu):
                return 0.0
        free, now = self._now(node_state)
        if instance.service.resources.gpu is not None:
            free = list(free)
            for position, take in gpu_choice(cycle, instance, node_state) or ():
                free[position] -= take
        after = self.fragmentation(node, node.cpu - node_state.cpu_used - requests.cpu,
                                   node.memory - node_state.memory_used - requests.memory, free)
        return now - after

    def normalize_score(self, raw):
        # The logistic of the change in GPUs, as the paper's simulator maps it (there in thousandths of a GPU / 1000).
        if raw < -50.0:
            return 0.0
        return 100.0 / (1.0 + math.exp(-raw))
