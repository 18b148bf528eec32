# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""plan() of two checkouts (before and after a change) interleaved on the same generated loads.

    .venv/bin/python benchmarks/interleaved_benchmark.py --old OLD_CHECKOUT --new . [--reps 4] [--sizes 20x300,...] [--kinds]

Each repetition runs one process per checkout, in alternating order, so that load on the machine
falls on both alike; each process plans every size several times (7, 3 from 5,000 instances) and
reports the least CPU time (``time.process_time`` around ``plan()``). Printed: per size the least
over the repetitions, before and after, and the ratio, with every repetition's figure. ``--kinds``
adds the sizes with preemptible work and an every-node service (generate.with_kinds), which only a
checkout that has with_kinds can plan. A benchmark: it prints, it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r'''
import copy, json, sys, time
sys.path.insert(0, "benchmarks")
import collection_path  # noqa: F401
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.scheduler import plan
import generate
out = {}
for nodes, instances, kinds in json.loads(sys.argv[1]):
    if kinds and not hasattr(generate, "with_kinds"):
        continue
    problem = generate.generate(nodes, instances, 20240611)
    if kinds:
        problem = generate.with_kinds(problem, 20240611)
    times = []
    for _ in range(3 if instances >= 5000 else 7):
        data = copy.deepcopy(problem)
        start = time.process_time()
        result = plan(data)
        times.append(time.process_time() - start)
    out["%dx%d%s" % (nodes, instances, " + kinds" if kinds else "")] = [min(times), len(result.get("preempted") or ())]
print(json.dumps(out))
'''


def _python(tree):
    venv = os.path.join(tree, ".venv", "bin", "python")
    return venv if os.path.exists(venv) else sys.executable


def _sizes(text):
    return [tuple(int(part) for part in item.split("x")) for item in text.split(",")]


def main(argv=None):
    parser = argparse.ArgumentParser(description="plan() of two checkouts, interleaved on the same loads.")
    parser.add_argument("--old", required=True, help="the checkout before the change")
    parser.add_argument("--new", required=True, help="the checkout after the change")
    parser.add_argument("--reps", type=int, default=4, help="processes per checkout (default %(default)s)")
    parser.add_argument("--sizes", type=_sizes, default=[(20, 300), (50, 1000), (1000, 10000)],
                        help="NODESxINSTANCES[,...] (default: 20x300,50x1000,1000x10000)")
    parser.add_argument("--kinds", action="store_true", help="also the sizes with preemptible and every-node work")
    args = parser.parse_args(argv)
    loads = [(nodes, instances, False) for nodes, instances in args.sizes]
    if args.kinds:
        loads += [(nodes, instances, True) for nodes, instances in args.sizes]
    trees = {"before": os.path.abspath(args.old), "after": os.path.abspath(args.new)}
    seconds = {}
    for rep in range(args.reps):
        for label in (("before", "after") if rep % 2 == 0 else ("after", "before")):
            out = subprocess.run([_python(trees[label]), "-c", CHILD, json.dumps(loads)], cwd=trees[label],
                                 capture_output=True, text=True, check=True).stdout
            for key, (least, _preempted) in json.loads(out).items():
                seconds.setdefault(key, {}).setdefault(label, []).append(least)
    print("plan() CPU time, least of %d interleaved processes per checkout (before: %s, after: %s)" % (
        args.reps, trees["before"], trees["after"]))
    for key, runs in seconds.items():
        before = min(runs["before"]) * 1000 if "before" in runs else None
        after = min(runs["after"]) * 1000
        print("%-20s before %s  after %9.1f ms  %s  runs before %s after %s" % (
            key, "%9.1f ms" % before if before else "      -     ", after,
            "ratio %.2f" % (after / before) if before else "          ",
            [round(x * 1000, 1) for x in runs.get("before", [])], [round(x * 1000, 1) for x in runs["after"]]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
