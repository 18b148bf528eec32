# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The CPU time of reading a cpulist, the GPU facts' reader (nvidia-smi topo -m's CPU Affinity, sysfs local_cpulist,
a simulated cpu_affinity; CPUs below 65,536) and the problem's (numa_cpus; CPUs below 4,096), on what a host prints and
on hostile lists whose ranges repeat the whole range (each within the bounds, together far more CPUs than there are).

    .venv/bin/python benchmarks/cpulist_benchmark.py [--repeat 5]

Printed per input: its length, the answer (the canonical cpulist or "refused"), and the median CPU seconds of
``--repeat`` reads (time.process_time). A benchmark, not a test: it exits 0.
"""

from __future__ import annotations

import argparse
import statistics
import time

# Puts the collection (through its shim) and this folder on sys.path.
import collection_path  # noqa: E402,F401  pylint: disable=unused-import,wrong-import-position

from ansible_collections.gangplank.platform.plugins.module_utils.facts import gpu_facts  # noqa: E402
from ansible_collections.gangplank.platform.plugins.module_utils import quantity  # noqa: E402

INPUTS = [
    ("facts", "a dual-socket host", "0-55,112-167"),
    ("facts", "every CPU once", "0-65535"),
    ("facts", "every second CPU", ",".join(str(cpu) for cpu in range(0, 16384, 2))),
    ("facts", "0-65535 x 8,191", ",".join(["0-65535"] * 8191)),
    ("facts", "0-32767 x 2", ",".join(["0-32767"] * 2)),
    ("problem", "a NUMA node", "0-15,32-47"),
    ("problem", "0-4095 x 1,638", ",".join(["0-4095"] * 1638)),
]


def read(kind, text):
    if kind == "facts":
        return gpu_facts.parse_cpulist(text) or "refused"
    try:
        return quantity.format_cpulist(quantity.parse_cpulist(text))
    except ValueError:
        return "refused"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    print("%-8s %-20s %8s  %-14s %s" % ("reader", "input", "chars", "answer", "CPU s (median)"))
    for kind, name, text in INPUTS:
        seconds = []
        for _run in range(max(1, options.repeat)):
            started = time.process_time()
            answer = read(kind, text)
            seconds.append(time.process_time() - started)
        shown = answer if len(answer) <= 14 else answer[:11] + "..."
        print("%-8s %-20s %8d  %-14s %.4f" % (kind, name, len(text), shown, statistics.median(seconds)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
