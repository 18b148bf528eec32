# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fuzz every entry point with hostile inputs and count what went wrong.

    .venv/bin/python benchmarks/fuzz_benchmark.py [--cases 300] [--command-cases 40] [--seed N] [--json] [--worst-cases]

Per entry point (tests/unit/plugins/fuzz_cases.py, ENTRY_POINTS: the planner in-process, the catalog's deploy
keys, scale requests, profiles, host facts, lock and record files, health probes, deploy host names, rebalance,
waves, every-node services, the facts cache, secrets, the status picture) it runs ``--cases``
mutated inputs in this process, each under an alarm of ``--case-seconds``; then ``--command-cases`` runs
of bin/gangplank-plan in a subprocess with a memory limit and a timeout. It prints, per entry point: cases,
accepted, rejected (the documented error), tracebacks (any other exception, or one on the command's
stderr), hangs (the alarm or the timeout), violations (a plan the independent checker refuses, or a
dangerous value accepted) and the slowest case. The targets are 0 tracebacks, 0 hangs, 0 violations.
``--worst-cases`` also times the worst input of each pairwise check within the documented bounds
(docs/problem-format.md, "Work") against the 10 s target.

A benchmark, not a test: it exits 0 even when a target is missed (2 on bad arguments) and prints MISS.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import signal
import sys
import time
import traceback

# Puts the collection (through its shim) and this folder on sys.path.
import collection_path  # noqa: E402,F401  pylint: disable=unused-import,wrong-import-position

from ansible_collections.gangplank.platform.tests.unit.plugins import fuzz_cases  # noqa: E402

COLUMNS = ("cases", "accepted", "rejected", "tracebacks", "hangs", "violations", "slowest_s")


class Hang(Exception):
    """The alarm fired: the case ran longer than --case-seconds."""


def _alarm(_signum, _frame):
    raise Hang()


def _new_row():
    return dict.fromkeys(COLUMNS, 0)


def _count(row, outcome, seconds, examples, name):
    row["cases"] += 1
    row["slowest_s"] = max(row["slowest_s"], round(seconds, 2))
    key = {"ok": "accepted", "rejected": "rejected"}.get(outcome.split(":")[0], None)
    if key is None:
        key = "violations" if outcome.startswith("violation") else "hangs" if outcome == "hang" else "tracebacks"
        examples.append("%s: %s" % (name, outcome if len(outcome) < 800 else outcome[:200] + " ... " + outcome[-600:]))
    row[key] += 1


def fuzz_in_process(name, cases, rng, case_seconds, examples):
    make, run = fuzz_cases.ENTRY_POINTS[name]
    row = _new_row()
    for _case in range(cases):
        case = make(lambda options: rng.choice(list(options)))
        start = time.monotonic()
        signal.setitimer(signal.ITIMER_REAL, case_seconds)
        try:
            outcome = run(case)
        except Hang:
            outcome = "hang"
        except Exception:  # noqa: BLE001 (a traceback the user would see: what this benchmark counts)
            outcome = "traceback: " + traceback.format_exc(limit=-2)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        _count(row, outcome, time.monotonic() - start, examples, name)
    return row


def fuzz_command(cases, rng, examples):
    row = _new_row()

    def choose(options):
        return rng.choice(list(options))

    for _case in range(cases):
        # JSON text cannot hold a billion laughs (json.dumps would expand it): as_text sends that as YAML aliases.
        problem = fuzz_cases.mutate(fuzz_cases.PROBLEM, choose, mutations=1, pool=fuzz_cases.JSON_HOSTILE)
        text, checkable = fuzz_cases.as_text(problem, choose)
        code, stdout, stderr, seconds = fuzz_cases.run_command(text, "--json")
        if code is None:
            outcome = "hang"
        else:
            failure = fuzz_cases.judge_command(problem if checkable else None, code, stdout, stderr)
            outcome = failure or ("ok" if code in (0, 2) else "rejected")
        _count(row, outcome, seconds, examples, "planner_command")
    return row


# --- worst cases of the pairwise checks (docs/problem-format.md, "Work") ---------------------------

TARGET_SECONDS = 10.0       # every input within the documented bounds is answered within this, on this machine


