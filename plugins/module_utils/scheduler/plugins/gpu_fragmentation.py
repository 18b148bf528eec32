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
memory (sidecars included), GPU count, memory per device and models, and for a scalable service with
``max_replicas`` the instances it may still grow by (headroom: part of every mix below too). The catalog is what a platform
runs, and the replicas already placed (recorded placements) are part of it, so no history is needed.
While a gang is being placed, the scheduler tells this plugin what is left of it (``expect``): the
mix is then the GPU work still to place, taken again each time that work has halved (heavy first,
the end of a gang is small shapes, which the whole catalog's mix would misjudge), and the catalog
again once no GPU work is left or the attempt is over.

Speed: the per-shape part of a node's fragmentation is remembered per node kind (the same devices, in
whatever order: a node's devices are looked at sorted by model and memory, as fragmentation does not
depend on their order), free memory per device, and how many of the mix's distinct CPU and memory
amounts the node's free CPU and memory reach (only those decide which shapes fit); the part for idle GPUs the free CPU and
memory cannot feed is a formula. A node's current state is cached per version, with the CPU and
memory that CPU-only work may take there without changing anything.

Units are GPUs: a device's free memory counts as the share of its memory that is free, so nodes of
different GPU sizes compare. The raw score is fragmentation before minus after, in GPUs; it is mapped
onto 0..100 with the logistic function, as the paper's simulator does (a change of 0 scores 50).

CPU-only work is scored too: taking a GPU node's last free cores leaves its GPUs stranded, which
this score sees as all of that node's free GPU memory turning into fragment.

GPU sharing: on a node that enforces shares with MPS (``gpu_sharing: mps``) a share also takes its MPS
server's memory (model.gpu_overhead) on each device, so there a shape needs its memory plus that to fit,
and a placement takes it too; such nodes are kinds of their own. GPU cores (``gpu.cores``) are left out on
purpose: the GPU plugin keeps them within 100 per device, and the fragment is measured in memory.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from operator import itemgetter, sub, truediv

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.framework import NormalizeScorePlugin, ScorePlugin
from ansible_collections.gangplank.platform.plugins.module_utils.problem_format import GPU_SHARING_MPS
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.model import MPS_SERVER_MEMORY
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.gpu import gpu_choice

MEMO_SIZE = 100000      # fragmentation values remembered at most (a few tens of MB)
REFRESH = 2             # the expected mix follows the gang's remaining GPU work when that has shrunk this many times


def expected_mix(problem, replicas=None):
    """The catalog's GPU request shapes: [(GPURequest, share of all GPU instances, ((cpu, memory, share), ...)), ...].

    Shapes with the same GPU request are one group, so the per-device work is done once per group;
    within a group the (cpu, memory) thresholds keep their own shares. Ordered for determinism.
    ``replicas`` (service name -> instances) counts other instances than the catalog's replicas. A scalable service
    with ``max_replicas`` counts as that many (headroom for what the compute platform may grow it to).
    """
    return _mix([(request, cpu, memory, (service.replicas if replicas is None else replicas.get(service.name, 0))
                  + headroom(service)) for service, request, cpu, memory in _gpu_services(problem)])


def headroom(service):
    """The instances a scalable service may still grow by (``max_replicas`` above its replicas), 0 for any other."""
    if not service.scalable or service.max_replicas is None:
        return 0
    return max(service.max_replicas - service.replicas, 0)


def _gpu_services(problem):
    """(service, GPU request, CPU, memory with sidecars) of every service that asks for GPUs."""
    result = []
    for service in problem.services.values():
        request = service.resources.gpu
        if service.sidecar or request is None:
            continue
        requests = problem.requests()[service.name]
        result.append((service, request, requests.cpu, requests.memory))
    return result


def _mix(counted):
    """expected_mix from (GPU request, CPU, memory, instances) entries."""
    groups = {}
    total = 0
    for request, cpu, memory, count in counted:
        if count <= 0:
            continue
        shapes = groups.setdefault(request, {})
        shapes[cpu, memory] = shapes.get((cpu, memory), 0) + count
        total += count
    mix = []
    for request in sorted(groups, key=lambda r: (r.count, -1 if r.memory is None else r.memory, r.models)):
        shapes = groups[request]
        weight = sum(shapes.values()) / float(total)
        mix.append((request, weight, tuple((cpu, memory, count / float(total))
                                           for (cpu, memory), count in sorted(shapes.items()))))
    return mix


def _models(problem):
    """How many devices of each model the cluster has."""
    devices = {}
    for node in problem.nodes.values():
        for device in node.gpus:
            devices[device.model] = devices.get(device.model, 0) + 1
    return devices


