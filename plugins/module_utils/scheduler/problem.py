# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Turn a problem mapping (parsed YAML or JSON) into the model, or say exactly what is wrong.

Every error names the path (``services.infer.resources.gpu.memory``), the value
found and what was expected. All errors are collected before raising, so one
run shows the user every mistake.
"""

from __future__ import annotations

import dataclasses
import re
from collections import OrderedDict
from graphlib import CycleError, TopologicalSorter

from ansible_collections.gangplank.platform.plugins.module_utils.messages import printable, show
from ansible_collections.gangplank.platform.plugins.module_utils.problem_format import (
    CPU_PINNING_MODES, CPU_PINNING_NONE, CPU_PINNING_NUMA, MAX_NUMA_NODES, GPU_LINK_LEVELS, GPU_LINK_NVLINK, GPU_PCIE_LEVELS, GPU_SHARING_MODES,
    GPU_SHARING_NONE, GPU_TOPOLOGY_MODES, GPU_TOPOLOGY_PREFERRED,
    MAX_DEVICES, MAX_GPU_LINKS, MAX_NUMA_NODE, MAX_NVLINKS, MAX_EVERY_NODE_WORK, MAX_GPU_CORES, MAX_INSTANCES, MAX_NODES, MAX_PORTS,
    MAX_PREVIOUS, MAX_PRIORITY, MAX_SERVICES, MAX_SPREAD_CONSTRAINTS, MAX_TOTAL, SERVICE_KEYS, SPREAD_DO_NOT_SCHEDULE,
    SPREAD_MODES,
)
from ansible_collections.gangplank.platform.plugins.module_utils.reader import ProblemError, Reader, join_path
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.model import (
    GPUDevice, GPULink, GPURequest, every_node_index, every_node_nodes, every_node_work, NVMeDevice, NVMeRequest, Node,
    DEFAULT_PORT_RANGE, PreviousPlacement, Problem, QUOTA_DIMENSIONS, Quota, Resources,
    Service, SpreadConstraint, TAINT_EFFECTS, Taint, Toleration,
)
from ansible_collections.gangplank.platform.plugins.module_utils.quantity import parse_cpu, parse_cpulist, parse_size
from ansible_collections.gangplank.platform.plugins.module_utils.validation import well_formed

_SERVICE_NAME = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?")
_SERVICE_NAME_EXPECTED = "a lowercase DNS label (a-z, 0-9, '-', at most 63 characters)"
_INSTANCE_NAME = re.compile(r"(.+)-(0|[1-9][0-9]*)")

_TOP_KEYS = ("nodes", "services", "quotas", "previous", "port_range")
# A dynamic port's name: like kube's container port names, a lowercase IANA service name (at most 15 characters).
PORT_NAME = re.compile(r"[a-z]([a-z0-9-]*[a-z0-9])?")
PORT_NAME_EXPECTED = "a port name of lowercase letters, digits and '-' (at most 15 characters, a letter first, no '-' last)"
_DYNAMIC_PORT_KEYS = ("name", "container_port")
_NODE_KEYS = ("cpu", "memory", "labels", "taints", "unschedulable", "gpus", "nvme", "gpu_sharing", "gpu_links", "numa_cpus",
              "disk")
_GPU_KEYS = ("index", "uuid", "model", "memory", "numa_node")
_GPU_REQUIRED_KEYS = ("index", "uuid", "model", "memory")
_GPU_LINK_KEYS = ("gpus", "level", "nvlinks", "pcie")
_NVME_KEYS = ("name", "size", "labels", "mount")
_TAINT_KEYS = ("key", "value", "effect")
# A problem's service may also carry its image (for user plugins, profiles.py). In a catalog the image is a
# deploy key (catalog.py checks it and hands it to the scheduler), so it is not among SERVICE_KEYS.
_PROBLEM_SERVICE_KEYS = SERVICE_KEYS + ("image",)
_RESOURCE_KEYS = ("cpu", "memory", "gpu", "nvme", "disk")
_GPU_REQUEST_KEYS = ("count", "memory", "models", "cores", "topology")
_NVME_REQUEST_KEYS = ("label", "size")
_SPREAD_KEYS = ("max_skew", "topology_key", "when_unsatisfiable")
_QUOTA_KEYS = ("min", "max")
_PREVIOUS_KEYS = ("node", "service", "ordinal", "gpus", "nvme", "sidecars", "cpuset_cpus", "cpuset_mems", "host_ports")
# A previous placement's GPU entries as the result writes them (a share's with its cores); only uuid is read.
_PREVIOUS_GPU_KEYS = ("index", "uuid", "model", "memory", "cores")
_MAX_GPU_INDEX = 1023
_MAX_IMAGE = 4096               # characters of an image reference
_NUMA_ID = re.compile(r"0|[1-9][0-9]{0,3}")       # a numa_cpus key: a NUMA node id in decimal, no sign or leading zero


class _ProblemReader(Reader):
    """The reader with the problem's quantities (module_utils/quantity.py): sizes and CPU amounts."""

    def size(self, value, path, positive=False):
        try:
            result = parse_size(value)
        except ValueError as error:
            self.bad(path, value, str(error))
            return None
        if positive and result == 0:
            self.bad(path, value, "a size greater than 0")
            return None
        return result

    def cpu(self, value, path):
        try:
            return parse_cpu(value)
        except ValueError as error:
            self.bad(path, value, str(error))
            return None


