# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Greedy only against the full scheduler (greedy, then the exact solver) on hard problems with known answers.

    .venv/bin/python benchmarks/exact_benchmark.py [--seed N] [--count 60] [--time-limit 5] [--no-throughput]

Each problem of benchmarks/hard_problems.py is planned twice: ``plan(p, exact_seconds=0)``
(greedy only) and ``plan(p, exact_seconds=LIMIT)`` (the full scheduler). Every feasible plan is
checked by the independent checker (tests/.../plan_checker.py), every answer against the
problem's known answer. Then the greedy path's throughput at 1,000 nodes / 10,000 instances
(benchmarks/generate.py). A benchmark, not a test: it always exits 0 (2 on bad arguments), and
prints MISS where a target is missed. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import copy
import platform
import statistics
import sys
import time

# Puts the collection (through its shim) and this folder on sys.path.
import collection_path  # noqa: E402,F401  pylint: disable=unused-import,wrong-import-position

HERE = collection_path.HERE
REPO = collection_path.REPO

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.scheduler import plan  # noqa: E402
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.plan_checker import check_plan  # noqa: E402
from generate import generate as generate_large  # noqa: E402
from hard_problems import planted_result, suite  # noqa: E402

DEFAULT_SEED = 20240611
DEFAULT_COUNT = 60
DEFAULT_TIME_LIMIT = 5.0
THROUGHPUT_SIZE = (1000, 10000)
THROUGHPUT_TARGET = 4000.0          # instances per second, at least, on the greedy path
THROUGHPUT_RUNS = 3


