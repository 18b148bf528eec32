# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The scheduler's model: what the cluster has and what the catalog asks for.

All amounts are integers: CPU in millicores, sizes in bytes. Everything here is
immutable; what changes during a scheduling attempt lives in ``state.py``.
"""

from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass, field
from functools import lru_cache
from typing import FrozenSet, Mapping, Optional, Tuple

from ansible_collections.gangplank.platform.plugins.module_utils.problem_format import (
    CPU_PINNING_NONE, GPU_SHARING_MPS, GPU_SHARING_NONE, GPU_TOPOLOGY_PREFERRED, SPREAD_DO_NOT_SCHEDULE,
)

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"
TAINT_EFFECTS = (NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE)

SERVICE_LABEL_PREFIX = "gangplank.io/service."

# The host ports dynamic ports are chosen from unless the problem says (Nomad's default range).
DEFAULT_PORT_RANGE = (20000, 32000)

# Quota dimensions: what a group of services may request in total.
QUOTA_DIMENSIONS = ("cpu", "memory", "gpu", "gpu_memory", "nvme")

# A problem's bounds (MAX_NODES, MAX_INSTANCES, ...) are in ../problem_format.py, which the catalog's parser shares.

# GPU memory one CUDA MPS server takes beyond its client's grant: measured per server on an H100, driver 580.
MPS_SERVER_MEMORY = 66 * 2 ** 20


@dataclass(frozen=True)
class GPUDevice:
    index: int
    uuid: str
    model: str
    memory: int
    numa_node: Optional[int] = None     # the NUMA node the GPU hangs off, where the facts know it


@dataclass(frozen=True)
class GPULink:
    """How GPUs ``first`` and ``second`` (indices, first < second) of one node meet: ``level`` one of
    problem_format.GPU_LINK_LEVELS; ``nvlinks`` the NVLink lanes between them (0 unless level is nvlink); ``pcie`` their
    PCIe path (problem_format.GPU_PCIE_LEVELS): the level itself for a pair without NVLink, and for an NVLinked pair
    the path besides its NVLinks (unknown when not said)."""
    first: int
    second: int
    level: str
    nvlinks: int = 0
    pcie: str = "unknown"


@dataclass(frozen=True)
class NVMeDevice:
    name: str
    size: int
    labels: Tuple[str, ...] = ()
    mount: Optional[str] = None


@dataclass(frozen=True)
class Taint:
    key: str
    value: Optional[str]
    effect: str


@dataclass(frozen=True)
class Toleration:
    key: str
    value: Optional[str] = None
    effect: Optional[str] = None

    def tolerates(self, taint):
        if self.key != taint.key:
            return False
        if self.value is not None and self.value != taint.value:
            return False
        return self.effect is None or self.effect == taint.effect


@dataclass(frozen=True)
class Node:
    name: str
    cpu: int
    memory: int
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: Tuple[Taint, ...] = ()
    unschedulable: bool = False
    gpus: Tuple[GPUDevice, ...] = ()
    nvme: Tuple[NVMeDevice, ...] = ()
    gpu_sharing: str = GPU_SHARING_NONE     # mps: the host holds each share to its grant (an MPS server per share)
    gpu_links: Tuple[GPULink, ...] = ()     # the pairs of GPUs whose link is known (scheduler/topology.py)
    # NUMA node id -> the ids of its CPUs (nodes.<n>.numa_cpus), for cpu_pinning: numa (plugins/numa_pinning.py)
    numa_cpus: Mapping[int, FrozenSet[int]] = field(default_factory=dict)
    # The size of the node's data filesystem (nodes.<n>.disk, bytes), where disk volumes live; None: not reported.
    disk: Optional[int] = None


@dataclass(frozen=True)
class GPURequest:
    """``count`` distinct devices on one node, each with ``memory`` free.

    ``memory`` None asks for whole, unshared devices. ``cores`` (shares only): the percent of each device's SMs the
    share may use; the shares on one device ask at most 100 in sum (None counts 0). ``topology``: preferred (the
    best-linked set that fits) or required (only a set whose every pair is NVLinked; scheduler/topology.py).
    """
    count: int
    memory: Optional[int]
    models: Tuple[str, ...] = ()
    cores: Optional[int] = None
    topology: str = GPU_TOPOLOGY_PREFERRED

    def matches(self, device):
        return not self.models or _model_matches(self.models, device.model)


def gpu_overhead(node, request):
    """The bytes a GPU request takes on each of its devices on ``node`` beyond its grant: a share on a node that
    enforces shares with MPS runs its own MPS server there (one per instance and device); whole GPUs never use MPS.
    This is kube's pod overhead (RuntimeClass ``overhead``): counted against the device, never part of the grant the
    instance may use (the claim's memory) nor of its quota."""
    if request.memory is None or node.gpu_sharing != GPU_SHARING_MPS:
        return 0
    return MPS_SERVER_MEMORY


@lru_cache(maxsize=4096)
def _model_matches(models, device_model):
    """True when one of ``models`` is a case-insensitive substring of the device's model. Remembered (bounded):
    the scheduler asks it for every device a GPU request looks at, and a cluster has few distinct models."""
    name = device_model.lower()
    return any(model.lower() in name for model in models)


@dataclass(frozen=True)
class NVMeRequest:
    label: str
    size: int


@dataclass(frozen=True)
class Resources:
    cpu: int = 0
    memory: int = 0
    gpu: Optional[GPURequest] = None
    nvme: Optional[NVMeRequest] = None
    disk: int = 0           # bytes of the node's data filesystem (the catalog's disk volumes)


@dataclass(frozen=True)
class SpreadConstraint:
    """kube's topologySpreadConstraint over the instances of one service: in the nodes' domains (the value of label
    ``topology_key``; None: each node its own domain), no domain holds more than ``max_skew`` instances above the
    emptiest one. ``when_unsatisfiable``: DoNotSchedule (a node that breaks it is refused) or ScheduleAnyway (the
    nodes that keep the skew lowest are preferred)."""
    max_skew: int
    topology_key: Optional[str] = None
    when_unsatisfiable: str = SPREAD_DO_NOT_SCHEDULE

    @property
    def required(self):
        return self.when_unsatisfiable == SPREAD_DO_NOT_SCHEDULE


@dataclass(frozen=True)
class Service:
    name: str
    replicas: int = 1
    stateful: bool = False
    sidecar: bool = False
    scalable: bool = False
    # The most replicas scale.yml may ask for a scalable service; the GPU fragmentation score keeps room for them.
    max_replicas: Optional[int] = None
    resources: Resources = Resources()
    ports: Tuple[int, ...] = ()
    # Dynamic ports: (name, container port) pairs; each instance gets a host port per name from the problem's
    # port_range, unique on its node (plugins/node_ports.py counts them, the binder chooses them).
    dynamic_ports: Tuple[Tuple[str, int], ...] = ()
    sidecars: Tuple[str, ...] = ()
    anti_affinity: Tuple[str, ...] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: Tuple[Toleration, ...] = ()
    depends_on: Tuple[str, ...] = ()
    quota: Optional[str] = None
    priority: int = 0               # higher is scheduled first; among preemptible work, left out last
    preemptible: bool = False       # not part of the all-or-nothing gang: placed when room is left
    every_node: bool = False        # one instance on every eligible node (<service>@<node>), like a DaemonSet
    image: Optional[str] = None     # the container image: no built-in plugin reads it; user plugins may
    cpu_pinning: str = CPU_PINNING_NONE     # numa: the containers get the CPUs and memory node of the GPUs' NUMA node(s)
    topology_spread: Tuple[SpreadConstraint, ...] = ()     # plugins/topology_spread.py


def toleration_index(service):
    """The service's tolerations as a set of (key, value, effect), None standing for "any": one taint is then checked
    with four set lookups instead of against every toleration (1,024 taints x 1,024 tolerations per node was 1e6).
    Remembered on the service, which is immutable (hashing 1,024 tolerations on every lookup would cost as much)."""
    index = service.__dict__.get("_toleration_index")
    if index is None:
        index = frozenset((toleration.key, toleration.value, toleration.effect) for toleration in service.tolerations)
        object.__setattr__(service, "_toleration_index", index)
    return index


def tolerated(index, taint):
    """Whether the tolerations of ``index`` (toleration_index) tolerate ``taint``, as Toleration.tolerates says."""
    if not index:
        return False
    key, value, effect = taint.key, taint.value, taint.effect
    return ((key, None, None) in index or (key, value, None) in index or (key, None, effect) in index
            or (key, value, effect) in index)


def every_node_eligible(service, node):
    """Whether an every-node service gets an instance on ``node``: the node's own labels match its
    node_selector and every NoSchedule or NoExecute taint is tolerated. Cordoned nodes are eligible
    (kube's DaemonSet controller ignores unschedulable too); whether the instance fits is the filters'."""
    for key, value in service.node_selector.items():
        if node.labels.get(key) != value:
            return False
    if node.taints:
        index = toleration_index(service)
        for taint in node.taints:
            if taint.effect in (NO_SCHEDULE, NO_EXECUTE) and not tolerated(index, taint):
                return False
    return True


class LabelIndex:
    """The nodes (in name order) per label (key, value), for the keys some selector uses: an every-node service's
    candidates are the nodes of its rarest selector label, not every node (999 services whose selector no node
    matches, on 10,000 nodes, were 1e7 checks; now 999 lookups). Built in one pass over the nodes' labels."""

    def __init__(self, nodes, keys):
        self.nodes = list(nodes)
        self.by_label = {}
        for node in self.nodes:
            for key, value in node.labels.items():
                if key in keys:
                    self.by_label.setdefault((key, value), []).append(node)

    def candidates(self, service):
        """The nodes that may be eligible for ``service``: those with its rarest selector label (all without one)."""
        if not service.node_selector:
            return self.nodes
        return min((self.by_label.get(item, ()) for item in service.node_selector.items()), key=len)


def every_node_index(services, nodes):
    """A LabelIndex for the selectors of the every-node services among ``services``."""
    keys = {key for service in services if service.every_node and not service.sidecar for key in service.node_selector}
    return LabelIndex(nodes, keys)


def every_node_work(services, index):
    """An upper bound on the checks every_node_eligible makes for the every-node ``services``: per service, each
    candidate node (LabelIndex) times its selector entries, plus the nodes' NoSchedule/NoExecute taints. Bounded by
    MAX_EVERY_NODE_WORK before any is made (10,000 services x 10,000 nodes would be 1e8)."""
    every = [service for service in services if service.every_node and not service.sidecar]
    if not every:
        return 0
    hard_taints = sum(1 for node in index.nodes for taint in node.taints if taint.effect in (NO_SCHEDULE, NO_EXECUTE))
    return sum(len(index.candidates(service)) * (1 + len(service.node_selector)) + hard_taints for service in every)


def every_node_nodes(service, index):
    """The names of the nodes ``service`` (every-node) gets an instance on, in name order."""
    return [node.name for node in index.candidates(service) if every_node_eligible(service, node)]


@dataclass(frozen=True)
class Quota:
    name: str
    min: Mapping[str, int] = field(default_factory=dict)
    max: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class PreviousPlacement:
    node: str
    gpu_uuids: Tuple[str, ...] = ()
    nvme: Optional[str] = None
    # The host ports it had by name (dynamic ports): kept when it stays on its node.
    host_ports: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Instance:
    """One replica of a service: ``<service>-<ordinal>``; of an every-node service: ``<service>@<node>``
    (``node`` set, ``ordinal`` the node's position among the service's eligible nodes)."""
    service: Service
    ordinal: int
    previous: Optional[PreviousPlacement] = None
    node: Optional[str] = None

    @property
    def name(self):
        # Remembered: the scheduler asks it several times per instance, and the instance is immutable.
        name = self.__dict__.get("_name")
        if name is None:
            name = "%s@%s" % (self.service.name, self.node) if self.node is not None else \
                "%s-%d" % (self.service.name, self.ordinal)
            object.__setattr__(self, "_name", name)
        return name

    @property
    def pinned(self):
        """A stateful instance that already runs somewhere must stay there."""
        return self.service.stateful and self.previous is not None

    def previous_node(self):
        return self.previous.node if self.previous is not None else None


Requests = namedtuple("Requests", "cpu memory ports services")


def pod_requests(services, service):
    """What an instance of ``service`` and its sidecars take together, like the containers of one pod."""
    members = [service] + [services[name] for name in service.sidecars]
    return Requests(
        cpu=sum(member.resources.cpu for member in members),
        memory=sum(member.resources.memory for member in members),
        ports=tuple(sorted(port for member in members for port in member.ports)),
        services=tuple(member.name for member in members),
    )


@dataclass(frozen=True)
class Problem:
    nodes: Mapping[str, Node]           # ordered by name
    services: Mapping[str, Service]     # ordered by name
    quotas: Mapping[str, Quota]
    previous: Mapping[str, PreviousPlacement]
    # Every-node instances (<service>@<node>) not made: an HTTP extender refused the node for the service
    # (plugins/extender.py, every_node_left_out), as kube leaves that node's DaemonSet pod pending.
    left_out: FrozenSet[str] = frozenset()
    # The host ports dynamic ports are chosen from (first, last), both included.
    port_range: Tuple[int, int] = DEFAULT_PORT_RANGE

    def instances(self):
        """Every instance the catalog asks for, in name order, with its history (a new list each call; the
        problem is immutable, so it is built once)."""
        cached = self.__dict__.get("_instances")
        if cached is None:
            cached = self._build_instances()
            object.__setattr__(self, "_instances", cached)
        return list(cached)

    def requests(self):
        """Per service name, what an instance of it and its sidecars take together (pod_requests): built once,
        shared by the plugins, read only."""
        cached = self.__dict__.get("_requests")
        if cached is None:
            cached = {name: pod_requests(self.services, service) for name, service in self.services.items()}
            object.__setattr__(self, "_requests", cached)
        return cached

    def _build_instances(self):
        result = []
        index = None
        for service in self.services.values():
            if service.sidecar:
                continue
            if service.every_node:
                if index is None:
                    index = every_node_index(self.services.values(), self.nodes.values())
                eligible = every_node_nodes(service, index)
                for ordinal, node_name in enumerate(eligible):
                    name = "%s@%s" % (service.name, node_name)
                    if name not in self.left_out:
                        result.append(Instance(service, ordinal, self.previous.get(name), node_name))
                continue
            for ordinal in range(service.replicas):
                name = "%s-%d" % (service.name, ordinal)
                result.append(Instance(service, ordinal, self.previous.get(name)))
        return result


@dataclass(frozen=True)
class GPUClaim:
    device: GPUDevice
    memory: int


@dataclass(frozen=True)
class Placement:
    instance: Instance
    node: str
    gpus: Tuple[GPUClaim, ...] = ()
    nvme: Optional[NVMeDevice] = None
    nvme_size: int = 0


def pinnable(node, device):
    """Whether an instance pinned to its GPUs' NUMA node may take ``device`` on ``node``: the device's NUMA node is known
    and the node lists that NUMA node's CPUs."""
    return device.numa_node is not None and device.numa_node in node.numa_cpus


def numa_nodes_of(devices):
    """The NUMA nodes (a frozenset of ids) of GPU ``devices`` (model.GPUDevice), all of them pinnable."""
    return frozenset(device.numa_node for device in devices)


def numa_capacity(node, numa_node):
    """The millicores of one NUMA node of ``node``: its CPUs, 1,000 each."""
    return 1000 * len(node.numa_cpus[numa_node])
