# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""From a host's facts to its node labels, its scheduler node entry and a readable table.

Input is one host's variables (``hostvars[host]``): ``ansible_facts`` from setup
(processor_vcpus, memtotal_mb, architecture, system), ``gangplank_gpus`` /
``gangplank_gpu_driver`` / ``gangplank_nvme`` from this collection's facts modules,
and the operator's host variables ``gangplank_labels``, ``gangplank_taints``,
``gangplank_unschedulable`` and ``gangplank_reserved`` ({cpu, memory} kept for the
system). Pure functions; no Ansible import.
"""

from __future__ import annotations

from collections import Counter

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.quantity import (
    format_size, parse_cpu, parse_size,
)

MIB = 2 ** 20

# NVIDIA GPU Feature Discovery's family names by compute capability (gpu-feature-discovery,
# internal/lm/resource.go getArchFamily).
_FAMILIES = {1: "tesla", 2: "fermi", 3: "kepler", 5: "maxwell", 6: "pascal", 9: "hopper",
             10: "blackwell", 12: "blackwell"}
_ARCHITECTURES = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64",
                  "ppc64le": "ppc64le", "s390x": "s390x"}


class NodeFactsError(ValueError):
    """Host variables or facts that cannot describe a node; the message names the host and key."""


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


def _facts(hostvars):
    return hostvars.get("ansible_facts") or {}


def usable_gpus(hostvars):
    """GPUs the scheduler may place on: no NVML error, and not partitioned by MIG."""
    gpus = _facts(hostvars).get("gangplank_gpus") or []
    return [gpu for gpu in gpus if not gpu.get("error") and not (gpu.get("mig_mode") or {}).get("current")]


def usable_nvme(hostvars):
    """NVMe namespaces instances can keep data on: mounted ones."""
    return [device for device in _facts(hostvars).get("gangplank_nvme") or [] if device.get("mount")]


def hardware_labels(hostvars):
    """Labels implied by the facts, named as GPU Feature Discovery names them where it has a name."""
    facts = _facts(hostvars)
    labels = {"gangplank.io/hostname": str(hostvars.get("inventory_hostname", facts.get("hostname", "")))}
    if facts.get("architecture"):
        labels["gangplank.io/arch"] = _ARCHITECTURES.get(facts["architecture"], str(facts["architecture"]).lower())
    if facts.get("system"):
        labels["gangplank.io/os"] = str(facts["system"]).lower()
    gpus = usable_gpus(hostvars)
    all_gpus = facts.get("gangplank_gpus") or []
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
        family = gpu_family(first.get("compute_capability"))
        if family:
            labels["nvidia.com/gpu.family"] = family
        if first.get("compute_capability"):
            major, _dot, minor = str(first["compute_capability"]).partition(".")
            labels["nvidia.com/gpu.compute.major"] = major
            labels["nvidia.com/gpu.compute.minor"] = minor or "0"
        if any(gpu.get("source") == "simulated" for gpu in gpus):
            labels["gangplank.io/gpu.simulated"] = "true"
    for device in usable_nvme(hostvars):
        for label in device.get("labels") or []:
            labels["gangplank.io/nvme.%s" % label] = "true"
    return dict(sorted(labels.items()))


def node_labels(hostvars):
    """Hardware labels plus the operator's ``gangplank_labels`` (which win on the same key)."""
    labels = hardware_labels(hostvars)
    operator = hostvars.get("gangplank_labels") or {}
    if not isinstance(operator, dict):
        raise NodeFactsError("%s: gangplank_labels must be a mapping of label to value, got %r"
                             % (hostvars.get("inventory_hostname"), operator))
    for key, value in operator.items():
        labels[str(key)] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return dict(sorted(labels.items()))


def _reserved(hostvars, host):
    reserved = hostvars.get("gangplank_reserved") or {}
    if not isinstance(reserved, dict) or set(reserved) - {"cpu", "memory"}:
        raise NodeFactsError("%s: gangplank_reserved must be a mapping with cpu and/or memory, got %r"
                             % (host, reserved))
    try:
        cpu = parse_cpu(reserved.get("cpu", 0))
    except ValueError as error:
        raise NodeFactsError("%s: gangplank_reserved.cpu: got %r; expected %s" % (host, reserved["cpu"], error))
    try:
        memory = parse_size(reserved.get("memory", 0))
    except ValueError as error:
        raise NodeFactsError("%s: gangplank_reserved.memory: got %r; expected %s"
                             % (host, reserved["memory"], error))
    return cpu, memory


