# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""From a host's facts to its node labels, its scheduler node entry and a readable table.

Input is one host's variables (``hostvars[host]``): ``ansible_facts`` from setup
(processor_vcpus, memtotal_mb, architecture, system), ``gangplank_gpus`` /
``gangplank_gpu_driver`` / ``gangplank_nvme`` from this collection's facts modules,
and the operator's host variables ``gangplank_labels``, ``gangplank_taints``,
``gangplank_unschedulable``, ``gangplank_reserved`` ({cpu, memory} kept for the
system) and ``gangplank_gpu_sharing`` (mps or none). Pure functions; no Ansible import.
"""

from __future__ import annotations

import math
import re
from collections import Counter

from ansible_collections.gangplank.platform.plugins.module_utils.messages import printable, show
from ansible_collections.gangplank.platform.plugins.module_utils.problem_format import (
    GPU_SHARING_MODES, GPU_SHARING_MPS, GPU_SHARING_NONE,
)
from ansible_collections.gangplank.platform.plugins.module_utils.quantity import (
    BLANKS, MAX_SIZE, format_cpulist, format_size, parse_cpu, parse_cpulist, parse_size,
)

MIB = 2 ** 20

# NVIDIA GPU Feature Discovery's family names by compute capability (gpu-feature-discovery,
# internal/lm/resource.go getArchFamily).
_FAMILIES = {1: "tesla", 2: "fermi", 3: "kepler", 5: "maxwell", 6: "pascal", 9: "hopper",
             10: "blackwell", 12: "blackwell"}
_ARCHITECTURES = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64",
                  "ppc64le": "ppc64le", "s390x": "s390x"}


# Ansible's boolean conversion (ansible.module_utils.parsing.convert_bool), for INI inventories' "false".
_TRUE = ("y", "yes", "on", "1", "true", "t", 1, 1.0, True)
_FALSE = ("n", "no", "off", "0", "false", "f", 0, 0.0, False)
# An inventory host name becomes container names and directories (deploy) and a label value: one path
# component the engines accept ([a-zA-Z0-9][a-zA-Z0-9_.-]*), so no "../x", "-node" or "fe80::1".
_HOST_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]{0,252}")
HOST_NAME_EXPECTED = ("a host name of letters, digits, '.', '_' and '-' that starts with a letter or digit "
                      "(it names containers and directories)")
_MAX_NUMBER_DIGITS = 64
# A count from the facts ("64"): ASCII digits, the whole string after ASCII blanks (str.isdigit() takes "²").
_COUNT = re.compile(r"[0-9]{1,18}")


class NodeFactsError(ValueError):
    """Host variables or facts that cannot describe a node; the message names the host and key."""


def valid_host_name(host):
    return isinstance(host, str) and bool(_HOST_NAME.fullmatch(host))


def boolean(value, host, key):
    """``value`` as Ansible's ``bool`` filter reads it (so "false" from an INI inventory is false)."""
    normalized = value.strip().lower() if isinstance(value, str) else value
    if isinstance(normalized, (str, bool, int, float)):
        if normalized in _TRUE:
            return True
        if normalized in _FALSE:
            return False
    raise NodeFactsError("%s: %s: got %s; expected a boolean (true/false, yes/no, on/off, 1/0)" % (host, key, show(value)))


def _fact(host, key, value, check, expected):
    """``value`` when ``check`` accepts it, else NodeFactsError naming the host and the fact."""
    if not check(value):
        raise NodeFactsError("%s: %s: got %s; expected %s (gather the facts again)" % (host, key, show(value), expected))
    return value


def _whole(value):
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2 ** 63


def _text(value):
    return isinstance(value, str) and bool(value) and value.strip() != "[N/A]"


def _count(host, key, value):
    """A whole number from the facts, also as a string of ASCII digits ("64")."""
    if isinstance(value, str) and _COUNT.fullmatch(value.strip(BLANKS)):
        value = int(value.strip(BLANKS))
    return _fact(host, key, value, _whole, "a whole number")


def _label_text(host, key, value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int) and value.bit_length() <= _MAX_NUMBER_DIGITS * 3 and len(str(value)) <= _MAX_NUMBER_DIGITS:
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)
    raise NodeFactsError("%s: %s: got %s; expected a string, number or boolean" % (host, key, show(value)))


