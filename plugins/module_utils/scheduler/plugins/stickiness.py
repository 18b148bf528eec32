# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stickiness: instances stay where they run.

A stateful instance that ran on a node may only go back to that node (its data is
there); if the node is gone the plan fails. In the first attempt a stateless
instance is pinned the same way, so unchanged work never moves; only when the
gang cannot fit like that does a second attempt let stateless instances move,
and then this plugin's score still draws each one back to its previous node.
"""

from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.framework import OK, SKIPPED, PreFilterPlugin, ScorePlugin, Status


class Stickiness(PreFilterPlugin, ScorePlugin):
    name = "Stickiness"
    instance_specific = True

    def pre_filter(self, cycle, cluster, instance):
        previous = instance.previous
        if previous is None:
            return SKIPPED
        if instance.pinned:
            if previous.node not in cluster.nodes:
                return Status.unschedulable(
                    "stateful instance %s ran on node %s, which is no longer in the cluster"
                    % (instance.name, previous.node), self.name)
            cycle.restrict({previous.node}, "node(s) were not the node the stateful instance runs on")
        elif not cluster.moves_allowed and instance.name not in cluster.released and previous.node in cluster.nodes:
            cycle.restrict({previous.node}, "node(s) were not the instance's previous node")
        return OK

    def score(self, cycle, cluster, instance, node_state):
        previous = instance.previous
        return 100.0 if previous is not None and previous.node == node_state.name else 0.0
