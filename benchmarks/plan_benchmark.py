# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Time the gang scheduler's ``plan()`` on generated problems and check the targets.

    .venv/bin/python benchmarks/plan_benchmark.py [--sizes 20x300,50x1000] [--seed N] [--kinds] [--json]

A benchmark, not a test: it always exits 0 (2 on bad arguments), and prints MISS
where a target is missed. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import copy
import json
import platform
import statistics
import sys
import time

# Puts the collection (through its shim) and this folder on sys.path.
import collection_path  # noqa: E402,F401  pylint: disable=unused-import,wrong-import-position

HERE = collection_path.HERE
REPO = collection_path.REPO

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.scheduler import plan  # noqa: E402
from generate import generate, with_kinds  # noqa: E402

DEFAULT_SIZES = ((20, 300), (50, 1000), (1000, 10000))
DEFAULT_SEED = 20240611
LATENCY_TARGET = {(50, 1000): 100.0}            # median plan time, ms, at most
THROUGHPUT_TARGET = {(1000, 10000): 4000.0}     # instances per second, at least
LARGE = 5000                                     # from this many instances: median of 3 runs, not 5
RERUN_SIZE = (50, 1000)


def _sizes(text):
    sizes = []
    for item in text.split(","):
        try:
            nodes, instances = item.lower().split("x")
            sizes.append((int(nodes), int(instances)))
        except ValueError:
            raise argparse.ArgumentTypeError("expected NODESxINSTANCES[,...], e.g. 20x300,50x1000; got %r" % item)
    return sizes


def _timed(problem, runs):
    """Median seconds of ``runs`` plan() calls, each on its own copy of the problem, and the last result."""
    times = []
    result = None
    for _unused in range(runs):
        data = copy.deepcopy(problem)
        start = time.perf_counter()
        result = plan(data)
        times.append(time.perf_counter() - start)
    return statistics.median(times), times, result


def _utilisation(result):
    """Used / total of CPU, memory and GPU memory over the whole cluster, from the result's usage."""
    if not result.get("feasible"):
        return None
    sums = {"cpu": [0, 0], "memory": [0, 0], "gpu_memory": [0, 0]}
    for usage in result["usage"].values():
        for key, dim in (("cpu_millicores", "cpu"), ("memory", "memory")):
            sums[dim][0] += usage[key]["used"]
            sums[dim][1] += usage[key]["total"]
        for gpu in usage["gpus"]:
            sums["gpu_memory"][0] += gpu["used"]
            sums["gpu_memory"][1] += gpu["total"]
    return {dim: (used / float(total) if total else 0.0) for dim, (used, total) in sums.items()}


def _verdict(nodes, instances, seconds):
    """(target text, PASS/MISS/-, ratio text, ratio) for one size."""
    key = (nodes, instances)
    if key in LATENCY_TARGET:
        budget = LATENCY_TARGET[key]
        ratio = seconds * 1000.0 / budget
        return "<= %g ms" % budget, "PASS" if ratio <= 1.0 else "MISS", "%.2fx of budget" % ratio, ratio
    if key in THROUGHPUT_TARGET:
        target = THROUGHPUT_TARGET[key]
        ratio = instances / seconds / target if seconds else float("inf")
        return ">= %g inst/s" % target, "PASS" if ratio >= 1.0 else "MISS", "%.2fx of target" % ratio, ratio
    return "-", "-", "", None


def run_size(nodes, instances, seed, kinds=False):
    problem = generate(nodes, instances, seed)
    if kinds:
        problem = with_kinds(problem, seed)
    runs = 3 if instances >= LARGE else 5
    median, times, result = _timed(problem, runs)
    target, status, ratio_text, ratio = _verdict(nodes, instances, median)
    services = sum(1 for spec in problem["services"].values() if not spec.get("sidecar"))
    return {
        "nodes": nodes, "instances": instances, "services": services,
        "sidecars": len(problem["services"]) - services, "seed": seed,
        "feasible": bool(result["feasible"]), "path": result["path"],
        "summary": result.get("summary"),
        "runs": runs, "median_ms": median * 1000.0, "times_ms": [t * 1000.0 for t in times],
        "instances_per_s": instances / median if median else None,
        "target": target, "status": status, "ratio": ratio, "ratio_text": ratio_text,
        "utilisation": _utilisation(result),
        "preemptible": sum(spec.get("replicas", 1) for spec in problem["services"].values() if spec.get("preemptible")),
        "preempted": len(result.get("preempted") or ()),
        "every_node": sum(1 for name in result["placements"] if "@" in name),
    }, problem, result


