# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""AntiAffinity: a service stays off nodes that run any service it lists, and vice versa.

The rule is symmetric (A listing B also keeps B off A's nodes), covers sidecars,
and a service that lists itself spreads its replicas one per node. It is read
from the gangplank.io/service.<name> labels the scheduler plants on each node.

Reserve records on the node the instance's service and its sidecars' (model.pod_requests), kept per service by the
plugin itself (its own view): it keeps nothing in the cycle state.
"""

from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.framework import OK, SKIPPED, FilterPlugin, PreFilterPlugin, ReservePlugin, Status
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.model import pod_requests


def service_conflicts(services):
    """Per service, the services its instances may not share a node with (the exact solver reads it too)."""
    avoid = {name: set(service.anti_affinity) for name, service in services.items()}
    for name, service in services.items():
        for other in service.anti_affinity:
            avoid[other].add(name)
    # An instance brings its sidecars: it avoids what any of them avoids.
    return {name: frozenset().union(*(avoid[member] for member in pod_requests(services, service).services))
            for name, service in services.items()}


class AntiAffinity(PreFilterPlugin, FilterPlugin, ReservePlugin):
    name = "AntiAffinity"
    node_local = True
    service_only = True

    def __init__(self, problem):
        super().__init__(problem)
        self._conflicts = service_conflicts(problem.services)
        self._members = {name: requests.services for name, requests in problem.requests().items()}

    def pre_filter(self, cycle, cluster, instance):
        return OK if self._conflicts[instance.service.name] else SKIPPED

    def filter(self, cycle, cluster, instance, node_state):
        if not self._conflicts[instance.service.name].isdisjoint(node_state.services):
            return Status.unschedulable("node(s) didn't satisfy anti-affinity rules", self.name)
        return OK

    def reserve(self, cycle, cluster, instance, node_state, placement):
        node_state.add_services(self._members[instance.service.name])

    def unreserve(self, cycle, cluster, instance, node_state, placement):
        # Replicas of a service may share a node: the service leaves it with the last of them.
        node_state.remove_services(self._members[instance.service.name])