def gpu_family(compute_capability):
    """GFD's nvidia.com/gpu.family for a compute capability such as "8.0", or None."""
    try:
        major, minor = (int(part) for part in str(compute_capability).split(".")[:2])
    except (TypeError, ValueError):
        return None
    if major == 7:
        return "volta" if minor < 5 else "turing"
    if major == 8:
        return "ampere" if minor < 9 else "ada-lovelace"
    return _FAMILIES.get(major)


def _brief(value):
    """A fact as text: itself when it is a string, else its brief rendering (never a whole huge value)."""
    return value if isinstance(value, str) else show(value)


def _host(hostvars):
    return printable(hostvars.get("inventory_hostname", "host"))


def _facts(hostvars):
    facts = hostvars.get("ansible_facts") or {}
    if not isinstance(facts, dict):
        raise NodeFactsError("%s: ansible_facts: got %s; expected a mapping" % (_host(hostvars), show(facts)))
    return facts


def _entries(hostvars, key):
    """The facts' list ``key`` (gangplank_gpus, gangplank_nvme), each entry a mapping."""
    entries = _facts(hostvars).get(key) or []
    host = _host(hostvars)
    _fact(host, "ansible_facts.%s" % key, entries, lambda value: isinstance(value, list), "a list")
    for position, entry in enumerate(entries):
        _fact(host, "ansible_facts.%s[%d]" % (key, position), entry, lambda value: isinstance(value, dict), "a mapping")
    return entries


def _mig_on(gpu):
    mig = gpu.get("mig_mode") or {}
    return isinstance(mig, dict) and bool(mig.get("current"))


def usable_gpus(hostvars):
    """GPUs the scheduler may place on: no NVML error, and not partitioned by MIG.

    Each has an index, a UUID, a model and its memory; NodeFactsError names the host and field otherwise
    (nvidia-smi prints "[N/A]" for what it cannot read).
    """
    host = _host(hostvars)
    usable = []
    for position, gpu in enumerate(_entries(hostvars, "gangplank_gpus")):
        if gpu.get("error") or _mig_on(gpu):
            continue
        path = "ansible_facts.gangplank_gpus[%d]." % position
        index = _count(host, path + "index", gpu.get("index"))
        _fact(host, path + "uuid", gpu.get("uuid"), _text, "the GPU's UUID")
        _fact(host, path + "model", gpu.get("model"), _text, "the GPU's model name")
        _fact(host, path + "memory_total", gpu.get("memory_total"), lambda value: _whole(value) and value > 0,
              "the GPU's memory in bytes")
        numa = _numa(host, path + "numa_node", gpu.get("numa_node"))
        usable.append(dict(gpu, index=index, numa_node=numa))
    return usable


def usable_nvme(hostvars):
    """NVMe namespaces instances can keep data on: mounted ones, each with a name and a size."""
    host = _host(hostvars)
    usable = []
    for position, device in enumerate(_entries(hostvars, "gangplank_nvme")):
        if not device.get("mount"):
            continue
        path = "ansible_facts.gangplank_nvme[%d]." % position
        _fact(host, path + "name", device.get("name"), _text, "the device's name")
        _fact(host, path + "size", device.get("size"), _whole, "the device's size in bytes")
        _fact(host, path + "mount", device.get("mount"), lambda value: isinstance(value, str), "a mount point")
        _fact(host, path + "labels", device.get("labels") or [],
              lambda value: isinstance(value, list) and all(isinstance(label, str) for label in value), "a list of labels")
        usable.append(device)
    return usable


# gangplank_gpu_links (docs/facts.md): the levels a pair may have, and the most pairs read (64 GPUs).
LINK_LEVELS = ("nvlink", "board", "switch", "multi_switch", "host_bridge", "numa", "system", "unknown")
MAX_GPU_LINKS = 64 * 63 // 2
# The steps the largest NVLink clique may take before it settles for the largest found (64 GPUs at most).
_CLIQUE_STEPS = 100000


def _numa(host, path, value):
    """A GPU's numa_node from the facts: None, or a whole number."""
    if value is None:
        return None
    return _fact(host, path, value, lambda number: _whole(number) and number <= 4095, "a NUMA node (0 to 4095) or null")