def _nodes(count, **spec):
    return {"n%05d" % index: dict({"cpu": 64, "memory": "256Gi"}, **spec) for index in range(count)}


def _worst_every_node_refused():
    # 1e8 pairs: refused by MAX_EVERY_NODE_WORK before any is checked.
    return {"nodes": _nodes(10000), "services": {"s%05d" % j: {"every_node": True} for j in range(10000)}}


def _worst_every_node_at_work_bound():
    # 2,000 every-node services x 10,000 nodes = the work bound (2e7): eligibility counted until the instances pass
    # MAX_INSTANCES, then refused by the instance total.
    return {"nodes": _nodes(10000), "services": {"s%04d" % j: {"every_node": True} for j in range(1999)}}


def _worst_every_node_none_eligible():
    # 999 every-node services whose selector no node matches x 10,000 nodes: 2e7 in the work bound, every pair checked.
    return {"nodes": _nodes(10000), "services": {"s%03d" % j: {"every_node": True, "node_selector": {"zone": "nowhere"}}
                                                 for j in range(999)}}


def _worst_every_node_placed():
    # 10 every-node services on 10,000 nodes: 100,000 instances (MAX_INSTANCES), each bound to its node.
    return {"nodes": _nodes(10000), "services": {"s%d" % j: {"every_node": True, "resources": {"cpu": "1m"}} for j in range(10)}}


def _worst_taints_tolerations():
    # 240 nodes x 1,024 NoSchedule taints (each taint is 4 of the 1e6 entries read in all) and services tolerating
    # all of them or all but one (every node refuses the second after 1,023 lookups).
    taints = [{"key": "k%d" % t, "value": "v", "effect": "NoSchedule"} for t in range(1024)]
    every = [{"key": "k%d" % t, "value": "v"} for t in range(1024)]
    return {"nodes": _nodes(240, taints=taints),
            "services": {"web": {"replicas": 100, "resources": {"cpu": "10m"}, "tolerations": every},
                         "db": {"resources": {"cpu": "10m"}, "tolerations": every[1:]}}}


def _worst_selector_labels():
    # 900 nodes x 1,024 labels (near the 1e6 entries) and selectors of 1,024 entries that all match (checked whole).
    labels = {"l%d" % t: "v" for t in range(1024)}
    return {"nodes": _nodes(900, labels=labels),
            "services": {"s%d" % j: {"replicas": 10, "resources": {"cpu": "10m"}, "node_selector": dict(labels, l0="v")}
                         for j in range(4)}}


def _worst_anti_affinity():
    # 10,000 services (most with no replicas), each avoiding 90 others: the exact solver's conflicting pairs.
    services = {"s%05d" % j: {"replicas": 1 if j < 50 else 0, "resources": {"cpu": 1},
                              "anti_affinity": ["s%05d" % ((j + k) % 10000) for k in range(1, 91)]} for j in range(10000)}
    return {"nodes": _nodes(40), "services": services}


def _classes(count):
    def build():
        # ``count`` scheduling classes (distinct selectors) over ``count`` nodes: every class checks every node.
        return {"nodes": {"n%05d" % i: {"cpu": 64, "memory": "256Gi", "labels": {"id": str(i)}} for i in range(count)},
                "services": {"s%05d" % j: {"resources": {"cpu": "1m"}, "node_selector": {"id": str(j)}} for j in range(count)}}
    return build


WORST_CASES = (
    ("every-node services x nodes, refused", _worst_every_node_refused),
    ("every-node services x nodes at the work bound", _worst_every_node_at_work_bound),
    ("every-node at the work bound, none eligible", _worst_every_node_none_eligible),
    ("every-node: 100,000 instances on 10,000 nodes", _worst_every_node_placed),
    ("taints x tolerations (1e6 taints)", _worst_taints_tolerations),
    ("node_selector x labels (1e6 labels)", _worst_selector_labels),
    ("anti_affinity of 10,000 services", _worst_anti_affinity),
    ("scheduling classes x nodes at the bound, 1,000 x 1,000", _classes(1000)),
    ("scheduling classes x nodes, 1,224 x 1,224, refused", _classes(1224)),
    ("scheduling classes x nodes, 2,000 x 2,000, refused", _classes(2000)),
)


