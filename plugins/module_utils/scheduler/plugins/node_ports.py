# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NodePorts: a host port has one user per node (the instance or one of its sidecars)."""

from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.framework import OK, SKIPPED, FilterPlugin, PreFilterPlugin, ReservePlugin, Status


class NodePorts(PreFilterPlugin, FilterPlugin, ReservePlugin):
    name = "NodePorts"
    node_local = True
    service_only = True

    def __init__(self, problem):
        super().__init__(problem)
        self._requests = problem.requests()

    def pre_filter(self, cycle, cluster, instance):
        return OK if self._requests[instance.service.name].ports else SKIPPED

    def filter(self, cycle, cluster, instance, node_state):
        for port in cycle["requests"].ports:
            if port in node_state.ports:
                return Status.unschedulable("node(s) didn't have free ports for the requested host ports",
                                            self.name)
        return OK

    def reserve(self, cycle, cluster, instance, node_state, placement):
        node_state.ports.update(cycle["requests"].ports)

    def unreserve(self, cycle, cluster, instance, node_state, placement):
        # A host port is one instance's on a node (Filter), so it is this one's to give back.
        node_state.ports.difference_update(cycle["requests"].ports)
