# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The greedy pass's repair: an instance that fits nowhere takes the room of one placed instance that can go elsewhere.

Local search after the greedy pass: each instance that fits nowhere (in the gang's order, by name) looks for a node
where it would fit without one placed, movable instance, which is then scheduled again elsewhere (its class heap, as in
the greedy pass); when that fails, both go back as they were. Greedy fills nodes one request at a time and leaves holes
no single request fits: one swap often closes one. Bounded by REPAIR_PAIRS pairs looked at and REPAIR_SWAPS swaps
tried; a class that found no swap is not looked at again until another swap succeeds (nothing changed for it).
"""

from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.problem_format import MAX_GPU_CORES
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.model import gpu_overhead

# The repair pass's bounds: (unplaced, placed) instance pairs it looks at, and swaps it tries.
REPAIR_PAIRS = 2000000
REPAIR_SWAPS = 20000


class RepairPass:
    """One repair pass over an attempt (scheduler/attempt.py) whose greedy pass left instances unplaced."""

    def __init__(self, attempt):
        self.attempt = attempt
        self.requests = attempt.problem.requests()
        self.by_node = {}           # node name -> the placements on it, kept up to date by the swaps
        for placement in attempt.placements:
            self.by_node.setdefault(placement.node, []).append(placement)
        self.pairs = 0
        self.swaps = 0

    def run(self):
        attempt = self.attempt
        framework, cluster = attempt.framework, attempt.cluster
        waiting = [instance for instance in attempt.gang if instance.name in attempt.unplaced]
        hopeless = set()            # classes that found no swap since the last one that succeeded
        for instance in waiting:
            key = attempt._class_key(instance.service)  # pylint: disable=protected-access
            if key in hopeless:
                continue
            status, cycle, filters = framework.run_pre_filter(cluster, instance)
            if not status.ok or cycle.node_names is not None:
                continue
            made = self._make_room(instance, filters)
            if made is None:
                break               # the bounds are reached
            if made:
                hopeless.clear()
            else:
                hopeless.add(key)
        attempt._compact()  # pylint: disable=protected-access

    def _make_room(self, instance, filters):
        """Try the swaps that could place ``instance``, node by node: True once one did, False when none did, None
        when the bounds were reached first."""
        attempt = self.attempt
        wanted = self.requests[instance.service.name]
        gpu = instance.service.resources.gpu
        for name, node_state in attempt.cluster.nodes.items():
            node = node_state.node
            if not attempt.static_ok(instance, node, filters):
                continue
            cpu_free, memory_free = node.cpu - node_state.cpu_used, node.memory - node_state.memory_used
            for placement in list(self.by_node.get(name, ())):
                self.pairs += 1
                if self.pairs > REPAIR_PAIRS or self.swaps >= REPAIR_SWAPS:
                    return None
                got = self.requests[placement.instance.service.name]
                if cpu_free + got.cpu < wanted.cpu or memory_free + got.memory < wanted.memory:
                    continue
                if gpu is not None and not gpu_room(node_state, placement, gpu):
                    continue
                if not self._may_leave(placement.instance, name):
                    continue
                self.swaps += 1
                if self._swap_in(instance, node_state, placement):
                    return True
        return False

    def _may_leave(self, instance, node_name):
        """Whether ``instance`` may leave ``node_name`` for another node that takes it now."""
        return movable(self.attempt, instance) and fits_elsewhere(self.attempt, instance, node_name)

    def _swap_in(self, instance, node_state, placement):
        """swap(), with the placements per node and the attempt's unplaced instances brought up to date."""
        placed, other_placed = swap(self.attempt, instance, node_state, placement)
        here = self.by_node[node_state.name]
        here.remove(placement)
        if placed is not None:
            here.append(placed)
        if other_placed is not None:
            self.by_node.setdefault(other_placed.node, []).append(other_placed)
        if placed is None:
            return False
        del self.attempt.unplaced[instance.name]
        return True


def movable(attempt, instance):
    """Whether the repair pass may take this placed instance off its node: it was placed anew by this attempt,
    or it is stateless and this attempt lets such instances move; never a pinned or every-node instance."""
    if instance.pinned or instance.node is not None or instance.service.preemptible:
        return False
    return instance.previous is None or (attempt.cluster.moves_allowed and not instance.service.stateful)


def fits_elsewhere(attempt, instance, node_name):
    """Whether a node other than ``node_name`` takes ``instance`` now: its class heap's answer. That holds for
    a movable instance with a history too: it may move (else it is not movable), and its history only widens
    what its own node accepts (a NoSchedule taint lets it stay), which is the node it leaves."""
    candidates = attempt._candidates_for(instance.service)  # pylint: disable=protected-access
    return candidates.status.ok and candidates.best(skip=node_name) is not None


def swap(attempt, instance, node_state, placement):
    """``instance`` onto ``node_state`` in place of ``placement``'s instance, which is scheduled again. Returns
    (the instance's placement, the other's new placement) when it worked, else (None, the other's placement
    restored where it was)."""
    # pylint: disable=protected-access
    framework, cluster = attempt.framework, attempt.cluster
    other = placement.instance
    status, other_cycle, _filters = framework.run_pre_filter(cluster, other)
    if not status.ok:
        return None, placement
    attempt._unbind(placement, other_cycle)
    status, cycle, filters = framework.run_pre_filter(cluster, instance)
    if status.ok and cycle.node_names is None and \
            attempt._evaluate(instance, cycle, filters, node_state, scored=False) is not None:
        placed = attempt._bind(instance, cycle, node_state)
        if attempt._schedule_one(other, may_fail=False):
            return placed, attempt.placements[-1]
        attempt._unbind(placed, cycle)
    # Back where it was, on the same devices (its placement as history: Stickiness keeps it to that node). The
    # node took it before and has the same room again; should it not, it is scheduled like any other.
    count = len(attempt.placements)
    attempt.adopt(placement)
    if len(attempt.placements) == count and not attempt._schedule_one(other, may_fail=True):
        return None, None
    return None, attempt.placements[-1]


def gpu_room(node_state, placement, request):
    """Whether ``request`` could have its devices on this node once ``placement`` has left it: a quick bound
    before the real check (the filters)."""
    node = node_state.node
    leaving = placement.instance.service.resources.gpu
    # What the leaving instance gives back per device: its grant, its MPS server (model.gpu_overhead) and its cores.
    extra = gpu_overhead(node, leaving) if leaving is not None else 0
    given = {claim.device.uuid: claim.memory + extra for claim in placement.gpus}
    given_cores = (leaving.cores or 0) if leaving is not None else 0
    needed = None if request.memory is None else request.memory + gpu_overhead(node, request)
    usable = 0
    for position, device in enumerate(node.gpus):
        if not request.matches(device):
            continue
        used = node_state.gpu_used[position] - given.get(device.uuid, 0)
        if request.cores is not None and node_state.gpu_cores[position] + request.cores - (
                given_cores if device.uuid in given else 0) > MAX_GPU_CORES:
            continue
        if (used == 0) if needed is None else (device.memory - used >= needed):
            usable += 1
    return usable >= request.count
