# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rebalance (scheduler/rebalance.py) on generated fragmented clusters: what each move frees, and how long it takes.

    .venv/bin/python benchmarks/rebalance_benchmark.py [--kind churned|scattered] [--sizes 10x120,20x300] [--seeds 3]
                                                       [--moves 1,2,5,10] [--large 50x1000] [--time-limit 10] [--json]

A fragmented cluster is made the way churn makes one: a problem of benchmarks/generate.py with every
stateless service scaled up by half is planned; then a random third of each stateless service's
instances go away (the survivors keep where they run, renumbered), so holes are left all over the
cluster. ``--kind scattered``: 8-GPU nodes with GPU instances of four sizes placed at random, a
stateful instance on every fifth node. ``rebalance(problem, max_moves=N)`` is then run for each N: whole GPUs freed and nodes freed,
per move used, the solver's verdict, and the time. Every plan is checked by the independent checker
(tests/.../plan_checker.py). Last, the rebalance plan time at 50 nodes / 1,000 instances.

A benchmark, not a test: it always exits 0 (2 on bad arguments). See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import copy
import json
import platform
import random
import sys
import time

# Puts the collection (through its shim) and this folder on sys.path.
import collection_path  # noqa: E402,F401  pylint: disable=unused-import,wrong-import-position

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.rebalance import rebalance  # noqa: E402
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.scheduler import plan  # noqa: E402
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.plan_checker import check_plan  # noqa: E402
from generate import generate  # noqa: E402

DEFAULT_SIZES = ((10, 120), (20, 300))
DEFAULT_MOVES = (1, 2, 5, 10, 20)
DEFAULT_LARGE = (50, 1000)
GROWTHS = (1.3, 1.15, 1.0)  # stateless services scaled up by the first of these that still fits, before the churn
LEAVING = 1 / 3         # the share of each stateless service's instances that then goes away


def fragmented(nodes, instances, seed):
    """A generated problem whose ``previous`` is a placement left fragmented by churn."""
    rng = random.Random(seed)
    problem = generate(nodes, instances, seed)
    for growth in GROWTHS:
        grown = copy.deepcopy(problem)
        for service in grown["services"].values():
            if not service.get("sidecar") and not service.get("stateful"):
                service["replicas"] = int(service.get("replicas", 1) * growth + 0.5)
        placed = plan(grown, exact_seconds=0)
        if placed["feasible"]:
            break
    else:
        return None
    previous = {}
    for name, service in problem["services"].items():
        if service.get("sidecar"):
            continue
        count = service.get("replicas", 1)
        mine = sorted((entry["ordinal"], instance) for instance, entry in placed["placements"].items() if entry["service"] == name)
        if service.get("stateful"):
            keep = [instance for _ordinal, instance in mine][:count]
        else:
            survivors = [instance for _ordinal, instance in mine]
            rng.shuffle(survivors)
            keep = sorted(survivors[:max(0, len(survivors) - int(len(survivors) * LEAVING))],
                          key=lambda instance: placed["placements"][instance]["ordinal"])
        service["replicas"] = len(keep)
        for ordinal, instance in enumerate(keep):
            entry = placed["placements"][instance]
            kept = {"node": entry["node"], "gpus": [{"uuid": gpu["uuid"]} for gpu in entry["gpus"]]}
            if entry["nvme"]:
                kept["nvme"] = {"name": entry["nvme"]["name"]}
            previous["%s-%d" % (name, ordinal)] = kept
    problem["previous"] = previous
    return problem


def scattered(nodes, instances, seed):
    """A GPU cluster after random churn: ``nodes`` nodes of 8 x 80Gi GPUs, ``instances`` stateless GPU instances
    of four services (8, 16, 24 or 40Gi) each placed on a random node and GPU with room, and one stateful
    instance on every fifth node: few instances per node, many GPUs used in part, nodes that could be emptied."""
    rng = random.Random(seed)
    names = ["g%03d" % index for index in range(nodes)]
    problem = {"nodes": {name: {"cpu": 64, "memory": "512Gi", "gpus": [
        {"index": g, "uuid": "GPU-%s-%d" % (name, g), "model": "NVIDIA A100-SXM4-80GB", "memory": "80Gi"} for g in range(8)]}
        for name in names}, "services": {}, "previous": {}}
    free = {(name, g): 80 for name in names for g in range(8)}
    sizes = {"embed": 8, "rerank": 16, "chat": 24, "vision": 40}
    counts = dict.fromkeys(sizes, 0)
    for _index in range(instances):
        service = rng.choice(sorted(sizes))
        room = [key for key, left in free.items() if left >= sizes[service]]
        if not room:
            break
        node, gpu = rng.choice(room)
        free[node, gpu] -= sizes[service]
        problem["previous"]["%s-%d" % (service, counts[service])] = {"node": node, "gpus": [{"uuid": "GPU-%s-%d" % (node, gpu)}]}
        counts[service] += 1
    for service, size in sizes.items():
        resources = {"cpu": 1, "memory": "4Gi", "gpu": {"memory": "%dGi" % size}}
        problem["services"][service] = {"replicas": counts[service], "resources": resources}
    keepers = names[::5]
    problem["services"]["db"] = {"stateful": True, "replicas": len(keepers), "resources": {"cpu": 2, "memory": "8Gi"}}
    for ordinal, node in enumerate(keepers):
        problem["previous"]["db-%d" % ordinal] = {"node": node}
    return problem


