# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What one scheduling attempt has assumed so far: per-node usage and per-quota usage.

An attempt starts from an empty ``ClusterState``; nothing outside the attempt sees
it, so an attempt that fails is simply dropped (all or nothing).
"""

from __future__ import annotations

from typing import Dict, FrozenSet, Optional, Set

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.model import QUOTA_DIMENSIONS, gpu_overhead


class NodeState:
    """A node and what is reserved on it. ``version`` changes on every reservation."""

    __slots__ = ("node", "name", "cpu_used", "memory_used", "gpu_used", "gpu_cores", "nvme_used", "disk_used", "ports", "dynamic_ports", "services",
                 "version", "topology", "numa_pinned")

    def __init__(self, node):
        self.node = node
        self.name = node.name
        self.cpu_used = 0
        self.memory_used = 0
        # Bytes taken, per device position: the grants, plus each share's MPS server on a node that enforces shares
        # (model.gpu_overhead), as kube counts a pod's overhead against its node.
        self.gpu_used = [0] * len(node.gpus)
        self.gpu_cores = [0] * len(node.gpus)       # percent of the SMs the shares there ask (gpu.cores), per position
        self.nvme_used = [0] * len(node.nvme)       # bytes taken, per device position
        self.disk_used = 0                          # bytes of the data filesystem the disk volumes here ask
        self.ports = set()
        self.dynamic_ports = 0      # host ports of the port range the instances here take (one per dynamic port)
        # Services (and sidecars) running here -> how many instances here bring each (Unreserve takes one away).
        self.services: Dict[str, int] = {}
        self.version = 0
        self.topology = None        # (version, what taking each device alone costs): scheduler/topology.py's break_cost
        # cpu_pinning numa (plugins/numa_pinning.py): the set of NUMA nodes (a frozenset of ids) pinned instances here
        # run on -> the millicores they ask there in sum (sidecars included).
        self.numa_pinned: Dict[FrozenSet[int], int] = {}

    def add_services(self, names):
        """Record one more instance here that brings these services (its own and its sidecars)."""
        services = self.services
        for name in names:
            services[name] = services.get(name, 0) + 1

    def remove_services(self, names):
        """Undo add_services for one instance: a service leaves the node with the last instance that brought it."""
        services = self.services
        for name in names:
            services[name] -= 1
            if not services[name]:
                del services[name]

    def add_gpu_claims(self, claims, request, sign=1):
        """Take (``sign`` 1) or give back (-1) these GPU claims (model.GPUClaim) of an instance of ``request``
        (model.GPURequest) on this node's devices: their memory with the request's overhead here, and its cores."""
        if not claims:
            return
        positions = {device.uuid: position for position, device in enumerate(self.node.gpus)}
        overhead = gpu_overhead(self.node, request)
        cores = request.cores or 0
        for claim in claims:
            position = positions[claim.device.uuid]
            self.gpu_used[position] += sign * (claim.memory + overhead)
            self.gpu_cores[position] += sign * cores

    def add_nvme(self, device, size, sign=1):
        """Take (``sign`` 1) or give back (-1) ``size`` bytes of this node's NVMe device (model.NVMeDevice)."""
        position = [mine.name for mine in self.node.nvme].index(device.name)
        self.nvme_used[position] += sign * size

    def gpu_free(self, position):
        return self.node.gpus[position].memory - self.gpu_used[position]

    def nvme_free(self, position):
        return self.node.nvme[position].size - self.nvme_used[position]


class ClusterState:
    def __init__(self, problem):
        self.problem = problem
        self.nodes = {name: NodeState(node) for name, node in problem.nodes.items()}
        self.quota_used: Dict[str, Dict[str, int]] = {name: dict.fromkeys(QUOTA_DIMENSIONS, 0)
                                                      for name in problem.quotas}
        self.unquoted_used = dict.fromkeys(QUOTA_DIMENSIONS, 0)
        # GPU uuids each quota group (and the ungrouped services) occupies: its "gpu" usage.
        self.quota_devices: Dict[str, Set[str]] = {name: set() for name in problem.quotas}
        self.unquoted_devices: Set[str] = set()
        # Per quota group (None: the ungrouped services), how many of its instances hold each GPU (for Unreserve).
        self.device_holders: Dict[Optional[str], Dict[str, int]] = {}
        self.capacity = _capacity(problem.nodes.values())


def _capacity(nodes):
    capacity = dict.fromkeys(QUOTA_DIMENSIONS, 0)
    for node in nodes:
        capacity["cpu"] += node.cpu
        capacity["memory"] += node.memory
        capacity["gpu"] += len(node.gpus)
        capacity["gpu_memory"] += sum(gpu.memory for gpu in node.gpus)
        capacity["nvme"] += sum(device.size for device in node.nvme)
    return capacity
