# -*- coding: utf-8 -*-
"""GPU topology facts (gangplank_gpu_links, numa_node, cpu_affinity) from a fake NVML shaped after published systems,
from nvidia-smi topo -m as it prints them (and hostile ones), from simulated GPUs; and what node_facts makes of them."""

from __future__ import annotations

import pynvml
import pytest

from ansible_collections.gangplank.platform.plugins.module_utils.facts.gpu_facts import (
    TOO_MANY_GPUS, NVIDIA_SMI_ARGS, TopologyError, collect_facts, cpulist_of_mask, parse_cpulist, parse_topo_matrix,
    sysfs_pci_name,
)
from ansible_collections.gangplank.platform.plugins.module_utils.facts.node_facts import (
    NodeFactsError, facts_table, node_labels, nvlink_domain, scheduler_node,
)
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils import published_topo
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.fake_pynvml import FakeNvml

GIB = 2 ** 30
SMI = "/usr/bin/nvidia-smi"
NODE, SYS, PIX, PHB = pynvml.NVML_TOPOLOGY_NODE, pynvml.NVML_TOPOLOGY_SYSTEM, pynvml.NVML_TOPOLOGY_SINGLE, pynvml.NVML_TOPOLOGY_HOSTBRIDGE


def bus(index):
    return "00000000:%02X:00.0" % (0x18 + 0x10 * index)


