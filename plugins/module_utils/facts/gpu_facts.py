# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU facts (docs/facts.md): one NVML session for all GPUs, nvidia-smi when pynvml is missing,
or the GPUs described by gangplank_simulated_gpus.

Nothing here imports pynvml: the caller passes the imported module (or None), so the collector runs
and is tested without it. Only the standard library and this collection are imported.
"""

from __future__ import annotations

import csv
import os
import re
import socket
from collections import Counter

from ansible_collections.gangplank.platform.plugins.module_utils.messages import show
from ansible_collections.gangplank.platform.plugins.module_utils.quantity import (
    BLANKS, cpu_ranges, format_cpulist, format_ranges, parse_size,
)
from ansible_collections.gangplank.platform.plugins.module_utils.validation import has_control

SIMULATED_VAR = "gangplank_simulated_gpus"
SIMULATED_LINKS_VAR = "gangplank_simulated_gpu_links"
SIMULATED_KEYS = ("model", "memory", "index", "uuid", "compute_capability", "numa_node", "cpu_affinity")
SIMULATED_LINK_KEYS = ("gpus", "level", "nvlinks", "pcie")
SIMULATED_REASON = "simulated by " + SIMULATED_VAR
NOTHING_REASON = "nvidia-ml-py (pynvml) is not installed and nvidia-smi was not found"

MIB = 1024 * 1024
# The CUDA MPS control binary (the driver's user-space tools): where it is found, the host enforces GPU shares with MPS.
MPS_CONTROL = "nvidia-cuda-mps-control"

# nvidia-smi --help-query-gpu names; the order is the order of the CSV columns.
NVIDIA_SMI_FIELDS = (
    "index", "uuid", "name", "memory.total", "memory.used", "memory.free", "pci.bus_id", "compute_cap",
    "persistence_mode", "mig.mode.current", "mig.mode.pending", "driver_version",
)
NVIDIA_SMI_ARGS = ("--query-gpu=" + ",".join(NVIDIA_SMI_FIELDS), "--format=csv,noheader,nounits")
NVIDIA_SMI_TOPO_ARGS = ("topo", "-m")

# --- topology (gangplank_gpu_links) ---
# The most GPUs whose pairs are read: 64 GPUs, 2,016 pairs. A host with more reports its GPUs and no links.
MAX_TOPOLOGY_GPUS = 64
TOO_MANY_GPUS = "not read: more than %d GPUs" % MAX_TOPOLOGY_GPUS
# A pair's level, best first; unknown: NVML (or nvidia-smi) could not tell.
LINK_LEVELS = ("nvlink", "board", "switch", "multi_switch", "host_bridge", "numa", "system", "unknown")
# A pair's PCIe path (its pcie): every level but nvlink. An NVLinked pair's is read beside its NVLinks.
PCIE_LEVELS = LINK_LEVELS[1:]
# nvmlDeviceGetTopologyCommonAncestor's nvmlGpuTopologyLevel_t values.
_ANCESTOR_LEVELS = {0: "board", 10: "switch", 20: "multi_switch", 30: "host_bridge", 40: "numa", 50: "system"}
# nvidia-smi topo -m's cells (its legend), NV<n> aside; SOC is what drivers before NODE and SYS printed for SYS.
_TOPO_LEVELS = {"PIX": "switch", "PXB": "multi_switch", "PHB": "host_bridge", "NODE": "numa", "SYS": "system", "SOC": "system"}
_TOPO_CELLS = "X, SYS, SOC, NODE, PHB, PXB, PIX, NV<n>"
# The most NVLinks one pair may report (NVML_NVLINK_MAX_LINKS is 18 to 36 per GPU).
MAX_NVLINKS = 64
# The highest NUMA node and CPU number taken (Linux's NODES_SHIFT 10 and NR_CPUS 8192; bounded well above).
MAX_NUMA_NODE = 4095
MAX_CPUS = 65536
_CPULIST = re.compile(r"[0-9]{1,5}(?:-[0-9]{1,5})?(?:,[0-9]{1,5}(?:-[0-9]{1,5})?)*")
_MAX_CPULIST = 65536
_PCI_BUS_ID = re.compile(r"([0-9a-fA-F]{1,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])")
_NUMA_TEXT = re.compile(r"[0-9]{1,4}")
# nvidia-smi topo -m, read strictly: at most this many characters, and table rows (GPUs and NICs).
MAX_TOPO_CHARS = 1 << 20
MAX_TOPO_ROWS = MAX_TOPOLOGY_GPUS + 256
_TOPO_NV = re.compile(r"NV([1-9][0-9]?)")
# A network card's column and row: NIC<k> (its name in the NIC Legend below), or, from older drivers, the device itself
# (mlx5_0, mlx4_0, bnxt_re0, ...): a letter, then letters, digits, "_", "." or "-"; never GPU<n>.
_TOPO_NIC = re.compile(r"NIC[0-9]{1,3}|(?!GPU[0-9])[A-Za-z][A-Za-z0-9_.-]{0,31}")
MAX_TOPO_NICS = 256
_TOPO_EXTRA_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
# The underline nvidia-smi puts around its header line, a terminal or not.
_SGR_ON, _SGR_OFF = "\x1b[4m", "\x1b[0m"

_NVML_INIT_HINTS = (
    ("NVMLError_LibraryNotFound", "libnvidia-ml.so.1 was not found: is the NVIDIA driver installed?"),
    ("NVMLError_DriverNotLoaded", "the NVIDIA kernel driver is not loaded"),
    ("NVMLError_NoPermission", "no permission to open the NVIDIA devices (/dev/nvidia*)"),
    ("NVMLError_LibRmVersionMismatch", "the NVIDIA kernel module and user-space driver versions differ: reboot or reload"),
)
# The NVML errors that mean "this GPU or driver does not have the feature": the fact becomes null.
_NOT_SUPPORTED = ("NVMLError_NotSupported", "NVMLError_FunctionNotFound")


def gpu_entry(index, source, **fields):
    """One gangplank_gpus entry with every key of docs/facts.md; unknown values null."""
    entry = {
        "index": index,
        "uuid": None,
        "model": None,
        "memory_total": None,
        "memory_used": None,
        "memory_free": None,
        "pci_bus_id": None,
        "compute_capability": None,
        "persistence_mode": None,
        "mig_mode": None,
        "mig_devices": [],
        "numa_node": None,
        "cpu_affinity": None,
        "source": source,
        "error": None,
    }
    unknown = set(fields) - set(entry)
    if unknown:
        raise KeyError("not a gangplank_gpus key: %s" % ", ".join(sorted(unknown)))
    entry.update(fields)
    return entry


def driver_entry(available, reason=None, source=None, driver_version=None, cuda_version=None, gpu_count=0):
    """The gangplank_gpu_driver fact."""
    return {
        "available": available,
        "reason": reason,
        "source": source,
        "driver_version": driver_version,
        "cuda_version": cuda_version,
        "gpu_count": gpu_count,
    }


def _is_nvml_error(exc, names):
    """Whether exc is one of pynvml's NVMLError_<Name> classes, by name: older bindings lack some of them."""
    return any(cls.__name__ in names for cls in type(exc).__mro__)


