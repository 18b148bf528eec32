# -*- coding: utf-8 -*-
"""The local proxy (docs/connecting-services.md): what it costs and how fast it follows a scale.

Two parts:

- ``generate`` (no bed): the controller's work of one run, the proxy's configuration generated from the endpoints, at
  3 and 30 hosts with 4 proxied services of 2 instances per host each (median of 50, milliseconds), and its size.
- ``fresh`` (the fresh-host bed, real SSH, Podman; tests/e2e/fresh.py): for each size of ``--hosts`` (hosts px-b1..N on
  127.0.0.161-190), a catalog with ``api`` (a dynamic port, behind the proxy) on every host, then timed:
  - scale +1: from the scale.yml request to the first answer of the new instance through the proxy on the first host
    (one process inside that host polls the local address every 0.05 s, a new connection each, beside the playbook),
    and the playbook's own time;
  - no-change site.yml runs on three sides: the proxy checking every instance every second (the default), the proxy
    checking every 60 s, and the same catalog without ``proxy`` (its first run removes the proxy from the hosts, which
    keep the HAProxy package; the runs after it find no proxy in the host's one read); interleaved over ``--rounds``
    rounds (each side in turn, two runs each after the run that switches to it). Quiet minus none is the proxy step's
    own cost (its read, its configuration generated and compared); checks minus none adds the load of every host's
    health checks, which on this bed share one machine's cores. Each in seconds and as a share of the run, with this
    machine's CPU busy share between runs on each side, the tasks whose walls differ most, and each run's changed
    count.

Prints figures (``--json`` as JSON), asserts nothing about time. Run under the bed lock, after scripts/lib/testbed.sh:
    flock -o .build/bed.lock .venv/bin/python benchmarks/proxy_benchmark.py [--part generate|fresh|all] [--hosts 3,30]
Removes its hosts at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, ".build", "collections"))

from ansible_collections.gangplank.platform.plugins.module_utils.planning.catalog import parse_catalog  # noqa: E402
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.endpoints import endpoints  # noqa: E402
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.proxy import proxy_config  # noqa: E402
from day2_benchmark import changed_count, task_seconds  # noqa: E402  (this folder is the script's, first on sys.path)

FIRST_ADDRESS = 161
SERVE = 'mkdir -p /www && echo "$GANGPLANK_INSTANCE ok" > /www/health && exec httpd -f -p 8080 -h /www'
# Polls the local address until the instance named by argv[1] answers (at most argv[2] seconds): prints time.time() then.
POLL = (
    "import sys, time, urllib.request\n"
    "opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))\n"
    "deadline = time.time() + float(sys.argv[2])\n"
    "while time.time() < deadline:\n"
    "    try:\n"
    "        with opener.open('http://169.254.30.1:18080/health', timeout=2) as answer:\n"
    "            if answer.read(200).decode('ascii', 'replace').split()[:1] == [sys.argv[1]]:\n"
    "                print('%.3f' % time.time())\n"
    "                break\n"
    "    except OSError:\n"
    "        pass\n"
    "    time.sleep(0.05)\n")


def generate(count, repeat=50):
    services = {"svc%d" % index: {"image": "localhost/app:1", "ports": [{"name": "http", "container_port": 8080}],
                                  "health": {"http": {"port": "http", "path": "/health"}},
                                  "proxy": [{"port": "http", "listen": 18080 + index}]} for index in range(4)}
    hosts = {}
    for host in range(count):
        instances = {}
        for index in range(4):
            for copy in range(2):
                ordinal = host * 2 + copy
                instances["svc%d-%d" % (index, ordinal)] = {"service": "svc%d" % index, "ordinal": ordinal,
                                                            "host_ports": {"http": 20000 + index * 2 + copy}}
        hosts["h%d" % host] = {"instances": instances}
    addresses = {"h%d" % host: "10.0.%d.%d" % (host // 250, host % 250 + 1) for host in range(count)}
    deploy = parse_catalog(services).deploy
    times, text = [], ""
    for _repeat in range(repeat):
        started = time.perf_counter()
        text = proxy_config(endpoints(hosts, services, addresses), deploy, {"port_range": [20000, 32000]})
        times.append((time.perf_counter() - started) * 1000)
    return {"hosts": count, "servers": count * 8, "median_ms": round(statistics.median(times), 2), "bytes": len(text)}


def catalog(proxied, check_interval=0.5):
    api = {"replicas": 0, "scalable": True, "resources": {"cpu": "20m", "memory": "16Mi"},
           "ports": [{"name": "http", "container_port": 8080}],
           "image": "{{ demo_image }}", "command": ["sh", "-c", SERVE], "init": True,
           "health": {"http": {"port": "http", "path": "/health"}, "interval": 0.2, "retries": 50}}
    if proxied:
        api["proxy"] = [{"port": "http", "listen": 18080}]
    # Checks every 0.5 s while the scale is timed (the new instance is in rotation after its first good check).
    return {"gangplank_services": {"api": api}, "gangplank_proxy_check_interval": check_interval}


class Figures(dict):
    """The figures of one size, each printed to stderr as soon as it is measured (a run cut short keeps them)."""

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        print("fresh %s hosts: %s=%s" % (self.get("hosts", "?"), key, value), file=sys.stderr, flush=True)


def fresh(count, rounds=2):
    from ansible_collections.gangplank.platform.tests.e2e.bed import failures
    from ansible_collections.gangplank.platform.tests.e2e.fresh import ENV, FreshBed

    base = Path(tempfile.mkdtemp(prefix="proxy-bench-"))
    names = {"fresh%d" % index: ("px-b%d" % index, "127.0.0.%d" % (FIRST_ADDRESS + index - 1))
             for index in range(1, 4)}
    extra = {"px-b%d" % index: ("127.0.0.%d" % (FIRST_ADDRESS + index - 1), {"gangplank_labels": {"zone": "east"}})
             for index in range(4, count + 1)}
    bed = FreshBed(base, {old: names[old] for old in list(names)[:min(count, 3)]}, extra)
    bed.environment = {"ANSIBLE_FORKS": str(max(count, 5)), "ANSIBLE_PIPELINING": "True"}
    figures = Figures(hosts=count)
    bed.down()
    try:
        started = time.monotonic()
        bed.up()
        figures["bed_up_s"] = round(time.monotonic() - started, 1)
        (base / "host_vars").mkdir()
        for host in bed.names:
            address = subprocess.run(["podman", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
                                      "gangplank-fresh-" + host], env=ENV, capture_output=True, text=True,
                                     check=True).stdout.strip()
            (base / "host_vars" / ("%s.yml" % host)).write_text(yaml.safe_dump(
                {"gangplank_publish_address": address, "gangplank_container_engine": "podman"}))
        settings = base / "group_vars" / "all" / "zz_proxy_bench.yml"
        settings.write_text(yaml.safe_dump(dict(catalog(True), gangplank_services=dict(
            catalog(True)["gangplank_services"], api=dict(catalog(True)["gangplank_services"]["api"], replicas=count)))))
        started = time.monotonic()
        returncode, report = bed.playbook("site.yml")
        assert returncode == 0, failures(report)
        figures["first_site_s"] = round(time.monotonic() - started, 1)
        # The first answer of the new instance through the proxy, seen from inside the first host: one process polls
        # the local address every 0.05 s beside the playbook (a new connection each, so each reaches the next server of
        # the round robin) and prints the wall clock at that answer (the hosts share this machine's clock).
        poller = subprocess.Popen(["podman", "exec", "gangplank-fresh-" + bed.names[0], "python3", "-c", POLL,
                                   "api-%d" % count, "900"], env=ENV, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  text=True)
        requested = time.time()
        started = time.monotonic()
        returncode, report = bed.playbook("scale.yml", "-e", "service=api", "-e", "replicas=%d" % (count + 1))
        figures["scale_plus_one_playbook_s"] = round(time.monotonic() - started, 1)
        assert returncode == 0, failures(report)
        try:
            answered, _err = poller.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            poller.kill()
            answered = ""
        figures["scale_plus_one_serving_s"] = round(float(answered) - requested, 1) if answered.strip() else None
        # Three sides, interleaved round by round so that all see the same machine (a load that falls or rises through
        # the benchmark would otherwise favour one): the proxy checking every second (the default), the proxy checking
        # every 60 s, and no proxy. On this bed every host's proxy checks every instance of the site on the same two
        # cores (at 30 hosts, 30 x 31 checks a second at the default), which slows every task of the run; the quiet
        # side keeps the proxy step (its read, its configuration generated and compared) without that load, so
        # quiet - none is the step's own cost and checks - none the whole cost on this one machine.
        sides = {"checks": (True, 1), "quiet": (True, 60), "none": (False, 1)}
        runs = {side: [] for side in sides}
        walls = {side: [] for side in sides}
        changed = {side: [] for side in sides}
        busy = {side: [] for side in sides}
        for _round in range(rounds):
            for side, (proxied, interval) in sides.items():
                values = catalog(proxied, interval)
                values["gangplank_services"]["api"]["replicas"] = count + 1
                settings.write_text(yaml.safe_dump(values))
                returncode, report = bed.playbook("site.yml")   # the first run after the catalog's change
                assert returncode == 0, failures(report)
                busy[side].append(cpu_busy(10))
                for _run in range(2):
                    started = time.monotonic()
                    returncode, report = bed.playbook("site.yml")
                    runs[side].append(round(time.monotonic() - started, 2))
                    assert returncode == 0, failures(report)
                    walls[side].append(task_seconds(report))
                    changed[side].append(changed_count(report))
        median = {side: round(statistics.median(runs[side]), 2) for side in sides}
        for side in sides:
            figures["no_change_runs_%s_s" % side] = runs[side]
            figures["no_change_%s_s" % side] = median[side]
            # This machine's CPU busy share over 10 s between runs: the proxies' health checks on the shared cores.
            figures["idle_cpu_busy_%s" % side] = busy[side]
            # A no-change run changes nothing.
            figures["no_change_changed_%s" % side] = changed[side]
        figures["proxy_step_added_s"] = round(median["quiet"] - median["none"], 2)
        figures["proxy_step_share"] = round((median["quiet"] - median["none"]) / median["quiet"], 3)
        figures["proxy_with_checks_added_s"] = round(median["checks"] - median["none"], 2)
        figures["proxy_with_checks_share"] = round((median["checks"] - median["none"]) / median["checks"], 3)
        # Where the differences are: the tasks whose median walls differ most (a task only one side runs counts 0 on
        # the other).
        figures["task_wall_differences_quiet_none_s"] = wall_differences(walls["quiet"], walls["none"])
        figures["task_wall_differences_checks_none_s"] = wall_differences(walls["checks"], walls["none"])
    finally:
        bed.down()
    return dict(figures)


def cpu_busy(seconds):
    """This machine's share of CPU time not idle over ``seconds`` (/proc/stat: idle and iowait are idle)."""
    def sample():
        with open("/proc/stat") as handle:
            values = [int(value) for value in handle.readline().split()[1:]]
        return sum(values), values[3] + values[4]
    total, idle = sample()
    time.sleep(seconds)
    total_after, idle_after = sample()
    return round(1 - (idle_after - idle) / max(1, total_after - total), 3)