def worst_cases(case_seconds, examples):
    """Each worst case planned in this process (the exact solver allowed 5 s), timed: name -> row."""
    rows = collections.OrderedDict()
    for name, build in WORST_CASES:
        problem = build()
        start, cpu = time.monotonic(), time.process_time()
        signal.setitimer(signal.ITIMER_REAL, case_seconds)
        try:
            result = fuzz_cases.plan_catalog(problem, exact_seconds=5.0)
            outcome = "feasible" if result["feasible"] else "infeasible"
        except fuzz_cases.ProblemError as error:
            outcome = "refused: " + error.errors[0][1][:90]
        except Hang:
            outcome = "hang"
        except Exception:  # noqa: BLE001 (counted, as in the fuzz cases)
            outcome = "traceback: " + traceback.format_exc(limit=-2)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        seconds = round(time.monotonic() - start, 2)
        # CPU seconds too (all threads): on a shared machine the wall time says more about the others' load.
        cpu_seconds = round(time.process_time() - cpu, 2)
        rows[name] = {"seconds": seconds, "cpu_seconds": cpu_seconds, "outcome": outcome,
                      "within_target": min(seconds, cpu_seconds) <= TARGET_SECONDS}
        if outcome == "hang" or outcome.startswith("traceback"):
            examples.append("worst case %s: %s" % (name, outcome))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--cases", type=int, default=300, help="cases per in-process entry point (default 300)")
    parser.add_argument("--command-cases", type=int, default=40, help="runs of bin/gangplank-plan (default 40)")
    parser.add_argument("--case-seconds", type=float, default=30.0, help="an in-process case longer than this is a hang")
    parser.add_argument("--seed", type=int, default=20261123)
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    parser.add_argument("--worst-cases", action="store_true",
                        help="also time the worst case of each pairwise check (docs/problem-format.md, Work)")
    parser.add_argument("--only", action="append", metavar="ENTRY_POINT",
                        help="fuzz only this in-process entry point (repeatable); the command cases still run")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGALRM, _alarm)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    rng = random.Random(args.seed)
    rows, examples = collections.OrderedDict(), []
    for name in fuzz_cases.ENTRY_POINTS:
        if args.only and name not in args.only:
            continue
        rows[name] = fuzz_in_process(name, args.cases, rng, args.case_seconds, examples)
    rows["planner_command"] = fuzz_command(args.command_cases, rng, examples)
    total = {column: sum(row[column] for row in rows.values()) for column in COLUMNS[:-1]}
    # Runs over the 10 s target: every input within the bounds must be answered within it.
    total["over_10s"] = sum(1 for row in rows.values() if row["slowest_s"] > TARGET_SECONDS)
    worst = worst_cases(max(args.case_seconds, 120.0), examples) if args.worst_cases else {}
    missed = total["tracebacks"] + total["hangs"] + total["violations"]
    if args.json:
        json.dump({"seed": args.seed, "entry_points": rows, "total": total, "worst_cases": worst, "failures": examples},
                  sys.stdout, indent=2)
        print()
        return 0
    print("fuzz benchmark, seed %d" % args.seed)
    print("%-16s" % "entry point" + "".join("%11s" % column for column in COLUMNS))
    for name, row in rows.items():
        print("%-16s" % name + "".join("%11s" % row[column] for column in COLUMNS))
    print("%-16s" % "total" + "".join("%11s" % total[column] for column in COLUMNS[:-1]))
    print("entry points whose slowest case took over %g s: %d" % (TARGET_SECONDS, total["over_10s"]))
    for name, row in worst.items():
        verdict = "ok" if row["within_target"] else "OVER"
        figures = (name, row["seconds"], row["cpu_seconds"], verdict, row["outcome"][:100])
        print("worst case %-46s %7.2f s (CPU %6.2f s)  %s  %s" % figures)
    for example in examples[:20]:
        print("  " + example.replace("\n", "\n    "))
    print("MISS: %d traceback(s), hang(s) or violation(s)" % missed if missed else
          "targets met: 0 tracebacks, 0 hangs, 0 violations")
    return 0


if __name__ == "__main__":
    sys.exit(main())