def gpu_links(hostvars, gpus=None):
    """The pairs of ``gpus`` (default: the usable ones) from gangplank_gpu_links whose level is known, as the scheduler's
    ``gpu_links``: [{gpus: [a, b], level, nvlinks[, pcie]}], a < b by the GPUs' own index (pcie for an NVLinked pair whose
    PCIe path is known). A pair not listed is unknown."""
    host = _host(hostvars)
    links = _facts(hostvars).get("gangplank_gpu_links") or []
    _fact(host, "ansible_facts.gangplank_gpu_links", links,
          lambda value: isinstance(value, list) and len(value) <= MAX_GPU_LINKS, "a list of at most %d pairs" % MAX_GPU_LINKS)
    offered = {gpu["index"] for gpu in (usable_gpus(hostvars) if gpus is None else gpus)}
    result = {}
    for position, link in enumerate(links):
        path = "ansible_facts.gangplank_gpu_links[%d]" % position
        _fact(host, path, link, lambda value: isinstance(value, dict), "a mapping {gpus, level, nvlinks}")
        pair = _fact(host, path + ".gpus", link.get("gpus"),
                     lambda value: isinstance(value, list) and len(value) == 2 and all(_whole(index) for index in value)
                     and value[0] != value[1], "two different GPU indexes")
        level = _fact(host, path + ".level", link.get("level"), lambda value: isinstance(value, str) and value in LINK_LEVELS,
                      "one of " + ", ".join(LINK_LEVELS))
        nvlinks = _fact(host, path + ".nvlinks", link.get("nvlinks", 0), lambda value: _whole(value) and value <= 64,
                        "a number of NVLinks (0 to 64)")
        # pcie: the PCIe path beside an NVLinked pair's NVLinks (facts written before it was read lack it: unknown).
        pcie = _fact(host, path + ".pcie", link.get("pcie", "unknown"),
                     lambda value: isinstance(value, str) and value in LINK_LEVELS[1:], "one of " + ", ".join(LINK_LEVELS[1:]))
        if level == "unknown" or not set(pair) <= offered:
            continue
        entry = {"gpus": [min(pair), max(pair)], "level": level, "nvlinks": nvlinks}
        if level == "nvlink" and pcie != "unknown":
            entry["pcie"] = pcie
        result[min(pair), max(pair)] = entry
    return [result[key] for key in sorted(result)]


def nvlink_groups(links):
    """The GPUs joined by NVLink (connected components of the nvlink pairs, 2 GPUs or more), each sorted."""
    parent = {}

    def root(index):
        while parent.setdefault(index, index) != index:
            parent[index] = parent[parent[index]]
            index = parent[index]
        return index
    for link in links:
        if link["level"] == "nvlink":
            parent[root(link["gpus"][0])] = root(link["gpus"][1])
    groups = {}
    for index in parent:
        groups.setdefault(root(index), []).append(index)
    return sorted(sorted(group) for group in groups.values() if len(group) > 1)


def nvlink_domain(links):
    """The size of the largest set of GPUs every two of which are NVLinked (Bron-Kerbosch with a pivot, bounded)."""
    neighbours = {}
    for link in links:
        if link["level"] == "nvlink":
            a, b = link["gpus"]
            neighbours.setdefault(a, set()).add(b)
            neighbours.setdefault(b, set()).add(a)
    best = [1 if neighbours else 0]
    steps = [0]

    def extend(size, candidates, excluded):
        steps[0] += 1
        if not candidates and not excluded:
            best[0] = max(best[0], size)
            return
        if steps[0] > _CLIQUE_STEPS or size + len(candidates) <= best[0]:
            return
        pivot = max(candidates | excluded, key=lambda index: len(neighbours[index] & candidates))
        for index in sorted(candidates - neighbours[pivot]):
            extend(size + 1, candidates & neighbours[index], excluded & neighbours[index])
            candidates = candidates - {index}
            excluded = excluded | {index}
    extend(0, set(neighbours), set())
    return best[0]


