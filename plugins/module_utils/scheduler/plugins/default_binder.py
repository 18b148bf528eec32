# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""DefaultBinder (Bind): turns the approved placements into the plan.

The core binds on paper: placements, the moves they imply, the labels each node
must carry, and each node's usage. Writing them to the hosts is the job of the
gang_schedule action plugin.
"""

from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.problem_format import CPU_PINNING_NUMA
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.framework import BindPlugin
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.model import SERVICE_LABEL_PREFIX, numa_nodes_of
from ansible_collections.gangplank.platform.plugins.module_utils.quantity import format_cpulist
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.topology import link_groups


class DefaultBinder(BindPlugin):
    name = "DefaultBinder"

    def __init__(self, problem):
        super().__init__(problem)
        # Whether some service asks for disk volumes: only then does the usage name each node's data filesystem.
        self._disk = any(service.resources.disk for service in problem.services.values())

    def bind(self, placements, cluster):
        ordered = sorted(placements, key=lambda p: (p.instance.service.name, p.instance.ordinal))
        result_placements = {}
        moves = []
        restarts = []
        host_ports = _host_ports(ordered, self.problem.port_range)
        for placement in ordered:
            instance = placement.instance
            gpus = [{"index": claim.device.index, "uuid": claim.device.uuid, "model": claim.device.model,
                     "memory": claim.memory} for claim in placement.gpus]
            request = instance.service.resources.gpu
            if request is not None and request.cores is not None:
                # Only a share that asks cores says so: every other plan stays as it was, byte for byte.
                for entry in gpus:
                    entry["cores"] = request.cores
            result_placements[instance.name] = {
                "service": instance.service.name,
                "ordinal": instance.ordinal,
                "node": placement.node,
                "gpus": gpus,
                "nvme": None if placement.nvme is None else {
                    "name": placement.nvme.name, "size": placement.nvme_size, "mount": placement.nvme.mount},
                "sidecars": list(instance.service.sidecars),
            }
            if instance.service.cpu_pinning == CPU_PINNING_NUMA:
                # Only a pinned instance says so (every other plan stays as it was, byte for byte): the CPUs and memory
                # nodes of its GPUs' NUMA node(s), from its devices, whichever path placed it (NUMAPinning checked them).
                result_placements[instance.name].update(_cpusets(self.problem.nodes[placement.node], placement.gpus))
            if instance.service.dynamic_ports:
                # Only an instance with dynamic ports says so: every other plan stays as it was, byte for byte.
                result_placements[instance.name]["host_ports"] = host_ports[instance.name]
            if instance.previous is not None and instance.previous.node != placement.node:
                moves.append({"instance": instance.name, "from": instance.previous.node, "to": placement.node})
            elif instance.previous is not None:
                restart = _restart(instance, placement, host_ports.get(instance.name))
                if restart is not None:
                    restarts.append(restart)
        node_labels = {}
        usage = {}
        instances_on = {name: [] for name in cluster.nodes}
        for placement in ordered:
            instances_on[placement.node].append(placement.instance.name)
        for name in sorted(cluster.nodes):
            state = cluster.nodes[name]
            node = state.node
            node_labels[name] = {SERVICE_LABEL_PREFIX + service: "true" for service in sorted(state.services)}
            usage[name] = {
                "cpu_millicores": {"used": state.cpu_used, "total": node.cpu},
                "memory": {"used": state.memory_used, "total": node.memory},
                "gpus": [{"index": gpu.index, "uuid": gpu.uuid, "model": gpu.model,
                          "used": state.gpu_used[position], "total": gpu.memory}
                         for position, gpu in enumerate(node.gpus)],
                "nvme": [{"name": device.name, "used": state.nvme_used[position], "size": device.size}
                         for position, device in enumerate(node.nvme)],
                "instances": instances_on[name],
            }
            if self._disk:
                # Only a problem with disk volumes says how each node's data filesystem is used: other plans stay as they were.
                usage[name]["disk"] = {"used": state.disk_used, "total": node.disk}
            if node.gpu_links:
                # Only a node that lists links says how its GPUs group (the picture draws them): other plans stay as they were.
                usage[name]["gpu_groups"] = link_groups(node)
        result = {"placements": result_placements, "moves": moves, "node_labels": node_labels, "usage": usage}
        if restarts:
            # Only a plan that restarts an instance on its node says so: every other plan stays as it was, byte for byte.
            result["restarts"] = restarts
        return result


def _host_ports(ordered, port_range):
    """The host port of each dynamic port of each placement (instance name -> {port name: host port}): one of
    ``port_range`` unused on its node. An instance that stays on its node keeps the ports it had (still in the
    range, not taken twice); the others get the lowest free ones, in the order of ``ordered``."""
    first, last = port_range
    taken = {}
    chosen = {}
    for placement in ordered:
        instance = placement.instance
        if not instance.service.dynamic_ports:
            continue
        chosen[instance.name] = {}
        previous = instance.previous
        if previous is None or previous.node != placement.node:
            continue
        used = taken.setdefault(placement.node, set())
        for name, _container_port in instance.service.dynamic_ports:
            port = previous.host_ports.get(name)
            if port is not None and first <= port <= last and port not in used:
                used.add(port)
                chosen[instance.name][name] = port
    for placement in ordered:
        instance = placement.instance
        if not instance.service.dynamic_ports:
            continue
        used = taken.setdefault(placement.node, set())
        port = first
        for name, _container_port in instance.service.dynamic_ports:
            if name in chosen[instance.name]:
                continue
            while port in used:
                port += 1
            # NodePorts (and the exact solver) kept the ports a node's instances take within the range's size.
            used.add(port)
            chosen[instance.name][name] = port
        chosen[instance.name] = dict(sorted(chosen[instance.name].items()))
    return chosen


def _restart(instance, placement, host_ports=None):
    """An instance that stays on its node but gets other GPUs, another NVMe device or other host ports is restarted
    there: {instance, node, gpus: {from, to} (uuids), nvme: {from, to}, host_ports: {from, to}} (only what changes),
    or None."""
    previous = instance.previous
    restart = {}
    if host_ports is not None and previous.host_ports and dict(previous.host_ports) != host_ports:
        restart["host_ports"] = {"from": dict(sorted(previous.host_ports.items())), "to": host_ports}
    taken = sorted(claim.device.uuid for claim in placement.gpus)
    if previous.gpu_uuids and taken != sorted(previous.gpu_uuids):
        restart["gpus"] = {"from": sorted(previous.gpu_uuids), "to": taken}
    device = None if placement.nvme is None else placement.nvme.name
    if previous.nvme is not None and device != previous.nvme:
        restart["nvme"] = {"from": previous.nvme, "to": device}
    if not restart:
        return None
    return dict({"instance": instance.name, "node": placement.node}, **restart)


def _cpusets(node, claims):
    """cpuset_cpus and cpuset_mems (cpulists) of an instance pinned to the NUMA node(s) of its GPU ``claims`` on ``node``."""
    numa_nodes = numa_nodes_of(claim.device for claim in claims)
    cpus = set()
    for numa_node in numa_nodes:
        cpus.update(node.numa_cpus[numa_node])
    return {"cpuset_cpus": format_cpulist(cpus), "cpuset_mems": format_cpulist(numa_nodes)}
