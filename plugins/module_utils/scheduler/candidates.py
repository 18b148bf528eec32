# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Equivalence classes and their candidate heaps: where the greedy pass looks for a node.

Instances whose requirements are the same (``equivalence_key``, kube's equivalence classes) share one heap of their
feasible nodes by score (``Candidates``), kept for the whole attempt: after a bind only the bound node is rescored,
and the node on top of the heap is re-checked before use (filters that read the whole cluster can only turn stricter).
"""

from __future__ import annotations

import heapq

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.model import Instance
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.anti_affinity import service_conflicts


def equivalence_key(problem, service, conflicts=None, extra=()):
    """What decides where an instance of ``service`` may go and how nodes score for it (kube's
    equivalence classes): services with the same key share one candidate heap. The name is left out;
    anti-affinity enters through the services each one conflicts with. The image is in it for user plugins
    (profiles.py), which may read it."""
    requests = problem.requests()[service.name]
    conflicts = service_conflicts(problem.services) if conflicts is None else conflicts
    return (service.resources, requests.cpu, requests.memory, requests.ports,
            tuple(sorted(conflicts[service.name])), tuple(sorted(service.node_selector.items())),
            service.tolerations, service.quota, service.image, service.cpu_pinning, len(service.dynamic_ports)) + extra


class Candidates:
    """The feasible nodes of one equivalence class, as a heap of (-score, node name, node version).

    Nodes bound since the heap last looked (``seen``, a position in the attempt's bind log) are
    rescored before it answers, so every class keeps its heap for the whole attempt.
    """

    def __init__(self, attempt, service):
        self.attempt = attempt
        # A stand-in replica with no history: what every instance of the class shares.
        self.instance = Instance(service, 0, None)
        framework, cluster = attempt.framework, attempt.cluster
        self.status, self.cycle, self.filters = framework.run_pre_filter(cluster, self.instance)
        # What a node on top of the heap is checked against again before use: its version says whether its own
        # state changed; only filters that read the rest of the cluster (quotas) can have turned stricter.
        self.recheck = [plugin for plugin in self.filters.dynamic if not plugin.node_local]
        self.heap = []
        self.diagnosis = None
        self.seen = len(attempt.bound)
        self.generation = attempt.generation
        if self.status.ok:
            self._fill()

    def _fill(self):
        self.heap = []
        self.generation = self.attempt.generation
        for node_state in self.attempt.cluster.nodes.values():
            self.push(node_state, heap=False)
        heapq.heapify(self.heap)

    def push(self, node_state, heap=True):
        attempt = self.attempt
        if not attempt.static_ok(self.instance, node_state.node, self.filters):
            return
        if not attempt.framework.run_filters(self.filters.dynamic, self.cycle, attempt.cluster, self.instance,
                                             node_state).ok:
            return
        score = attempt.framework.run_score(attempt.framework.shared_scorers, self.cycle, attempt.cluster,
                                            self.instance, node_state)
        entry = (-score, node_state.name, node_state.version)
        if heap:
            heapq.heappush(self.heap, entry)
        else:
            self.heap.append(entry)

    def refresh(self):
        """Rescore the nodes bound since this heap last looked (all of them, past a third of the cluster)."""
        bound = self.attempt.bound
        if self.generation != self.attempt.generation:
            # A score of every node changed (Framework.run_expect): all of them are scored again.
            self.seen = len(bound)
            self._fill()
            return
        if self.seen == len(bound):
            return
        changed = set(bound[self.seen:])
        self.seen = len(bound)
        nodes = self.attempt.cluster.nodes
        if 3 * len(changed) > len(nodes):
            self._fill()
            return
        for name in sorted(changed):
            self.push(nodes[name])

    def best(self, skip):
        """The best feasible node other than ``skip``, as (score, name), or None."""
        attempt = self.attempt
        self.refresh()
        set_aside = []
        found = None
        while self.heap:
            negative, name, version = self.heap[0]
            node_state = attempt.cluster.nodes[name]
            if version != node_state.version:
                heapq.heappop(self.heap)        # stale: its node was rescored after a bind
                continue
            if name == skip:
                set_aside.append(heapq.heappop(self.heap))
                continue
            if self.recheck and not attempt.framework.run_filters(self.recheck, self.cycle, attempt.cluster,
                                                                  self.instance, node_state).ok:
                heapq.heappop(self.heap)        # a cluster-wide limit (quota) was reached
                continue
            found = (-negative, name)
            break
        for entry in set_aside:
            heapq.heappush(self.heap, entry)
        return found


def better(current, candidate):
    """Higher score wins; on a tie the node name that sorts first."""
    if candidate is None:
        return current
    if current is None:
        return candidate
    if candidate[0] > current[0] or (candidate[0] == current[0] and candidate[1] < current[1]):
        return candidate
    return current
