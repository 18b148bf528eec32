# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Sidecars: an app instance and its sidecars share a node, so they are fitted as one.

PreFilter puts the instance's total (model.pod_requests: the sidecars' CPU, memory and ports added to its own,
like the containers of one pod) in the cycle state, where the other plugins read it.
"""

from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.framework import OK, PreFilterPlugin


class Sidecars(PreFilterPlugin):
    name = "Sidecars"

    def __init__(self, problem):
        super().__init__(problem)
        self._requests = problem.requests()

    def requests(self, service):
        return self._requests[service.name]

    def pre_filter(self, cycle, cluster, instance):
        cycle["requests"] = self._requests[instance.service.name]
        return OK