def run_rerun(problem, result, seed):
    """Steady state: the problem re-planned with its own placements as ``previous``."""
    if not result["feasible"]:
        return {"nodes": RERUN_SIZE[0], "instances": RERUN_SIZE[1], "seed": seed, "feasible": False,
                "skipped": "the first plan is infeasible"}
    again = dict(problem)
    again["previous"] = result["placements"]
    median, times, rerun = _timed(again, 5)
    moves = len(rerun.get("moves", ())) if rerun["feasible"] else None
    return {"nodes": RERUN_SIZE[0], "instances": RERUN_SIZE[1], "seed": seed,
            "feasible": bool(rerun["feasible"]), "path": rerun["path"], "moves": moves,
            "median_ms": median * 1000.0, "times_ms": [t * 1000.0 for t in times],
            "status": "PASS" if rerun["feasible"] and moves == 0 else "MISS"}


def _table(rows):
    header = ("nodes", "instances", "services", "feasible", "median ms", "instances/s", "target", "result")
    lines = [header]
    for row in rows:
        verdict = row["status"] if row["status"] == "-" else "%s (%s)" % (row["status"], row["ratio_text"])
        lines.append((str(row["nodes"]), str(row["instances"]), str(row["services"]),
                      "yes" if row["feasible"] else "NO", "%.1f" % row["median_ms"],
                      "%.0f" % row["instances_per_s"], row["target"], verdict))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = []
    for position, line in enumerate(lines):
        out.append("  ".join(cell.rjust(width) if i < 6 else cell.ljust(width)
                             for i, (cell, width) in enumerate(zip(line, widths))).rstrip())
        if position == 0:
            out.append("  ".join("-" * width for width in widths))
    return "\n".join(out)


def main(argv=None):
    parser = argparse.ArgumentParser(description="Time plan() on generated problems.")
    parser.add_argument("--sizes", type=_sizes, default=list(DEFAULT_SIZES),
                        help="NODESxINSTANCES[,...] (default: 20x300,50x1000,1000x10000)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="generator seed (default %(default)s)")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of the table")
    parser.add_argument("--kinds", action="store_true",
                        help="about 20%% of the instances preemptible (with priorities) and one every-node service")
    args = parser.parse_args(argv)

    rows = []
    kept = {}
    for nodes, instances in args.sizes:
        row, problem, result = run_size(nodes, instances, args.seed, args.kinds)
        rows.append(row)
        if (nodes, instances) == RERUN_SIZE:
            kept = {"problem": problem, "result": result}
    if not kept:
        problem = generate(RERUN_SIZE[0], RERUN_SIZE[1], args.seed)
        if args.kinds:
            problem = with_kinds(problem, args.seed)
        kept = {"problem": problem, "result": plan(copy.deepcopy(problem))}
    rerun = run_rerun(kept["problem"], kept["result"], args.seed)

    if args.json:
        json.dump({"seed": args.seed, "python": platform.python_version(), "sizes": rows, "rerun": rerun},
                  sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
        return 0

    print("gang scheduler plan() benchmark - seed %d, python %s, %s" % (
        args.seed, platform.python_version(), platform.machine()))
    print("median of 5 runs (3 from %d instances); time.perf_counter around plan() only" % LARGE)
    print()
    print(_table(rows))
    print()
    for row in rows:
        load = row["utilisation"]
        if load is None:
            print("%dx%d: INFEASIBLE: %s" % (row["nodes"], row["instances"], row["summary"]))
        else:
            print("%dx%d: path %s; used cpu %.0f%%, memory %.0f%%, gpu memory %.0f%%; runs %s ms" % (
                row["nodes"], row["instances"], row["path"], 100 * load["cpu"], 100 * load["memory"],
                100 * load["gpu_memory"], ", ".join("%.1f" % t for t in row["times_ms"])))
            if args.kinds:
                print("  %d preemptible instance(s), %d preempted; %d every-node instance(s)" % (
                    row["preemptible"], row["preempted"], row["every_node"]))
    if "skipped" in rerun:
        print("steady-state rerun %dx%d: skipped (%s)" % (rerun["nodes"], rerun["instances"], rerun["skipped"]))
    else:
        print("steady-state rerun %dx%d (previous = own placements): %s, path %s, moves %s, median %.1f ms - %s" % (
            rerun["nodes"], rerun["instances"], "feasible" if rerun["feasible"] else "INFEASIBLE",
            rerun["path"], rerun["moves"], rerun["median_ms"], rerun["status"]))
    misses = [row for row in rows if row["status"] == "MISS"] + ([rerun] if rerun.get("status") == "MISS" else [])
    infeasible = [row for row in rows if not row["feasible"]]
    if misses or infeasible:
        print()
        for row in misses:
            print("MISS: %dx%d %s" % (row["nodes"], row["instances"], row.get("ratio_text") or "rerun moved instances"))
        for row in infeasible:
            print("MISS: %dx%d is infeasible: the generator must produce feasible problems" % (
                row["nodes"], row["instances"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