def mask(*ranges):
    """nvmlDeviceGetCpuAffinity's words for CPU ranges (inclusive)."""
    words = [0] * 4
    for low, high in ranges:
        for cpu in range(low, high + 1):
            words[cpu // 64] |= 1 << (cpu % 64)
    return words


def gpu(index, name="NVIDIA H100 80GB HBM3", **extra):
    entry = {"name": name, "uuid": "GPU-%d" % index, "memory_total": 80 * GIB, "pci_bus_id": bus(index),
             "compute_capability": (9, 0), "persistence": True, "mig": None}
    entry.update(extra)
    return entry


def socket_of(index, per_socket=4):
    return 0 if index < per_socket else 1


def dgx_h100():
    """8 H100 SXM, each with 18 NVLinks to the 4 NVSwitches (5+4+4+5), two sockets of 56 cores (112 threads)."""
    switches = ["00000000:%02X:00.0" % bus_number for bus_number in (0xA5, 0xA6, 0xA7, 0xA8)]
    links = [switches[0]] * 5 + [switches[1]] * 4 + [switches[2]] * 4 + [switches[3]] * 5
    affinity = {0: mask((0, 55), (112, 167)), 1: mask((56, 111), (168, 223))}
    return FakeNvml([gpu(i, nvlinks=list(links), numa_node=socket_of(i), cpu_affinity=affinity[socket_of(i)]) for i in range(8)],
                    topology={(a, b): NODE if socket_of(a) == socket_of(b) else SYS for a in range(8) for b in range(8)})


def pcie_bridged():
    """8 PCIe GPUs with NVLink bridges in pairs: 0-1 and 2-3 with 4 links, 4-5 and 6-7 with 2 (and 2 unused links)."""
    partner = {0: 1, 1: 0, 2: 3, 3: 2, 4: 5, 5: 4, 6: 7, 7: 6}
    gpus = []
    for i in range(8):
        links = [bus(partner[i])] * 4 if i < 4 else [bus(partner[i])] * 2 + [None, None]
        gpus.append(gpu(i, "NVIDIA RTX A6000", nvlinks=links, numa_node=socket_of(i), cpu_affinity=mask((0, 31)) if i < 4 else mask((32, 63))))
    topology = {(a, b): NODE if socket_of(a) == socket_of(b) else SYS for a in range(8) for b in range(8)}
    return FakeNvml(gpus, topology=topology)


def dual_socket(tmp_path):
    """4 GPUs per socket, no NVLink; 0-1, 2-3, 4-5, 6-7 under one PCIe switch; an old driver (NUMA and CPUs from sysfs)."""
    gpus = []
    for i in range(8):
        gpus.append(gpu(i, "NVIDIA L40S"))
        directory = tmp_path / "bus" / "pci" / "devices" / ("0000:%02x:00.0" % (0x18 + 0x10 * i))
        directory.mkdir(parents=True)
        (directory / "numa_node").write_text("%d\n" % socket_of(i))
        (directory / "local_cpulist").write_text("0-23,48-71\n" if i < 4 else "24-47,72-95\n")
    topology = {}
    for a in range(8):
        for b in range(8):
            topology[a, b] = PIX if a // 2 == b // 2 else NODE if socket_of(a) == socket_of(b) else SYS
    return FakeNvml(gpus, topology=topology)


def mixed():
    """A100 pair on NVLink (12 links), an L4 on the host bridge, a GPU lost, and a pair NVML cannot place."""
    gpus = [gpu(0, "NVIDIA A100-SXM4-80GB", nvlinks=[bus(1)] * 12 + [None] * 6, numa_node=0),
            gpu(1, "NVIDIA A100-SXM4-80GB", nvlinks=[bus(0)] * 12 + [None] * 6, numa_node=0),
            gpu(2, "NVIDIA L4", numa_node=-1),
            gpu(3, "NVIDIA L4", errors={"nvmlDeviceGetHandleByIndex": pynvml.NVML_ERROR_GPU_IS_LOST}),
            gpu(4, "NVIDIA L4", numa_node=1)]
    topology = {(0, 2): PHB, (1, 2): PHB, (0, 4): SYS, (1, 4): SYS, (2, 4): (pynvml.NVML_ERROR_UNKNOWN,)}
    return FakeNvml(gpus, topology=topology)


def pairs(links):
    return {tuple(link["gpus"]): (link["level"], link["nvlinks"]) for link in links}


def read(nvml, sysfs="/nonexistent"):
    return collect_facts(nvml=nvml, sysfs=sysfs)


def test_nvswitch_server_every_pair_nvlinked():
    nvml = dgx_h100()
    facts = read(nvml)
    links = facts["gangplank_gpu_links"]
    assert len(links) == 28 and all(link["level"] == "nvlink" and link["nvlinks"] == 18 for link in links)
    assert [link["gpus"] for link in links[:3]] == [[0, 1], [0, 2], [0, 3]]
    gpus = facts["gangplank_gpus"]
    assert [g["numa_node"] for g in gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert gpus[0]["cpu_affinity"] == "0-55,112-167" and gpus[7]["cpu_affinity"] == "56-111,168-223"
    assert "topology" not in facts["gangplank_gpu_driver"]
    # Beside its NVLinks, each pair's PCIe path: within a socket or across.
    assert {tuple(link["gpus"]): link["pcie"] for link in links} == {
        (a, b): "numa" if socket_of(a) == socket_of(b) else "system" for a in range(8) for b in range(a + 1, 8)}
    assert nvml.calls["nvmlDeviceGetTopologyCommonAncestor"] == 2 * 28 and nvml.sessions == 0


def test_pcie_server_with_nvlink_bridges_in_pairs():
    facts = read(pcie_bridged())
    links = pairs(facts["gangplank_gpu_links"])
    assert len(links) == 28
    assert links[0, 1] == links[2, 3] == ("nvlink", 4) and links[4, 5] == links[6, 7] == ("nvlink", 2)
    assert links[0, 2] == links[1, 3] == links[5, 6] == ("numa", 0)
    assert links[0, 4] == links[3, 7] == ("system", 0)


def test_dual_socket_pcie_server_reads_numa_and_cpus_from_sysfs(tmp_path):
    facts = read(dual_socket(tmp_path), str(tmp_path))
    links = pairs(facts["gangplank_gpu_links"])
    assert links[0, 1] == links[6, 7] == ("switch", 0)
    assert links[0, 2] == links[5, 7] == ("numa", 0)
    assert links[0, 4] == links[3, 5] == ("system", 0)
    gpus = facts["gangplank_gpus"]
    assert [g["numa_node"] for g in gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert gpus[0]["cpu_affinity"] == "0-23,48-71" and gpus[4]["cpu_affinity"] == "24-47,72-95"


def test_mixed_host_errors_make_pairs_unknown_and_never_fail():
    facts = read(mixed())
    links = pairs(facts["gangplank_gpu_links"])
    assert len(links) == 10
    assert links[0, 1] == ("nvlink", 12)
    assert links[0, 2] == links[1, 2] == ("host_bridge", 0)
    assert links[0, 4] == ("system", 0)
    assert links[2, 4] == ("unknown", 0)  # NVML raised on the pair
    assert all(links[pair] == ("unknown", 0) for pair in links if 3 in pair)  # the lost GPU
    gpus = facts["gangplank_gpus"]
    assert gpus[2]["numa_node"] is None and gpus[3]["error"] and gpus[3]["numa_node"] is None and gpus[4]["numa_node"] == 1


def test_an_nvlink_read_error_makes_that_gpus_pairs_unknown():
    nvml = pcie_bridged()
    nvml.gpus[1]["errors"] = {"nvmlDeviceGetNvLinkState": pynvml.NVML_ERROR_UNKNOWN}
    links = pairs(read(nvml)["gangplank_gpu_links"])
    assert links[0, 1] == ("unknown", 0) and links[1, 5] == ("unknown", 0) and links[2, 3] == ("nvlink", 4)


def test_one_gpu_has_no_links_and_many_gpus_are_not_paired():
    facts = read(FakeNvml([gpu(0, numa_node=0)]))
    assert facts["gangplank_gpu_links"] == [] and facts["gangplank_gpus"][0]["numa_node"] == 0
    many = FakeNvml([gpu(i, nvlinks=[bus(0)]) for i in range(65)])
    facts = read(many)
    assert len(facts["gangplank_gpus"]) == 65 and facts["gangplank_gpu_links"] == []
    assert facts["gangplank_gpu_driver"]["topology"] == TOO_MANY_GPUS == "not read: more than 64 GPUs"
    assert many.calls["nvmlDeviceGetNvLinkState"] == 0


def test_64_gpus_are_paired_in_bounded_calls():
    nvml = FakeNvml([gpu(i, nvlinks=["00000000:A5:00.0"] * 18) for i in range(64)])
    links = read(nvml)["gangplank_gpu_links"]
    assert len(links) == 2016 and nvml.calls["nvmlDeviceGetNvLinkState"] == 64 * pynvml.NVML_NVLINK_MAX_LINKS


def test_helpers():
    assert cpulist_of_mask([0xF, 1 << 63]) == "0-3,127" and cpulist_of_mask([0, 0]) is None
    assert parse_cpulist("0-3,2,8") == "0-3,8" and parse_cpulist("3-1") is None and parse_cpulist("0-99999") is None
    assert parse_cpulist(" 0-3") is None and parse_cpulist("0-3\n") is None
    assert parse_cpulist("8-11,0-3,4-7,20") == "0-11,20"


def test_a_cpulist_listing_more_cpus_than_there_may_be_is_refused():
    # Each range is within the bound, together they name 65,536 CPUs 8,191 times: refused, nothing expanded.
    assert parse_cpulist(",".join(["0-65535"] * 8191)) is None
    assert parse_cpulist(",".join(["0-32767", "32768-65535"])) == "0-65535"
    assert parse_cpulist(",".join(["0-32767"] * 2)) == "0-32767"
    assert parse_cpulist(",".join(["0-32767"] * 3)) is None
    assert sysfs_pci_name("00000000:AB:00.0") == "0000:ab:00.0" and sysfs_pci_name("../x") is None


# --- nvidia-smi topo -m ---------------------------------------------------------------------------

def topo(rows, extra=("CPU Affinity", "NUMA Affinity", "GPU NUMA ID"), nics=0, affinity=None):
    count = len(rows)
    header = "\t\x1b[4m" + "\t".join(["GPU%d" % i for i in range(count)] + ["NIC%d" % i for i in range(nics)] + list(extra)) + "\x1b[0m"
    lines = [header]
    for i, row in enumerate(rows):
        cells = [" X " if j == i else cell for j, cell in enumerate(row)] + ["PXB"] * nics
        cpus, numa = affinity(i) if affinity else ("N/A", "N/A")
        lines.append("GPU%d\t" % i + "\t".join(cells) + "\t%s\t%s" % (cpus, numa) + ("\t\tN/A" if "GPU NUMA ID" in extra else ""))
    for n in range(nics):
        lines.append("NIC%d\t" % n + "\t".join(["PXB"] * count) + "\t X \t\t\t\t")
    legend = ["", "Legend:", "", "  X    = Self", "  SYS  = Connection traversing PCIe as well as the SMP interconnect",
              "  NV#  = Connection traversing a bonded set of # NVLinks", "", "NIC Legend:", "", "  NIC0: mlx5_0", ""]
    return "\n".join(lines + legend)


def matrix(count, cell):
    return [[cell(a, b) for b in range(count)] for a in range(count)]


TOPO_DGX = topo(matrix(8, lambda a, b: "NV18"), nics=2,
                affinity=lambda i: ("0-55,112-167", 0) if i < 4 else ("56-111,168-223", 1))
TOPO_BRIDGED = topo(matrix(8, lambda a, b: ("NV4" if a < 4 else "NV2") if a // 2 == b // 2 else "NODE" if a // 4 == b // 4 else "SYS"),
                    affinity=lambda i: ("0-31", 0) if i < 4 else ("32-63", 1))
TOPO_DUAL = topo(matrix(8, lambda a, b: "PIX" if a // 2 == b // 2 else "NODE" if a // 4 == b // 4 else "SYS"),
                 affinity=lambda i: ("0-23,48-71", 0) if i < 4 else ("24-47,72-95", 1))
TOPO_MIXED = topo(matrix(4, lambda a, b: "NV12" if {a, b} == {0, 1} else "PHB" if 3 not in (a, b) else "PXB"),
                  extra=("CPU Affinity", "NUMA Affinity"), affinity=lambda i: ("0-15", 0))


def query(count):
    return "".join("%d, GPU-%d, NVIDIA H100 80GB HBM3, 81559, 0, 81000, %s, 9.0, Enabled, Disabled, Disabled, 550.54.15\n"
                   % (i, i, bus(i)) for i in range(count))


def smi_facts(count, topo_out, rc=0):
    seen = []

    def run_command(argv):
        seen.append(argv)
        return (0, query(count), "") if argv[1:] == list(NVIDIA_SMI_ARGS) else (rc, topo_out, "")
    facts = collect_facts(nvml=None, run_command=run_command, which={"nvidia-smi": SMI}.get)
    return facts, seen


def test_topo_m_of_the_four_servers(tmp_path):
    facts, seen = smi_facts(8, TOPO_DGX)
    assert seen[1] == [SMI, "topo", "-m"]
    assert all(link["level"] == "nvlink" and link["nvlinks"] == 18 for link in facts["gangplank_gpu_links"])
    assert facts["gangplank_gpus"][5]["numa_node"] == 1 and facts["gangplank_gpus"][5]["cpu_affinity"] == "56-111,168-223"
    assert "topology" not in facts["gangplank_gpu_driver"]

    bridged = pairs(smi_facts(8, TOPO_BRIDGED)[0]["gangplank_gpu_links"])
    assert bridged == pairs(read(pcie_bridged())["gangplank_gpu_links"])

    facts = smi_facts(8, TOPO_DUAL)[0]
    assert pairs(facts["gangplank_gpu_links"]) == pairs(read_dual(tmp_path)["gangplank_gpu_links"])
    assert [g["cpu_affinity"] for g in facts["gangplank_gpus"]][3:5] == ["0-23,48-71", "24-47,72-95"]

    mixed_links = pairs(smi_facts(4, TOPO_MIXED)[0]["gangplank_gpu_links"])
    assert mixed_links[0, 1] == ("nvlink", 12) and mixed_links[0, 2] == ("host_bridge", 0) and mixed_links[2, 3] == ("multi_switch", 0)


def pcie_pairs(links):
    return {tuple(link["gpus"]): (link["level"], link["nvlinks"], link["pcie"]) for link in links}


def test_published_topo_m_outputs_are_read():
    # 8x RTX 4090 with NIC0/NIC1: every pair across the system bus, two sockets.
    facts = smi_facts(8, published_topo.RTX4090_NICS)[0]
    assert set(pcie_pairs(facts["gangplank_gpu_links"]).values()) == {("system", 0, "system")}
    assert [g["numa_node"] for g in facts["gangplank_gpus"]] == [0] * 4 + [1] * 4
    # 8 PCIe GPUs and a card named mlx4_0 (older drivers), CPU Affinity only.
    facts = smi_facts(8, published_topo.PCIE_MLX4)[0]
    links = pcie_pairs(facts["gangplank_gpu_links"])
    assert links[0, 1] == ("switch", 0, "switch") and links[0, 2] == ("host_bridge", 0, "host_bridge")
    assert links[3, 4] == ("system", 0, "system") and links[6, 7] == ("switch", 0, "switch")
    assert "topology" not in facts["gangplank_gpu_driver"]
    assert facts["gangplank_gpus"][4]["cpu_affinity"] == "10-19,30-39" and facts["gangplank_gpus"][4]["numa_node"] is None
    # A DGX A100 with NIC0..NIC11: NV12 every pair; beside NVLink, the NUMA nodes tell the pairs across sockets.
    facts = smi_facts(8, published_topo.DGX_A100_NICS)[0]
    links = pcie_pairs(facts["gangplank_gpu_links"])
    assert links[0, 1] == ("nvlink", 12, "unknown") and links[0, 2] == ("nvlink", 12, "system")
    assert [g["numa_node"] for g in facts["gangplank_gpus"]] == [3, 3, 1, 1, 7, 7, 5, 5]
    # 4x K40m from a driver that printed SOC for SYS.
    links = pcie_pairs(smi_facts(4, published_topo.K40M_SOC)[0]["gangplank_gpu_links"])
    assert links == {(0, 1): ("host_bridge", 0, "host_bridge"), (2, 3): ("host_bridge", 0, "host_bridge"),
                     (0, 2): ("system", 0, "system"), (0, 3): ("system", 0, "system"),
                     (1, 2): ("system", 0, "system"), (1, 3): ("system", 0, "system")}


def test_a_published_five_gpu_pcie_host_is_read():
    facts = smi_facts(5, published_topo.FIVE_PCIE)[0]
    links = pcie_pairs(facts["gangplank_gpu_links"])
    assert links[1, 2] == ("host_bridge", 0, "host_bridge") and links[1, 3] == ("numa", 0, "numa")
    assert all(links[0, other] == ("system", 0, "system") for other in range(1, 5))
    assert [(g["numa_node"], g["cpu_affinity"]) for g in facts["gangplank_gpus"]] == [(1, "8-15,24-31")] + [(0, "0-7,16-23")] * 4


def test_a_published_dgx2_with_cards_named_by_device_is_read():
    links, affinity = parse_topo_matrix(published_topo.DGX2_MLX5, list(range(16)))
    assert len(links) == 120 and all(link[:2] == ("nvlink", 6) for link in links.values())
    # Only CPU Affinity: disjoint CPUs tell the pairs across sockets.
    assert links[0, 7][2] == "unknown" and links[0, 8][2] == "system"
    assert affinity[15] == ("24-47,72-95", None)


def read_dual(sysfs):
    server = dual_socket(sysfs)
    return collect_facts(nvml=FakeNvml(server.gpus, topology=server.topology), sysfs=str(sysfs))


def test_topo_m_one_gpu_and_without_escapes_or_affinity():
    facts = smi_facts(1, "\tGPU0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \t0-7\tN/A\n")[0]
    assert facts["gangplank_gpu_links"] == [] and facts["gangplank_gpus"][0]["cpu_affinity"] == "0-7"
    assert facts["gangplank_gpus"][0]["numa_node"] is None and "topology" not in facts["gangplank_gpu_driver"]
    plain = "\tGPU0\tGPU1\nGPU0\tX\tNV2\r\nGPU1\tNV2\tX\r\n"
    assert parse_topo_matrix(plain, [0, 1])[0] == {(0, 1): ("nvlink", 2, "unknown")}


HOSTILE = {
    "an extra GPU column": TOPO_MIXED.replace("GPU3\tCPU", "GPU3\tGPU4\tCPU", 1),
    "an unknown column": TOPO_MIXED.replace("CPU Affinity", "CPU Affinity\tPOWER", 1),
    "an extra cell": TOPO_MIXED.replace("\t0-15\t0", "\tPHB\t0-15\t0", 1),
    "NV999999": TOPO_MIXED.replace("NV12", "NV999999", 1),
    "NV0": TOPO_MIXED.replace("NV12", "NV0", 1),
    "a trailing space": TOPO_MIXED.replace("NV12", "NV12 ", 1),
    "a leading space": TOPO_MIXED.replace("PHB", " PHB", 1),
    "a line break in a cell": TOPO_MIXED.replace("NV12", "NV12\n", 1),
    "a carriage return in a cell": TOPO_MIXED.replace("NV12", "NV12\r", 1),
    "an unknown token": TOPO_MIXED.replace("PHB", "QPI", 1),
    "a network card row without its column": TOPO_MIXED.split("\n\n", maxsplit=1)[0] + "\nmlx5_0\tSYS\tSYS\tSYS\tSYS\t X \n",
    "a network card named twice": TOPO_MIXED.replace("GPU3\tCPU", "GPU3\tmlx5_0\tmlx5_0\tCPU", 1),
    "a network card named like a GPU": TOPO_MIXED.replace("GPU3\tCPU", "GPU3\tGPU9\tCPU", 1),
    "a network card's name with a blank": TOPO_MIXED.replace("GPU3\tCPU", "GPU3\tmlx 5\tCPU", 1),
    "lower case": TOPO_MIXED.replace("PHB", "phb", 1),
    "a non-ASCII digit": TOPO_MIXED.replace("NV12", "NV\u0661\u0662", 1),
    "asymmetry": TOPO_MIXED.replace("NV12", "NV11", 1),
    "a bad own cell": TOPO_MIXED.replace(" X ", "  X", 1),
    "rows out of order": TOPO_MIXED.replace("GPU1\tNV12", "GPU2\tNV12", 1),
    "a bad cpulist": TOPO_MIXED.replace("0-15", "15-0", 1),
    "a huge cpulist": TOPO_MIXED.replace("0-15", "0-99999999", 1),
    "three GPUs in the header": TOPO_MIXED.replace("\tGPU3", "", 1),
    "empty": "",
    "not a table": "Failed to initialize NVML: Driver/library version mismatch\n",
    "100,000 lines": TOPO_MIXED.split("\n\n", maxsplit=1)[0] + "\n" + "NIC0\tPXB\n" * 100000,
    "a header escape twice": TOPO_MIXED.replace("\x1b[4m", "\x1b[4m\x1b[4m", 1),
    "over a megabyte": TOPO_MIXED + "x" * (1 << 20),
}


@pytest.mark.parametrize("what", sorted(HOSTILE))
def test_hostile_topo_m_makes_every_pair_unknown_with_a_note(what):
    facts, _seen = smi_facts(4, HOSTILE[what])
    assert pairs(facts["gangplank_gpu_links"]) == {(a, b): ("unknown", 0) for a in range(4) for b in range(a + 1, 4)}
    note = facts["gangplank_gpu_driver"]["topology"]
    assert note.startswith("not read: nvidia-smi topo -m: ") and len(note) < 200 and "\n" not in note
    assert all(g["numa_node"] is None and g["cpu_affinity"] is None for g in facts["gangplank_gpus"])
    with pytest.raises(TopologyError):
        parse_topo_matrix(HOSTILE[what], [0, 1, 2, 3])


def test_topo_m_failing_or_too_many_gpus():
    facts = smi_facts(4, "", rc=3)[0]
    assert facts["gangplank_gpu_driver"]["topology"] == "not read: nvidia-smi topo -m exited with 3"
    assert len(facts["gangplank_gpu_links"]) == 6
    facts, seen = smi_facts(65, "")
    assert facts["gangplank_gpu_links"] == [] and facts["gangplank_gpu_driver"]["topology"] == TOO_MANY_GPUS and len(seen) == 1


# --- simulated ------------------------------------------------------------------------------------

SIM = [{"model": "NVIDIA H100 80GB HBM3", "memory": "80Gi"} for _gpu in range(4)]


def test_simulated_default_links_and_numa_unknown():
    facts = collect_facts(simulated=SIM, hostname="h")
    assert pairs(facts["gangplank_gpu_links"]) == {(a, b): ("unknown", 0) for a in range(4) for b in range(a + 1, 4)}
    assert all(g["numa_node"] is None and g["cpu_affinity"] is None for g in facts["gangplank_gpus"])


def test_simulated_links_keep_the_pcie_path_beside_nvlink():
    sim = [dict(SIM[0], numa_node=i // 2) for i in range(4)]
    links = [{"gpus": [0, 1], "level": "nvlink", "nvlinks": 2, "pcie": "switch"}, {"gpus": [0, 2], "level": "nvlink", "nvlinks": 1},
             {"gpus": [2, 3], "level": "host_bridge", "pcie": "host_bridge"}]
    got = {tuple(link["gpus"]): (link["level"], link["nvlinks"], link["pcie"])
           for link in collect_facts(simulated=sim, simulated_links=links, hostname="h")["gangplank_gpu_links"]}
    assert got[0, 1] == ("nvlink", 2, "switch") and got[0, 2] == ("nvlink", 1, "unknown")
    assert got[2, 3] == ("host_bridge", 0, "host_bridge") and got[1, 3] == ("unknown", 0, "unknown")


def test_simulated_links_and_affinity():
    sim = [dict(SIM[0], numa_node=i // 2, cpu_affinity="0-7" if i < 2 else "8-15,8") for i in range(4)]
    links = [{"gpus": [1, 0], "level": "nvlink", "nvlinks": 4}, {"gpus": [2, 3], "level": "switch"}]
    facts = collect_facts(simulated=sim, simulated_links=links, hostname="h")
    got = pairs(facts["gangplank_gpu_links"])
    assert got[0, 1] == ("nvlink", 4) and got[2, 3] == ("switch", 0) and got[0, 2] == ("unknown", 0)
    assert facts["gangplank_gpus"][3]["cpu_affinity"] == "8-15" and facts["gangplank_gpus"][3]["numa_node"] == 1


@pytest.mark.parametrize("links, message", [
    ("x", "gangplank_simulated_gpu_links: got"),
    ([{"gpus": [0, 9], "level": "nvlink", "nvlinks": 1}], "gangplank_simulated_gpu_links[0].gpus: got [0, 9]"),
    ([{"gpus": [0, 0], "level": "system"}], "gangplank_simulated_gpu_links[0].gpus"),
    ([{"gpus": [0, True], "level": "system"}], "gangplank_simulated_gpu_links[0].gpus"),
    ([{"gpus": [0, 1], "level": "NVLINK"}], "gangplank_simulated_gpu_links[0].level"),
    ([{"gpus": [0, 1], "level": "nvlink"}], "gangplank_simulated_gpu_links[0].nvlinks: got 0; expected 1 to 64"),
    ([{"gpus": [0, 1], "level": "system", "nvlinks": 2}], "gangplank_simulated_gpu_links[0].nvlinks: got 2; expected 0"),
    ([{"gpus": [0, 1], "level": "system"}, {"gpus": [1, 0], "level": "numa"}], "gangplank_simulated_gpu_links[1].gpus"),
    ([{"gpus": [0, 1], "level": "system", "speed": 1}], "gangplank_simulated_gpu_links[0]: unknown key \"speed\""),
    (["x"], "gangplank_simulated_gpu_links[0]: got"),
    ([{"gpus": [0, 1], "level": "nvlink", "nvlinks": 2, "pcie": "nvlink"}], "gangplank_simulated_gpu_links[0].pcie: got \"nvlink\"; expected one of board"),
    ([{"gpus": [0, 1], "level": "switch", "pcie": "system"}], "gangplank_simulated_gpu_links[0].pcie: got \"system\"; expected switch (or none)"),
])
def test_simulated_links_are_checked(links, message):
    with pytest.raises(ValueError) as caught:
        collect_facts(simulated=SIM, simulated_links=links, hostname="h")
    assert str(caught.value).startswith(message)


@pytest.mark.parametrize("key, value", [("numa_node", -1), ("numa_node", "0"), ("numa_node", True), ("cpu_affinity", "0-3 "),
                                        ("cpu_affinity", 7), ("cpu_affinity", "a")])
def test_simulated_affinity_is_checked(key, value):
    with pytest.raises(ValueError) as caught:
        collect_facts(simulated=[dict(SIM[0], **{key: value})], hostname="h")
    assert str(caught.value).startswith("gangplank_simulated_gpus[0].%s: got" % key)


def test_simulated_links_need_simulated_gpus():
    with pytest.raises(ValueError, match="expected none without gangplank_simulated_gpus"):
        collect_facts(nvml=FakeNvml([]), simulated_links=[{"gpus": [0, 1], "level": "system"}])


# --- node entry, labels, table ----------------------------------------------------------------------

def hostvars(facts, name="node-a"):
    return {"inventory_hostname": name,
            "ansible_facts": dict(facts, processor_vcpus=224, memtotal_mb=2048 * 1024, architecture="x86_64", system="Linux",
                                  gangplank_nvme=[])}


def test_scheduler_node_passes_numa_and_known_links_of_the_offered_gpus():
    facts = read(mixed())
    facts["gangplank_gpus"][4]["mig_mode"] = {"current": True, "pending": True}
    node = scheduler_node(hostvars(facts))
    assert [g["index"] for g in node["gpus"]] == [0, 1, 2]
    assert [g.get("numa_node") for g in node["gpus"]] == [0, 0, None] and "numa_node" not in node["gpus"][2]
    assert node["gpu_links"] == [{"gpus": [0, 1], "level": "nvlink", "nvlinks": 12},
                                 {"gpus": [0, 2], "level": "host_bridge", "nvlinks": 0},
                                 {"gpus": [1, 2], "level": "host_bridge", "nvlinks": 0}]


def test_scheduler_node_passes_the_pcie_path_of_nvlinked_pairs_and_reads_facts_without_it():
    facts = read(pcie_bridged())
    links = {tuple(link["gpus"]): link for link in scheduler_node(hostvars(facts))["gpu_links"]}
    assert links[0, 1] == {"gpus": [0, 1], "level": "nvlink", "nvlinks": 4, "pcie": "numa"}
    assert links[0, 4] == {"gpus": [0, 4], "level": "system", "nvlinks": 0}
    for link in facts["gangplank_gpu_links"]:
        del link["pcie"]        # facts written before the PCIe path was read
    links = {tuple(link["gpus"]): link for link in scheduler_node(hostvars(facts))["gpu_links"]}
    assert links[0, 1] == {"gpus": [0, 1], "level": "nvlink", "nvlinks": 4}


def test_scheduler_node_unchanged_without_topology():
    facts = collect_facts(simulated=SIM[:2], hostname="h")
    node = scheduler_node(hostvars(facts))
    assert "gpu_links" not in node
    del facts["gangplank_gpu_links"]
    for g in facts["gangplank_gpus"]:
        del g["numa_node"], g["cpu_affinity"]
    old = scheduler_node(hostvars(facts))
    assert "gpu_links" not in old and all(set(g) == {"index", "uuid", "model", "memory"} for g in old["gpus"])


@pytest.mark.parametrize("change, path", [
    (lambda f: f.update(gangplank_gpu_links="x"), "ansible_facts.gangplank_gpu_links: got"),
    (lambda f: f.update(gangplank_gpu_links=[{"gpus": [0], "level": "nvlink", "nvlinks": 1}]), "ansible_facts.gangplank_gpu_links[0].gpus"),
    (lambda f: f.update(gangplank_gpu_links=[{"gpus": [0, 1], "level": "fast", "nvlinks": 1}]), "ansible_facts.gangplank_gpu_links[0].level"),
    (lambda f: f["gangplank_gpus"][1].update(numa_node="0"), "ansible_facts.gangplank_gpus[1].numa_node"),
    (lambda f: f["gangplank_gpu_links"][0].update(pcie="nvlink"), "ansible_facts.gangplank_gpu_links[0].pcie"),
])
def test_malformed_topology_facts_name_the_host_and_field(change, path):
    facts = read(pcie_bridged())
    change(facts)
    with pytest.raises(NodeFactsError) as caught:
        scheduler_node(hostvars(facts))
    assert str(caught.value).startswith("node-a: " + path)


def test_nvlink_domain_label(tmp_path):
    assert node_labels(hostvars(read(dgx_h100())))["gangplank.io/gpu.nvlink-domain"] == "8"
    assert node_labels(hostvars(read(pcie_bridged())))["gangplank.io/gpu.nvlink-domain"] == "2"
    assert "gangplank.io/gpu.nvlink-domain" not in node_labels(hostvars(read(dual_socket(tmp_path))))
    assert node_labels(hostvars(read(mixed())))["gangplank.io/gpu.nvlink-domain"] == "2"
    # A triangle 0-1-2 beside a chain 3-4-5: the largest all-linked set is 3.
    chain = [{"gpus": list(pair), "level": "nvlink", "nvlinks": 1} for pair in ((0, 1), (1, 2), (0, 2), (3, 4), (4, 5))]
    assert nvlink_domain(chain) == 3 and nvlink_domain([]) == 0


def test_facts_table_shows_numa_and_nvlink_groups():
    lines = facts_table(hostvars(read(pcie_bridged()))).splitlines()
    assert lines[2].split() == ["GPU", "MODEL", "MEMORY", "USED", "UUID", "MIG", "NUMA", "SOURCE"]
    assert lines[3].split()[-2:] == ["0", "nvml"] and lines[10].split()[-2:] == ["1", "nvml"]
    assert "  NVLink groups: [0,1] [2,3] [4,5] [6,7]" in lines
    many = read(FakeNvml([gpu(i) for i in range(65)]))
    assert "  GPU topology not read: more than 64 GPUs" in facts_table(hostvars(many)).splitlines()