def parse_problem(data):
    """Return a ``Problem`` or raise ``ProblemError`` listing every mistake."""
    if not isinstance(data, dict):
        raise ProblemError([("problem", "got %s; expected a mapping with nodes and services" % show(data))])
    reader = _ProblemReader()
    top = reader.mapping(data, "", _TOP_KEYS, required=("nodes", "services"), optional_none=False)
    nodes = _parse_nodes(reader, top["nodes"]) if "nodes" in top else {}
    quotas = _parse_quotas(reader, top.get("quotas"))
    port_range = parse_port_range(reader, top.get("port_range"), "port_range")
    services = _parse_services(reader, top["services"], quotas, nodes, port_range) if "services" in top else {}
    previous = _parse_previous(reader, top.get("previous"))
    if not reader.errors:
        _check_totals(reader, nodes, services)
    if reader.errors:
        raise ProblemError(reader.errors)
    if port_range is None or port_range == DEFAULT_PORT_RANGE:
        return Problem(nodes=nodes, services=services, quotas=quotas, previous=previous)
    return Problem(nodes=nodes, services=services, quotas=quotas, previous=previous, port_range=port_range)


def parse_port_range(reader, value, path):
    """The host ports dynamic ports are chosen from: [first, last] (both included, first <= last), or the default."""
    if value is None:
        return DEFAULT_PORT_RANGE
    items = reader.sequence(value, path, 2)
    if len(items) != 2:
        if isinstance(value, list):
            reader.bad(path, value, "a list of two ports [first, last]")
        return None
    first = reader.integer(items[0], join_path(path, 0), minimum=1, maximum=65535)
    last = reader.integer(items[1], join_path(path, 1), minimum=1, maximum=65535)
    if first is None or last is None:
        return None
    if first > last:
        reader.bad(path, value, "a range [first, last] with first <= last")
        return None
    return (first, last)


def parse_ports(reader, value, path, port_range, dynamic_anywhere=True):
    """A service's ports: each a static host port (an integer, the same port in the container) or a dynamic one
    ({name, container_port}: its host port is chosen from ``port_range`` per instance). Returns (static, dynamic).
    When some service asks a dynamic port (``dynamic_anywhere``), no static port may lie in the range the scheduler
    hands out; a site without dynamic ports keeps whatever static ports it had."""
    ports, seen_ports, dynamic, seen_names = [], set(), [], set()
    for position, item in enumerate(reader.sequence(value, path, MAX_PORTS)):
        where = join_path(path, position)
        if isinstance(item, dict):
            spec = reader.mapping(item, where, _DYNAMIC_PORT_KEYS, required=_DYNAMIC_PORT_KEYS, optional_none=False)
            name = spec.get("name")
            if "name" in spec and not well_formed(name, PORT_NAME, 15):
                reader.bad(join_path(where, "name"), name, PORT_NAME_EXPECTED)
                name = None
            elif name in seen_names:
                reader.bad(join_path(where, "name"), name, "a port name not listed twice")
                name = None
            container_port = reader.integer(spec["container_port"], join_path(where, "container_port"), minimum=1,
                                            maximum=65535) if "container_port" in spec else None
            if name is not None and container_port is not None:
                seen_names.add(name)
                dynamic.append((name, container_port))
            continue
        port = reader.integer(item, where, minimum=1, maximum=65535)
        if port is not None and port in seen_ports:
            reader.bad(where, item, "a port not listed twice")
        elif port is not None and dynamic_anywhere and port_range is not None and port_range[0] <= port <= port_range[1]:
            reader.bad(where, item, "a static port outside the dynamic port range %d-%d (the scheduler hands those "
                                    "out)" % port_range)
        elif port is not None:
            seen_ports.add(port)
            ports.append(port)
    if port_range is not None and len(dynamic) > port_range[1] - port_range[0] + 1:
        reader.bad(path, "%d dynamic ports" % len(dynamic),
                   "at most %d dynamic ports (the size of the range %d-%d)"
                   % ((port_range[1] - port_range[0] + 1,) + tuple(port_range)))
    return tuple(ports), tuple(dynamic)


def _check_totals(reader, nodes, services):
    """Instances and sums within the documented bounds, so planning stays bounded and 64-bit."""
    instances = sum(service.replicas for service in services.values())
    if instances > MAX_INSTANCES:
        reader.error("services", "ask for %d instances in total (the sum of replicas); expected at most %d"
                     % (instances, MAX_INSTANCES))
        return
    totals = {
        "nodes": {"CPU (millicores)": sum(node.cpu for node in nodes.values()),
                  "memory (bytes)": sum(node.memory for node in nodes.values()),
                  "GPU memory (bytes)": sum(gpu.memory for node in nodes.values() for gpu in node.gpus),
                  "NVMe size (bytes)": sum(device.size for node in nodes.values() for device in node.nvme),
                  "disk size (bytes)": sum(node.disk or 0 for node in nodes.values())},
        "services": {},
    }
    requests = totals["services"] = dict.fromkeys(totals["nodes"], 0)
    # A whole-GPU request takes a device's whole memory: count it at the largest device's.
    largest_gpu = max((gpu.memory for node in nodes.values() for gpu in node.gpus), default=0)
    for service in services.values():
        pod = [service] + [services[name] for name in service.sidecars if name in services]
        gpu = service.resources.gpu
        requests["CPU (millicores)"] += service.replicas * sum(member.resources.cpu for member in pod)
        requests["memory (bytes)"] += service.replicas * sum(member.resources.memory for member in pod)
        requests["GPU memory (bytes)"] += service.replicas * (gpu.count * (gpu.memory or largest_gpu) if gpu else 0)
        requests["NVMe size (bytes)"] += service.replicas * (service.resources.nvme.size if service.resources.nvme else 0)
        requests["disk size (bytes)"] += service.replicas * service.resources.disk
    for path, sums in totals.items():
        for what, total in sums.items():
            if total > MAX_TOTAL:
                reader.error(path, "the %s %s add up to %d; expected at most 2^62 (%d)" % (
                    "nodes'" if path == "nodes" else "instances' requested", what, total, MAX_TOTAL))


