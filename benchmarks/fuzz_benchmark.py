# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fuzz every entry point with hostile inputs and count what went wrong (issue 13).

    .venv/bin/python benchmarks/fuzz_benchmark.py [--cases 300] [--command-cases 40] [--seed N] [--json]

Per entry point (tests/unit/plugins/fuzz_cases.py: the planner in-process, the catalog's deploy keys,
scale requests, host facts, lock and record files, health probes, deploy host names) it runs ``--cases``
mutated inputs in this process, each under an alarm of ``--case-seconds``; then ``--command-cases`` runs
of bin/gangplank-plan in a subprocess with a memory limit and a timeout. It prints, per entry point: cases,
accepted, rejected (the documented error), tracebacks (any other exception, or one on the command's
stderr), hangs (the alarm or the timeout), violations (a plan the independent checker refuses, or a
dangerous value accepted) and the slowest case. The targets are 0 tracebacks, 0 hangs, 0 violations.

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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--cases", type=int, default=300, help="cases per in-process entry point (default 300)")
    parser.add_argument("--command-cases", type=int, default=40, help="runs of bin/gangplank-plan (default 40)")
    parser.add_argument("--case-seconds", type=float, default=30.0, help="an in-process case longer than this is a hang")
    parser.add_argument("--seed", type=int, default=20261123)
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGALRM, _alarm)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    rng = random.Random(args.seed)
    rows, examples = collections.OrderedDict(), []
    for name in fuzz_cases.ENTRY_POINTS:
        rows[name] = fuzz_in_process(name, args.cases, rng, args.case_seconds, examples)
    rows["planner_command"] = fuzz_command(args.command_cases, rng, examples)
    total = {column: sum(row[column] for row in rows.values()) for column in COLUMNS[:-1]}
    missed = total["tracebacks"] + total["hangs"] + total["violations"]
    if args.json:
        json.dump({"seed": args.seed, "entry_points": rows, "total": total, "failures": examples}, sys.stdout, indent=2)
        print()
        return 0
    print("fuzz benchmark, seed %d" % args.seed)
    print("%-16s" % "entry point" + "".join("%11s" % column for column in COLUMNS))
    for name, row in rows.items():
        print("%-16s" % name + "".join("%11s" % row[column] for column in COLUMNS))
    print("%-16s" % "total" + "".join("%11s" % total[column] for column in COLUMNS[:-1]))
    for example in examples[:20]:
        print("  " + example.replace("\n", "\n    "))
    print("MISS: %d traceback(s), hang(s) or violation(s)" % missed if missed else
          "targets met: 0 tracebacks, 0 hangs, 0 violations")
    return 0


if __name__ == "__main__":
    sys.exit(main())
