# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVMe: one device on the node that carries the requested label, with the size free.

Devices are shared by size and chosen best-fit (least free space that fits, then
name); an instance staying on its node keeps the device its data is on.
"""

from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.framework import (
    OK, SKIPPED, FilterPlugin, PreFilterPlugin, ReservePlugin, ScorePlugin, Status,
)

# The NVMe plugin's cycle state: node name -> (node version, the device chosen there), written by nvme_choice.
STATE_KEY = "NVMe"


def choose_nvme(node_state, request, preferred=None):
    """The position of the device an instance would use on this node, or None."""
    label, size, used = request.label, request.size, node_state.nvme_used
    candidates = []
    for position, device in enumerate(node_state.node.nvme):
        if label in device.labels:
            free = device.size - used[position]
            if free >= size:
                candidates.append((device.name != preferred, free, device.name, position))
    return min(candidates)[3] if candidates else None


def preferred_device(instance, node_name):
    previous = instance.previous
    return previous.nvme if previous is not None and previous.node == node_name else None


def nvme_choice(cycle, instance, node_state):
    """choose_nvme for this instance (its previous device first), remembered in its cycle (under the NVMe
    plugin's STATE_KEY) for the node's current version (Filter, Score and Reserve all ask)."""
    choices = cycle.get(STATE_KEY)
    if choices is None:
        choices = cycle[STATE_KEY] = {}
    cached = choices.get(node_state.name)
    if cached is not None and cached[0] == node_state.version:
        return cached[1]
    chosen = choose_nvme(node_state, instance.service.resources.nvme, preferred_device(instance, node_state.name))
    choices[node_state.name] = (node_state.version, chosen)
    return chosen


class NVMe(PreFilterPlugin, FilterPlugin, ScorePlugin, ReservePlugin):
    name = "NVMe"
    node_local = True
    service_only = True

    def pre_filter(self, cycle, cluster, instance):
        return OK if instance.service.resources.nvme is not None else SKIPPED

    def filter_static(self, instance, node, staying):
        request = instance.service.resources.nvme
        if request is None:
            return OK
        labelled = [device for device in node.nvme if request.label in device.labels]
        if not labelled:
            return Status.unschedulable("node(s) had no NVMe device labelled %s" % request.label, self.name)
        if not any(device.size >= request.size for device in labelled):
            return Status.unschedulable("Insufficient NVMe space (%s)" % request.label, self.name)
        return OK

    def filter(self, cycle, cluster, instance, node_state):
        request = instance.service.resources.nvme
        if nvme_choice(cycle, instance, node_state) is None:
            return Status.unschedulable("Insufficient NVMe space (%s)" % request.label, self.name)
        return OK

    def scores_alike_for(self, service):
        return service.resources.nvme is None

    def score(self, cycle, cluster, instance, node_state):
        request = instance.service.resources.nvme
        if request is None:
            return 0.0
        position = nvme_choice(cycle, instance, node_state)
        if position is None:
            return 0.0
        free = node_state.nvme_free(position)
        return 100.0 if free == 0 else 100.0 * request.size / free

    def reserve(self, cycle, cluster, instance, node_state, placement):
        request = instance.service.resources.nvme
        if request is None:
            return
        position = nvme_choice(cycle, instance, node_state)
        node_state.nvme_used[position] += request.size
        placement["nvme"] = node_state.node.nvme[position]
        placement["nvme_size"] = request.size

    def unreserve(self, cycle, cluster, instance, node_state, placement):
        if placement.nvme is not None:
            node_state.add_nvme(placement.nvme, placement.nvme_size, -1)
