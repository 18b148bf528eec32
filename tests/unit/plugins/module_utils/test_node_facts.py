# -*- coding: utf-8 -*-
"""Facts -> node labels (GFD names), the scheduler's node entry, and the facts table."""

from __future__ import annotations

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils.facts.node_facts import (
    NodeFactsError, facts_table, gpu_family, node_labels, scheduler_node,
)
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.problem import parse_problem

GI = 2 ** 30


def gpu(index, model="NVIDIA A100-SXM4-80GB", memory=80 * GI, capability="8.0", **extra):
    entry = {"index": index, "uuid": "GPU-%d" % index, "model": model, "memory_total": memory,
             "memory_used": 0, "memory_free": memory, "pci_bus_id": None, "compute_capability": capability,
             "persistence_mode": True, "mig_mode": {"current": False, "pending": False}, "mig_devices": [],
             "source": "nvml", "error": None}
    entry.update(extra)
    return entry


def disk(name, labels=(), mount="/mnt/x", **extra):
    entry = {"name": name, "controller": name[:5], "model": "M", "serial": "S", "firmware": "F", "transport": "pcie",
             "size": 4 * 2 ** 40, "logical_block_size": 512, "mount": mount, "fstype": "xfs" if mount else None,
             "free": 3 * 2 ** 40 if mount else None, "labels": list(labels), "source": "sysfs"}
    entry.update(extra)
    return entry


def host(gpus=(), nvme=(), **hostvars):
    values = {"inventory_hostname": "node-a", "ansible_facts": {
        "processor_vcpus": 64, "memtotal_mb": 512 * 1024, "architecture": "x86_64", "system": "Linux",
        "gangplank_gpus": list(gpus), "gangplank_nvme": list(nvme),
        "gangplank_gpu_driver": {"available": bool(gpus), "reason": None if gpus else "no NVIDIA driver",
                                 "source": "nvml" if gpus else None, "driver_version": "550.54.15",
                                 "cuda_version": "12.4", "gpu_count": len(gpus)}}}
    values.update(hostvars)
    return values


@pytest.mark.parametrize("capability, family", [
    ("3.7", "kepler"), ("6.0", "pascal"), ("7.0", "volta"), ("7.5", "turing"), ("8.0", "ampere"),
    ("8.6", "ampere"), ("8.9", "ada-lovelace"), ("9.0", "hopper"), ("10.0", "blackwell"), ("12.0", "blackwell"),
    ("4.0", None), (None, None), ("x", None),
])
def test_gpu_family_as_gfd_names_it(capability, family):
    assert gpu_family(capability) == family


def test_gfd_labels_on_a_mixed_node_summarise_the_most_common_model():
    gpus = [gpu(0, model="NVIDIA L4", memory=24 * GI, capability="8.9")] + [gpu(i) for i in range(1, 4)]
    labels = node_labels(host(gpus, [disk("nvme0n1", ["cache", "dataset"]), disk("nvme1n1", ["scratch"], mount=None)]))
    assert labels == {
        "gangplank.io/arch": "amd64", "gangplank.io/hostname": "node-a", "gangplank.io/os": "linux",
        "gangplank.io/nvme.cache": "true", "gangplank.io/nvme.dataset": "true",
        "nvidia.com/gpu.compute.major": "8", "nvidia.com/gpu.compute.minor": "0",
        "nvidia.com/gpu.count": "4", "nvidia.com/gpu.family": "ampere", "nvidia.com/gpu.memory": "81920",
        "nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
        "nvidia.com/mig.capable": "true",
    }


def test_no_gpus_no_gpu_labels_and_operator_labels_win():
    labels = node_labels(host(gangplank_labels={"zone": "east", "gangplank.io/os": "custom", "gpu": True}))
    assert labels["zone"] == "east" and labels["gangplank.io/os"] == "custom" and labels["gpu"] == "true"
    assert not any(key.startswith("nvidia.com/") for key in labels)
    with pytest.raises(NodeFactsError, match="gangplank_labels must be a mapping"):
        node_labels(host(gangplank_labels=["zone"]))


def test_simulated_gpus_are_labelled_as_such():
    labels = node_labels(host([gpu(0, source="simulated", compute_capability=None)]))
    assert labels["gangplank.io/gpu.simulated"] == "true" and "nvidia.com/gpu.family" not in labels