def _parse_nodes(reader, value):
    nodes = OrderedDict()
    raw = reader.mapping(value, "nodes", optional_none=False, maximum=MAX_NODES)
    uuids = {}
    for name in sorted(k for k in raw if isinstance(k, str)):
        path = join_path("nodes", name)
        spec = reader.mapping(raw[name], path, _NODE_KEYS, required=("cpu", "memory"), optional_none=False)
        cpu = reader.cpu(spec.get("cpu"), join_path(path, "cpu")) if "cpu" in spec else 0
        memory = reader.size(spec.get("memory"), join_path(path, "memory")) if "memory" in spec else 0
        taints = []
        for position, item in enumerate(reader.sequence(spec.get("taints"), join_path(path, "taints"))):
            taint_path = join_path(join_path(path, "taints"), position)
            taint = reader.mapping(item, taint_path, _TAINT_KEYS, required=("key", "effect"), optional_none=False)
            key = reader.string(taint.get("key"), join_path(taint_path, "key")) if "key" in taint else None
            taint_value = None
            if taint.get("value") is not None:
                taint_value = reader.label_value(taint["value"], join_path(taint_path, "value"))
            effect = taint.get("effect")
            if "effect" in taint and effect not in TAINT_EFFECTS:
                reader.bad(join_path(taint_path, "effect"), effect, "one of " + ", ".join(TAINT_EFFECTS))
            elif key is not None and effect is not None:
                taints.append(Taint(key, taint_value, effect))
        gpus = []
        indices = set()
        for position, item in enumerate(reader.sequence(spec.get("gpus"), join_path(path, "gpus"), MAX_DEVICES)):
            gpu_path = join_path(join_path(path, "gpus"), position)
            gpu = reader.mapping(item, gpu_path, _GPU_KEYS, required=_GPU_REQUIRED_KEYS, optional_none=False)
            index = reader.integer(gpu.get("index"), join_path(gpu_path, "index"), limit=_MAX_GPU_INDEX) \
                if "index" in gpu else None
            if index is not None and index in indices:
                reader.bad(join_path(gpu_path, "index"), index, "an index not used by another GPU of node %s" % printable(name))
            uuid = reader.string(gpu.get("uuid"), join_path(gpu_path, "uuid")) if "uuid" in gpu else None
            if uuid is not None and uuid in uuids:
                reader.bad(join_path(gpu_path, "uuid"), uuid, "a UUID unique in the cluster (also at %s)" % uuids[uuid])
            model = reader.string(gpu.get("model"), join_path(gpu_path, "model")) if "model" in gpu else None
            gpu_memory = reader.size(gpu.get("memory"), join_path(gpu_path, "memory"), positive=True) \
                if "memory" in gpu else None
            numa_node = reader.integer(gpu.get("numa_node"), join_path(gpu_path, "numa_node"), maximum=MAX_NUMA_NODE) \
                if "numa_node" in gpu else None
            if None not in (index, uuid, model, gpu_memory) and index not in indices and uuid not in uuids:
                indices.add(index)
                uuids[uuid] = gpu_path
                gpus.append(GPUDevice(index, uuid, model, gpu_memory, numa_node))
        devices = []
        device_names = set()
        for position, item in enumerate(reader.sequence(spec.get("nvme"), join_path(path, "nvme"), MAX_DEVICES)):
            nvme_path = join_path(join_path(path, "nvme"), position)
            nvme = reader.mapping(item, nvme_path, _NVME_KEYS, required=("name", "size"), optional_none=False)
            device_name = reader.string(nvme.get("name"), join_path(nvme_path, "name")) if "name" in nvme else None
            if device_name is not None and device_name in device_names:
                reader.bad(join_path(nvme_path, "name"), device_name, "a device name not used twice on node %s" % printable(name))
                device_name = None
            size = reader.size(nvme.get("size"), join_path(nvme_path, "size")) if "size" in nvme else None
            labels = reader.names(nvme.get("labels"), join_path(nvme_path, "labels"))
            mount = None
            if nvme.get("mount") is not None:
                mount = reader.string(nvme["mount"], join_path(nvme_path, "mount"), "an absolute path")
                if mount is not None and not mount.startswith("/"):
                    reader.bad(join_path(nvme_path, "mount"), mount, "an absolute path")
            if device_name is not None and size is not None:
                device_names.add(device_name)
                devices.append(NVMeDevice(device_name, size, labels, mount))
        nodes[name] = Node(
            name=name,
            cpu=cpu or 0,
            memory=memory or 0,
            labels=reader.labels(spec.get("labels"), join_path(path, "labels")),
            taints=tuple(taints),
            unschedulable=reader.boolean(spec.get("unschedulable"), join_path(path, "unschedulable")),
            gpus=tuple(sorted(gpus, key=lambda gpu: gpu.index)),
            nvme=tuple(sorted(devices, key=lambda device: device.name)),
            gpu_sharing=_gpu_sharing(reader, spec.get("gpu_sharing"), join_path(path, "gpu_sharing")),
            gpu_links=_gpu_links(reader, spec.get("gpu_links"), join_path(path, "gpu_links"), name, indices),
            numa_cpus=_numa_cpus(reader, spec.get("numa_cpus"), join_path(path, "numa_cpus")),
            disk=reader.size(spec["disk"], join_path(path, "disk")) if spec.get("disk") is not None else None,
        )
    return nodes


