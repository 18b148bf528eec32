# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NodeSelector: every key/value of the service's node_selector must be a label of the node.

Only the node's own labels count (from the operator and the facts), not the
gangplank.io/service.* labels this scheduler plants: those change as it places.
"""

from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.framework import OK, FilterPlugin, Status


class NodeSelector(FilterPlugin):
    name = "NodeSelector"

    def filter_static(self, instance, node, staying):
        for key, value in instance.service.node_selector.items():
            if node.labels.get(key) != value:
                return Status.unschedulable("node(s) didn't match node selector", self.name)
        return OK
