# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The default profile: which plugins run, in which order, and the score weights.

Filters run in this order and a node is reported with the first one that rejects
it; Reserve runs in this order too. Stickiness outweighs every other score together
(100 x 100 > 15 x 100), so a stateless instance that may move goes back to its previous
node whenever it fits. GPUFragmentation outweighs the other placement scores together
(10 > 1 + 2 + 1 + 1): on the openb trace (benchmarks/trace_benchmark.py) it is what keeps
GPUs usable; MostAllocated and best fit only break its near-ties. GPUTopology (1) scores only multi-GPU work on nodes
that list their GPU links: it moves such work to the node with the better-linked set among those fragmentation rates
about alike.
TopologySpread (20) scores only the instances of services with a ScheduleAnyway spread: it outweighs the placement
scores together (20 > 15), so a preferred spread wins over packing wherever it fits, and yields to Stickiness.
"""

from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.anti_affinity import AntiAffinity
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.coscheduling import Coscheduling
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.default_binder import DefaultBinder
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.every_node import EveryNode
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.gpu import GPU
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.gpu_fragmentation import GPUFragmentation
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.gpu_topology import GPUTopology
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.node_ports import NodePorts
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.node_resources_fit import NodeResourcesFit
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.node_selector import NodeSelector
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.node_unschedulable import NodeUnschedulable
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.numa_pinning import NUMAPinning
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.nvme import NVMe
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.disk import Disk
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.queue_sort import HeavyFirst
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.quota import Quota
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.repack import Repack
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.stickiness import Stickiness
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.taint_toleration import TaintToleration
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.topology_spread import TopologySpread

PLUGINS = (
    HeavyFirst,           # QueueSort
    Stickiness,           # PreFilter, Score
    EveryNode,            # PreFilter: an every-node instance goes to its own node
    NodeUnschedulable,    # Filter
    TaintToleration,      # Filter, Score
    NodeSelector,         # Filter
    NodePorts,            # PreFilter, Filter, Reserve
    NodeResourcesFit,     # PreFilter (the instance's request, sidecars included), Filter, Score, Reserve
    GPU,                  # PreFilter, Filter, Score, Reserve
    NUMAPinning,          # PreFilter, Filter, Reserve: cpu_pinning numa, after GPU, whose device choice it reads
    GPUFragmentation,     # Score
    GPUTopology,          # Score: multi-GPU instances where their GPUs are best linked (left out without links)
    NVMe,                 # PreFilter, Filter, Score, Reserve
    Disk,                 # PreFilter, Filter, Reserve: disk volumes on the node's data filesystem
    AntiAffinity,         # PreFilter, Filter, Reserve
    TopologySpread,       # PreFilter, Filter, Score, Reserve, Permit: services with topology_spread only
    Quota,                # PreFilter, Filter, Reserve, Permit: after GPU, whose Reserve picks the devices it counts
    Repack,               # PostFilter
    Coscheduling,         # Permit
    DefaultBinder,        # Bind
)

WEIGHTS = {
    "NodeResourcesFit": 1,
    "GPU": 2,
    "GPUFragmentation": 10,
    "GPUTopology": 1,
    "NVMe": 1,
    "TaintToleration": 1,
    "TopologySpread": 20,
    "Stickiness": 100,
}
