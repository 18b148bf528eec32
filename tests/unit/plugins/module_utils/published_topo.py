# -*- coding: utf-8 -*-
"""``nvidia-smi topo -m`` outputs published in public issue threads, as nvidia-smi prints them: cells separated by tabs,
the own cell " X " (a pasted copy shows the tabs as runs of spaces; ``tabbed`` puts them back). Where a thread shows
only the first rows, the others are completed from the machine's symmetry, and the docstring of each says which rows
are as published."""

from __future__ import annotations

import re

LEGEND = """
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""

OLD_LEGEND = """
Legend:

  X   = Self
  SOC  = Connection traversing PCIe as well as the SMP link between CPU sockets(e.g. QPI)
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe switches (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing a single PCIe switch
  NV#  = Connection traversing a bonded set of # NVLinks
"""


def tabbed(text):
    """A pasted table back in nvidia-smi's form: cells split at tabs or runs of two or more spaces, joined by tabs, the
    header led by a tab, own cells " X "."""
    lines = []
    for number, line in enumerate(text.strip("\n").split("\n")):
        cells = [cell for cell in re.split(r"\t| {2,}", line.strip()) if cell]
        cells = [" X " if cell == "X" else cell for cell in cells]
        lines.append(("\t" if number == 0 else "") + "\t".join(cells))
    return "\n".join(lines) + "\n"


# NVIDIA/go-gpuallocator issue 17: 8x RTX 4090, two NICs, two sockets; every GPU pair SYS. All rows as published.
RTX4090_NICS = (
    "\tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    "GPU0\t X \tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t0-55,112-167\t0\t\tN/A\n"
    "GPU1\tSYS\t X \tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t0-55,112-167\t0\t\tN/A\n"
    "GPU2\tSYS\tSYS\t X \tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t0-55,112-167\t0\t\tN/A\n"
    "GPU3\tSYS\tSYS\tSYS\t X \tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t0-55,112-167\t0\t\tN/A\n"
    "GPU4\tSYS\tSYS\tSYS\tSYS\t X \tSYS\tSYS\tSYS\tSYS\tSYS\t56-111,168-223\t1\t\tN/A\n"
    "GPU5\tSYS\tSYS\tSYS\tSYS\tSYS\t X \tSYS\tSYS\tSYS\tSYS\t56-111,168-223\t1\t\tN/A\n"
    "GPU6\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t X \tSYS\tPHB\tPHB\t56-111,168-223\t1\t\tN/A\n"
    "GPU7\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t X \tSYS\tSYS\t56-111,168-223\t1\t\tN/A\n"
    "NIC0\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tPHB\tSYS\t X \tPIX\n"
    "NIC1\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\tPHB\tSYS\tPIX\t X\n"
    + LEGEND + "\nNIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n"
)

# kubernetes/kubernetes issue 53497 (2017): 8 PCIe GPUs, two per switch, four per socket, and a card named by its
# device, mlx4_0; only CPU Affinity. Rows GPU0-GPU4 as published; GPU5-GPU7 and the mlx4_0 row by symmetry.
PCIE_MLX4 = tabbed("""
        GPU0    GPU1    GPU2    GPU3    GPU4    GPU5    GPU6    GPU7    mlx4_0  CPU Affinity
GPU0     X      PIX     PHB     PHB     SYS     SYS     SYS     SYS     PHB     0-9,20-29
GPU1    PIX      X      PHB     PHB     SYS     SYS     SYS     SYS     PHB     0-9,20-29
GPU2    PHB     PHB      X      PIX     SYS     SYS     SYS     SYS     PHB     0-9,20-29
GPU3    PHB     PHB     PIX      X      SYS     SYS     SYS     SYS     PHB     0-9,20-29
GPU4    SYS     SYS     SYS     SYS      X      PIX     PHB     PHB     SYS     10-19,30-39
GPU5    SYS     SYS     SYS     SYS     PIX      X      PHB     PHB     SYS     10-19,30-39
GPU6    SYS     SYS     SYS     SYS     PHB     PHB      X      PIX     SYS     10-19,30-39
GPU7    SYS     SYS     SYS     SYS     PHB     PHB     PIX      X      SYS     10-19,30-39
mlx4_0  PHB     PHB     PHB     PHB     SYS     SYS     SYS     SYS      X
""") + LEGEND


def _dgx2():
    """NVIDIA/nccl-tests issue 78: a DGX-2, 16 V100 on NVSwitches (NV6 every pair), ten cards named mlx5_0..mlx5_9, only
    CPU Affinity. Rows GPU0-GPU3 as published (GPU4 up to its cut); the rest by symmetry: GPUs 0-7 with mlx5_0-3 on
    the first socket (0-23,48-71), 8-15 with mlx5_6-9 on the second (24-47,72-95), a switch pair per card pair."""
    header = "\t" + "\t".join(["GPU%d" % gpu for gpu in range(16)] + ["mlx5_%d" % nic for nic in range(10)] + ["CPU Affinity"])
    near = {0: 0, 1: 0, 2: 1, 3: 1, 4: 2, 5: 2, 6: 3, 7: 3, 8: 6, 9: 6, 10: 7, 11: 7, 12: 8, 13: 8, 14: 9, 15: 9}
    rows = [header]
    for gpu in range(16):
        cells = [" X " if other == gpu else "NV6" for other in range(16)]
        for nic in range(10):
            if (nic < 5) != (gpu < 8):
                cells.append("SYS")
            elif nic in (4, 5):
                cells.append("NODE")
            elif nic == near[gpu]:
                cells.append("PIX")
            elif nic // 2 == near[gpu] // 2 or (nic - 6) // 2 == (near[gpu] - 6) // 2 and nic >= 6:
                cells.append("PXB")
            else:
                cells.append("NODE")
        rows.append("GPU%d\t" % gpu + "\t".join(cells) + "\t" + ("0-23,48-71" if gpu < 8 else "24-47,72-95"))
    for nic in range(10):
        rows.append("mlx5_%d\t" % nic + "\t".join(["SYS"] * 16 + [" X " if other == nic else "SYS" for other in range(10)]))
    return "\n".join(rows) + "\n" + LEGEND


DGX2_MLX5 = _dgx2()


def _dgx_a100():
    """NVIDIA/nccl issue 1505: a DGX A100 40GB, 8 A100 (NV12 every pair), NIC0..NIC11, NUMA nodes 3, 1, 7, 5 for the
    GPU pairs. Rows GPU0-GPU3 as published; GPU4-GPU7 and the NIC rows by symmetry (GPU6-7: 80-95,208-223 on node 5)."""
    affinity = ["48-63,176-191\t3"] * 2 + ["16-31,144-159\t1"] * 2 + ["112-127,240-255\t7"] * 2 + ["80-95,208-223\t5"] * 2
    near = {0: (0, 1), 1: (0, 1), 2: (2, 3), 3: (2, 3), 4: (6, 7), 5: (6, 7), 6: (8, 9), 7: (8, 9)}
    header = "\t" + "\t".join(["GPU%d" % gpu for gpu in range(8)] + ["NIC%d" % nic for nic in range(12)]
                              + ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"])
    rows = [header]
    for gpu in range(8):
        cells = [" X " if other == gpu else "NV12" for other in range(8)]
        cells += ["PXB" if nic in near[gpu] else "SYS" for nic in range(12)]
        rows.append("GPU%d\t" % gpu + "\t".join(cells) + "\t" + affinity[gpu] + "\t\tN/A")
    for nic in range(12):
        cells = ["PXB" if nic in near[gpu] else "SYS" for gpu in range(8)]
        cells += [" X " if other == nic else ("PIX" if other // 2 == nic // 2 else "SYS") for other in range(12)]
        rows.append("NIC%d\t" % nic + "\t".join(cells))
    legend = "\nNIC Legend:\n\n" + "".join("  NIC%d: mlx5_%d\n" % (nic, nic) for nic in range(12))
    return "\n".join(rows) + "\n" + LEGEND + legend


DGX_A100_NICS = _dgx_a100()

# 4x Tesla K40m on two sockets, from a driver that printed SOC for SYS and had no NUMA Affinity column; not a
# published copy: written after the old drivers' legend (OLD_LEGEND) and their layout, two GPUs per socket.
K40M_SOC = tabbed("""
        GPU0    GPU1    GPU2    GPU3    CPU Affinity
GPU0     X      PHB     SOC     SOC     0-7,16-23
GPU1    PHB      X      SOC     SOC     0-7,16-23
GPU2    SOC     SOC      X      PHB     8-15,24-31
GPU3    SOC     SOC     PHB      X      8-15,24-31
""") + OLD_LEGEND

# noonghunna/club-3090 issue 46: 5 PCIe GPUs, one on the second socket, two host-bridge pairs on the first. All rows
# as published.
FIVE_PCIE = tabbed("""
        GPU0    GPU1    GPU2    GPU3    GPU4    CPU Affinity    NUMA Affinity   GPU NUMA ID
GPU0     X      SYS     SYS     SYS     SYS     8-15,24-31      1               N/A
GPU1    SYS      X      PHB     NODE    NODE    0-7,16-23       0               N/A
GPU2    SYS     PHB      X      NODE    NODE    0-7,16-23       0               N/A
GPU3    SYS     NODE    NODE     X      PHB     0-7,16-23       0               N/A
GPU4    SYS     NODE    NODE    PHB      X      0-7,16-23       0               N/A
""") + LEGEND