def test_scheduler_node_is_a_valid_problem_node():
    erroring = gpu(2, error="Unknown Error", uuid=None, model=None, memory_total=None)
    mig = gpu(3, mig_mode={"current": True, "pending": True})
    hostvars = host([gpu(0), gpu(1, model="NVIDIA L4", memory=24 * GI), erroring, mig],
                    [disk("nvme1n1", ["cache"]), disk("nvme0n1", mount=None)],
                    gangplank_reserved={"cpu": "2", "memory": "8Gi"},
                    gangplank_taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}],
                    gangplank_unschedulable=True)
    node = scheduler_node(hostvars)
    assert node["cpu"] == "62000m" and node["memory"] == 504 * GI
    assert [g["index"] for g in node["gpus"]] == [0, 1]     # the erroring and the MIG GPU are left out
    assert node["gpus"][1] == {"index": 1, "uuid": "GPU-1", "model": "NVIDIA L4", "memory": 24 * GI}
    assert node["nvme"] == [{"name": "nvme1n1", "size": 4 * 2 ** 40, "labels": ["cache"], "mount": "/mnt/x"}]
    assert node["unschedulable"] is True and node["taints"][0]["key"] == "dedicated"
    problem = parse_problem({"nodes": {"node-a": node}, "services": {}})
    assert problem.nodes["node-a"].cpu == 62000


def test_scheduler_node_numa_cpus_from_the_gpus_cpu_affinity():
    gpus = [gpu(0, numa_node=0, cpu_affinity="0-15,32-47"), gpu(1, numa_node=0, cpu_affinity="0-15,32-47"),
            gpu(2, numa_node=1, cpu_affinity="16-31,48-63"), gpu(3, numa_node=None, cpu_affinity="0-63")]
    node = scheduler_node(host(gpus))
    assert node["numa_cpus"] == {"0": "0-15,32-47", "1": "16-31,48-63"}
    assert parse_problem({"nodes": {"node-a": node}, "services": {}}).nodes["node-a"].numa_cpus[1] == \
        frozenset(range(16, 32)) | frozenset(range(48, 64))
    # Without affinity facts the entry is as before: no numa_cpus key.
    assert "numa_cpus" not in scheduler_node(host([gpu(0, numa_node=0, cpu_affinity=None), gpu(1)]))


@pytest.mark.parametrize("gpus, expected", [
    ([gpu(0, numa_node=0, cpu_affinity="0-7"), gpu(1, numa_node=0, cpu_affinity="0-3")], None),     # they disagree
    ([gpu(0, numa_node=0, cpu_affinity="0-63"), gpu(1, numa_node=1, cpu_affinity="0-63")], None),   # a socket-wide affinity
    ([gpu(0, numa_node=0, cpu_affinity="0-8191"), gpu(1, numa_node=1, cpu_affinity="8-15")], {"1": "8-15"}),   # ids > 4095
    ([gpu(0, numa_node=0, cpu_affinity="0-3\n")], None),
])
def test_scheduler_node_leaves_out_numa_nodes_it_cannot_tell(gpus, expected):
    assert scheduler_node(host(gpus)).get("numa_cpus") == expected


@pytest.mark.parametrize("hostvars, message", [
    ({"inventory_hostname": "n1", "ansible_facts": {}}, "n1: ansible_facts lacks processor_vcpus, memtotal_mb"),
    (host(gangplank_reserved={"cpu": "lots"}), "node-a: gangplank_reserved.cpu: got \"lots\""),
    (host(gangplank_reserved={"disk": 1}), "gangplank_reserved must be a mapping with cpu and/or memory"),
])
def test_bad_host_variables_name_the_host_and_key(hostvars, message):
    with pytest.raises(NodeFactsError, match=message.replace("(", r"\(").replace(")", r"\)")):
        scheduler_node(hostvars)


def test_facts_table_says_what_is_simulated_and_why_there_are_no_gpus():
    text = facts_table(host([gpu(0, source="simulated")], [disk("nvme0n1", ["cache"], source="simulated")]))
    lines = text.splitlines()
    assert lines[0] == "node-a: 1 GPU(s), 1 NVMe namespace(s) -- SIMULATED GPUs and NVMe (host variables, not hardware)"
    assert lines[2].split() == ["GPU", "MODEL", "MEMORY", "USED", "UUID", "MIG", "SOURCE"]
    assert lines[3].split() == ["0", "NVIDIA", "A100-SXM4-80GB", "0/80Gi", "GPU-0", "-", "simulated"]
    assert lines[-1].startswith("  labels: gangplank.io/arch=amd64")
    bare = facts_table(host()).splitlines()
    assert bare[1] == "  no GPUs: no NVIDIA driver" and bare[2] == "  no NVMe devices"


def test_facts_table_shows_gpu_errors():
    text = facts_table(host([gpu(0), gpu(1, error="GPU is lost", model=None, uuid=None, memory_total=None)]))
    assert "ERROR: GPU is lost" in text


@pytest.mark.parametrize("mig_devices, shown", [([{"uuid": "MIG-0"}, {"uuid": "MIG-1"}], "on (2)"), (None, "on (0)"),
                                                (7, "on (?)"), ("MIG-0", "on (?)")])
def test_facts_table_counts_mig_devices_only_in_a_list(mig_devices, shown):
    # Stored facts are read back as they are: a count that is not a list is shown as unknown, not a traceback.
    row = facts_table(host([gpu(0, mig_mode={"current": True}, mig_devices=mig_devices)])).splitlines()[3]
    assert shown in row