def _checked(problem, result):
    plain = {key: value for key, value in result.items() if key != "rebalance"}
    plain["path"] = "greedy_with_moves" if result["path"] == "rebalance" else result["path"]
    return check_plan(problem, plain)


def run_one(problem, max_moves, time_limit):
    started = time.perf_counter()
    result = rebalance(copy.deepcopy(problem), max_moves=max_moves, exact_seconds=time_limit)
    seconds = time.perf_counter() - started
    report = result["rebalance"]
    used = report.get("moves", 0) + report.get("restarts", 0) if result["path"] == "rebalance" else 0
    gain = report.get("gain", {"whole_gpus_freed": 0, "nodes_freed": 0})
    return {
        "max_moves": max_moves, "moves": used, "status": report.get("status"), "seconds": round(seconds, 2),
        "whole_gpus_freed": gain["whole_gpus_freed"], "nodes_freed": gain["nodes_freed"],
        "gpus_per_move": round(gain["whole_gpus_freed"] / used, 2) if used else 0.0,
        "nodes_per_move": round(gain["nodes_freed"] / used, 2) if used else 0.0,
        "before": report.get("before"), "violations": len(_checked(problem, result)),
    }


def _sizes(text):
    try:
        return tuple(tuple(int(part) for part in item.split("x")) for item in text.split(",") if item)
    except ValueError:
        raise argparse.ArgumentTypeError("expected NODESxINSTANCES[,...], got %r" % text) from None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--sizes", type=_sizes, default=DEFAULT_SIZES)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--moves", type=lambda text: tuple(int(item) for item in text.split(",")), default=DEFAULT_MOVES)
    parser.add_argument("--large", type=_sizes, default=(DEFAULT_LARGE,))
    parser.add_argument("--large-moves", type=int, default=10)
    parser.add_argument("--time-limit", type=float, default=10.0)
    parser.add_argument("--kind", choices=("churned", "scattered"), default="churned",
                        help="churned: benchmarks/generate.py after scale-up and scale-down; scattered: GPU instances "
                             "placed at random over 8-GPU nodes")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = []
    if not args.json:
        print("rebalance benchmark (%s): python %s, %s; CP-SAT limit %g s; churned: stateless grown by up to 30%%, then "
              "%d%% leave; scattered: GPU instances at random" % (
                  args.kind, platform.python_version(), platform.machine(), args.time_limit, LEAVING * 100))
        print("%-10s %4s %5s %5s %6s %6s %7s %7s %-8s %7s %4s" % (
            "size", "seed", "max", "used", "GPUs+", "nodes+", "GPU/mv", "node/mv", "status", "seconds", "bad"))
    for nodes, instances in args.sizes + args.large:
        large = (nodes, instances) in args.large
        for seed in range(1, (1 if large else args.seeds) + 1):
            problem = (fragmented if args.kind == "churned" else scattered)(nodes, instances, seed)
            if problem is None:
                continue
            for max_moves in ((args.large_moves,) if large else args.moves):
                row = dict(run_one(problem, max_moves, args.time_limit), size="%dx%d" % (nodes, instances), seed=seed)
                rows.append(row)
                if not args.json:
                    print("%-10s %4d %5d %5d %6d %6d %7.2f %7.2f %-8s %7.2f %4d" % (
                        row["size"], seed, max_moves, row["moves"], row["whole_gpus_freed"], row["nodes_freed"],
                        row["gpus_per_move"], row["nodes_per_move"], row["status"], row["seconds"], row["violations"]))
                    sys.stdout.flush()
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        before = [row["before"] for row in rows if row["before"]]
        if before:
            print("before rebalancing (per cluster): whole free GPUs %s, free nodes %s" % (
                sorted({entry["whole_free_gpus"] for entry in before}), sorted({entry["free_nodes"] for entry in before})))
        bad = sum(row["violations"] for row in rows)
        print("checker: %s" % ("every plan valid" if not bad else "%d violation(s): BAD" % bad))
    return 0


if __name__ == "__main__":
    sys.exit(main())