def _scarcity(devices, mix):
    """Per GPU request of the mix: its weight over the share of the cluster's GPUs its models match
    (its weight when it accepts every model). ``devices``: what _models returns."""
    everything = sum(devices.values())
    scarcity = {}
    for request, weight, _shapes in mix:
        matching = everything if not request.models else sum(
            count for model, count in devices.items() if request.matches(_Model(model)))
        scarcity[request] = weight * everything / float(matching) if matching else weight
    return scarcity


class _Model:
    """A device as far as GPURequest.matches looks at it."""

    __slots__ = ("model",)

    def __init__(self, model):
        self.model = model


class GPUFragmentation(ScorePlugin, NormalizeScorePlugin):
    name = "GPUFragmentation"
    # Count the idle GPUs that a node's free CPU and memory cannot feed (beyond FGD); False gives FGD's own
    # fragmentation (the trace benchmark's baseline, benchmarks/trace_benchmark.py --policy fgd).
    starvation = True

    def __init__(self, problem):
        super().__init__(problem)
        self._requests = problem.requests()
        gpu_services = _gpu_services(problem)
        self._services = [(service.name, request, cpu, memory) for service, request, cpu, memory in gpu_services]
        # What the scalable services may grow by: part of every mix, the gang's remaining work included, so that its
        # last placements leave room shaped for that growth.
        self._headroom = {service.name: headroom(service) for service, _r, _c, _m in gpu_services}
        self._catalog = expected_mix(problem)
        # GPU instances that run already (recorded placements): the work a living cluster holds besides the queue.
        self._running = sum(1 for instance in problem.instances() if instance.previous is not None
                            and instance.service.resources.gpu is not None and not instance.service.sidecar)
        self._device_models = _models(problem)
        self._sizes = {}        # (node kind, positions) -> the largest of those devices' memory, as a float
        self._kinds = {}        # node name -> what _kind returns
        self._kind_names = {}   # sorted devices (model, memory) -> the kind: the name of the first node with them
        self._kind_devices = {}  # kind -> its devices, sorted
        self._kind_sizes = {}   # kind -> (its devices' memory as floats, as integers), sorted
        self._kind_overhead = {}    # kind -> the bytes a share takes per device beyond its memory (an MPS server), or 0
        self._matching = {}     # (node kind, GPU request) -> positions of the devices it accepts
        self._basis = None      # GPU instances still to place when the mix was last taken from them
        self._devices_now = {}  # node name -> (state, memory used per device, free per device sorted, idle GPUs)
        self._use(self._catalog)

    def _use(self, mix):
        """Score against this expected mix from now on; everything computed for another one is dropped."""
        self._mix = mix
        self._scarcity = _scarcity(self._device_models, mix)
        self._layouts = {}      # node kind -> per group, the positions of the devices its models match
        self._needs = {}        # node kind -> (CPU, memory) per GPU the mix asks
        self._compiled_kinds = {}   # node kind -> what _compiled returns
        self._infos = {}        # node name -> what _info returns
        self._kind_infos = {}   # node kind -> what _info returns
        # The distinct CPU and memory amounts the mix's shapes ask, sorted: a shape fits a node's free CPU when its
        # position here is below bisect_right(amounts, free CPU).
        self._cpus = sorted({cpu for _r, _w, shapes in mix for cpu, _m, _s in shapes})
        self._memories = sorted({memory for _r, _w, shapes in mix for _c, memory, _s in shapes})
        cpu_ranks = {cpu: rank for rank, cpu in enumerate(self._cpus)}
        memory_ranks = {memory: rank for rank, memory in enumerate(self._memories)}
        # The mix's shapes with their CPU and memory as ranks in those lists, once per mix rather than per node kind.
        self._ranked = [tuple((cpu_ranks[cpu], memory_ranks[memory], share) for cpu, memory, share in shapes)
                        for _request, _weight, shapes in mix]
        self._memo = {}         # (node kind, CPU rank, memory rank, free per device) -> (idle GPUs, fragment per shape)
        # The most CPU and memory any expected shape asks: with that much left, every shape that fits still fits.
        self._largest = (max([cpu for _r, _w, shapes in mix for cpu, _m, _s in shapes] or [0]),
                         max([memory for _r, _w, shapes in mix for _c, memory, _s in shapes] or [0]))
        self._current = {}      # node name -> what _now returns: attempts have their own states
        # (service, node kind, free CPU, free memory, free memory per device and the devices taken, in the kind's
        # order) -> score: nodes of one kind in the same state score the same for an instance with no history (they
        # all start empty).
        self._scores = {}

    def expect(self, remaining):
        """The expected mix is the GPU work the gang has still to place while there is some (the gang knows it
        exactly: what is left of it at its end are small shapes, not the catalog's mix), else the catalog. It is
        taken again each time that work has shrunk to half of what it was (a new mix makes every node's
        fragmentation be computed again, so at most about log2(instances) times).

        Only when the queue is most of the work the cluster is expected to hold: when, at the start of an attempt,
        more GPU instances run already than the queue has to place (a living cluster whose running instances are
        pinned, scale.yml adding a few: the queue is one call's batch, not the mix of what will arrive), the mix
        stays the catalog's, running instances included (on openb multigpu30 planned in 2% batches,
        scoring each batch against its own mix refused multi-GPU pods from 82% arrived)."""
        mix = self._catalog
        if remaining is not None:
            left = sum(remaining.get(name, 0) for name, _request, _cpu, _memory in self._services)
            if self._basis is None and left < self._running:
                self._basis = 0         # not following the queue until the attempt is over (expect(None))
            if self._basis is not None and left * REFRESH > self._basis:
                return False
            self._basis = left
            mix = _mix([(request, cpu, memory, remaining.get(name, 0) + self._headroom[name])
                        for name, request, cpu, memory in self._services])
            if not mix:
                mix = self._catalog
        else:
            self._basis = None
        if mix == self._mix:
            return False
        self._use(mix)
        return True

    def _layout(self, kind):
        """Per group of the mix, the positions (in the kind's sorted order) of the devices whose model it accepts."""
        layout = self._layouts.get(kind)
        if layout is None:
            layout = self._layouts[kind] = [self._positions(kind, request) for request, _weight, _shapes in self._mix]
        return layout

    def _positions(self, kind, request):
        """The positions of the kind's devices whose model the request accepts (kept across mixes)."""
        key = (kind, request)
        positions = self._matching.get(key)
        if positions is None:
            positions = self._matching[key] = tuple(position for position, device in enumerate(self._kind_devices[kind])
                                                    if request.matches(device))
        return positions

    def _compiled(self, kind):
        """Per node kind: the summed weight of the mix (the shapes that cannot use the node counted by their
        scarcity), and the others merged by what they ask of it: per (memory per device, usable positions), the
        counts asked with their (CPU rank, memory rank, share) shapes."""
        compiled = self._compiled_kinds.get(kind)
        if compiled is None:
            absent = 0.0
            merged = {}
            for (request, weight, _shapes), ranked, positions in zip(self._mix, self._ranked, self._layout(kind)):
                if not positions:
                    absent += self._scarcity[request]
                    continue
                # A share needs room for its MPS server too on the nodes that run one (0 elsewhere).
                wanted = request.memory if request.memory is None else request.memory + self._kind_overhead[kind]
                entry = merged.setdefault((request.count, wanted, positions), [0.0, {}])
                entry[0] += weight
                for cpu_rank, memory_rank, share in ranked:
                    entry[1][cpu_rank, memory_rank] = entry[1].get((cpu_rank, memory_rank), 0.0) + share
            # Groups with the same device need and positions see the same usable devices: one block each.
            blocks = {}
            total = absent
            for (count, wanted, positions), (weight, shapes) in sorted(
                    merged.items(), key=lambda item: (item[0][0], -1 if item[0][1] is None else item[0][1], item[0][2])):
                total += weight
                blocks.setdefault((wanted, positions), []).append(
                    (count, tuple((cpu_rank, memory_rank, share) for (cpu_rank, memory_rank), share in sorted(shapes.items()))))
            compiled = self._compiled_kinds[kind] = (total, tuple(
                (wanted, positions, tuple(members)) for (wanted, positions), members in blocks.items()))
        return compiled

    def _per_gpu(self, kind):
        """(CPU, memory) the expected work asks per GPU it takes on a node of this kind: what idle GPUs will need."""
        cached = self._needs.get(kind)
        if cached is None:
            cpu = memory = gpus = 0.0
            for (request, _weight, shapes), positions in zip(self._mix, self._layout(kind)):
                if not positions:
                    continue
                size = self._sizes.get((kind, positions))
                if size is None:
                    devices = self._kind_devices[kind]
                    size = self._sizes[kind, positions] = float(max(devices[position].memory for position in positions))
                taken = request.count * (1.0 if request.memory is None else min(
                    1.0, (request.memory + self._kind_overhead[kind]) / size))
                for shape_cpu, shape_memory, share in shapes:
                    cpu += share * shape_cpu
                    memory += share * shape_memory
                    gpus += share * taken
            cached = self._needs[kind] = (cpu / gpus, memory / gpus) if gpus else (0.0, 0.0)
        return cached

    def _info(self, node):
        """What the fragmentation needs of a node, shared by its kind: (kind, device sizes as floats, device sizes,
        CPU and memory per GPU the mix asks, the mix's summed weight, the blocks of _compiled, then the node's own
        part of _kind: its per-device values in the kind's sorted order, and each device's place in it). Sizes are in
        sorted order."""
        info = self._infos.get(node.name)
        if info is None:
            found = self._kind(node)
            kind = found[0]
            shared = self._kind_infos.get(kind)
            if shared is None:
                shared = self._kind_infos[kind] = (kind,) + self._kind_sizes[kind] + self._per_gpu(kind) + \
                    self._compiled(kind)
            info = self._infos[node.name] = shared + found[1:]
        return info

    def fragmentation(self, node, cpu_free, memory_free, gpu_free):
        """Expected fragment, in GPUs, of a node with this much free CPU, memory and memory per device (in the
        node's own device order)."""
        if not node.gpus or not self._mix:
            return 0.0
        info = self._info(node)
        return self._fragmentation(info, cpu_free, memory_free, info[7](gpu_free))

    def _fragmentation(self, info, cpu_free, memory_free, gpu_free):
        # Free CPU and memory decide which shapes fit only through how many of the mix's distinct amounts they
        # reach, so the per-shape part is remembered per node kind, those two counts and the free memory per device
        # (nodes of one kind pass through the same states: all of them start empty).
        key = (info[0], bisect_right(self._cpus, cpu_free), bisect_right(self._memories, memory_free), tuple(gpu_free))
        entry = self._memo.get(key)
        if entry is None:
            if len(self._memo) >= MEMO_SIZE:
                self._memo.clear()      # bounded: early states (the shared ones) are the ones worth keeping
            entry = self._memo[key] = self._shaped(info, key[1], key[2], gpu_free)
        idle, shaped = entry
        if idle <= 0.0 or not self.starvation:
            return shaped if idle > 0.0 else 0.0
        # Beyond FGD, which asks only whether one more request of each shape fits: the idle GPUs that the
        # node's free CPU and memory cannot feed at the mix's CPU and memory per GPU are stranded too.
        cpu_per_gpu, memory_per_gpu = info[3], info[4]
        starved = 0.0
        if cpu_per_gpu > 0:
            starved = max(starved, idle - max(cpu_free, 0) / cpu_per_gpu)
        if memory_per_gpu > 0:
            starved = max(starved, idle - max(memory_free, 0) / memory_per_gpu)
        return starved + shaped

    def _kind(self, node):
        """Nodes whose devices are alike, in any order, have the same layout and needs: one name stands for them
        all. (kind, a function that puts per-device values of the node in the kind's order (sorted by model and
        memory), each device's position in that order or None when the node's devices are already in it)."""
        found = self._kinds.get(node.name)
        if found is None:
            order = tuple(sorted(range(len(node.gpus)), key=lambda p: (node.gpus[p].model, node.gpus[p].memory, p)))
            signature = tuple((node.gpus[p].model, node.gpus[p].memory) for p in order)
            overhead = MPS_SERVER_MEMORY if node.gpu_sharing == GPU_SHARING_MPS else 0   # model.gpu_overhead of a share
            if overhead:
                signature += (node.gpu_sharing,)       # alike devices that host MPS servers fit shares differently
            kind = self._kind_names.setdefault(signature, node.name)
            if kind not in self._kind_devices:
                self._kind_overhead[kind] = overhead
                devices = self._kind_devices[kind] = tuple(node.gpus[p] for p in order)
                self._kind_sizes[kind] = (tuple(float(device.memory) for device in devices),
                                          tuple(device.memory for device in devices))
            if order == tuple(range(len(order))):
                found = (kind, tuple, None)
            else:
                rank = [0] * len(order)
                for sorted_position, position in enumerate(order):
                    rank[position] = sorted_position
                found = (kind, itemgetter(*order), tuple(rank))
            self._kinds[node.name] = found
        return found

    @staticmethod
    def _shaped(info, cpu_rank, memory_rank, gpu_free):
        """(idle GPUs, the fragment the mix's shapes see) for free CPU and memory that reach ``cpu_rank`` and
        ``memory_rank`` of the mix's distinct CPU and memory amounts."""
        sizes = info[2]
        shares = list(map(truediv, gpu_free, info[1]))
        idle = sum(shares)
        if idle <= 0.0:
            return 0.0, 0.0
        # Every shape strands all idle GPUs, except that a shape that fits strands only the devices too full for
        # it: the usable devices' share is taken back for each. A shape that cannot use this node's models at all
        # counts its idle GPUs in proportion to how scarce its own models are (its share of the mix over its share
        # of the cluster's GPUs), so work that fits anywhere leaves a scarce model to the work that needs it.
        result = info[5] * idle
        for wanted, positions, members in info[6]:
            usable = 0
            usable_share = 0.0
            for position in positions:
                free = gpu_free[position]
                if (free == sizes[position]) if wanted is None else (free >= wanted):
                    usable += 1
                    usable_share += shares[position]
            if not usable:
                continue
            for count, shapes in members:
                if usable >= count:
                    for cpu, memory, share in shapes:
                        if cpu < cpu_rank and memory < memory_rank:
                            result -= share * usable_share
        return idle, result

    def _now(self, node_state):
        """[state, version, free memory per device, free CPU, free memory, fragmentation or None, CPU and memory
        that CPU work may take without changing the fragmentation, info] of the node as it is, cached per node state
        and version; the fragmentation is computed when first asked."""
        cached = self._current.get(node_state.name)
        if cached is not None and cached[0] is node_state and cached[1] == node_state.version:
            return cached
        node = node_state.node
        info = self._infos.get(node.name) or self._info(node)
        used = node_state.gpu_used
        # Most reservations on a GPU node take CPU and memory only: the devices' part is kept while they are unchanged.
        devices = self._devices_now.get(node_state.name)
        if devices is not None and devices[0] is node_state and devices[1] == used:
            free, idle = devices[2], devices[3]
        else:
            free = tuple(map(sub, info[2], info[7](used)))
            idle = sum(map(truediv, free, info[1]))
            self._devices_now[node_state.name] = (node_state, list(used), free, idle)
        cpu_free, memory_free = node.cpu - node_state.cpu_used, node.memory - node_state.memory_used
        if idle <= 0.0:
            spare = (cpu_free, memory_free, True)      # no GPU memory left to strand: CPU work changes nothing here
        else:
            # CPU work that leaves enough for every shape and for feeding every idle GPU changes nothing either.
            spare = (cpu_free - max(self._largest[0], idle * info[3]),
                     memory_free - max(self._largest[1], idle * info[4]), False)
        cached = self._current[node_state.name] = [node_state, node_state.version, free, cpu_free, memory_free, None,
                                                   spare, info]
        return cached

    def score(self, cycle, cluster, instance, node_state):
        if not node_state.node.gpus:
            return 0.0
        now = self._current.get(node_state.name)
        if now is None or now[0] is not node_state or now[1] != node_state.version:
            now = self._now(node_state)
        service = instance.service
        requests = self._requests[service.name]
        free = now[2]
        info = now[7]
        if service.resources.gpu is None:
            spare = now[6]
            if spare[2] or (requests.cpu <= spare[0] and requests.memory <= spare[1]):
                return 0.0
            chosen = ()
        else:
            rank = info[8]
            chosen = gpu_choice(cycle, instance, node_state) or ()
            chosen = tuple(chosen) if rank is None else tuple((rank[position], take) for position, take in chosen)
        key = None
        if instance.previous is None:
            # The score is a function of this key: the node's kind and state in the kind's device order, and the
            # devices the instance would take there (GPU's best fit breaks ties by index, which differs by node).
            key = (service.name, info[0], now[3], now[4], free, chosen)
            known = self._scores.get(key)
            if known is not None:
                return known
        if chosen:
            free = list(free)
            # The devices lose the grant and, for a share on an MPS node, its server's memory.
            extra = self._kind_overhead[info[0]] if service.resources.gpu.memory is not None else 0
            for position, take in chosen:
                free[position] -= take + extra
        before = now[5]
        if before is None:
            before = now[5] = self._fragmentation(info, now[3], now[4], now[2])
        score = before - self._fragmentation(info, now[3] - requests.cpu, now[4] - requests.memory, free)
        if key is not None:
            if len(self._scores) >= MEMO_SIZE:
                self._scores.clear()
            self._scores[key] = score
        return score

    def scores_alike(self):
        # No GPU work in the catalog: every node would score the same.
        return not self._catalog

    def normalize_score(self, raw):
        # The logistic of the change in GPUs, as the paper's simulator maps it (there in thousandths of a GPU / 1000).
        if raw == 0.0:
            return 50.0     # most nodes: the placement changes nothing
        if raw < -50.0:
            return 0.0
        return 100.0 / (1.0 + math.exp(-raw))
