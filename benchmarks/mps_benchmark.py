# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The start of GPU share instances with their MPS control daemons, against the same shares without (advisory), on the
local test bed (real Podman; the MPS control binary is the bed's stand-in, scripts/lib/nvidia-cuda-mps-control.stand-in).

Per repetition and mode, on a fresh copy of the bed: site.yml deploys a catalog of one small service (so facts, the
runtime and the lock are warm), then a timed site.yml adds SHARES GPU shares (20Gi each, on node1's A100s: 4 fit there
with the MPS servers' memory); then teardown. Mode ``mps``: every host's facts find the stand-in, so each share gets its
daemon container, whose limits are set before the instance starts; mode ``none``: no daemon, the share is advisory.
The modes alternate, so that a machine's load falls on both alike. Printed: each timed run, the medians, their ratio,
and the cost per share.

Run (after scripts/demo.sh or scripts/test.sh has set up .venv and the test bed):
    .venv/bin/python benchmarks/mps_benchmark.py [--repeat 3] [--shares 2]
Uses hosts bmps-n1..3 on 127.0.0.181-183 and removes its containers at the end of each repetition.
A benchmark, not a test: it exits 0 (1 when a run fails).
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import tempfile
import time

import yaml

# Puts the collection (through its shim) and this folder on sys.path.
import collection_path  # noqa: E402,F401  pylint: disable=unused-import,wrong-import-position

from ansible_collections.gangplank.platform.tests.e2e.bed import Bed, failures, summaries  # noqa: E402

HOSTS = {"node1": ("bmps-n1", "127.0.0.181"), "node2": ("bmps-n2", "127.0.0.182"), "node3": ("bmps-n3", "127.0.0.183")}
READY = "touch /tmp/ready && exec sleep 2147483647"


def service(gpu=None, **extra):
    resources = {"cpu": "20m", "memory": "16Mi"}
    if gpu:
        resources["gpu"] = gpu
    return dict({"resources": resources, "image": "localhost/gangplank-demo:1", "command": ["sh", "-c", READY],
                 "init": True, "health": {"command": ["test", "-f", "/tmp/ready"], "timeout": 10, "interval": 0.2,
                                          "retries": 50}}, **extra)


def catalog(shares):
    services = {"base": service()}
    for number in range(shares):
        # node1 only: its A100s hold 20Gi shares; node2's L4 (24Gi) would too, so a selector keeps them together.
        services["share%d" % number] = service({"count": 1, "memory": "20Gi"},
                                               node_selector={"gangplank.io/hostname": HOSTS["node1"][0]})
    return services


def one_run(mode, shares):
    with tempfile.TemporaryDirectory(prefix="mps-bench-") as base:
        bed = Bed.make(pathlib.Path(base), HOSTS)
        inventory = yaml.safe_load(bed.inventory.read_text())
        if mode == "mps":
            for spec in inventory["all"]["hosts"].values():
                spec["gangplank_mps_control"] = "{{ gangplank_mps_stand_in }}"
        bed.inventory.write_text(yaml.safe_dump(inventory))
        services = bed.base / "group_vars" / "all" / "zz_catalog.yml"
        try:
            services.write_text(yaml.safe_dump({"gangplank_services": catalog(0)}))
            returncode, report = bed.playbook("site.yml")
            if returncode:
                raise RuntimeError("the first site.yml failed: %s" % failures(report))
            services.write_text(yaml.safe_dump({"gangplank_services": catalog(shares)}))
            started = time.monotonic()
            returncode, report = bed.playbook("site.yml")
            seconds = time.monotonic() - started
            if returncode:
                raise RuntimeError("the timed site.yml failed: %s" % failures(report))
            daemons = sorted(name for name in bed.containers() if name.endswith(".mps"))
            return seconds, daemons, summaries(report).get(HOSTS["node1"][0], "")
        finally:
            bed.playbook("teardown.yml", "-e", "gangplank_break_lock=true")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--shares", type=int, default=2, choices=range(1, 5))
    args = parser.parse_args(argv)
    times = {"none": [], "mps": []}
    try:
        for repetition in range(args.repeat):
            for mode in (("none", "mps") if repetition % 2 == 0 else ("mps", "none")):
                seconds, daemons, line = one_run(mode, args.shares)
                times[mode].append(seconds)
                print("%-4s run %d: %.1f s, daemons %s; node1: %s" % (mode, repetition + 1, seconds, daemons, line))
                sys.stdout.flush()
    except RuntimeError as error:
        print("mps_benchmark: %s" % error)
        return 1
    none, mps = statistics.median(times["none"]), statistics.median(times["mps"])
    print("\n%d share(s) added by site.yml, median of %d: advisory %.1f s, with MPS daemons %.1f s: %.2fx, %+.1f s per share"
          % (args.shares, args.repeat, none, mps, mps / none, (mps - none) / args.shares))
    return 0


if __name__ == "__main__":
    sys.exit(main())
