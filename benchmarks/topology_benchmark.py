# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Topology-aware GPU choice against the topology-blind one, on synthetic arrivals.

    .venv/bin/python benchmarks/topology_benchmark.py [--servers 16] [--seeds 1-3] [--batch 4]
        [--exact-seconds 2] [--kinds nvswitch,pcie_bridged,dual_socket,mixed] [--json]

Per topology kind, a cluster of ``--servers`` 8-GPU servers of that kind (80 GiB devices):

- ``nvswitch``: an HGX-style NVSwitch server, every pair NVLinked (18 lanes);
- ``pcie_bridged``: PCIe GPUs with NVLink bridges in pairs (0-1, 2-3, ...; 4 lanes), four per socket;
- ``dual_socket``: PCIe only, four GPUs per socket, two per PCIe switch;
- ``mixed``: GPUs 0-3 an NVLink mesh, 4-5 bridged, 6-7 on one switch, the rest PCIe (some pairs unknown).

Arrivals (``random.Random(seed)``): whole-GPU instances of 1, 2, 4 or 8 GPUs (40, 25, 20, 5%) and shares of 20 or
40 GiB (10%), each a service of its own. They arrive in batches of ``--batch`` percent of the cluster's GPUs; each
batch is one ``plan()`` of problem text (the way scale.yml plans: every earlier instance ``stateful`` and in
``previous`` with its node and GPU UUIDs); a refused batch is planned again without what plan() refused (dropped,
nothing moves), until twice the cluster's GPUs have arrived. Run twice: topology-aware (the
nodes list their ``gpu_links``) and topology-blind (the same problem without them: today's choice).

Printed per kind: the fraction of the multi-GPU instances placed before the first refusal (and to the end) whose GPUs
score (scheduler/topology.py's link
score) as well as the best set the empty server could give that request, aware and blind; the GPU allocation ratio
(GPUs allocated, a share counted as its fraction of the device, over all GPUs) at the first refusal, aware and
blind, and its change, which must not be a drop of more than 0.5 points (MISS); the ratio at the end; plan() calls
and CPU seconds.
A benchmark, not a test: it exits 0 (2 on bad arguments). See benchmarks/README.md ("Topology benchmark").
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time

# Puts the collection (through its shim) and this folder on sys.path.
import collection_path  # noqa: E402,F401  pylint: disable=unused-import,wrong-import-position

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.gpu import choose_gpus  # noqa: E402
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.problem import parse_problem  # noqa: E402
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.scheduler import plan  # noqa: E402
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.topology import (  # noqa: E402
    best_empty_score, link_matrix, set_score,
)
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.test_gpu_topology import (  # noqa: E402
    TOPOLOGIES, links,
)

GPUS = 8
GPU_MEMORY = 80 * 2 ** 30
# (weight, count, memory per device in GiB or None for whole GPUs)
SHAPES = ((40, 1, None), (25, 2, None), (20, 4, None), (5, 8, None), (6, 1, 20), (4, 1, 40))
RETRIES = 4            # plan() calls per batch at most: a refused batch is planned again without what it refused
MAX_DROP = 0.5          # points of allocation ratio the aware choice may lose at the first refusal


# The four published topologies, as the unit tests describe them.
KINDS = TOPOLOGIES


def nodes_for(kind, servers, aware):
    nodes = {}
    for number in range(servers):
        name = "%s-%02d" % (kind.replace("_", "-"), number)
        spec = {"cpu": 128, "memory": "1Ti",
                "gpus": [{"index": index, "uuid": "GPU-%s-%d" % (name, index), "model": "NVIDIA A100-SXM4-80GB",
                          "memory": "80Gi", "numa_node": index // 4} for index in range(GPUS)]}
        if aware:
            spec["gpu_links"] = links(KINDS[kind], GPUS)
        nodes[name] = spec
    return nodes


def arrivals(seed, total):
    """(count, memory GiB or None, GPUs it takes) until twice the cluster's GPUs have arrived."""
    chance = random.Random(seed)
    weights = [shape[0] for shape in SHAPES]
    result, arrived = [], 0.0
    while arrived < 2 * total:
        _weight, count, memory = chance.choices(SHAPES, weights)[0]
        takes = count if memory is None else memory * 2 ** 30 / float(GPU_MEMORY)
        result.append((count, memory, takes))
        arrived += takes
    return result


def service_spec(count, memory):
    gpu = {"count": count}
    if memory is not None:
        gpu["memory"] = "%dGi" % memory
    return {"replicas": 1, "resources": {"cpu": 1, "memory": "4Gi", "gpu": gpu}}


def run(kind, servers, seed, aware, batch_percent, exact_seconds):
    """One arrival sequence through plan(): (allocation at the first refusal, at the end, multi-GPU instances placed,
    of them on a best set, plan() calls, CPU seconds)."""
    nodes = nodes_for(kind, servers, aware)
    total = servers * GPUS
    sequence = arrivals(seed, total)
    running = {}            # service name -> (spec, node, uuids, takes)
    step = batch_percent * total / 100.0
    position = 0
    calls, cpu = 0, 0.0
    first_refusal = None
    before = None           # the instances placed before the first refusal
    while position < len(sequence):
        batch, size = [], 0.0
        while position < len(sequence) and size < step:
            batch.append(("p%04d" % position, sequence[position]))
            size += sequence[position][2]
            position += 1
        services, previous = {}, {}
        for name, (spec, node, uuids, _takes) in running.items():
            services[name] = dict(spec, stateful=True)
            previous[name + "-0"] = {"node": node, "gpus": [{"uuid": uuid} for uuid in uuids]}
        for name, (count, memory, _takes) in batch:
            services[name] = service_spec(count, memory)
        problem = {"nodes": nodes, "services": services}
        if previous:
            problem["previous"] = previous
        for _try in range(RETRIES):
            text = json.dumps(problem, sort_keys=True)
            started = time.process_time()
            result = plan(json.loads(text), exact_seconds=exact_seconds)
            cpu += time.process_time() - started
            calls += 1
            if result["feasible"]:
                break
            if first_refusal is None:
                first_refusal = sum(entry[3] for entry in running.values()) / float(total)
                before = set(running)
            # Dropped, as the trace benchmark's plan mode drops what a batch's plan refuses; nothing moves.
            refused = {name[:-2] for name in result["unschedulable"]}
            batch = [(name, shape) for name, shape in batch if name not in refused]
            for name in refused:
                problem["services"].pop(name, None)
        if not result["feasible"]:
            continue
        for name, (count, memory, takes) in batch:
            placed = result["placements"][name + "-0"]
            running[name] = (service_spec(count, memory), placed["node"], [gpu["uuid"] for gpu in placed["gpus"]], takes)
    allocation = sum(entry[3] for entry in running.values()) / float(total)
    if first_refusal is None:
        first_refusal, before = allocation, set(running)
    # Judged with the links known, whichever run placed them.
    model = parse_problem({"nodes": nodes_for(kind, servers, True), "services": {}})
    multi = best = early_multi = early_best = 0
    for name, (spec, node_name, uuids, _takes) in running.items():
        request = spec["resources"]["gpu"]
        if request["count"] < 2:
            continue
        node = model.nodes[node_name]
        positions = [index for index, device in enumerate(node.gpus) if device.uuid in uuids]
        wanted = parse_problem({"nodes": {}, "services": {"x": spec}}).services["x"].resources.gpu
        on_best = set_score(link_matrix(node), positions) >= best_empty_score(node, wanted, choose_gpus)
        multi += 1
        best += on_best
        early_multi += name in before
        early_best += on_best and name in before
    return first_refusal, allocation, early_multi, early_best, multi, best, calls, cpu


def seeds_of(text):
    if "-" in text:
        low, high = text.split("-", 1)
        return list(range(int(low), int(high) + 1))
    return [int(part) for part in text.split(",")]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=16)
    parser.add_argument("--seeds", default="1-3")
    parser.add_argument("--batch", type=float, default=4.0, help="percent of the cluster's GPUs per plan() call")
    parser.add_argument("--exact-seconds", type=float, default=2.0)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args(argv)
    kinds = options.kinds.split(",")
    if any(kind not in KINDS for kind in kinds) or options.servers < 1 or options.batch <= 0:
        parser.print_usage(sys.stderr)
        return 2
    rows = []
    for kind in kinds:
        row = {"kind": kind}
        for mode, aware in (("aware", True), ("blind", False)):
            totals = [0.0, 0.0, 0, 0, 0, 0, 0, 0.0]
            seeds = seeds_of(options.seeds)
            for seed in seeds:
                figures = run(kind, options.servers, seed, aware, options.batch, options.exact_seconds)
                totals = [total + figure for total, figure in zip(totals, figures)]
            row[mode] = {"best_set": totals[3] / float(max(totals[2], 1)), "multi_gpu_instances": totals[2],
                         "best_set_to_the_end": totals[5] / float(max(totals[4], 1)),
                         "allocation": 100.0 * totals[0] / len(seeds), "final_allocation": 100.0 * totals[1] / len(seeds),
                         "plans": totals[6], "cpu_seconds": totals[7]}
        row["allocation_change"] = row["aware"]["allocation"] - row["blind"]["allocation"]
        row["ok"] = row["allocation_change"] >= -MAX_DROP
        rows.append(row)
    if options.json:
        print(json.dumps(rows, indent=2))
        return 0
    print("best set: multi-GPU instances placed before the first refusal on a set as good as the empty server's best "
          "(to the end in brackets); allocation: GPU allocation ratio at the first refusal, and at the end")
    print("%-13s %30s %24s %7s %18s %14s" % ("kind", "best set aware/blind", "at 1st refusal aware/blind", "change",
                                             "end aware/blind", "plans, CPU s"))
    for row in rows:
        aware, blind = row["aware"], row["blind"]
        print("%-13s %6.1f%% (%5.1f%%) /%6.1f%% (%5.1f%%) %12.2f%% /%6.2f%% %+7.2f%s %8.2f%% /%6.2f%% %6d, %6.1f" % (
            row["kind"], 100 * aware["best_set"], 100 * aware["best_set_to_the_end"], 100 * blind["best_set"],
            100 * blind["best_set_to_the_end"], aware["allocation"], blind["allocation"],
            row["allocation_change"], "" if row["ok"] else " MISS", aware["final_allocation"], blind["final_allocation"],
            aware["plans"] + blind["plans"], aware["cpu_seconds"] + blind["cpu_seconds"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
