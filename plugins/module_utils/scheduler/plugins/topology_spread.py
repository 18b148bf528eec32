# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""TopologySpread: a service's instances spread evenly over the nodes' domains (kube's PodTopologySpread).

A constraint (model.SpreadConstraint) names a domain per node: the value of its label ``topology_key``, or the node
itself when the key is left out. The skew of a domain is its instances of the service minus those of the emptiest
eligible domain. ``DoNotSchedule`` refuses a node whose domain would pass ``max_skew`` with one more instance
(kube's Filter: "node(s) didn't match pod topology spread constraints"); ``ScheduleAnyway`` only scores the nodes
whose domain holds the fewest above the emptiest one highest (kube's Score).

The eligible domains (``spread_domains``) are those of the nodes that could take an instance by their labels, taints
and devices: the service's node_selector matched, every NoSchedule/NoExecute taint tolerated, not cordoned, and, when
it asks for them, enough GPUs of its models and an NVMe device of its label. Only they count for the emptiest domain
(kube counts every node its nodeAffinity accepts; a node that can never hold the instance would hold the minimum at 0).
Under DoNotSchedule an instance goes only to a node of an eligible domain, unless it stays on its previous node.

The counts are this plugin's own (per attempt, kept by its Reserve and Unreserve). The filter depends on the other
nodes of the domain and may turn looser as instances are placed, so an instance of a spread service is evaluated node
by node (its PreFilter restricts the candidates to every node, which takes it off the class heaps, candidates.py).
Permit checks the whole plan once more: a repair swap that took an instance off its node may have left a domain too
low, and such an attempt is refused (the exact solver, which states the constraint, then plans).
"""

from __future__ import annotations

import weakref

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.framework import (
    MAX_NODE_SCORE, OK, SKIPPED, FilterPlugin, PermitPlugin, PreFilterPlugin, ReservePlugin, ScorePlugin, Status,
)
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.model import every_node_eligible

REASON = "node(s) didn't match pod topology spread constraints"
MISSING = REASON + " (missing required label)"
STATE_KEY = "PreFilterTopologySpread"


def spread_eligible(service, node):
    """Whether ``node`` counts for ``service``'s spread (the module's docstring says which nodes do)."""
    if node.unschedulable or not every_node_eligible(service, node):
        return False
    gpu = service.resources.gpu
    if gpu is not None and sum(1 for device in node.gpus if gpu.matches(device)) < gpu.count:
        return False
    nvme = service.resources.nvme
    return nvme is None or any(nvme.label in device.labels for device in node.nvme)


def node_domain(node, constraint):
    """The domain ``node`` is in for ``constraint``: its name, or its label's value; None without the label."""
    if constraint.topology_key is None:
        return node.name
    return node.labels.get(constraint.topology_key)


def spread_domains(problem, service, constraint):
    """(node name -> its domain or None, the eligible domains as a sorted tuple) for ``constraint`` of ``service``."""
    domain_of = {name: node_domain(node, constraint) for name, node in problem.nodes.items()}
    eligible = sorted({domain_of[name] for name, node in problem.nodes.items()
                       if domain_of[name] is not None and spread_eligible(service, node)})
    return domain_of, tuple(eligible)


def skew_violations(problem, nodes_of):
    """The DoNotSchedule constraints a plan breaks, as messages: ``nodes_of`` maps a service name to the nodes its placed
    instances are on (one entry per instance). Used by Permit (and the same rule as the exact solver's)."""
    messages = []
    for name in sorted(nodes_of):
        service = problem.services[name]
        for constraint in service.topology_spread:
            if not constraint.required:
                continue
            domain_of, eligible = spread_domains(problem, service, constraint)
            counts = dict.fromkeys(eligible, 0)
            for node in nodes_of[name]:
                domain = domain_of.get(node)
                if domain is not None:
                    counts[domain] = counts.get(domain, 0) + 1
            if not eligible:
                continue
            least = min(counts[domain] for domain in eligible)
            worst = max(counts.values()) - least
            if worst > constraint.max_skew:
                messages.append("service %s: %d instance(s) more in one %s than in another, above its max_skew %d" % (
                    name, worst, "node" if constraint.topology_key is None else "%s domain" % constraint.topology_key,
                    constraint.max_skew))
    return messages


class _Spread:
    """One constraint of one service, as the plugin reads it."""

    __slots__ = ("index", "constraint", "domain_of", "eligible")

    def __init__(self, index, constraint, domain_of, eligible):
        self.index = index
        self.constraint = constraint
        self.domain_of = domain_of
        self.eligible = eligible


class TopologySpread(PreFilterPlugin, FilterPlugin, ScorePlugin, ReservePlugin, PermitPlugin):
    name = "TopologySpread"

    def __init__(self, problem):
        super().__init__(problem)
        self._spreads = {}
        for name, service in problem.services.items():
            if service.topology_spread and not service.sidecar:
                spreads = []
                for index, constraint in enumerate(service.topology_spread):
                    domain_of, eligible = spread_domains(problem, service, constraint)
                    spreads.append(_Spread(index, constraint, domain_of, frozenset(eligible)))
                self._spreads[name] = spreads
        self._soft = {name for name, spreads in self._spreads.items()
                      if any(not spread.constraint.required for spread in spreads)}
        self._all_nodes = frozenset(problem.nodes)
        # ClusterState -> service name -> constraint index -> domain -> instances there (this attempt's).
        self._counts = weakref.WeakKeyDictionary()

    def class_key(self, service):
        return service.topology_spread

    def _counts_of(self, cluster, service_name):
        by_service = self._counts.get(cluster)
        if by_service is None:
            by_service = self._counts[cluster] = {}
        counts = by_service.get(service_name)
        if counts is None:
            counts = by_service[service_name] = [{} for _spread in self._spreads[service_name]]
        return counts

    # --- PreFilter: the counts and the emptiest eligible domain, per constraint

    def pre_filter(self, cycle, cluster, instance):
        spreads = self._spreads.get(instance.service.name)
        if spreads is None:
            return SKIPPED
        counts = self._counts_of(cluster, instance.service.name)
        state = []
        for spread in spreads:
            here = counts[spread.index]
            least = min((here.get(domain, 0) for domain in spread.eligible), default=0)
            state.append((spread, here, least))
        cycle[STATE_KEY] = state
        if cycle.node_names is None:
            # Node by node, not from a class heap: the answer for a node changes with the other nodes of its domain.
            cycle.restrict(self._all_nodes, REASON)
        return OK

    # --- Filter

    def filter_static(self, instance, node, staying):
        spreads = self._spreads.get(instance.service.name)
        if spreads is None or staying:
            return OK
        for spread in spreads:
            if spread.constraint.required and spread.domain_of.get(node.name) not in spread.eligible:
                return Status.unschedulable(MISSING if spread.domain_of.get(node.name) is None else REASON, self.name)
        return OK

    def filter(self, cycle, cluster, instance, node_state):
        state = cycle.get(STATE_KEY)
        if state is None:
            return OK
        for spread, here, least in state:
            constraint = spread.constraint
            if not constraint.required:
                continue
            domain = spread.domain_of.get(node_state.name)
            if domain is None:
                continue            # only a staying instance gets here (filter_static)
            if here.get(domain, 0) + 1 - least > constraint.max_skew:
                return Status.unschedulable(REASON, self.name)
        return OK

    # --- Score: ScheduleAnyway constraints only

    def scores_alike(self):
        return not self._soft

    def scores_alike_for(self, service):
        return service.name not in self._soft

    def score(self, cycle, cluster, instance, node_state):
        state = cycle.get(STATE_KEY)
        if state is None:
            return MAX_NODE_SCORE
        above = 0
        for spread, here, least in state:
            if spread.constraint.required:
                continue
            domain = spread.domain_of.get(node_state.name)
            if domain is None:
                return 0.0          # kube scores a node without the label lowest
            above += here.get(domain, 0) - least
        return MAX_NODE_SCORE / (1 + above)

    # --- Reserve

    def reserve(self, cycle, cluster, instance, node_state, placement):
        self._count(cluster, instance, node_state.name, 1)

    def unreserve(self, cycle, cluster, instance, node_state, placement):
        self._count(cluster, instance, node_state.name, -1)

    def _count(self, cluster, instance, node_name, sign):
        spreads = self._spreads.get(instance.service.name)
        if spreads is None:
            return
        counts = self._counts_of(cluster, instance.service.name)
        for spread in spreads:
            domain = spread.domain_of.get(node_name)
            if domain is not None:
                here = counts[spread.index]
                here[domain] = here.get(domain, 0) + sign

    # --- Permit: the whole plan

    def permit(self, attempt):
        if not self._spreads or attempt.unplaced:
            return OK           # instances left unplaced: Coscheduling speaks
        nodes_of = {name: [] for name in self._spreads}
        for placement in attempt.placements:
            if placement.instance.service.name in nodes_of:
                nodes_of[placement.instance.service.name].append(placement.node)
        broken = skew_violations(self.problem, nodes_of)
        if broken:
            return Status.unschedulable("the topology spread is broken: %s" % "; ".join(broken), self.name)
        return OK
