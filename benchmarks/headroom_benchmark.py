# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Headroom for scalable services (``max_replicas``): how far a compute platform grows a service after the gang.

    .venv/bin/python benchmarks/headroom_benchmark.py [--servers 8] [--seeds 1-6] [--slack 0.8] [--json]

Per seed (``random.Random(seed)``), a cluster of ``--servers`` 8-GPU servers (80 GiB A100s, 96 CPUs, 1 TiB) and a
catalog: GPU shares of 20 and 40 GiB and whole single GPUs (their counts drawn so that they fill 40-60% of the
cluster's GPU memory), and a scalable training service of 2 or 4 whole GPUs per instance starting at 0 replicas,
whose ``max_replicas`` is what ``--slack`` (a fraction) of the cluster's GPUs left free could hold of it. The gang is planned once; then the
service is grown one replica at a time, each step one ``plan()`` with the last plan's placements in ``previous``
(what scale.yml does), until ``max_replicas`` or the first refusal. Two ways, each with the catalog marked the same
but for ``max_replicas``:

- ``headroom``: the catalog states ``max_replicas`` (the GPU fragmentation score counts the growth in its mix);
- ``blind``: it does not (today's behaviour without the field).

And two kinds of catalog: ``stateless`` (the shares may move: a step that needs room moves them, counted) and
``stateful`` (they never move: a step that needs room is refused). Printed per kind, summed over the seeds: the
training replicas reached, the stateless instances moved on the way, the steps that moved something, and CPU.
A benchmark, not a test: it exits 0 (2 on bad arguments). See benchmarks/README.md ("Headroom benchmark").
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time

# Puts the collection (through its shim) and this folder on sys.path.
import collection_path  # noqa: E402,F401  pylint: disable=unused-import,wrong-import-position

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.scheduler import plan  # noqa: E402

GPUS = 8
GIB = 2 ** 30
GPU_MEMORY = 80 * GIB


def seeds_of(text):
    first, _dash, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def nodes_for(servers):
    return {"node-%02d" % number: {
        "cpu": 96, "memory": "1Ti",
        "gpus": [{"index": index, "uuid": "GPU-%02d-%d" % (number, index), "model": "NVIDIA A100-SXM4-80GB",
                  "memory": "80Gi"} for index in range(GPUS)]} for number in range(servers)}


def catalog(seed, servers, stateful, slack):
    """(services, the training service's GPUs per instance, its max_replicas)."""
    chance = random.Random(seed)
    gpus = servers * GPUS
    fill = chance.uniform(0.4, 0.6) * gpus          # GPUs' worth of memory the shares and single GPUs take
    parts = [chance.random() for _part in range(3)]
    total = sum(parts)
    infer = int(fill * parts[0] / total / 0.25)      # 20 GiB: a quarter GPU each
    embed = int(fill * parts[1] / total / 0.5)       # 40 GiB: half a GPU
    solo = int(fill * parts[2] / total)
    train_gpus = chance.choice((2, 4))
    used = infer * 0.25 + embed * 0.5 + solo
    maximum = max(int(slack * (gpus - used) // train_gpus), 1)
    services = {
        "infer": {"replicas": infer, "stateful": stateful,
                  "resources": {"cpu": 2, "memory": "8Gi", "gpu": {"count": 1, "memory": "20Gi"}}},
        "embed": {"replicas": embed, "stateful": stateful,
                  "resources": {"cpu": 2, "memory": "8Gi", "gpu": {"count": 1, "memory": "40Gi"}}},
        "solo": {"replicas": solo, "stateful": stateful, "resources": {"cpu": 4, "memory": "16Gi", "gpu": {"count": 1}}},
        "train": {"replicas": 0, "scalable": True,
                  "resources": {"cpu": 8, "memory": "64Gi", "gpu": {"count": train_gpus}}},
    }
    return services, train_gpus, maximum


def grow(servers, seed, stateful, headroom, slack):
    """(replicas reached, max_replicas, instances moved, steps that moved some, CPU seconds)."""
    services, _train_gpus, maximum = catalog(seed, servers, stateful, slack)
    if headroom:
        services["train"]["max_replicas"] = maximum
    nodes = nodes_for(servers)
    started = time.process_time()
    result = plan(json.loads(json.dumps({"nodes": nodes, "services": services})))
    reached, moved, moving_steps = 0, 0, 0
    if result["feasible"]:
        for replicas in range(1, maximum + 1):
            services["train"]["replicas"] = replicas
            step = plan(json.loads(json.dumps({"nodes": nodes, "services": services, "previous": result["placements"]})))
            if not step["feasible"]:
                break
            reached, result = replicas, step
            moves = len(step.get("moves") or [])
            moved += moves
            moving_steps += 1 if moves else 0
    return reached, maximum, moved, moving_steps, time.process_time() - started


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=8)
    parser.add_argument("--seeds", default="1-6")
    parser.add_argument("--slack", type=float, default=0.8, help="max_replicas: this fraction of the free GPUs' worth")
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args(argv)
    try:
        seeds = seeds_of(options.seeds)
    except ValueError:
        seeds = []
    if options.servers < 1 or not seeds or not 0 < options.slack <= 1:
        parser.print_usage(sys.stderr)
        return 2
    rows = []
    for kind, stateful in (("stateless", False), ("stateful", True)):
        row = {"kind": kind}
        for way, headroom in (("headroom", True), ("blind", False)):
            totals = [0, 0, 0, 0, 0.0]
            for seed in seeds:
                figures = grow(options.servers, seed, stateful, headroom, options.slack)
                totals = [total + figure for total, figure in zip(totals, figures)]
            row[way] = {"reached": totals[0], "max_replicas": totals[1], "moved": totals[2], "moving_steps": totals[3],
                        "cpu_seconds": round(totals[4], 1)}
        rows.append(row)
    if options.json:
        print(json.dumps(rows, indent=2))
        return 0
    print("training replicas reached of max_replicas (summed over %d seeds), instances moved on the way (steps that "
          "moved some), CPU" % len(seeds))
    print("%-10s %28s %28s %16s" % ("kind", "reached headroom / blind", "moved headroom / blind", "CPU s"))
    for row in rows:
        with_headroom, blind = row["headroom"], row["blind"]
        print("%-10s %11d / %4d of %4d %14d (%d) / %4d (%d) %10.1f" % (
            row["kind"], with_headroom["reached"], blind["reached"], with_headroom["max_replicas"],
            with_headroom["moved"], with_headroom["moving_steps"], blind["moved"], blind["moving_steps"],
            with_headroom["cpu_seconds"] + blind["cpu_seconds"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