def _numa_cpus(reader, value, path):
    """nodes.<n>.numa_cpus: {"<NUMA node id>": "<cpulist>"}, at most MAX_NUMA_NODES entries, no CPU in two NUMA nodes."""
    result = {}
    owner = {}
    raw = reader.mapping(value, path, maximum=MAX_NUMA_NODES)
    for key in sorted((key for key in raw if isinstance(key, str)), key=lambda key: (len(key), key)):
        entry_path = join_path(path, key)
        if not _NUMA_ID.fullmatch(key) or int(key) > MAX_NUMA_NODE:
            reader.bad(entry_path, key, "a NUMA node id from 0 to %d (a decimal string such as \"0\")" % MAX_NUMA_NODE)
            continue
        try:
            cpus = parse_cpulist(raw[key])
        except ValueError as error:
            reader.bad(entry_path, raw[key], str(error))
            continue
        shared = sorted(cpu for cpu in cpus if cpu in owner)
        if shared:
            reader.bad(entry_path, raw[key], "CPUs of this NUMA node only (CPU %d is also NUMA node %d's)"
                       % (shared[0], owner[shared[0]]))
            continue
        owner.update(dict.fromkeys(cpus, int(key)))
        result[int(key)] = cpus
    return result


def _gpu_links(reader, value, path, name, indices):
    """nodes.<n>.gpu_links: [{gpus: [a, b], level, nvlinks, pcie}, ...], each pair of the node's GPU indices at most once;
    pcie (optional) the PCIe path of an NVLinked pair, and for any other pair its level if given."""
    links = []
    pairs = set()
    for position, item in enumerate(reader.sequence(value, path, MAX_GPU_LINKS)):
        link_path = join_path(path, position)
        spec = reader.mapping(item, link_path, _GPU_LINK_KEYS, required=("gpus", "level"), optional_none=False)
        ends = []
        gpus_path = join_path(link_path, "gpus")
        if "gpus" in spec:
            raw = spec["gpus"]
            if not isinstance(raw, list) or len(raw) != 2:
                reader.bad(gpus_path, raw, "a list of two GPU indices of node %s" % printable(name))
            else:
                for end, index in enumerate(raw):
                    index = reader.integer(index, join_path(gpus_path, end), limit=_MAX_GPU_INDEX)
                    if index is not None and index not in indices:
                        reader.bad(join_path(gpus_path, end), index, "the index of a GPU of node %s" % printable(name))
                        index = None
                    ends.append(index)
                if None not in ends and ends[0] == ends[1]:
                    reader.bad(gpus_path, raw, "two different GPUs")
                    ends = []
                elif None not in ends and (min(ends), max(ends)) in pairs:
                    reader.bad(gpus_path, raw, "a pair of GPUs not listed before in gpu_links")
                    ends = []
        level = spec.get("level")
        if "level" in spec and (not isinstance(level, str) or level not in GPU_LINK_LEVELS):
            reader.bad(join_path(link_path, "level"), level, "one of " + ", ".join(GPU_LINK_LEVELS))
            level = None
        nvlinks = reader.integer(spec.get("nvlinks"), join_path(link_path, "nvlinks"), maximum=MAX_NVLINKS, default=0)
        if nvlinks is not None and level is not None:
            if level == GPU_LINK_NVLINK and nvlinks == 0:
                reader.bad(join_path(link_path, "nvlinks"), spec.get("nvlinks"), "an integer from 1 to %d for an nvlink pair"
                           % MAX_NVLINKS)
                level = None
            elif level != GPU_LINK_NVLINK and nvlinks != 0:
                reader.bad(join_path(link_path, "nvlinks"), nvlinks, "0 (or none) for a %s pair: only nvlink has lanes" % level)
                level = None
        pcie = spec.get("pcie")
        pcie_path = join_path(link_path, "pcie")
        if "pcie" in spec and (not isinstance(pcie, str) or pcie not in GPU_PCIE_LEVELS):
            reader.bad(pcie_path, pcie, "one of " + ", ".join(GPU_PCIE_LEVELS) + " (the pair's PCIe path)")
            level = None
        elif "pcie" in spec and level is not None and level != GPU_LINK_NVLINK and pcie != level:
            reader.bad(pcie_path, pcie, "%s (or none) for a %s pair: pcie differs from level only beside NVLinks" % (level, level))
            level = None
        if len(ends) == 2 and None not in ends and level is not None and nvlinks is not None:
            pairs.add((min(ends), max(ends)))
            if level != GPU_LINK_NVLINK:
                pcie = level
            links.append(GPULink(min(ends), max(ends), level, nvlinks, pcie or "unknown"))
    return tuple(sorted(links, key=lambda link: (link.first, link.second)))