def hardware_labels(hostvars):
    """Labels implied by the facts, named as GPU Feature Discovery names them where it has a name."""
    facts = _facts(hostvars)
    hostname = hostvars["inventory_hostname"] if "inventory_hostname" in hostvars else facts.get("hostname", "")
    labels = {"gangplank.io/hostname": _brief(hostname)}
    if facts.get("architecture"):
        architecture = _brief(facts["architecture"])
        labels["gangplank.io/arch"] = _ARCHITECTURES.get(architecture, architecture.lower())
    if facts.get("system"):
        labels["gangplank.io/os"] = _brief(facts["system"]).lower()
    gpus = usable_gpus(hostvars)
    all_gpus = _entries(hostvars, "gangplank_gpus")
    if all_gpus:
        labels["nvidia.com/mig.capable"] = "true" if any(g.get("mig_mode") is not None for g in all_gpus) else "false"
    if gpus:
        # A node label is a summary: on a mixed node it names the most common model (ties: lowest
        # index). The scheduler itself matches every device's own model.
        counts = Counter(gpu["model"] for gpu in gpus)
        product = max(counts, key=lambda model: (counts[model], -min(g["index"] for g in gpus if g["model"] == model)))
        first = min((gpu for gpu in gpus if gpu["model"] == product), key=lambda gpu: gpu["index"])
        labels["nvidia.com/gpu.present"] = "true"
        labels["nvidia.com/gpu.count"] = str(len(gpus))
        labels["nvidia.com/gpu.product"] = "-".join(product.split())
        labels["nvidia.com/gpu.memory"] = str(int(first["memory_total"]) // MIB)
        capability = _brief(first.get("compute_capability") or "")
        family = gpu_family(capability)
        if family:
            labels["nvidia.com/gpu.family"] = family
        if capability:
            major, _dot, minor = capability.partition(".")
            labels["nvidia.com/gpu.compute.major"] = major
            labels["nvidia.com/gpu.compute.minor"] = minor or "0"
        if any(gpu.get("source") == "simulated" for gpu in gpus):
            labels["gangplank.io/gpu.simulated"] = "true"
        domain = nvlink_domain(gpu_links(hostvars, gpus))
        if domain > 1:
            labels["gangplank.io/gpu.nvlink-domain"] = str(domain)
    for device in usable_nvme(hostvars):
        for label in device.get("labels") or []:
            labels["gangplank.io/nvme.%s" % label] = "true"
    return dict(sorted(labels.items()))


def node_labels(hostvars):
    """Hardware labels plus the operator's ``gangplank_labels`` (which win on the same key)."""
    labels = hardware_labels(hostvars)
    operator = hostvars.get("gangplank_labels") or {}
    if not isinstance(operator, dict):
        raise NodeFactsError("%s: gangplank_labels must be a mapping of label to value, got %s"
                             % (_host(hostvars), show(operator)))
    for key, value in operator.items():
        labels[_brief(key)] = _label_text(_host(hostvars), "gangplank_labels.%s" % printable(key), value)
    return dict(sorted(labels.items()))


def _reserved(hostvars, host):
    reserved = hostvars.get("gangplank_reserved") or {}
    if not isinstance(reserved, dict) or set(reserved) - {"cpu", "memory"}:
        raise NodeFactsError("%s: gangplank_reserved must be a mapping with cpu and/or memory, got %s"
                             % (host, show(reserved)))
    try:
        cpu = parse_cpu(reserved.get("cpu", 0))
    except ValueError as error:
        raise NodeFactsError("%s: gangplank_reserved.cpu: got %s; expected %s" % (host, show(reserved["cpu"]), error))
    try:
        memory = parse_size(reserved.get("memory", 0))
    except ValueError as error:
        raise NodeFactsError("%s: gangplank_reserved.memory: got %s; expected %s"
                             % (host, show(reserved["memory"]), error))
    return cpu, memory


def gpu_sharing(hostvars):
    """How the host enforces GPU shares, as the cluster role's cluster_gpu_sharing says: ``gangplank_gpu_sharing``
    when set, else mps where the facts found the MPS control binary (gangplank_gpu_driver.mps_control), else none."""
    host = _host(hostvars)
    if hostvars.get("gangplank_gpu_sharing") is not None:
        value = hostvars["gangplank_gpu_sharing"]
        if not isinstance(value, str) or value not in GPU_SHARING_MODES:
            raise NodeFactsError("%s: gangplank_gpu_sharing: got %s; expected %s (how the host enforces GPU shares)"
                                 % (host, show(value), " or ".join(GPU_SHARING_MODES)))
        return value
    driver = _facts(hostvars).get("gangplank_gpu_driver")
    found = driver.get("mps_control") if isinstance(driver, dict) else None
    return GPU_SHARING_MPS if found else GPU_SHARING_NONE


def scheduler_node(hostvars):
    """The scheduler's ``nodes.<host>`` entry (docs/problem-format.md) for one host."""
    host = _host(hostvars)
    facts = _facts(hostvars)
    missing = [key for key in ("processor_vcpus", "memtotal_mb") if key not in facts]
    if missing:
        raise NodeFactsError("%s: ansible_facts lacks %s; gather the hardware facts first (setup)"
                             % (host, ", ".join(missing)))
    reserved_cpu, reserved_memory = _reserved(hostvars, host)
    cpu = max(_count(host, "ansible_facts.processor_vcpus", facts["processor_vcpus"]) * 1000 - reserved_cpu, 0)
    memory = max(_count(host, "ansible_facts.memtotal_mb", facts["memtotal_mb"]) * MIB - reserved_memory, 0)
    taints = hostvars.get("gangplank_taints") or []
    if not isinstance(taints, list):
        raise NodeFactsError("%s: gangplank_taints: got %s; expected a list of {key, value, effect}" % (host, show(taints)))
    gpus = sorted(usable_gpus(hostvars), key=lambda gpu: gpu["index"])
    node = {
        "cpu": "%dm" % cpu,
        "memory": memory,
        "labels": node_labels(hostvars),
        "taints": list(taints),
        "unschedulable": boolean(hostvars.get("gangplank_unschedulable", False), host, "gangplank_unschedulable"),
        "gpus": scheduler_gpus(gpus),
        "nvme": [{"name": device["name"], "size": device["size"], "labels": list(device.get("labels") or []),
                  "mount": device["mount"]}
                 for device in sorted(usable_nvme(hostvars), key=lambda device: device["name"])],
        "gpu_sharing": gpu_sharing(hostvars),
    }
    links = gpu_links(hostvars, gpus)
    if links:
        node["gpu_links"] = links
    numa_cpus = _numa_cpus(gpus)
    if numa_cpus:
        node["numa_cpus"] = numa_cpus
    disk = data_filesystem_size(hostvars)
    if disk is not None:
        node["disk"] = disk
    return node


def data_filesystem_size(hostvars):
    """The size of the host's data filesystem (gangplank_data_filesystem, where disk volumes live), or None when the
    facts do not report it."""
    entry = _facts(hostvars).get("gangplank_data_filesystem")
    if entry is None:
        return None
    host = _host(hostvars)
    if not isinstance(entry, dict):
        raise NodeFactsError("%s: ansible_facts.gangplank_data_filesystem: got %s; expected a mapping with size and free"
                             % (host, show(entry)))
    _fact(host, "ansible_facts.gangplank_data_filesystem.size", entry.get("size"), _whole, "the file system's size in bytes")
    # A file system above the problem's largest size (1 PiB) counts as that much: room enough for any volume.
    return min(entry["size"], MAX_SIZE)


def scheduler_gpus(gpus):
    """The scheduler's ``nodes.<host>.gpus`` entries of usable_gpus' GPUs, in the order given."""
    entries = []
    for gpu in gpus:
        entry = {"index": gpu["index"], "uuid": gpu["uuid"], "model": gpu["model"], "memory": gpu["memory_total"]}
        if gpu["numa_node"] is not None:
            entry["numa_node"] = gpu["numa_node"]
        entries.append(entry)
    return entries


def _numa_cpus(gpus):
    """The scheduler's ``numa_cpus`` ({"<NUMA node>": cpulist}) from the GPUs' numa_node and cpu_affinity facts (the CPUs
    local to each GPU, docs/facts.md), for cpu_pinning numa. A NUMA node is left out where its GPUs disagree, where the
    affinity is not a cpulist the problem takes (CPU ids above problem_format.MAX_CPU_ID), or where it shares CPUs with
    another NUMA node's (an affinity as wide as a socket): pinned instances then avoid its GPUs (no NUMA facts)."""
    found = {}
    for gpu in gpus:
        affinity = gpu.get("cpu_affinity")
        if gpu["numa_node"] is None or affinity is None:
            continue
        try:
            cpus = parse_cpulist(affinity)
        except ValueError:
            cpus = None
        found.setdefault(gpu["numa_node"], set()).add(cpus)
    usable = {numa: next(iter(cpus)) for numa, cpus in found.items() if len(cpus) == 1 and None not in cpus}
    owners = Counter(cpu for cpus in usable.values() for cpu in cpus)
    return {str(numa): format_cpulist(cpus) for numa, cpus in sorted(usable.items())
            if all(owners[cpu] == 1 for cpu in cpus)}


def _labels_text(labels):
    return ",".join(_brief(label) for label in labels) or "-" if isinstance(labels, list) else _brief(labels or "-")


def _count_text(items):
    """How many ``items`` a list holds; "?" for what the facts modules do not write (a table shows what it can)."""
    return str(len(items)) if isinstance(items, list) else "0" if items is None else "?"


def _size_text(value):
    return format_size(value) if _whole(value) else "-"


def _table(headers, rows):
    rows = [[_brief(cell) for cell in row] for row in [headers] + rows]
    widths = [max(len(row[column]) for row in rows) for column in range(len(headers))]
    return ["  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]


def facts_table(hostvars):
    """One host's GPUs, NVMe devices and labels as lines of text."""
    host = _host(hostvars)
    facts = _facts(hostvars)
    gpus = _entries(hostvars, "gangplank_gpus")
    driver = facts.get("gangplank_gpu_driver") or {}
    driver = driver if isinstance(driver, dict) else {}
    nvme = _entries(hostvars, "gangplank_nvme")
    simulated = [kind for kind, items in (("GPUs", gpus), ("NVMe", nvme))
                 if any(item.get("source") == "simulated" for item in items)]
    title = "%s: %d GPU(s), %d NVMe namespace(s)" % (host, len(gpus), len(nvme))
    if simulated:
        title += " -- SIMULATED %s (host variables, not hardware)" % " and ".join(simulated)
    lines = [title]
    if gpus:
        versions = tuple(_brief(driver.get(key) or "-") for key in ("driver_version", "cuda_version", "source"))
        lines.append("  driver %s, CUDA %s, via %s" % versions)
        rows = []
        # The NUMA column where the facts know a GPU's NUMA node (facts gathered before they did have none).
        numa = any(gpu.get("numa_node") is not None for gpu in gpus)
        for gpu in gpus:
            if gpu.get("error"):
                rows.append((gpu.get("index"), "ERROR: %s" % _brief(gpu["error"]), "-", "-", "-") + (("-",) if numa else ())
                            + (gpu.get("source") or "-",))
                continue
            mig = "on (%s)" % _count_text(gpu.get("mig_devices")) if _mig_on(gpu) else "-"
            node = () if not numa else ("-" if gpu.get("numa_node") is None else gpu["numa_node"],)
            rows.append((gpu.get("index"), gpu.get("model") or "-",
                         "%s/%s" % (_size_text(gpu.get("memory_used") or 0), _size_text(gpu.get("memory_total"))),
                         gpu.get("uuid") or "-", mig) + node + (gpu.get("source") or "-",))
        lines += _table(("GPU", "MODEL", "MEMORY USED", "UUID", "MIG") + (("NUMA",) if numa else ()) + ("SOURCE",), rows)
        groups = nvlink_groups(gpu_links(hostvars))
        if groups:
            lines.append("  NVLink groups: " + " ".join("[%s]" % ",".join(str(index) for index in group) for group in groups))
        if driver.get("topology"):
            lines.append("  GPU topology %s" % _brief(driver["topology"]))
    else:
        lines.append("  no GPUs: %s" % _brief(driver.get("reason") or "none found"))
    if nvme:
        rows = [(device.get("name") or "-", _size_text(device.get("size")), device.get("mount") or "-",
                 _size_text(device.get("free")),
                 _labels_text(device.get("labels")), device.get("model") or "-", device.get("source") or "-")
                for device in nvme]
        lines += _table(("NVME", "SIZE", "MOUNT", "FREE", "LABELS", "MODEL", "SOURCE"), rows)
    else:
        lines.append("  no NVMe devices")
    labels = node_labels(hostvars)
    lines.append("  labels: " + ", ".join("%s=%s" % item for item in labels.items()))
    return "\n".join(lines)