def _percentile(values, share):
    """Nearest-rank percentile of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, int(-(-share * len(ordered) // 1)))
    return ordered[min(rank, len(ordered)) - 1]


def _timed_plan(problem, exact_seconds):
    data = copy.deepcopy(problem)
    start = time.perf_counter()
    result = plan(data, exact_seconds=exact_seconds)
    return result, time.perf_counter() - start


def _shape(problem, result):
    """(nodes used, nodes, GPUs left whole, GPUs) of a feasible result."""
    usage = result["usage"]
    used = sum(1 for entry in usage.values() if entry["instances"])
    gpus = [gpu for entry in usage.values() for gpu in entry["gpus"]]
    return used, len(usage), sum(1 for gpu in gpus if gpu["used"] == 0), len(gpus)


def _planted_shape(problem, answer):
    nodes = set(answer["planted"].values())
    touched = {uuid for uuids in answer["planted_gpus"].values() for uuid in uuids}
    gpus = [gpu["uuid"] for node in problem["nodes"].values() for gpu in node.get("gpus", [])]
    return len(nodes), len(problem["nodes"]), sum(1 for uuid in gpus if uuid not in touched), len(gpus)


def run_problem(name, problem, answer, time_limit):
    row = {"name": name, "kind": answer["kind"], "known_feasible": answer["feasible"],
           "min_moves": answer["min_moves"], "has_previous": bool(problem.get("previous")),
           "instances": answer["instances"], "nodes": answer["nodes"]}
    if answer["feasible"]:
        row["plant_violations"] = check_plan(problem, planted_result(problem, answer))
        row["planted"] = _planted_shape(problem, answer)
    for label, seconds in (("greedy", 0), ("full", time_limit)):
        result, elapsed = _timed_plan(problem, seconds)
        entry = {"feasible": result["feasible"], "path": result["path"], "ms": elapsed * 1000.0,
                 "status": (result.get("exact") or {}).get("status"), "summary": result.get("summary", "")}
        if result["feasible"]:
            entry["violations"] = check_plan(problem, result)
            entry["moves"] = len(result["moves"])
            entry["shape"] = _shape(problem, result)
        row[label] = entry
    return row


def _share(part, whole):
    return "%d/%d (%.0f%%)" % (part, whole, 100.0 * part / whole) if whole else "0/0"


def _ratio(pairs):
    """Sum of the first items over the sum of the second, as 'a/b (p%)'."""
    return _share(sum(a for a, _b in pairs), sum(b for _a, b in pairs))


def _column(rows, label):
    """The figures of one column: 'greedy', 'full' or 'planted'."""
    feasible = [row for row in rows if row["known_feasible"]]
    infeasible = [row for row in rows if not row["known_feasible"]]
    if label == "planted":
        shapes = [row["planted"] for row in feasible]
        return {
            "placed": _share(len(feasible), len(rows)), "placed_feasible": _share(len(feasible), len(feasible)),
            "proved": "-", "timeout": "-", "exact_path": "-", "optimal": "-",
            "moves": "-", "moves_known": "-",
            "nodes": _ratio([(s[0], s[1]) for s in shapes]), "whole": _ratio([(s[2], s[3]) for s in shapes]),
            "median": "-", "p95": "-", "max": "-", "violations": str(sum(len(row["plant_violations"]) for row in feasible)),
        }
    entries = [row[label] for row in rows]
    placed = [row for row in rows if row[label]["feasible"]]
    with_previous = [row for row in placed if row["has_previous"]]
    known = [row for row in placed if row["min_moves"] is not None]
    above = sum(1 for row in known if row[label]["moves"] > row["min_moves"])
    below = sum(1 for row in known if row[label]["moves"] < row["min_moves"])
    times = [entry["ms"] for entry in entries]
    exact = [entry for entry in entries if entry["path"] == "exact"]
    return {
        "placed": _share(len(placed), len(rows)),
        "placed_feasible": _share(sum(1 for row in feasible if row[label]["feasible"]), len(feasible)),
        "proved": _share(sum(1 for row in infeasible if row[label]["status"] == "infeasible"), len(infeasible))
        if label == "full" else "-",
        "timeout": _share(sum(1 for entry in entries if entry["status"] == "timeout"), len(rows)) if label == "full" else "-",
        "exact_path": _share(len(exact), len(rows)) if label == "full" else "-",
        "optimal": ", ".join("%d %s" % (sum(1 for e in exact if e["status"] == status), status)
                             for status in ("optimal", "feasible", "infeasible", "timeout")) if label == "full" else "-",
        "moves": "%d moves in %d problems" % (sum(row[label]["moves"] for row in with_previous), len(with_previous)),
        "moves_known": "%d/%d at min, %d above, %d below" % (len(known) - above - below, len(known), above, below),
        "nodes": _ratio([(row[label]["shape"][0], row[label]["shape"][1]) for row in placed]),
        "whole": _ratio([(row[label]["shape"][2], row[label]["shape"][3]) for row in placed]),
        "median": "%.1f" % statistics.median(times), "p95": "%.1f" % _percentile(times, 0.95), "max": "%.1f" % max(times),
        "violations": str(sum(len(row[label]["violations"]) for row in placed)),
    }


ROWS = (
    ("placed (feasible: true), all problems", "placed"),
    ("placed, known-feasible problems", "placed_feasible"),
    ("proved infeasible, known-infeasible problems", "proved"),
    ("timed out (exact status timeout)", "timeout"),
    ("answered by the exact solver (path exact)", "exact_path"),
    ("  of which exact status", "optimal"),
    ("moves (placed problems with previous)", "moves"),
    ("moves vs known minimum (placed)", "moves_known"),
    ("nodes used / nodes (placed problems)", "nodes"),
    ("GPUs left whole / GPUs (placed problems)", "whole"),
    ("plan time median, ms", "median"),
    ("plan time p95, ms", "p95"),
    ("plan time max, ms", "max"),
    ("plan_checker violations", "violations"),
)


def _render(lines, right_from=1):
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    out = []
    for position, line in enumerate(lines):
        out.append("  ".join(cell.ljust(width) if i < right_from else cell.rjust(width)
                             for i, (cell, width) in enumerate(zip(line, widths))).rstrip())
        if position == 0:
            out.append("  ".join("-" * width for width in widths))
    return "\n".join(out)


def _table(rows, time_limit):
    columns = {label: _column(rows, label) for label in ("greedy", "full", "planted")}
    header = ("", "greedy (exact_seconds=0)", "full (exact_seconds=%g)" % time_limit, "planted answer")
    lines = [header] + [(title, columns["greedy"][key], columns["full"][key], columns["planted"][key]) for title, key in ROWS]
    return _render(lines)


def _kinds_table(rows):
    lines = [("kind", "problems", "instances", "greedy placed", "full placed", "proved infeasible", "timeout",
              "full median ms", "full max ms")]
    for kind in sorted({row["kind"] for row in rows}):
        mine = [row for row in rows if row["kind"] == kind]
        times = [row["full"]["ms"] for row in mine]
        lines.append((kind, str(len(mine)), "%d-%d" % (min(r["instances"] for r in mine), max(r["instances"] for r in mine)),
                      str(sum(row["greedy"]["feasible"] for row in mine)), str(sum(row["full"]["feasible"] for row in mine)),
                      str(sum(row["full"]["status"] == "infeasible" for row in mine)),
                      str(sum(row["full"]["status"] == "timeout" for row in mine)),
                      "%.1f" % statistics.median(times), "%.1f" % max(times)))
    return _render(lines)


def run_throughput(seed):
    nodes, instances = THROUGHPUT_SIZE
    problem = generate_large(nodes, instances, seed)
    times, result = [], None
    for _unused in range(THROUGHPUT_RUNS):
        result, elapsed = _timed_plan(problem, 0)
        times.append(elapsed)
    median = statistics.median(times)
    return {"nodes": nodes, "instances": instances, "feasible": result["feasible"], "path": result["path"],
            "median_s": median, "times_s": times, "rate": instances / median if median else float("inf")}


def _misses(rows, throughput):
    misses = []
    for label in ("greedy", "full"):
        bad = [row["name"] for row in rows if row[label]["feasible"] and row[label]["violations"]]
        if bad:
            misses.append("%s plans violating a constraint (plan_checker): %s" % (label, ", ".join(bad)))
    bad = [row["name"] for row in rows if row["known_feasible"] and row["plant_violations"]]
    if bad:
        misses.append("planted solutions violating a constraint (a generator bug): %s" % ", ".join(bad))
    bad = [row["name"] for row in rows if row["known_feasible"] and not row["full"]["feasible"]]
    if bad:
        misses.append("known-feasible problems the full scheduler did not place: %s" % ", ".join(
            "%s (%s)" % (name, next(r["full"]["status"] for r in rows if r["name"] == name)) for name in bad))
    bad = [row["name"] for row in rows if not row["known_feasible"] and (row["full"]["feasible"] or row["greedy"]["feasible"])]
    if bad:
        misses.append("known-infeasible problems reported feasible: %s" % ", ".join(bad))
    bad = [row["name"] for row in rows if not row["known_feasible"] and row["full"]["status"] != "infeasible"]
    if bad:
        misses.append("known-infeasible problems not proved infeasible (status %s): %s" % (
            "/".join(sorted({str(r["full"]["status"]) for r in rows if r["name"] in bad})), ", ".join(bad)))
    for label in ("greedy", "full"):
        bad = ["%s (%s: %d moves, minimum %d)" % (row["name"], row[label]["path"], row[label]["moves"], row["min_moves"])
               for row in rows if row[label]["feasible"] and row["min_moves"] is not None
               and row[label]["moves"] != row["min_moves"]]
        if bad:
            misses.append("%s plans whose moves differ from the known minimum: %s" % (label, ", ".join(bad)))
    if throughput is not None and (throughput["rate"] < THROUGHPUT_TARGET or not throughput["feasible"]):
        misses.append("greedy throughput at %dx%d: %.0f instances/s (%s), target >= %.0f" % (
            throughput["nodes"], throughput["instances"], throughput["rate"],
            "feasible" if throughput["feasible"] else "INFEASIBLE", THROUGHPUT_TARGET))
    return misses


def main(argv=None):
    parser = argparse.ArgumentParser(description="Greedy only vs the full scheduler on hard problems with known answers.")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="suite seed (default %(default)s)")
    parser.add_argument("--count", type=int, default=DEFAULT_COUNT, help="problems (default %(default)s)")
    parser.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT,
                        help="exact_seconds of the full scheduler (default %(default)s)")
    parser.add_argument("--no-throughput", action="store_true", help="skip the 1000x10000 greedy throughput run")
    args = parser.parse_args(argv)
    if args.count < 1 or args.time_limit <= 0:
        parser.error("--count must be >= 1 and --time-limit > 0")

    started = time.perf_counter()
    rows = [run_problem(name, problem, answer, args.time_limit) for name, problem, answer in suite(args.seed, args.count)]
    feasible = sum(1 for row in rows if row["known_feasible"])
    print("exact solver benchmark - seed %d, %d problems (%d known feasible, %d known infeasible), python %s, %s" % (
        args.seed, len(rows), feasible, len(rows) - feasible, platform.python_version(), platform.machine()))
    print("each problem planned with exact_seconds=0 and with exact_seconds=%g; time.perf_counter around plan() only" % (
        args.time_limit))
    print()
    print(_table(rows, args.time_limit))
    print()
    print(_kinds_table(rows))
    throughput = None
    if not args.no_throughput:
        throughput = run_throughput(args.seed)
        print()
        print("greedy throughput %dx%d: %.0f instances/s (median of %d: %s s; %s, path %s) - target >= %.0f: %s" % (
            throughput["nodes"], throughput["instances"], throughput["rate"], THROUGHPUT_RUNS,
            ", ".join("%.2f" % t for t in throughput["times_s"]), "feasible" if throughput["feasible"] else "INFEASIBLE",
            throughput["path"], THROUGHPUT_TARGET, "PASS" if throughput["rate"] >= THROUGHPUT_TARGET else "MISS"))
    print()
    print("total %.1f s" % (time.perf_counter() - started))
    misses = _misses(rows, throughput)
    if misses:
        print()
        for miss in misses:
            print("MISS: " + miss)
    return 0


if __name__ == "__main__":
    sys.exit(main())
