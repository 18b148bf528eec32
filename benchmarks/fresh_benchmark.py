# -*- coding: utf-8 -*-
"""site.yml on the fresh-host bed, per engine: hosts that have never seen this project.

For each engine (every host Podman, then every host Docker) three new bed hosts
(scripts/lib/freshbed.sh) get the demo catalog: a cold site.yml (the runtime role installs the
engine from Debian's repositories, loads the image bundle, then facts, schedule, deploy), then a
no-change site.yml. Reported per run: wall time, changed tasks, and module runs on the hosts
(each loop item counts; every one is made over SSH with become). With --cold-image the host image
is first removed and built again, and that time is reported too.

Run (after scripts/demo.sh or scripts/test.sh has set up .venv and the test bed), as root:
    .venv/bin/python benchmarks/fresh_benchmark.py [--cold-image] [--engines podman,docker]
Uses hosts bench-f1..3 on 127.0.0.91-93 and removes them at the end. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, ".build", "collections"))

from ansible_collections.gangplank.platform.tests.e2e.bed import failures  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.gangplank.platform.tests.e2e.fresh import ENV, FRESHBED, FreshBed  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.gangplank.platform.tests.e2e.test_fresh import modules_run  # noqa: E402  pylint: disable=wrong-import-position
# This script's folder is first on sys.path.
from day2_benchmark import changed_count  # noqa: E402  pylint: disable=wrong-import-position

HOSTS = {"fresh1": ("bench-f1", "127.0.0.91"), "fresh2": ("bench-f2", "127.0.0.92"), "fresh3": ("bench-f3", "127.0.0.93")}


def build_image_cold():
    started = time.monotonic()
    subprocess.run([FRESHBED, "image", "--rebuild"], env=ENV, check=True)
    return time.monotonic() - started


def site(bed, engine):
    started = time.monotonic()
    returncode, report = bed.playbook("site.yml", "-e", "gangplank_container_engine=%s" % engine, timeout=1800)
    seconds = time.monotonic() - started
    changed = changed_count(report)
    if returncode != 0:
        print("%s: site.yml failed:\n%s" % (engine, "\n".join(failures(report))), flush=True)
    return {"ok": returncode == 0, "seconds": seconds, "changed": changed, "module_runs": modules_run(report)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--cold-image", action="store_true", help="remove the host image and time its build")
    parser.add_argument("--engines", default="podman,docker", help="comma-separated (default: podman,docker)")
    args = parser.parse_args(argv)
    if args.cold_image:
        print("host image, cold build (debootstrap + customize + import): %.1f s" % build_image_cold())
    print("%-7s %-9s %8s %8s %12s" % ("engine", "site.yml", "seconds", "changed", "module runs"), flush=True)
    for engine in filter(None, args.engines.split(",")):
        with tempfile.TemporaryDirectory() as base:
            bed = FreshBed(Path(base), HOSTS)
            bed.down()
            bed.up()
            try:
                runs = [("cold", site(bed, engine)), ("no-change", site(bed, engine))]
            finally:
                bed.playbook("teardown.yml", "-e", "teardown_remove_data=true")
                bed.down()
        for label, run in runs:
            flag = "" if run["ok"] else "  FAILED"
            print("%-7s %-9s %8.1f %8d %12d%s" % (engine, label, run["seconds"], run["changed"], run["module_runs"], flag))
        print("%-7s no-change / cold: %.2f" % (engine, runs[1][1]["seconds"] / runs[0][1]["seconds"]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
