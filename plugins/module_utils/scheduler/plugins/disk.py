# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Disk: an instance's disk volumes (resources.disk, the sum of their sizes) fit on the node's data filesystem.

A node's room is the size of its data filesystem (nodes.<n>.disk), less what the instances placed there ask: requests
against capacity, as kube schedules ephemeral storage and local volumes. Free space is not the measure: it shrinks as
instances write, and a plan from it would move work as data grows. A node that did not report its data filesystem has
no room for a disk request.
"""

from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.framework import (
    OK, SKIPPED, FilterPlugin, PreFilterPlugin, ReservePlugin, Status,
)

NOT_REPORTED = "node(s) did not report their data filesystem (disk)"
INSUFFICIENT = "Insufficient disk space"


class Disk(PreFilterPlugin, FilterPlugin, ReservePlugin):
    name = "Disk"
    node_local = True
    service_only = True

    def pre_filter(self, cycle, cluster, instance):
        return OK if instance.service.resources.disk else SKIPPED

    def filter_static(self, instance, node, staying):
        size = instance.service.resources.disk
        if not size:
            return OK
        if node.disk is None:
            return Status.unschedulable(NOT_REPORTED, self.name)
        if size > node.disk:
            return Status.unschedulable(INSUFFICIENT, self.name)
        return OK

    def filter(self, cycle, cluster, instance, node_state):
        size = instance.service.resources.disk
        if size and node_state.disk_used + size > (node_state.node.disk or 0):
            return Status.unschedulable(INSUFFICIENT, self.name)
        return OK

    def reserve(self, cycle, cluster, instance, node_state, placement):
        node_state.disk_used += instance.service.resources.disk

    def unreserve(self, cycle, cluster, instance, node_state, placement):
        node_state.disk_used -= instance.service.resources.disk