def _gpu_sharing(reader, value, path):
    """nodes.<n>.gpu_sharing: mps (the host enforces shares with MPS) or none (the default: shares are advisory)."""
    if value is None:
        return GPU_SHARING_NONE
    if isinstance(value, str) and value in GPU_SHARING_MODES:
        return value
    reader.bad(path, value, "one of %s (how the node enforces GPU shares)" % ", ".join(GPU_SHARING_MODES))
    return GPU_SHARING_NONE


def _parse_quota_amounts(reader, value, path):
    amounts = {}
    for key, item in sorted(reader.mapping(value, path, QUOTA_DIMENSIONS).items(), key=lambda kv: str(kv[0])):
        if key not in QUOTA_DIMENSIONS:
            continue
        item_path = join_path(path, key)
        if key == "cpu":
            amount = reader.cpu(item, item_path)
        elif key == "gpu":
            amount = reader.integer(item, item_path, limit=MAX_NODES * MAX_DEVICES)
        else:
            amount = reader.size(item, item_path)
        if amount is not None:
            amounts[key] = amount
    return amounts


def _parse_quotas(reader, value):
    quotas = OrderedDict()
    raw = reader.mapping(value, "quotas")
    for name in sorted(k for k in raw if isinstance(k, str)):
        path = join_path("quotas", name)
        spec = reader.mapping(raw[name], path, _QUOTA_KEYS)
        minimum = _parse_quota_amounts(reader, spec.get("min"), join_path(path, "min"))
        maximum = _parse_quota_amounts(reader, spec.get("max"), join_path(path, "max"))
        for key in sorted(set(minimum) & set(maximum)):
            if minimum[key] > maximum[key]:
                reader.bad(join_path(join_path(path, "min"), key), spec["min"][key],
                           "at most the max (%s)" % show(spec["max"][key]))
        quotas[name] = Quota(name, minimum, maximum)
    return quotas


def _parse_resources(reader, value, path):
    spec = reader.mapping(value, path, _RESOURCE_KEYS)
    cpu = reader.cpu(spec["cpu"], join_path(path, "cpu")) if spec.get("cpu") is not None else 0
    memory = reader.size(spec["memory"], join_path(path, "memory")) if spec.get("memory") is not None else 0
    gpu = None
    if spec.get("gpu") is not None:
        gpu_path = join_path(path, "gpu")
        gpu_spec = reader.mapping(spec["gpu"], gpu_path, _GPU_REQUEST_KEYS)
        count = reader.integer(gpu_spec.get("count"), join_path(gpu_path, "count"), minimum=1, limit=MAX_DEVICES,
                               default=1)
        gpu_memory = None
        if gpu_spec.get("memory") is not None:
            gpu_memory = reader.size(gpu_spec["memory"], join_path(gpu_path, "memory"), positive=True)
        models = reader.names(gpu_spec.get("models"), join_path(gpu_path, "models"))
        cores = None
        if gpu_spec.get("cores") is not None:
            cores = reader.integer(gpu_spec["cores"], join_path(gpu_path, "cores"), minimum=1, maximum=MAX_GPU_CORES)
            if cores is not None and gpu_spec.get("memory") is None:
                reader.bad(join_path(gpu_path, "cores"), cores,
                           "only on a GPU share (with resources.gpu.memory): a whole GPU has all its cores")
                cores = None
        topology = gpu_spec.get("topology")
        if topology is None:
            topology = GPU_TOPOLOGY_PREFERRED
        elif not isinstance(topology, str) or topology not in GPU_TOPOLOGY_MODES:
            reader.bad(join_path(gpu_path, "topology"), topology,
                       "one of %s (whether every pair of the GPUs must be NVLinked)" % ", ".join(GPU_TOPOLOGY_MODES))
            topology = GPU_TOPOLOGY_PREFERRED
        if count is not None:
            gpu = GPURequest(count, gpu_memory, models, cores, topology)
    nvme = None
    if spec.get("nvme") is not None:
        nvme_path = join_path(path, "nvme")
        nvme_spec = reader.mapping(spec["nvme"], nvme_path, _NVME_REQUEST_KEYS, required=("label",))
        label = reader.string(nvme_spec.get("label"), join_path(nvme_path, "label")) if "label" in nvme_spec else None
        size = reader.size(nvme_spec["size"], join_path(nvme_path, "size")) if nvme_spec.get("size") is not None else 0
        if label is not None and size is not None:
            nvme = NVMeRequest(label, size)
    disk = reader.size(spec["disk"], join_path(path, "disk")) if spec.get("disk") is not None else 0
    return Resources(cpu or 0, memory or 0, gpu, nvme, disk or 0)


