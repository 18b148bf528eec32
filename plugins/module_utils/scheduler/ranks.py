# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Deployment ranks: dependency levels from depends_on.

Rank 0 holds the services that depend on nothing; a service's rank is one more
than the highest rank it depends on. Sidecars are deployed with their app, so
they have no rank of their own. Cycles are rejected when the problem is parsed.
"""

from __future__ import annotations

from graphlib import TopologicalSorter


def ranks(services):
    graph = {name: list(service.depends_on) for name, service in services.items() if not service.sidecar}
    sorter = TopologicalSorter(graph)
    sorter.prepare()
    levels = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready())
        levels.append(ready)
        sorter.done(*ready)
    return levels
