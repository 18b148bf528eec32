# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Why an instance fits nowhere: kube's FitError, "0/N nodes are available: 3 Insufficient cpu, ...".

Every node is asked again, its first refusal counted (framework.reasons_histogram). The instances of one class fail
the same way until something is bound, so a class keeps its last message (Candidates.diagnosis) and the next
instance that fails with nothing bound since reuses it.
"""

from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.framework import reasons_histogram


def unschedulable_message(attempt, instance, status, cycle, filters):
    """The message for ``instance``, which fits on no node of ``attempt``; ``status``, ``cycle`` and ``filters`` are
    its PreFilter's (a failed PreFilter speaks for every node)."""
    nodes = len(attempt.cluster.nodes)
    if not status.ok:
        return "0/%d nodes are available: %s." % (nodes, "; ".join(status.reasons))
    shared = cycle.node_names is None and instance.previous is None
    candidates = attempt._candidates_for(instance.service) if shared else None  # pylint: disable=protected-access
    if shared and candidates.diagnosis is not None and candidates.diagnosis[0] == len(attempt.bound):
        return candidates.diagnosis[1]
    statuses = node_statuses(attempt, instance, cycle, filters)
    message = "0/%d nodes are available: %s." % (nodes, reasons_histogram(statuses))
    if shared:
        # Nothing was bound since: the next instance of the class fails the same way.
        candidates.diagnosis = (len(attempt.bound), message)
    return message


def node_statuses(attempt, instance, cycle, filters):
    """(node name, the first refusal there) for every node of the attempt."""
    framework, cluster = attempt.framework, attempt.cluster
    statuses = []
    previous = instance.previous_node()
    for name, node_state in cluster.nodes.items():
        if cycle.node_names is not None and name not in cycle.node_names:
            statuses.append((name, _Reason(cycle.outside_reason)))
            continue
        status = framework.run_static_filters(filters, instance, node_state.node, name == previous)
        if status.ok:
            status = framework.run_filters(filters.dynamic, cycle, cluster, instance, node_state)
        statuses.append((name, status))
    return statuses


class _Reason:
    def __init__(self, reason):
        self.reasons = (reason,)