def wall_differences(with_proxy, without_proxy, top=8):
    """[task, median wall with, median wall without] for the ``top`` tasks whose medians differ most."""
    names = set().union(*with_proxy, *without_proxy)
    rows = []
    for name in names:
        first = statistics.median(run.get(name, 0.0) for run in with_proxy)
        second = statistics.median(run.get(name, 0.0) for run in without_proxy)
        # 'play / role : task': the task is enough to find it.
        rows.append([name.split(" / ", 1)[-1], round(first, 2), round(second, 2)])
    rows.sort(key=lambda row: abs(row[1] - row[2]), reverse=True)
    return rows[:top]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--part", choices=("generate", "fresh", "all"), default="all")
    parser.add_argument("--hosts", default="3,30")
    parser.add_argument("--rounds", type=int, default=2, help="fresh: rounds of no-change runs, each with the proxy "
                        "then without it, two runs each (default 2)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sizes = [int(size) for size in args.hosts.split(",")]
    results = {}
    if args.part in ("generate", "all"):
        results["generate"] = [generate(size) for size in sizes]
    if args.part in ("fresh", "all"):
        results["fresh"] = [fresh(size, max(1, args.rounds)) for size in sizes]
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for entry in results.get("generate", []):
        print("generate  %(hosts)3d hosts, %(servers)4d servers: %(median_ms)8.2f ms, %(bytes)7d bytes" % entry)
    for entry in results.get("fresh", []):
        print("fresh     " + ", ".join("%s=%s" % item for item in sorted(entry.items())))


if __name__ == "__main__":
    main()