def scheduler_node(hostvars):
    """The scheduler's ``nodes.<host>`` entry (docs/problem-format.md) for one host."""
    host = hostvars.get("inventory_hostname", "host")
    facts = _facts(hostvars)
    missing = [key for key in ("processor_vcpus", "memtotal_mb") if key not in facts]
    if missing:
        raise NodeFactsError("%s: ansible_facts lacks %s; gather the hardware facts first (setup)"
                             % (host, ", ".join(missing)))
    reserved_cpu, reserved_memory = _reserved(hostvars, host)
    cpu = max(int(facts["processor_vcpus"]) * 1000 - reserved_cpu, 0)
    memory = max(int(facts["memtotal_mb"]) * MIB - reserved_memory, 0)
    node = {
        "cpu": "%dm" % cpu,
        "memory": memory,
        "labels": node_labels(hostvars),
        "taints": list(hostvars.get("gangplank_taints") or []),
        "unschedulable": bool(hostvars.get("gangplank_unschedulable", False)),
        "gpus": [{"index": gpu["index"], "uuid": gpu["uuid"], "model": gpu["model"], "memory": gpu["memory_total"]}
                 for gpu in sorted(usable_gpus(hostvars), key=lambda gpu: gpu["index"])],
        "nvme": [{"name": device["name"], "size": device["size"], "labels": list(device.get("labels") or []),
                  "mount": device["mount"]}
                 for device in sorted(usable_nvme(hostvars), key=lambda device: device["name"])],
    }
    return node


def _table(headers, rows):
    widths = [max(len(str(row[column])) for row in [headers] + rows) for column in range(len(headers))]
    return ["  " + "  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip()
            for row in [headers] + rows]


def facts_table(hostvars):
    """One host's GPUs, NVMe devices and labels as lines of text."""
    host = hostvars.get("inventory_hostname", "host")
    facts = _facts(hostvars)
    gpus = facts.get("gangplank_gpus") or []
    driver = facts.get("gangplank_gpu_driver") or {}
    nvme = facts.get("gangplank_nvme") or []
    simulated = [kind for kind, items in (("GPUs", gpus), ("NVMe", nvme))
                 if any(item.get("source") == "simulated" for item in items)]
    title = "%s: %d GPU(s), %d NVMe namespace(s)" % (host, len(gpus), len(nvme))
    if simulated:
        title += " -- SIMULATED %s (host variables, not hardware)" % " and ".join(simulated)
    lines = [title]
    if gpus:
        versions = (driver.get("driver_version") or "-", driver.get("cuda_version") or "-", driver.get("source") or "-")
        lines.append("  driver %s, CUDA %s, via %s" % versions)
        rows = []
        for gpu in gpus:
            if gpu.get("error"):
                rows.append((gpu.get("index"), "ERROR: %s" % gpu["error"], "-", "-", "-", gpu.get("source") or "-"))
                continue
            mig = "on (%d)" % len(gpu.get("mig_devices") or []) if (gpu.get("mig_mode") or {}).get("current") else "-"
            rows.append((gpu["index"], gpu["model"],
                         "%s/%s" % (format_size(gpu.get("memory_used") or 0), format_size(gpu["memory_total"])),
                         gpu["uuid"], mig, gpu.get("source") or "-"))
        lines += _table(("GPU", "MODEL", "MEMORY USED", "UUID", "MIG", "SOURCE"), rows)
    else:
        lines.append("  no GPUs: %s" % (driver.get("reason") or "none found"))
    if nvme:
        rows = [(device["name"], format_size(device["size"]), device.get("mount") or "-",
                 format_size(device["free"]) if device.get("free") is not None else "-",
                 ",".join(device.get("labels") or []) or "-", device.get("model") or "-", device.get("source") or "-")
                for device in nvme]
        lines += _table(("NVME", "SIZE", "MOUNT", "FREE", "LABELS", "MODEL", "SOURCE"), rows)
    else:
        lines.append("  no NVMe devices")
    labels = node_labels(hostvars)
    lines.append("  labels: " + ", ".join("%s=%s" % item for item in labels.items()))
    return "\n".join(lines)
