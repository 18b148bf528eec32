# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Quota: groups of services with a min and a max on what they request in total.

``max`` caps a group's total use. ``min`` is reserved for its group: after every
placement, the sum over groups of max(min, used), plus what services outside any
group use, must fit the cluster's totals. Dimensions: cpu, memory, nvme (bytes),
gpu_memory (bytes taken on GPUs) and gpu: the devices the group occupies, wholly
or in part, so instances of a group that share a device count it once (GPUs are
shared by memory; counting each share as a device would forbid what fits).
Usage only grows during an attempt, so a node this plugin rejects stays rejected.
"""

from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.framework import (
    OK, SKIPPED, FilterPlugin, PermitPlugin, PreFilterPlugin, ReservePlugin, Status,
)
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.model import QUOTA_DIMENSIONS
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.gpu import gpu_choice
from ansible_collections.gangplank.platform.plugins.module_utils.quantity import format_cpu, format_size


def _show(dimension, amount):
    """An amount of a quota dimension as words: 6 CPUs, 500m CPU, 40Gi of memory, 4 GPUs, 160Gi of GPU memory."""
    if dimension == "cpu":
        return "%s CPU%s" % (format_cpu(amount), "s" if amount % 1000 == 0 and amount != 1000 else "")
    if dimension == "gpu":
        return "%d GPU%s" % (amount, "" if amount == 1 else "s")
    return "%s of %s" % (format_size(amount), {"memory": "memory", "gpu_memory": "GPU memory", "nvme": "NVMe"}[dimension])


class Quota(PreFilterPlugin, FilterPlugin, ReservePlugin, PermitPlugin):
    name = "Quota"

    def __init__(self, problem):
        super().__init__(problem)
        self._requests = problem.requests()
        self._reserved = sorted({dim for quota in problem.quotas.values() for dim in quota.min})
        self._limits = {name: sorted(quota.max.items()) for name, quota in problem.quotas.items()}
        self._base = {}     # service name -> its request without devices (copied, never changed)
        # Per reserved dimension, each group's min there (0 where it has none).
        self._minimums = [(dim, [(name, quota.min.get(dim, 0)) for name, quota in problem.quotas.items()])
                          for dim in self._reserved]
        self._device_bound = {}     # service name -> what _depends_on_devices answers

    def _request(self, cluster, instance, devices=None):
        """The instance's request per dimension.

        ``devices`` are the (uuid, bytes) it would take on a given node; without them (before a
        node is chosen) the GPU dimensions are counted at their least: no new device, and the
        shared memory asked for.
        """
        service = instance.service
        base = self._base.get(service.name)
        if base is None:
            requests = self._requests[service.name]
            base = self._base[service.name] = dict.fromkeys(QUOTA_DIMENSIONS, 0)
            base["cpu"] = requests.cpu
            base["memory"] = requests.memory
            if service.resources.gpu is not None:
                base["gpu_memory"] = service.resources.gpu.count * (service.resources.gpu.memory or 0)
            if service.resources.nvme is not None:
                base["nvme"] = service.resources.nvme.size
        if devices is None or service.resources.gpu is None:
            return base
        request = dict(base)
        occupied = cluster.quota_devices.get(service.quota, cluster.unquoted_devices)
        request["gpu"] = len({uuid for uuid, _taken in devices} - occupied)
        request["gpu_memory"] = sum(taken for _uuid, taken in devices)
        return request

    def _check(self, cluster, instance, request, per_node=False):
        """OK, or why not; ``per_node``: the reason is counted per node ("2 node(s) would take ..."), else it speaks for
        the whole cluster."""
        group = instance.service.quota if instance is not None else None
        if group is not None:
            used = cluster.quota_used[group]
            for dim, limit in self._limits[group]:
                if used[dim] + request[dim] > limit:
                    return Status.unschedulable(
                        "%s quota %s to %s, above its max of %s" % (
                            "node(s) would take" if per_node else "placing it would take", group,
                            _show(dim, used[dim] + request[dim]), _show(dim, limit)),
                        self.name)
        quota_used = cluster.quota_used
        for dim, minimums in self._minimums:
            total = cluster.unquoted_used[dim] + (request[dim] if group is None and instance is not None else 0)
            for name, minimum in minimums:
                used = quota_used[name][dim] + (request[dim] if name == group else 0)
                total += minimum if minimum > used else used
            if total > cluster.capacity[dim]:
                needed = "%s needed in all, the cluster has %s" % (_show(dim, total), _show(dim, cluster.capacity[dim]))
                return Status.unschedulable(
                    "node(s) would leave too little for the quotas' min reservations (%s)" % needed if per_node else
                    "the quotas' min reservations cannot be kept (%s)" % needed, self.name)
        return OK

    def _depends_on_devices(self, instance):
        """Whether the devices a node would give change this instance's quota check."""
        service = instance.service
        known = self._device_bound.get(service.name)
        if known is None:
            limited = set(self._reserved)
            if service.quota is not None:
                limited |= set(self.problem.quotas[service.quota].max)
            known = self._device_bound[service.name] = service.resources.gpu is not None and bool(
                limited & {"gpu", "gpu_memory"})
        return known

    def pre_filter(self, cycle, cluster, instance):
        if instance.service.quota is None and not self._reserved:
            return SKIPPED
        status = self._check(cluster, instance, self._request(cluster, instance))
        if not status.ok:
            return status
        return OK if self._depends_on_devices(instance) else SKIPPED

    def filter(self, cycle, cluster, instance, node_state):
        chosen = gpu_choice(cycle, instance, node_state) or []
        devices = [(node_state.node.gpus[position].uuid, taken) for position, taken in chosen]
        return self._check(cluster, instance, self._request(cluster, instance, devices), per_node=True)

    def reserve(self, cycle, cluster, instance, node_state, placement):
        devices = [(claim.device.uuid, claim.memory) for claim in placement.get("gpus", ())]
        request = self._request(cluster, instance, devices)
        group = instance.service.quota
        used = cluster.quota_used[group] if group else cluster.unquoted_used
        for dim in QUOTA_DIMENSIONS:
            used[dim] += request[dim]
        occupied = cluster.quota_devices[group] if group else cluster.unquoted_devices
        occupied.update(uuid for uuid, _taken in devices)
        holders = cluster.device_holders.setdefault(group, {})
        for uuid, _taken in devices:
            holders[uuid] = holders.get(uuid, 0) + 1

    def unreserve(self, cycle, cluster, instance, node_state, placement):
        # A GPU counts for its group until the last of the group's instances on it leaves.
        group = instance.service.quota
        occupied = cluster.quota_devices[group] if group else cluster.unquoted_devices
        holders = cluster.device_holders.setdefault(group, {})
        freed = 0
        for claim in placement.gpus:
            uuid = claim.device.uuid
            holders[uuid] -= 1
            if not holders[uuid]:
                del holders[uuid]
                occupied.discard(uuid)
                freed += 1
        request = dict(self._request(cluster, instance))
        request["gpu"] = freed
        request["gpu_memory"] = sum(claim.memory for claim in placement.gpus)
        used = cluster.quota_used[group] if group else cluster.unquoted_used
        for dim in QUOTA_DIMENSIONS:
            used[dim] -= request[dim]

    def permit(self, attempt):
        # The per-instance checks hold the reservations as instances are placed; this also holds
        # them for a gang with no instance at all (reservations alone larger than the cluster).
        return self._check(attempt.cluster, None, dict.fromkeys(QUOTA_DIMENSIONS, 0))
