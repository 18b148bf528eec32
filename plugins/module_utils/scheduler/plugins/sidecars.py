# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Sidecars: an app instance and its sidecars share a node, so they are fitted as one.

PreFilter adds the sidecars' CPU, memory and ports to the instance's own, like the
containers of one pod; the other plugins read the total from the cycle state.
"""

from __future__ import annotations

from collections import namedtuple

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.framework import OK, PreFilterPlugin

Requests = namedtuple("Requests", "cpu memory ports services")


def pod_requests(services, service):
    """What an instance of ``service`` and its sidecars take together."""
    members = [service] + [services[name] for name in service.sidecars]
    return Requests(
        cpu=sum(member.resources.cpu for member in members),
        memory=sum(member.resources.memory for member in members),
        ports=tuple(sorted(port for member in members for port in member.ports)),
        services=tuple(member.name for member in members),
    )


class Sidecars(PreFilterPlugin):
    name = "Sidecars"

    def __init__(self, problem):
        super().__init__(problem)
        self._requests = {name: pod_requests(problem.services, service)
                          for name, service in problem.services.items()}

    def requests(self, service):
        return self._requests[service.name]

    def pre_filter(self, cycle, cluster, instance):
        cycle["requests"] = self._requests[instance.service.name]
        return OK