def _parse_kind(reader, spec, path, sidecar):
    """priority, preemptible, every_node and image: (priority, preemptible, every_node, image)."""
    priority = reader.integer(spec.get("priority"), join_path(path, "priority"), minimum=-MAX_PRIORITY,
                              maximum=MAX_PRIORITY, default=0)
    preemptible = reader.boolean(spec.get("preemptible"), join_path(path, "preemptible"))
    every_node = reader.boolean(spec.get("every_node"), join_path(path, "every_node"))
    image = None
    if spec.get("image") is not None:
        image = reader.string(spec["image"], join_path(path, "image"), "an image reference (a non-empty string)")
        if image is not None and len(image) > _MAX_IMAGE:
            reader.bad(join_path(path, "image"), image, "an image reference of at most %d characters" % _MAX_IMAGE)
            image = None
    if sidecar:
        # scalable too: a sidecar runs beside each instance of its app, so a scale request has nothing to set.
        for key in ("priority", "preemptible", "every_node", "scalable"):
            if spec.get(key):
                reader.bad(join_path(path, key), spec[key], "nothing: a sidecar follows its app's %s" % key)
    if preemptible and spec.get("stateful") is True:
        reader.bad(join_path(path, "preemptible"), True,
                   "false for a stateful service (its data must not be given up for other work)")
    if every_node:
        if preemptible:
            reader.bad(join_path(path, "every_node"), True,
                       "false for a preemptible service (an every-node service runs on every eligible node, or the plan fails)")
        for key in ("replicas", "scalable"):
            if spec.get(key) is not None and spec.get(key) is not False:
                reader.bad(join_path(path, key), spec[key],
                           "no %s on an every-node service (one instance runs on every eligible node)" % key)
    return priority if priority is not None else 0, preemptible, every_node, image


def _cpu_pinning(reader, spec, path, sidecar):
    """services.<s>.cpu_pinning: none (the default) or numa, which only a service that asks for GPUs may ask (its CPUs are
    those of its GPUs' NUMA node); a sidecar follows its app's."""
    value = spec.get("cpu_pinning")
    if value is None:
        return CPU_PINNING_NONE
    where = join_path(path, "cpu_pinning")
    if not isinstance(value, str) or value not in CPU_PINNING_MODES:
        reader.bad(where, value, "one of " + ", ".join(CPU_PINNING_MODES))
        return CPU_PINNING_NONE
    if value == CPU_PINNING_NUMA and sidecar:
        reader.bad(where, value, "nothing: a sidecar follows its app's cpu_pinning")
        return CPU_PINNING_NONE
    asks_gpu = isinstance(spec.get("resources"), dict) and spec["resources"].get("gpu") is not None
    if value == CPU_PINNING_NUMA and not asks_gpu:
        reader.bad(where, value, "none on a service without a GPU request (numa pins it to its GPUs' NUMA node)")
        return CPU_PINNING_NONE
    return value


def _topology_spread(reader, spec, path, sidecar, every_node):
    """services.<s>.topology_spread: [{max_skew, topology_key, when_unsatisfiable}, ...] (kube's
    topologySpreadConstraints over the service's own instances); none on a sidecar or an every-node service."""
    value = spec.get("topology_spread")
    where = join_path(path, "topology_spread")
    if value is None:
        return ()
    if sidecar or every_node:
        reader.bad(where, value, "nothing on %s" % (
            "a sidecar (it follows its app)" if sidecar else "an every-node service (one instance per eligible node)"))
        return ()
    constraints = []
    for position, item in enumerate(reader.sequence(value, where, MAX_SPREAD_CONSTRAINTS)):
        item_path = join_path(where, position)
        entry = reader.mapping(item, item_path, _SPREAD_KEYS, required=("max_skew",), optional_none=False)
        skew = reader.integer(entry.get("max_skew"), join_path(item_path, "max_skew"), minimum=1, limit=MAX_INSTANCES) \
            if "max_skew" in entry else None
        key = None
        if entry.get("topology_key") is not None:
            key = reader.string(entry["topology_key"], join_path(item_path, "topology_key"),
                                "a node label key (or none: each node is its own domain)")
        mode = entry.get("when_unsatisfiable", SPREAD_DO_NOT_SCHEDULE)
        if mode is None:
            mode = SPREAD_DO_NOT_SCHEDULE
        if not isinstance(mode, str) or mode not in SPREAD_MODES:
            reader.bad(join_path(item_path, "when_unsatisfiable"), mode, "one of " + ", ".join(SPREAD_MODES))
            mode = None
        if skew is not None and mode is not None and (entry.get("topology_key") is None or key is not None):
            constraint = SpreadConstraint(skew, key, mode)
            if constraint in constraints:
                reader.bad(item_path, item, "a constraint not listed twice")
                continue
            constraints.append(constraint)
    return tuple(constraints)


def _max_replicas(reader, spec, path, scalable, replicas):
    """services.<s>.max_replicas: the most replicas a scale request may set, only on a scalable service, and not below
    its replicas (a scale request's count included: it is the service's replicas here)."""
    value = spec.get("max_replicas")
    if value is None:
        return None
    where = join_path(path, "max_replicas")
    if not scalable:
        reader.bad(where, value, "nothing on a service that is not scalable: true (only scale requests change replicas)")
        return None
    maximum = reader.integer(value, where, minimum=1, limit=MAX_INSTANCES)
    if maximum is not None and replicas is not None and replicas > maximum:
        reader.bad(join_path(path, "replicas"), replicas, "at most max_replicas (%d)" % maximum)
    return maximum


