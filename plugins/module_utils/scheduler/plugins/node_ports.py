# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NodePorts: a host port has one user per node (the instance or one of its sidecars).

A dynamic port (a name and a container port) takes one host port of the problem's port range on its node: a node
takes instances while its range has ports left (static ports never lie in the range; the binder picks the ports).

The ports an instance takes with its sidecars (model.pod_requests) depend on its service alone: the plugin keeps them
per service (its own view, built once per problem), so its PreFilter is asked once per service and it keeps nothing
in the cycle state.
"""

from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.framework import OK, SKIPPED, FilterPlugin, PreFilterPlugin, ReservePlugin, Status


class NodePorts(PreFilterPlugin, FilterPlugin, ReservePlugin):
    name = "NodePorts"
    node_local = True
    service_only = True

    def __init__(self, problem):
        super().__init__(problem)
        self._ports = {name: requests.ports for name, requests in problem.requests().items()}
        self._range_size = problem.port_range[1] - problem.port_range[0] + 1

    def pre_filter(self, cycle, cluster, instance):
        return OK if self._ports[instance.service.name] or instance.service.dynamic_ports else SKIPPED

    def filter(self, cycle, cluster, instance, node_state):
        for port in self._ports[instance.service.name]:
            if port in node_state.ports:
                return Status.unschedulable("node(s) didn't have free ports for the requested host ports",
                                            self.name)
        if node_state.dynamic_ports + len(instance.service.dynamic_ports) > self._range_size:
            return Status.unschedulable("node(s) didn't have free ports in the dynamic port range", self.name)
        return OK

    def reserve(self, cycle, cluster, instance, node_state, placement):
        node_state.ports.update(self._ports[instance.service.name])
        node_state.dynamic_ports += len(instance.service.dynamic_ports)

    def unreserve(self, cycle, cluster, instance, node_state, placement):
        # A host port is one instance's on a node (Filter), so it is this one's to give back.
        node_state.ports.difference_update(self._ports[instance.service.name])
        node_state.dynamic_ports -= len(instance.service.dynamic_ports)
