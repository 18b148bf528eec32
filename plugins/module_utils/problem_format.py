# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a problem may hold (docs/problem-format.md): its services' keys and its bounds.

Shared by the scheduler's parser (scheduler/problem.py), the catalog's (catalog.py, which reads a problem's
services plus deploy keys and imports nothing of the scheduler) and the reader every input format uses (reader.py).
Plain constants: it imports nothing.
"""

from __future__ import annotations

SERVICE_KEYS = ("replicas", "stateful", "sidecar", "scalable", "max_replicas", "resources", "ports", "sidecars",
                "anti_affinity", "node_selector", "tolerations", "depends_on", "quota", "priority", "preemptible",
                "every_node", "cpu_pinning", "topology_spread")

# Upper bounds of a problem (docs/problem-format.md, "Bounds"; quantity.py bounds each amount). They keep
# every input plannable in bounded time and memory, and every total a 64-bit integer for the exact solver.
MAX_NODES = 10000
MAX_SERVICES = 10000
MAX_INSTANCES = 100000          # replicas summed over all services; also the bound of one service's replicas
MAX_PREVIOUS = 100000           # entries of previous (stale ones included)
MAX_DEVICES = 64                # GPUs, NVMe devices per node; GPUs per request
MAX_PORTS = 1024                # host ports per service
MAX_ITEMS = 1024                # any other list or mapping: labels, taints, tolerations, sidecars, quotas, ...
MAX_TOTAL = 2 ** 62             # a sum over the cluster or over all requests, in millicores or bytes
MAX_ENTRIES = 1000000           # list items and mapping entries read in all: YAML aliases cannot multiply the work
MAX_ERRORS = 100                # mistakes listed; reading stops after them
MAX_PRIORITY = 1000000000       # |priority| of a service (kube's PriorityClass values are of this order)
MAX_GPU_CORES = 100             # resources.gpu.cores: a percent of a GPU's SMs; the shares on one device add up to at most this
# nodes.<n>.gpu_sharing: how a node enforces GPU shares. mps: a CUDA MPS server per share instance holds it to its memory
# and cores; none: shares are advisory (and gpu.cores cannot be enforced there).
GPU_SHARING_MPS = "mps"
GPU_SHARING_NONE = "none"
GPU_SHARING_MODES = (GPU_SHARING_MPS, GPU_SHARING_NONE)
# Checks of every-node eligibility (every_node_work): every-node services x (nodes x (1 + selector entries) + the
# nodes' NoSchedule/NoExecute taints). 2e7 set lookups take a few seconds here; a real cluster needs far fewer
# (100 every-node services on 10,000 nodes with a 2-entry selector and a taint each: 4e6).
MAX_EVERY_NODE_WORK = 20000000
# nodes.<n>.gpu_links[].level: how two GPUs of a node meet, best first (NVML's P2P levels, nvidia-smi topo -m):
# NVLink, the same board, one PCIe switch, several switches, the host bridge, the same NUMA node, across sockets.
# A pair not listed is unknown. nvlinks: the NVLink lanes between the pair (> 0 for nvlink, 0 otherwise).
# pcie: the PCIe path of an NVLinked pair besides its NVLinks (one of GPU_PCIE_LEVELS; unknown when not said); the
# PCIe path of any other pair is its level.
GPU_LINK_NVLINK = "nvlink"
GPU_LINK_LEVELS = (GPU_LINK_NVLINK, "board", "switch", "multi_switch", "host_bridge", "numa", "system", "unknown")
GPU_PCIE_LEVELS = GPU_LINK_LEVELS[1:]
MAX_NVLINKS = 64                # nodes.<n>.gpu_links[].nvlinks
MAX_GPU_LINKS = MAX_DEVICES * (MAX_DEVICES - 1) // 2     # entries of nodes.<n>.gpu_links: every pair of 64 GPUs once
MAX_NUMA_NODE = 1023            # nodes.<n>.gpus[].numa_node
# resources.gpu.topology: preferred (the default) takes the best-linked free set; required only a set whose every pair
# is NVLinked (a request of one GPU meets it anywhere).
GPU_TOPOLOGY_PREFERRED = "preferred"
GPU_TOPOLOGY_REQUIRED = "required"
GPU_TOPOLOGY_MODES = (GPU_TOPOLOGY_PREFERRED, GPU_TOPOLOGY_REQUIRED)
# services.<s>.cpu_pinning: none (the default) or numa: the instance's containers get the CPUs and memory node of its GPUs'
# NUMA node(s) (nodes.<n>.numa_cpus), and the pinned instances there ask at most those CPUs in sum.
CPU_PINNING_NONE = "none"
CPU_PINNING_NUMA = "numa"
CPU_PINNING_MODES = (CPU_PINNING_NONE, CPU_PINNING_NUMA)
MAX_NUMA_NODES = 64             # entries of nodes.<n>.numa_cpus
MAX_CPU_ID = 4095               # a CPU id in a cpulist (nodes.<n>.numa_cpus)
MAX_CPULIST = 16384             # characters of one cpulist: every other CPU of 4,096 takes about 9,700
# services.<s>.topology_spread[].when_unsatisfiable: kube's topology spread. DoNotSchedule (the default) refuses a node
# that would push the skew past max_skew; ScheduleAnyway only prefers the nodes that keep it lowest.
SPREAD_DO_NOT_SCHEDULE = "DoNotSchedule"
SPREAD_SCHEDULE_ANYWAY = "ScheduleAnyway"
SPREAD_MODES = (SPREAD_DO_NOT_SCHEDULE, SPREAD_SCHEDULE_ANYWAY)
MAX_SPREAD_CONSTRAINTS = 8      # entries of services.<s>.topology_spread
