# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""EveryNode (PreFilter): an instance of an every-node service goes to its own node and nowhere else.

Like kube's DaemonSet controller, which binds each daemon pod to one node: the problem makes one
instance, ``<service>@<node>``, per eligible node (model.every_node_eligible: the node selector and
NoSchedule/NoExecute tolerations), and this plugin restricts each to its node (kube's PreFilterResult).
Whether it fits there (CPU, memory, ports, devices) is the other filters' answer; when it does not, the
gang fails with their reasons. Cordoned nodes still get theirs (NodeUnschedulable lets them through).

An HTTP extender's verdict is the exception: a node it refuses for the service gets no instance at all (kube's
DaemonSet pod of that node stays pending; the rest is placed). plugins/extender.py's every_node_left_out takes those
instances out of the problem before any attempt, so the greedy pass, the exact solver and a rebalance never see
them, and the result names each in ``left_out``.
"""

from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.framework import OK, SKIPPED, PreFilterPlugin

OUTSIDE = "node(s) were not the every-node instance's node"


class EveryNode(PreFilterPlugin):
    name = "EveryNode"

    def pre_filter(self, cycle, cluster, instance):
        if instance.node is None:
            return SKIPPED
        cycle.restrict({instance.node}, OUTSIDE)
        return OK