def _parse_services(reader, value, quotas, nodes, port_range=DEFAULT_PORT_RANGE):
    raw = reader.mapping(value, "services", optional_none=False, maximum=MAX_SERVICES)
    dynamic_anywhere = any(isinstance(port, dict) for spec in raw.values() if isinstance(spec, dict)
                           and isinstance(spec.get("ports"), list) for port in spec["ports"])
    services = OrderedDict()
    for name in sorted(k for k in raw if isinstance(k, str)):
        path = join_path("services", name)
        if not well_formed(name, _SERVICE_NAME, 63):
            reader.bad(path, name, "a service name that is " + _SERVICE_NAME_EXPECTED)
        spec = reader.mapping(raw[name], path, _PROBLEM_SERVICE_KEYS)
        sidecar = reader.boolean(spec.get("sidecar"), join_path(path, "sidecar"))
        if sidecar and "replicas" in spec:
            reader.bad(join_path(path, "replicas"), spec["replicas"],
                       "no replicas on a sidecar (it runs once beside each instance that lists it)")
        replicas = reader.integer(spec.get("replicas"), join_path(path, "replicas"), limit=MAX_INSTANCES,
                                  default=1) if not sidecar else 0
        ports, dynamic_ports = parse_ports(reader, spec.get("ports"), join_path(path, "ports"), port_range, dynamic_anywhere)
        if sidecar and dynamic_ports:
            reader.bad(join_path(path, "ports"), "a dynamic port", "static ports only on a sidecar")
        tolerations = []
        for position, item in enumerate(reader.sequence(spec.get("tolerations"), join_path(path, "tolerations"))):
            tol_path = join_path(join_path(path, "tolerations"), position)
            tol = reader.mapping(item, tol_path, _TAINT_KEYS, required=("key",), optional_none=False)
            key = reader.string(tol.get("key"), join_path(tol_path, "key")) if "key" in tol else None
            tol_value = reader.label_value(tol["value"], join_path(tol_path, "value")) \
                if tol.get("value") is not None else None
            effect = tol.get("effect")
            if effect is not None and effect not in TAINT_EFFECTS:
                reader.bad(join_path(tol_path, "effect"), effect, "one of " + ", ".join(TAINT_EFFECTS))
                effect = None
            if key is not None:
                tolerations.append(Toleration(key, tol_value, effect))
        quota = None
        if spec.get("quota") is not None:
            quota = reader.string(spec["quota"], join_path(path, "quota"))
            if quota is not None and quota not in quotas:
                reader.bad(join_path(path, "quota"), quota,
                           "a quota defined under quotas (%s)" % (", ".join(map(printable, quotas)) or "none defined"))
        resources = _parse_resources(reader, spec.get("resources"), join_path(path, "resources"))
        priority, preemptible, every_node, image = _parse_kind(reader, spec, path, sidecar)
        if sidecar:
            for key in ("gpu", "nvme"):
                if getattr(resources, key) is not None:
                    reader.bad(join_path(join_path(path, "resources"), key), spec["resources"][key],
                               "no %s request on a sidecar: it takes CPU, memory and ports beside its app" % key)
            if resources.disk:
                reader.bad(join_path(join_path(path, "resources"), "disk"), spec["resources"]["disk"],
                           "no disk request on a sidecar: it takes CPU, memory and ports beside its app")
            for key in ("sidecars", "quota", "stateful", "depends_on"):
                if spec.get(key):
                    reader.bad(join_path(path, key), spec[key], "nothing: a sidecar follows its app's %s" % key)
        cpu_pinning = _cpu_pinning(reader, spec, path, sidecar)
        scalable = reader.boolean(spec.get("scalable"), join_path(path, "scalable"))
        max_replicas = _max_replicas(reader, spec, path, scalable, replicas)
        services[name] = Service(
            name=name,
            replicas=replicas or 0,
            stateful=reader.boolean(spec.get("stateful"), join_path(path, "stateful")),
            sidecar=sidecar,
            scalable=scalable,
            max_replicas=max_replicas,
            resources=resources,
            ports=tuple(ports),
            dynamic_ports=dynamic_ports,
            sidecars=reader.names(spec.get("sidecars"), join_path(path, "sidecars")),
            anti_affinity=reader.names(spec.get("anti_affinity"), join_path(path, "anti_affinity")),
            node_selector=reader.labels(spec.get("node_selector"), join_path(path, "node_selector")),
            tolerations=tuple(tolerations),
            depends_on=reader.names(spec.get("depends_on"), join_path(path, "depends_on")),
            quota=quota,
            priority=priority,
            preemptible=preemptible,
            every_node=every_node,
            image=image,
            cpu_pinning=cpu_pinning,
            topology_spread=_topology_spread(reader, spec, path, sidecar, every_node),
        )
    index = every_node_index(services.values(), nodes.values())
    work = every_node_work(services.values(), index)
    if work > MAX_EVERY_NODE_WORK:
        # Refused before any pair is checked: the product, not each bound alone, decides the time.
        reader.error("services", "every-node services need %d eligibility checks (per every-node service: the nodes with "
                     "its rarest node_selector label x (1 + node_selector entries), plus the nodes' NoSchedule and "
                     "NoExecute taints); expected at most %d" % (work, MAX_EVERY_NODE_WORK))
    else:
        total = sum(service.replicas for service in services.values() if not service.every_node)
        for name, service in services.items():
            if service.every_node and not service.sidecar and total <= MAX_INSTANCES:
                # One instance per eligible node: its count is known once the nodes are. Past MAX_INSTANCES in all
                # the count stops mattering (_check_totals refuses the problem), so counting stops there.
                services[name] = dataclasses.replace(service, replicas=len(every_node_nodes(service, index)))
                total += services[name].replicas
    _check_references(reader, services)
    return services


