# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NodeUnschedulable: a cordoned node takes no new instances; those already there stay.

Every-node services are let through, as kube's DaemonSet pods are: a cordoned node keeps its agents.
"""

from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.framework import OK, FilterPlugin, Status


class NodeUnschedulable(FilterPlugin):
    name = "NodeUnschedulable"

    def filter_static(self, instance, node, staying):
        if node.unschedulable and not staying and not instance.service.every_node:
            return Status.unschedulable("node(s) were unschedulable", self.name)
        return OK
