# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hosts that are down: in the inventory and in the placement record, but not reachable in this run.

Like a NotReady node in Kubernetes, a down host keeps its place: its recorded instances and what they
reserve stay in the plan (the node it was planned with, from the record, cordoned), nothing new goes
there, and everything else is planned and deployed on the live hosts. Its instances wait for it.
Plain Python, no Ansible import.
"""

from __future__ import annotations

import copy

MAX_DOWN_HOSTS = 1000


def recorded_hosts(record):
    """The hosts the record places instances on or has a node entry for."""
    placement = record.get("placement") or {}
    hosts = {entry.get("node") for entry in placement.values() if isinstance(entry, dict)}
    hosts |= set(record.get("nodes") or {})
    return {host for host in hosts if isinstance(host, str)}


def down_nodes(record, live_hosts, inventory_hosts):
    """{host: node entry} for each host of the inventory that the record knows and that is not live: the node it was
    last planned with, cordoned. A host without a recorded node entry (a record of an older version) is left out
    (as if removed). The inventory's hosts are bounded by the caller's inventory; at most MAX_DOWN_HOSTS are kept."""
    nodes = record.get("nodes") or {}
    if not isinstance(nodes, dict):
        return {}
    live = set(live_hosts)
    down = {}
    for host in sorted(recorded_hosts(record) & set(inventory_hosts) - live)[:MAX_DOWN_HOSTS]:
        entry = nodes.get(host)
        if isinstance(entry, dict):
            down[host] = dict(copy.deepcopy(entry), unschedulable=True)
    return down


def waiting(placements, down):
    """{host: [instance, ...]}: the instances of the plan that wait for their down host."""
    result = {host: [] for host in down}
    for name, placement in placements.items():
        if placement.get("node") in result:
            result[placement["node"]].append(name)
    return {host: sorted(names) for host, names in sorted(result.items())}


def waiting_lines(waits):
    """The report of what waits for which host, one line per host."""
    return ["down: %s (unreachable or left out of this run): %s wait for it"
            % (host, ", ".join(names) if names else "no instances") for host, names in waits.items()]