def _text(value):
    """str from pynvml's str (nvidia-ml-py) or bytes (old pynvml); None and '' as None."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if value is None:
        return None
    value = str(value).rstrip("\x00").strip()
    return value or None


def cuda_version_text(version):
    """NVML's CUDA driver version integer as text: 12040 -> '12.4', 11080 -> '11.8'."""
    if not isinstance(version, int) or isinstance(version, bool) or version <= 0:
        return None
    return "%d.%d" % (version // 1000, (version % 1000) // 10)


# --- topology helpers ----------------------------------------------------------------------------

def cpulist_of(cpus):
    """A set of CPU numbers as a Linux cpulist ("0-31,64-95"); None when empty."""
    return format_cpulist(cpus) or None


def parse_cpulist(text):
    """A Linux cpulist (sysfs local_cpulist, nvidia-smi's CPU Affinity) in its canonical form; None when it is not one
    (checked whole: ASCII digits, ranges low-high, CPUs below MAX_CPUS, bounded length, its ranges holding at most
    MAX_CPUS CPUs in all as listed: no range is expanded, so any text costs at most a sort of its ranges)."""
    ranges = cpu_ranges(text, _CPULIST, _MAX_CPULIST, MAX_CPUS - 1)
    return format_ranges(ranges) if ranges else None


def cpulist_of_mask(words):
    """nvmlDeviceGetCpuAffinity's bitmask (64-bit words, CPU 0 in bit 0 of the first) as a cpulist; None when empty."""
    cpus = set()
    for position, word in enumerate(list(words)[:MAX_CPUS // 64]):
        word = int(word) & 0xFFFFFFFFFFFFFFFF
        cpus.update(position * 64 + bit for bit in range(64) if word >> bit & 1)
    return cpulist_of(cpus)


def pci_key(bus_id):
    """A PCI bus id ("00000000:07:00.0", "0000:07:00.0", any case) as (domain, bus, device, function); None when not one."""
    match = _PCI_BUS_ID.fullmatch(bus_id) if isinstance(bus_id, str) else None
    return tuple(int(part, 16) for part in match.groups()) if match else None


def sysfs_pci_name(bus_id):
    """The GPU's directory name under /sys/bus/pci/devices ("0000:07:00.0"); None when bus_id is not a bus id."""
    key = pci_key(bus_id)
    return "%04x:%02x:%02x.%x" % key if key else None


def numa_of(value):
    """A NUMA node as the facts give it: an int 0..MAX_NUMA_NODE, else None (-1: the kernel does not know)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_NUMA_NODE:
        return value
    return None


def all_pairs(indexes, known=None):
    """gangplank_gpu_links for GPUs ``indexes``: every pair i < j, from ``known`` {(i, j): (level, nvlinks[, pcie])}, else
    unknown. Each entry has ``pcie``, the pair's PCIe path: an NVLinked pair's as given (unknown when not), any other
    pair's its level."""
    known = known or {}
    ordered = sorted(indexes)
    links = []
    for position, a in enumerate(ordered):
        for b in ordered[position + 1:]:
            found = known.get((a, b), ("unknown", 0))
            level, nvlinks = found[0], found[1]
            pcie = (found[2] if len(found) > 2 else "unknown") if level == "nvlink" else level
            links.append({"gpus": [a, b], "level": level, "nvlinks": nvlinks, "pcie": pcie})
    return links


class TopologyError(ValueError):
    """nvidia-smi topo -m printed something this reader does not take; the message says what, never quoting it."""


def parse_topo_matrix(output, indexes):
    """nvidia-smi topo -m, read strictly, for GPUs ``indexes`` (must be 0..n-1, the query's order).

    Returns (links, affinity): links {(i, j): (level, nvlinks, pcie)} for every pair, affinity {i: (cpu_affinity, numa_node)}.
    An NVLinked pair's PCIe path is not in the table: system where the two GPUs' NUMA Affinity (or CPU Affinity) says
    they hang off different NUMA nodes, else unknown.
    Raises TopologyError for anything else than what nvidia-smi prints: a header of GPU0..GPUn-1, the network cards
    (NIC<k>, or by device name such as mlx5_0 from older drivers; at most MAX_TOPO_NICS) and the CPU Affinity /
    NUMA Affinity / GPU NUMA ID columns; a row per GPU, then at most a row per network card named as its column;
    each link cell exactly X (the diagonal, also " X "), SYS, SOC (older drivers' SYS), NODE, PHB, PXB, PIX or NV<n>
    (n at most 99), the same both ways."""
    count = len(indexes)
    if sorted(indexes) != list(range(count)):
        raise TopologyError("the GPUs' indexes are not 0..%d" % (count - 1))
    if not isinstance(output, str) or len(output) > MAX_TOPO_CHARS:
        raise TopologyError("the output is not text of at most %d characters" % MAX_TOPO_CHARS)
    lines = [line[:-1] if line.endswith("\r") else line for line in output.split("\n")]
    while lines and lines[0] == "":
        lines.pop(0)
    if not lines:
        raise TopologyError("the output is empty")
    header = lines[0]
    if header.count(_SGR_ON) > 1 or header.count(_SGR_OFF) > 1:
        raise TopologyError("line 1 is not the table's header")
    columns = [cell for cell in header.replace(_SGR_ON, "").replace(_SGR_OFF, "").split("\t") if cell]
    gpu_columns = ["GPU%d" % index for index in range(count)]
    if columns[:count] != gpu_columns:
        raise TopologyError("the header does not start with GPU0..GPU%d (the %d GPUs the query found)" % (count - 1, count))
    rest = columns[count:]
    nics = 0
    while nics < len(rest) and rest[nics] not in _TOPO_EXTRA_COLUMNS and _TOPO_NIC.fullmatch(rest[nics]):
        nics += 1
    if nics > MAX_TOPO_NICS:
        raise TopologyError("the header has more than %d network cards" % MAX_TOPO_NICS)
    nic_names = rest[:nics]
    if len(set(nic_names)) != nics:
        raise TopologyError("the header names a network card twice")
    extra = rest[nics:]
    if any(name not in _TOPO_EXTRA_COLUMNS for name in extra) or extra != sorted(extra, key=_TOPO_EXTRA_COLUMNS.index) \
            or len(set(extra)) != len(extra):
        raise TopologyError("the header has a column other than GPU<n>, a network card, CPU Affinity, NUMA Affinity and GPU NUMA ID")
    cells = {}
    affinity = {}
    rows = 0
    for number, line in enumerate(lines[1:], 2):
        if line == "":
            break
        rows += 1
        if rows > MAX_TOPO_ROWS:
            raise TopologyError("the table has more than %d rows" % MAX_TOPO_ROWS)
        row = line.split("\t")
        name = row[0]
        if rows > count and name in nic_names:
            continue
        if rows > count or name != "GPU%d" % (rows - 1):
            raise TopologyError("line %d is not the row of GPU%d" % (number, min(rows, count + 1) - 1))
        gpu = rows - 1
        links = row[1:1 + count + nics]
        values = [cell for cell in row[1 + count + nics:] if cell]
        if len(links) != count + nics or len(values) != len(extra):
            raise TopologyError("line %d does not have a cell for each column" % number)
        for other, cell in enumerate(links[:count]):
            if other == gpu:
                if cell not in ("X", " X "):
                    raise TopologyError("line %d: GPU%d's own cell is not X" % (number, gpu))
                continue
            nvlink = _TOPO_NV.fullmatch(cell)
            if nvlink:
                cells[gpu, other] = ("nvlink", int(nvlink.group(1)))
            elif cell in _TOPO_LEVELS:
                cells[gpu, other] = (_TOPO_LEVELS[cell], 0)
            else:
                raise TopologyError("line %d: the cell of GPU%d and GPU%d is not one of %s" % (number, gpu, other, _TOPO_CELLS))
        for cell in links[count:]:
            if not (cell in ("X", " X ") or cell in _TOPO_LEVELS or _TOPO_NV.fullmatch(cell)):
                raise TopologyError("line %d: a network card's cell is not one of %s" % (number, _TOPO_CELLS))
        named = dict(zip(extra, values))
        cpu_text = named.get("CPU Affinity", "N/A")
        cpus = None if cpu_text == "N/A" else parse_cpulist(cpu_text)
        if cpu_text != "N/A" and cpus is None:
            raise TopologyError("line %d: CPU Affinity is not a cpulist or N/A" % number)
        numa_text = named.get("NUMA Affinity", "N/A")
        if numa_text != "N/A" and not _NUMA_TEXT.fullmatch(numa_text) and parse_cpulist(numa_text) is None:
            raise TopologyError("line %d: NUMA Affinity is not a NUMA node, a list of them or N/A" % number)
        numa = numa_of(int(numa_text)) if _NUMA_TEXT.fullmatch(numa_text) else None
        gpu_numa = named.get("GPU NUMA ID", "N/A")
        if gpu_numa != "N/A" and not _NUMA_TEXT.fullmatch(gpu_numa):
            raise TopologyError("line %d: GPU NUMA ID is not a NUMA node or N/A" % number)
        affinity[gpu] = (cpus, numa)
    if len(affinity) != count:
        raise TopologyError("the table has %d GPU rows; expected %d" % (len(affinity), count))
    links = {}
    for a in range(count):
        for b in range(a + 1, count):
            if cells[a, b] != cells[b, a]:
                raise TopologyError("GPU%d-GPU%d and GPU%d-GPU%d differ" % (a, b, b, a))
            level, nvlinks = cells[a, b]
            pcie = "unknown"
            if level == "nvlink" and _apart(affinity[a], affinity[b]):
                pcie = "system"
            links[a, b] = (level, nvlinks, pcie)
    return links, affinity


def _apart(first, second):
    """Whether two GPUs' (cpu_affinity, numa_node) say they hang off different NUMA nodes."""
    if first[1] is not None and second[1] is not None:
        return first[1] != second[1]
    if first[0] is not None and second[0] is not None:
        return _disjoint(first[0], second[0])
    return False


def _disjoint(first, second):
    """Whether two cpulists (parse_cpulist's) share no CPU: their ranges walked side by side."""
    left, right = (cpu_ranges(text, _CPULIST, _MAX_CPULIST, MAX_CPUS - 1) for text in (first, second))
    i = j = 0
    while i < len(left) and j < len(right):
        if left[i][1] < right[j][0]:
            i += 1
        elif right[j][1] < left[i][0]:
            j += 1
        else:
            return False
    return True


# --- simulated ---------------------------------------------------------------------------------

def parse_simulated(entries, hostname):
    """gangplank_simulated_gpus as gangplank_gpus entries; ValueError naming the entry path when malformed."""
    if not isinstance(entries, list):
        raise ValueError("%s: got %s; expected a list of mappings with model and memory" % (SIMULATED_VAR, show(entries)))
    gpus = []
    indexes = {}
    uuids = {}
    for position, entry in enumerate(entries):
        gpu = _simulated_gpu(position, entry, hostname)
        path = "%s[%d]" % (SIMULATED_VAR, position)
        if gpu["index"] in indexes:
            raise ValueError("%s.index: got %d; %s[%d] already has that index"
                             % (path, gpu["index"], SIMULATED_VAR, indexes[gpu["index"]]))
        if gpu["uuid"] in uuids:
            raise ValueError("%s.uuid: got %s; %s[%d] already has that uuid"
                             % (path, show(gpu["uuid"]), SIMULATED_VAR, uuids[gpu["uuid"]]))
        indexes[gpu["index"]] = position
        uuids[gpu["uuid"]] = position
        gpus.append(gpu)
    return gpus


def _simulated_gpu(position, entry, hostname):
    path = "%s[%d]" % (SIMULATED_VAR, position)
    if not isinstance(entry, dict):
        raise ValueError("%s: got %s; expected a mapping with model and memory (e.g. {model: NVIDIA L4, memory: 24Gi})"
                         % (path, show(entry)))
    # show(), not str(): str() of an integer key of more than 4,300 digits raises.
    unknown = sorted((show(key) for key in entry if key not in SIMULATED_KEYS))
    if unknown:
        raise ValueError("%s: unknown key %s; expected only %s" % (path, ", ".join(unknown), ", ".join(SIMULATED_KEYS)))

    model = entry.get("model")
    if not isinstance(model, str) or not model.strip(BLANKS) or has_control(model.strip(BLANKS)):
        # One line: ASCII blanks around it are dropped, a control character is refused (the model is a node label).
        raise ValueError("%s.model: got %s; expected a non-empty string without control characters (e.g. NVIDIA L4)"
                         % (path, "nothing" if "model" not in entry else show(model)))

    if "memory" not in entry:
        raise ValueError("%s.memory: got nothing; expected a size (e.g. 24Gi)" % path)
    try:
        memory = parse_size(entry["memory"])
    except ValueError as exc:
        raise ValueError("%s.memory: got %s; expected %s" % (path, show(entry["memory"]), exc)) from None
    if memory <= 0:
        raise ValueError("%s.memory: got %s; expected a size greater than 0" % (path, show(entry["memory"])))

    index = entry.get("index", position)
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise ValueError("%s.index: got %s; expected an integer >= 0" % (path, show(index)))

    uuid = entry.get("uuid")
    if uuid is None:
        uuid = "GPU-sim-%s-%d" % (hostname, index)
    elif not isinstance(uuid, str) or not uuid.strip(BLANKS) or has_control(uuid.strip(BLANKS)):
        raise ValueError("%s.uuid: got %s; expected a non-empty string without control characters" % (path, show(uuid)))

    capability = entry.get("compute_capability")
    if capability is not None:
        # A bounded number before str(): str() of an integer of more than 4,300 digits raises.
        if isinstance(capability, bool) or not isinstance(capability, (str, int, float)) or (
                isinstance(capability, int) and capability.bit_length() > 64) or not str(capability).strip(BLANKS) \
                or has_control(str(capability).strip(BLANKS)):
            raise ValueError("%s.compute_capability: got %s; expected a string such as \"8.0\"" % (path, show(capability)))
        capability = str(capability).strip(BLANKS)

    numa_node = entry.get("numa_node")
    if numa_node is not None and numa_of(numa_node) is None:
        raise ValueError("%s.numa_node: got %s; expected an integer from 0 to %d, or null" % (path, show(numa_node), MAX_NUMA_NODE))
    cpu_affinity = entry.get("cpu_affinity")
    if cpu_affinity is not None:
        if parse_cpulist(cpu_affinity) is None:
            raise ValueError("%s.cpu_affinity: got %s; expected a Linux cpulist such as \"0-31,64-95\" (CPUs below %d), or null"
                             % (path, show(cpu_affinity), MAX_CPUS))
        cpu_affinity = parse_cpulist(cpu_affinity)

    return gpu_entry(index, "simulated", uuid=uuid.strip(BLANKS), model=model.strip(BLANKS), memory_total=memory, memory_used=0,
                     memory_free=memory, compute_capability=capability, numa_node=numa_node, cpu_affinity=cpu_affinity)


def parse_simulated_links(entries, gpus):
    """gangplank_simulated_gpu_links for the simulated ``gpus``: every pair, the ones not listed unknown with 0 NVLinks.
    ValueError naming the entry path when malformed."""
    if entries is None:
        entries = []
    if not isinstance(entries, list):
        raise ValueError("%s: got %s; expected a list of {gpus: [i, j], level, nvlinks, pcie}" % (SIMULATED_LINKS_VAR, show(entries)))
    if entries and not gpus:
        raise ValueError("%s: got %d entries; expected none without %s" % (SIMULATED_LINKS_VAR, len(entries), SIMULATED_VAR))
    indexes = {gpu["index"] for gpu in gpus}
    limit = len(indexes) * (len(indexes) - 1) // 2
    if len(entries) > limit:
        raise ValueError("%s: got %d entries; expected at most %d (one per pair of the %d simulated GPUs)"
                         % (SIMULATED_LINKS_VAR, len(entries), limit, len(indexes)))
    known = {}
    for position, entry in enumerate(entries):
        path = "%s[%d]" % (SIMULATED_LINKS_VAR, position)
        if not isinstance(entry, dict):
            raise ValueError("%s: got %s; expected a mapping {gpus: [i, j], level, nvlinks, pcie}" % (path, show(entry)))
        unknown = sorted((show(key) for key in entry if key not in SIMULATED_LINK_KEYS))
        if unknown:
            raise ValueError("%s: unknown key %s; expected only %s" % (path, ", ".join(unknown), ", ".join(SIMULATED_LINK_KEYS)))
        pair = entry.get("gpus")
        if not isinstance(pair, list) or len(pair) != 2 or any(
                not isinstance(index, int) or isinstance(index, bool) or index not in indexes for index in pair) or pair[0] == pair[1]:
            raise ValueError("%s.gpus: got %s; expected two different indexes of %s" % (path, show(pair), SIMULATED_VAR))
        key = (min(pair), max(pair))
        if key in known:
            raise ValueError("%s.gpus: got %s; %s[%d] already describes that pair" % (path, show(pair), SIMULATED_LINKS_VAR, known[key][3]))
        level = entry.get("level")
        if not isinstance(level, str) or level not in LINK_LEVELS:
            raise ValueError("%s.level: got %s; expected one of %s" % (path, show(level), ", ".join(LINK_LEVELS)))
        nvlinks = entry.get("nvlinks", 0)
        if not isinstance(nvlinks, int) or isinstance(nvlinks, bool) or not 0 <= nvlinks <= MAX_NVLINKS \
                or (nvlinks > 0) != (level == "nvlink"):
            raise ValueError("%s.nvlinks: got %s; expected %s" % (
                path, show(nvlinks), "1 to %d with level nvlink" % MAX_NVLINKS if level == "nvlink" else "0 unless the level is nvlink"))
        pcie = entry.get("pcie", "unknown" if level == "nvlink" else level)
        if not isinstance(pcie, str) or pcie not in PCIE_LEVELS or (level != "nvlink" and pcie != level):
            raise ValueError("%s.pcie: got %s; expected %s" % (
                path, show(pcie), "one of " + ", ".join(PCIE_LEVELS) if level == "nvlink" else "%s (or none), the level" % level))
        known[key] = (level, nvlinks, pcie, position)
    return all_pairs(indexes, {key: value[:3] for key, value in known.items()})


# --- nvidia-smi --------------------------------------------------------------------------------

def _smi_value(value):
    """One nvidia-smi CSV value: '[N/A]', '[Not Supported]' and other bracketed notes -> None."""
    value = value.strip()
    if not value or value in ("N/A", "Not Supported") or (value.startswith("[") and value.endswith("]")):
        return None
    return value


def _smi_int(value):
    value = _smi_value(value)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def _smi_mib(value):
    mib = _smi_int(value)
    return None if mib is None else mib * MIB


def _smi_bool(value):
    return {"enabled": True, "disabled": False}.get((_smi_value(value) or "").lower())


def parse_nvidia_smi(output):
    """Parse the CSV of NVIDIA_SMI_ARGS; return (gpus, driver_version)."""
    gpus = []
    driver_version = None
    lines = [line for line in output.splitlines() if line.strip()]
    for position, line in enumerate(lines):
        row = next(csv.reader([line], skipinitialspace=True))
        if len(row) != len(NVIDIA_SMI_FIELDS):
            gpus.append(gpu_entry(position, "nvidia-smi", error="nvidia-smi printed %s; expected %d comma-separated fields"
                                  % (show(line), len(NVIDIA_SMI_FIELDS))))
            continue
        values = dict(zip(NVIDIA_SMI_FIELDS, row))
        index = _smi_int(values["index"])
        current = _smi_bool(values["mig.mode.current"])
        pending = _smi_bool(values["mig.mode.pending"])
        gpus.append(gpu_entry(
            position if index is None else index,
            "nvidia-smi",
            uuid=_smi_value(values["uuid"]),
            model=_smi_value(values["name"]),
            memory_total=_smi_mib(values["memory.total"]),
            memory_used=_smi_mib(values["memory.used"]),
            memory_free=_smi_mib(values["memory.free"]),
            pci_bus_id=_smi_value(values["pci.bus_id"]),
            compute_capability=_smi_value(values["compute_cap"]),
            persistence_mode=_smi_bool(values["persistence_mode"]),
            mig_mode=None if current is None and pending is None else {"current": current, "pending": pending},
        ))
        if driver_version is None:
            driver_version = _smi_value(values["driver_version"])
    return gpus, driver_version


# --- the collector -----------------------------------------------------------------------------

class GpuFactCollector:
    """Collects gangplank_gpus and gangplank_gpu_driver.

    nvml: the imported pynvml module, or None when it could not be imported.
    run_command: callable(argv) -> (rc, stdout, stderr), e.g. AnsibleModule.run_command.
    which: callable(name) -> path or None, e.g. AnsibleModule.get_bin_path.
    simulated: gangplank_simulated_gpus; a non-empty list wins over the hardware.
    simulated_links: gangplank_simulated_gpu_links, the simulated GPUs' pairs (the others are unknown).
    hostname: used in the uuids of simulated GPUs.
    topology: read each GPU's NUMA node and CPU affinity and the links between GPUs (self.links after collect()).
    sysfs: where sysfs is mounted (the NUMA node and local CPUs of a GPU NVML does not tell them for).
    """

    name = "gangplank_gpus"
    fact_ids = frozenset(("gangplank_gpus", "gangplank_gpu_driver", "gangplank_gpu_links"))

    def __init__(self, nvml=None, run_command=None, which=None, simulated=None, hostname=None, simulated_links=None,
                 topology=False, sysfs="/sys"):
        self.nvml = nvml
        self.run_command = run_command
        self.which = which
        self.simulated = simulated
        self.simulated_links = simulated_links
        self.hostname = socket.gethostname() if hostname is None else hostname
        self.topology = topology
        self.sysfs = sysfs
        self.links = []

    def collect(self):
        """Return (gpus, driver); gangplank_gpu_links in self.links. Raises ValueError only for a malformed simulated list."""
        self.links = []
        if self.simulated:
            gpus = parse_simulated(self.simulated, self.hostname)
            driver = driver_entry(True, SIMULATED_REASON, "simulated", gpu_count=len(gpus))
            if len(gpus) > MAX_TOPOLOGY_GPUS:
                driver["topology"] = TOO_MANY_GPUS
            else:
                self.links = parse_simulated_links(self.simulated_links, gpus)
            return gpus, driver
        parse_simulated_links(self.simulated_links, [])
        if self.nvml is not None:
            return self._from_nvml()
        return self._from_nvidia_smi()

    # NVML

    def _from_nvml(self):
        nvml = self.nvml
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as exc:
            return [], driver_entry(False, self._init_reason(exc))
        try:
            return self._nvml_session()
        finally:
            try:
                nvml.nvmlShutdown()
            except nvml.NVMLError:
                pass  # the facts are read; a failing shutdown changes nothing for them

    def _init_reason(self, exc):
        reason = "NVML could not be initialised: nvmlInit raised %s (%s)" % (type(exc).__name__, exc)
        for name, hint in _NVML_INIT_HINTS:
            if _is_nvml_error(exc, (name,)):
                return "%s; %s" % (reason, hint)
        return reason

    def _optional(self, call, *args):
        """call(*args), or None when NVML raises."""
        try:
            return call(*args)
        except self.nvml.NVMLError:
            return None

    def _unless_not_supported(self, call, *args):
        """call(*args), or None when this GPU or driver does not support it; other NVML errors are raised."""
        try:
            return call(*args)
        except self.nvml.NVMLError as exc:
            if _is_nvml_error(exc, _NOT_SUPPORTED):
                return None
            raise

    def _nvml_session(self):
        nvml = self.nvml
        driver_version = _text(self._optional(nvml.nvmlSystemGetDriverVersion))
        cuda_version = cuda_version_text(self._optional(nvml.nvmlSystemGetCudaDriverVersion))
        try:
            count = nvml.nvmlDeviceGetCount()
        except nvml.NVMLError as exc:
            reason = "nvmlDeviceGetCount raised %s (%s)" % (type(exc).__name__, exc)
            return [], driver_entry(False, reason, None, driver_version, cuda_version)
        read = [self._nvml_gpu(index) for index in range(count)]
        gpus = [gpu for gpu, _handle in read]
        driver = driver_entry(True, None, "nvml", driver_version, cuda_version, len(gpus))
        if self.topology:
            for gpu, handle in read:
                if handle is not None:
                    gpu["numa_node"], gpu["cpu_affinity"] = self._nvml_affinity(handle, gpu["pci_bus_id"])
            if count > MAX_TOPOLOGY_GPUS:
                driver["topology"] = TOO_MANY_GPUS
            else:
                self.links = self._nvml_links(read)
        return gpus, driver

    def _nvml_gpu(self, index):
        """(gangplank_gpus entry, its NVML handle or None when it could not be read)."""
        nvml = self.nvml
        handle = None
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            memory = nvml.nvmlDeviceGetMemoryInfo(handle)
            major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
            gpu = gpu_entry(
                index,
                "nvml",
                uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
                model=_text(nvml.nvmlDeviceGetName(handle)),
                memory_total=int(memory.total),
                memory_used=int(memory.used),
                memory_free=int(memory.free),
                pci_bus_id=_text(getattr(nvml.nvmlDeviceGetPciInfo(handle), "busId", None)),
                compute_capability="%d.%d" % (major, minor),
            )
            persistence = self._unless_not_supported(nvml.nvmlDeviceGetPersistenceMode, handle)
            if persistence is not None:
                gpu["persistence_mode"] = persistence == nvml.NVML_FEATURE_ENABLED
            mig_mode = self._unless_not_supported(nvml.nvmlDeviceGetMigMode, handle)
            if mig_mode is not None:
                current, pending = mig_mode
                enabled = nvml.NVML_DEVICE_MIG_ENABLE
                gpu["mig_mode"] = {"current": current == enabled, "pending": pending == enabled}
                if current == enabled:
                    gpu["mig_devices"] = self._mig_devices(handle)
        except nvml.NVMLError as exc:
            return gpu_entry(index, "nvml", error=str(exc)), None
        return gpu, handle

    # NVML topology

    def _sysfs_value(self, bus_id, name):
        """/sys/bus/pci/devices/<bus id>/<name> as text (first 64 KiB), or None."""
        directory = sysfs_pci_name(bus_id)
        if directory is None:
            return None
        try:
            with open(os.path.join(self.sysfs, "bus", "pci", "devices", directory, name), "rb") as handle:
                return handle.read(65536).decode("ascii", errors="replace").strip()
        except OSError:
            return None

    def _sysfs_numa(self, bus_id):
        text = self._sysfs_value(bus_id, "numa_node")
        return numa_of(int(text)) if text is not None and _NUMA_TEXT.fullmatch(text) else None

    def _nvml_affinity(self, handle, bus_id):
        """(numa_node, cpu_affinity) of one GPU: NVML where it tells, else sysfs; None for what neither tells."""
        nvml = self.nvml
        numa = None
        call = getattr(nvml, "nvmlDeviceGetNumaNodeId", None)
        if call is not None:
            value = self._optional(call, handle)
            numa = numa_of(value)
            if value is not None and numa is None:
                return None, self._nvml_cpus(handle, bus_id)  # NVML says: not known (-1)
        if numa is None:
            numa = self._sysfs_numa(bus_id)
        return numa, self._nvml_cpus(handle, bus_id)

    def _nvml_cpus(self, handle, bus_id):
        # Words enough for the online CPUs, and never fewer than 16 (1,024 CPUs): a CPU number may exceed the count.
        words = min(max(-(-(os.cpu_count() or 1) // 64), 16), MAX_CPUS // 64)
        mask = self._optional(self.nvml.nvmlDeviceGetCpuAffinity, handle, words)
        cpus = None
        if mask is not None:
            try:
                cpus = cpulist_of_mask(mask)
            except (TypeError, ValueError):
                cpus = None
        return cpus if cpus is not None else parse_cpulist(self._sysfs_value(bus_id, "local_cpulist"))

    def _nvlink_remotes(self, handle):
        """Counter of the remote PCI devices (pci_key) of this GPU's active NVLinks; None when NVML fails."""
        nvml = self.nvml
        remote_info = getattr(nvml, "nvmlDeviceGetNvLinkRemotePciInfo_v2", None) or nvml.nvmlDeviceGetNvLinkRemotePciInfo
        remotes = Counter()
        for link in range(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18)):
            try:
                state = nvml.nvmlDeviceGetNvLinkState(handle, link)
            except nvml.NVMLError as exc:
                # No such link on this GPU, or no NVLink at all.
                if _is_nvml_error(exc, _NOT_SUPPORTED + ("NVMLError_InvalidArgument",)):
                    continue
                return None
            if state != nvml.NVML_FEATURE_ENABLED:
                continue
            try:
                remote = pci_key(_text(getattr(remote_info(handle, link), "busId", None)))
            except nvml.NVMLError:
                return None
            if remote is None:
                return None
            remotes[remote] += 1
        return remotes

    def _nvml_links(self, read):
        """gangplank_gpu_links from NVML: NVLinks (direct, or through NVSwitches), else the common ancestor."""
        nvml = self.nvml
        handles = {gpu["index"]: handle for gpu, handle in read}
        buses = {pci_key(gpu["pci_bus_id"]): gpu["index"] for gpu, handle in read if handle is not None and pci_key(gpu["pci_bus_id"])}
        remotes = {index: self._nvlink_remotes(handle) if handle is not None else None for index, handle in handles.items()}
        direct = Counter()
        switch = {}
        for index, seen in remotes.items():
            if seen is None:
                continue
            switch[index] = sum(count for remote, count in seen.items() if remote not in buses)
            for remote, count in seen.items():
                other = buses.get(remote)
                if other is not None and other != index:
                    pair = (min(index, other), max(index, other))
                    direct[pair] = max(direct[pair], count)
        known = {}
        ordered = sorted(handles)
        for position, a in enumerate(ordered):
            for b in ordered[position + 1:]:
                if remotes[a] is None or remotes[b] is None:
                    continue
                nvlinks = direct[a, b] + (min(switch[a], switch[b]) if switch[a] and switch[b] else 0)
                level = self._optional(nvml.nvmlDeviceGetTopologyCommonAncestor, handles[a], handles[b])
                pcie = _ANCESTOR_LEVELS.get(level, "unknown") if isinstance(level, int) else "unknown"
                known[a, b] = ("nvlink", nvlinks, pcie) if nvlinks > 0 else (pcie, 0)
        return all_pairs(ordered, known)

    def _mig_devices(self, handle):
        nvml = self.nvml
        devices = []
        for slot in range(nvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
            try:
                mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
            except nvml.NVMLError_NotFound:
                continue
            memory = nvml.nvmlDeviceGetMemoryInfo(mig)
            devices.append({
                "index": slot,
                "uuid": _text(nvml.nvmlDeviceGetUUID(mig)),
                "memory_total": int(memory.total),
                "memory_used": int(memory.used),
                "memory_free": int(memory.free),
            })
        return devices

    # nvidia-smi

    def _from_nvidia_smi(self):
        path = self.which("nvidia-smi") if self.which is not None else None
        if not path or self.run_command is None:
            return [], driver_entry(False, NOTHING_REASON)
        try:
            rc, out, err = self.run_command([path] + list(NVIDIA_SMI_ARGS))
        except OSError as exc:
            return [], driver_entry(False, "nvidia-ml-py (pynvml) is not installed and %s could not be run: %s" % (path, exc))
        if rc != 0:
            said = (err or "").strip() or (out or "").strip() or "no output"
            return [], driver_entry(False, "nvidia-ml-py (pynvml) is not installed and nvidia-smi exited with %d: %s" % (rc, said))
        gpus, driver_version = parse_nvidia_smi(out or "")
        driver = driver_entry(True, None, "nvidia-smi", driver_version, None, len(gpus))
        if self.topology and gpus:
            self._smi_topology(path, gpus, driver)
        return gpus, driver

    def _smi_topology(self, path, gpus, driver):
        """Links, NUMA nodes and CPU affinity from nvidia-smi topo -m; on anything unexpected every pair unknown and
        gangplank_gpu_driver.topology says why."""
        if len(gpus) > MAX_TOPOLOGY_GPUS:
            driver["topology"] = TOO_MANY_GPUS
            return
        indexes = [gpu["index"] for gpu in gpus]
        if len(set(indexes)) != len(indexes):
            driver["topology"] = "not read: nvidia-smi listed a GPU index twice"
            return
        self.links = all_pairs(indexes)
        try:
            rc, out, err = self.run_command([path] + list(NVIDIA_SMI_TOPO_ARGS))
        except OSError as exc:
            driver["topology"] = "not read: nvidia-smi topo -m could not be run: %s" % exc
            return
        if rc != 0:
            driver["topology"] = "not read: nvidia-smi topo -m exited with %s" % show(rc)
            return
        try:
            if any(gpu["error"] for gpu in gpus):
                raise TopologyError("a GPU could not be read from nvidia-smi --query-gpu")
            links, affinity = parse_topo_matrix(out or "", indexes)
        except TopologyError as exc:
            driver["topology"] = "not read: nvidia-smi topo -m: %s" % exc
            return
        for gpu in gpus:
            gpu["cpu_affinity"], gpu["numa_node"] = affinity[gpu["index"]]
        self.links = all_pairs(indexes, links)


def mps_control_path(name, gpus, which):
    """gangplank_gpu_driver.mps_control: the absolute path of the CUDA MPS control binary, or None.

    ``name``: a bare command name, looked up with ``which`` (e.g. AnsibleModule.get_bin_path: PATH), or an absolute
    path, taken when it is an executable regular file; empty (or None) looks nothing up. A host without GPUs (none read and none
    simulated) has no use for MPS: None. Simulated GPUs look it up too, so a test bed may name a stand-in.
    Raises ValueError for another name (a relative path, a control character)."""
    if name is None:
        return None
    if not isinstance(name, str) or has_control(name) or ("/" in name and not name.startswith("/")):
        raise ValueError("mps_control: got %s; expected a command name (looked up on PATH) or an absolute path"
                         % show(name))
    if not gpus or not name:
        return None
    if name.startswith("/"):
        return name if os.path.isfile(name) and os.access(name, os.X_OK) else None
    found = which(name) if which is not None else None
    return found if isinstance(found, str) and found.startswith("/") else None


def collect(nvml=None, run_command=None, which=None, simulated=None, hostname=None):
    """Return (gangplank_gpus, gangplank_gpu_driver) without the topology; see GpuFactCollector."""
    return GpuFactCollector(nvml=nvml, run_command=run_command, which=which, simulated=simulated, hostname=hostname).collect()


def collect_facts(nvml=None, run_command=None, which=None, simulated=None, hostname=None, simulated_links=None, sysfs="/sys"):
    """The three facts, gangplank_gpus, gangplank_gpu_links and gangplank_gpu_driver, as a dict (docs/facts.md)."""
    collector = GpuFactCollector(nvml=nvml, run_command=run_command, which=which, simulated=simulated, hostname=hostname,
                                 simulated_links=simulated_links, topology=True, sysfs=sysfs)
    gpus, driver = collector.collect()
    return {"gangplank_gpus": gpus, "gangplank_gpu_links": collector.links, "gangplank_gpu_driver": driver}
