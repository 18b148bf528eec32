# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""TaintToleration: taints keep instances off nodes unless tolerated.

As in Kubernetes: NoSchedule keeps new instances off but lets running ones stay,
NoExecute also evicts running ones, PreferNoSchedule only lowers the score.
"""

from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.framework import OK, FilterPlugin, ScorePlugin, Status
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.model import (
    NO_EXECUTE, NO_SCHEDULE, PREFER_NO_SCHEDULE, toleration_index, tolerated,
)


def untolerated(service, taints):
    # model.tolerated: constant time per taint, so a node's taints cost their count, not count x tolerations.
    index = toleration_index(service)
    return [taint for taint in taints if not tolerated(index, taint)]


class TaintToleration(FilterPlugin, ScorePlugin):
    name = "TaintToleration"

    def filter_static(self, instance, node, staying):
        if not node.taints:
            return OK
        for taint in untolerated(instance.service, node.taints):
            if taint.effect == NO_EXECUTE or (taint.effect == NO_SCHEDULE and not staying):
                shown = taint.key if taint.value is None else "%s: %s" % (taint.key, taint.value)
                return Status.unschedulable("node(s) had untolerated taint {%s}" % shown, self.name)
        return OK

    def __init__(self, problem):
        super().__init__(problem)
        self._scores = {}
        self._preferred_off = {taint for node in problem.nodes.values() for taint in node.taints
                               if taint.effect == PREFER_NO_SCHEDULE}

    def scores_alike(self):
        return not self._preferred_off

    def scores_alike_for(self, service):
        # Every node scores 100 unless one of its PreferNoSchedule taints is not tolerated.
        return not untolerated(service, self._preferred_off)

    def score(self, cycle, cluster, instance, node_state):
        # Depends only on the service and the node's taints: computed once per pair.
        key = (instance.service.name, node_state.name)
        score = self._scores.get(key)
        if score is None:
            preferred_off = [t for t in untolerated(instance.service, node_state.node.taints)
                             if t.effect == PREFER_NO_SCHEDULE]
            score = self._scores[key] = 0.0 if preferred_off else 100.0
        return score
