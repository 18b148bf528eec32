# -*- coding: utf-8 -*-
"""Deploy wall time against the critical path, on the local test bed (real Podman containers).

A catalog of R ranks whose services become healthy after known delays (each container sleeps
DELAY seconds before it serves its health page). The critical path is the sum over ranks of the
slowest delay: a rollout that waits for a rank's instances at once, on all hosts at once, takes
that long plus Ansible's and Podman's own time. That fixed overhead is measured with the same
catalog at zero delays. Reported:

- deploy.yml wall time with delays, and with zero delays (the overhead);
- (wall - overhead) / critical path: target <= 1.5; the sum of all delays for comparison (what a
  one-instance-at-a-time rollout would wait);
- a no-change re-run of deploy.yml, and of site.yml.

Run (after scripts/demo.sh or scripts/test.sh has set up .venv and the test bed):
    .venv/bin/python benchmarks/deploy_benchmark.py [--ranks 3]
Uses hosts bench-n1..3 on 127.0.0.31-33 and removes its containers at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.dirname(sys.executable)
BUNDLE = os.path.join(ROOT, ".build", "testbed", "images", "gangplank-demo.tar")
HOSTS = {"bench-n1": "127.0.0.31", "bench-n2": "127.0.0.32", "bench-n3": "127.0.0.33"}
SERVE = ('sleep "$DELAY"; mkdir -p /www && echo ok > /www/health && '
         'exec httpd -f -p "${GANGPLANK_PORTS%%,*}" -h /www')
# Per rank: (delay in seconds, replicas) of each service. The slowest of each rank makes the critical path.
RANKS = [[(2.0, 3), (4.0, 2)], [(3.0, 3), (1.0, 1)], [(5.0, 2), (2.0, 3)], [(1.0, 3), (3.0, 2)]]


def catalog(ranks, scale):
    services, previous = {}, []
    for rank, specs in enumerate(ranks):
        names = []
        for position, (delay, replicas) in enumerate(specs):
            name = "r%ds%d" % (rank, position)
            port = 20000 + rank * 10 + position
            services[name] = {
                "replicas": replicas, "resources": {"cpu": "10m", "memory": "8Mi"}, "ports": [port],
                "depends_on": previous, "image": "localhost/gangplank-demo:1", "init": True,
                "command": ["sh", "-c", SERVE], "env": {"DELAY": "%g" % (delay * scale)},
                "health": {"http": {"port": port, "path": "/health"}, "interval": 0.1, "retries": 600},
            }
            names.append(name)
        previous = names
    return services


def write_inventory(base, services):
    hosts = {name: {"gangplank_publish_address": address} for name, address in HOSTS.items()}
    inventory = {"all": {"hosts": hosts, "children": {"gangplank_control": {"hosts": {"bench-n1": {}}}}, "vars": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
        "gangplank_state_dir": os.path.join(base, "{{ inventory_hostname }}"),
        "gangplank_fact_path": os.path.join(base, "{{ inventory_hostname }}", "facts.d"),
        "gangplank_reserved": {"cpu": 0, "memory": 0}, "facts_show_table": False, "runtime_install_packages": False,
        "gangplank_image_bundles": [{"path": BUNDLE, "images": ["localhost/gangplank-demo:1"]}],
        "gangplank_services": services}}}
    path = os.path.join(base, "hosts.json")
    with open(path, "w") as handle:
        json.dump(inventory, handle)
    return path


def playbook(inventory, name, *extra):
    started = time.monotonic()
    completed = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", inventory,
                                os.path.join(ROOT, "playbooks", name), *extra],
                               cwd=ROOT, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    if completed.returncode != 0:
        sys.exit("%s failed:\n%s" % (name, completed.stdout[-4000:]))
    return seconds


def deploy_seconds(base, ranks, scale):
    inventory = write_inventory(base, catalog(ranks, scale))
    playbook(inventory, "teardown.yml", "-e", "teardown_remove_data=true")
    playbook(inventory, "schedule.yml")
    return inventory, playbook(inventory, "deploy.yml")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--ranks", type=int, default=3, help="how many ranks of RANKS to use (1-%d)" % len(RANKS))
    args = parser.parse_args()
    ranks = RANKS[:args.ranks]
    critical = sum(max(delay for delay, _replicas in specs) for specs in ranks)
    serial = sum(delay * replicas for specs in ranks for delay, replicas in specs)
    instances = sum(replicas for specs in ranks for _delay, replicas in specs)
    with tempfile.TemporaryDirectory(prefix="gangplank-bench-") as base:
        _inventory, overhead = deploy_seconds(base, ranks, 0.0)
        inventory, wall = deploy_seconds(base, ranks, 1.0)
        rerun = playbook(inventory, "deploy.yml")
        site_rerun = playbook(inventory, "site.yml")
        playbook(inventory, "teardown.yml", "-e", "teardown_remove_data=true")
    print("deploy benchmark: %d ranks, %d instances on %d hosts (real Podman containers, HTTP probes)"
          % (len(ranks), instances, len(HOSTS)))
    print("  critical path (sum of each rank's slowest delay) %6.1f s" % critical)
    print("  sum of all delays (one instance at a time)        %6.1f s" % serial)
    print("  deploy.yml, zero delays (fixed overhead)          %6.1f s" % overhead)
    print("  deploy.yml, with delays                           %6.1f s" % wall)
    print("  (wall - overhead) / critical path                 %6.2f x   (target <= 1.5)" % ((wall - overhead) / critical))
    print("  wall / (critical path + overhead)                 %6.2f x" % (wall / (critical + overhead)))
    print("  no-change re-run: deploy.yml %.1f s, site.yml %.1f s" % (rerun, site_rerun))


if __name__ == "__main__":
    main()