def _check_references(reader, services):
    for name, service in services.items():
        path = join_path("services", name)
        for position, other in enumerate(service.sidecars):
            where = join_path(join_path(path, "sidecars"), position)
            if other not in services:
                reader.bad(where, other, "a service defined under services")
            elif not services[other].sidecar:
                reader.bad(where, other, "a service with sidecar: true")
        for position, other in enumerate(service.depends_on):
            where = join_path(join_path(path, "depends_on"), position)
            if other not in services:
                reader.bad(where, other, "a service defined under services")
            elif services[other].sidecar:
                reader.bad(where, other, "an app, not a sidecar (depend on the app it runs beside)")
        for position, other in enumerate(service.anti_affinity):
            if other not in services:
                reader.bad(join_path(join_path(path, "anti_affinity"), position), other, "a service defined under services")
        _check_pod(reader, services, name, service, path)
        # Instances are named <service>-<ordinal>: "web" replica 1 and a service "web-1" would clash.
        match = _INSTANCE_NAME.fullmatch(name)
        if match and match.group(1) in services and not services[match.group(1)].sidecar \
                and not services[match.group(1)].every_node \
                and int(match.group(2)) < services[match.group(1)].replicas:
            reader.bad(path, name, "a name that is not also an instance of service %s" % printable(match.group(1)))
    graph = {name: [d for d in s.depends_on if d in services] for name, s in services.items()}
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as error:
        cycle = error.args[1]
        # graphlib lists the cycle backwards (each node followed by what depends on it).
        reader.error("services", "dependency cycle in depends_on: %s" % " -> ".join(map(printable, reversed(cycle))))


def _check_pod(reader, services, name, service, path):
    """An instance and its sidecars share a node: they must not clash with each other."""
    members = [service] + [services[other] for other in service.sidecars
                           if other in services and services[other].sidecar]
    owners = {}
    for member in members:
        for port in member.ports:
            if port in owners:
                where = join_path(join_path(path, "sidecars"), service.sidecars.index(member.name))
                reader.bad(where, member.name, "a sidecar whose host ports do not clash with %s's (port %d)"
                           % (owners[port], port))
            owners.setdefault(port, member.name)
    for position, first in enumerate(members):
        for second in members[position + 1:]:
            if second.name in first.anti_affinity or first.name in second.anti_affinity:
                where = join_path(join_path(path, "sidecars"), service.sidecars.index(second.name))
                reader.bad(where, second.name, "a sidecar that %s's anti_affinity does not keep away from %s"
                           % (first.name if second.name in first.anti_affinity else second.name,
                              second.name if second.name in first.anti_affinity else first.name))


def _parse_previous(reader, value):
    previous = OrderedDict()
    raw = reader.mapping(value, "previous", maximum=MAX_PREVIOUS)
    for name in sorted(k for k in raw if isinstance(k, str)):
        path = join_path("previous", name)
        spec = reader.mapping(raw[name], path, _PREVIOUS_KEYS, required=("node",), optional_none=False)
        node = reader.string(spec.get("node"), join_path(path, "node")) if "node" in spec else None
        uuids = []
        for position, item in enumerate(reader.sequence(spec.get("gpus"), join_path(path, "gpus"), MAX_DEVICES)):
            gpu = reader.mapping(item, join_path(join_path(path, "gpus"), position), _PREVIOUS_GPU_KEYS,
                                 required=("uuid",), optional_none=False)
            if "uuid" in gpu:
                uuid = reader.string(gpu["uuid"], join_path(join_path(join_path(path, "gpus"), position), "uuid"))
                if uuid is not None:
                    uuids.append(uuid)
        nvme = None
        if spec.get("nvme") is not None:
            nvme_spec = reader.mapping(spec["nvme"], join_path(path, "nvme"), ("name", "size", "mount"),
                                       required=("name",))
            if "name" in nvme_spec:
                nvme = reader.string(nvme_spec["name"], join_path(join_path(path, "nvme"), "name"))
        host_ports = {}
        raw_ports = reader.mapping(spec.get("host_ports"), join_path(path, "host_ports"), maximum=MAX_PORTS)
        for port_name in sorted(k for k in raw_ports if isinstance(k, str)):
            where = join_path(join_path(path, "host_ports"), port_name)
            if not well_formed(port_name, PORT_NAME, 15):
                reader.bad(where, port_name, PORT_NAME_EXPECTED)
                continue
            port = reader.integer(raw_ports[port_name], where, minimum=1, maximum=65535)
            if port is not None:
                host_ports[port_name] = port
        if node is not None and host_ports:
            previous[name] = PreviousPlacement(node, tuple(uuids), nvme, host_ports)
        elif node is not None:
            previous[name] = PreviousPlacement(node, tuple(uuids), nvme)
    return previous
