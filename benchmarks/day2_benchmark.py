# -*- coding: utf-8 -*-
"""Day-2 operations on the local test bed at 3, 10 and 30 hosts (real Podman containers), or over SSH on the fresh-host bed.

For each size the demo catalog (inventories/local) is deployed once with site.yml, then timed:

- scale +1: scale.yml -e service=worker -e replicas=4, request to healthy (the playbook returns
  once the new worker passed its probe);
- scale -1: scale.yml back to 3 replicas;
- no-change site.yml;
- config change: the api's rendered config file changes (its template gets one more line), site.yml
  restarts the two api instances.

Besides wall time each step reports its tasks, its tasks x hosts (every task result on every host,
skipped ones included: what the controller had to run) and on how many hosts something changed.

Each figure is wall time, with the 1-minute load average before it and its ratio to the 3-host
figure of the same checkout. Hosts d2-n1..N on 127.0.0.100-129: d2-n1 and d2-n2 have the simulated
GPUs and NVMe of node1 and node2, the rest are like node3. Forks = number of hosts.

Before/after: ``--before /path/to/old/tree`` (the same as ``--checkout before=PATH --checkout after=.``)
runs each size with every checkout in turn, ``--repeat N`` rounds of them (A B A B ..., so both see the
same machine load); each checkout's own playbooks and collection are used. ``--lock PATH`` holds an
flock on PATH for each round (one run of every checkout), not for the whole benchmark, so that other
work on the bed can take its turn between rounds. With several rounds or checkouts the summary gives
each step's median per checkout, its ratio to the first checkout (after / before), every run's figure
and the load range, and the tasks whose wall time differs most between the first two checkouts (each
task's wall time from the JSON callback, the median over the rounds). Prints figures, asserts nothing
about time; a step that fails or leaves the wrong containers is marked FAILED.

With ``--bed fresh`` the same steps run over real SSH on the fresh-host bed (scripts/lib/freshbed.sh,
tests/e2e/fresh.py): hosts d2s-1..N on 127.0.0.201-230, new Debian 12 hosts reached as the sudo user
gangplank with become, all of them Podman (d2s-1 and d2s-2 as inventories/fresh's fresh1 and fresh2, the
rest like fresh3 but with Podman, zones as above). SSH is set as a site's ansible.cfg would have it:
pipelining on (ANSIBLE_PIPELINING) and Ansible's ssh_args with ControlMaster=auto and ControlPersist=60s
(ANSIBLE_SSH_ARGS). The initial site.yml installs Podman on each host from Debian's repositories. Each
size gets new hosts, removed at the end; also printed: the seconds to start them and the memory they use.

Run (after scripts/demo.sh or scripts/test.sh has set up .venv and the test bed image), under the bed lock:
    .venv/bin/python benchmarks/day2_benchmark.py --lock .build/bed.lock [--bed local|fresh] [--hosts 3,10,30]
        [--before PATH | --checkout NAME=PATH ...] [--demo PATH] [--repeat N] [--top N] [--json] [--save PATH]
    .venv/bin/python benchmarks/day2_benchmark.py --summarize SAVED.json [...] [--top N]
Removes its containers (--bed fresh: its hosts) at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import fcntl
import json
import os
import shutil
import subprocess
import sys
import statistics
import sysconfig
import tempfile
import time
from pathlib import Path

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.dirname(sys.executable)
BUNDLE = os.path.join(ROOT, ".build", "testbed", "images", "gangplank-demo.tar")
FIRST_ADDRESS = 100
MAX_HOSTS = 30
# The fresh-host bed (--bed fresh): addresses no test or other benchmark uses.
FRESH_FIRST_ADDRESS = 201
FRESH_MAX_HOSTS = 30
# SSH as a site's ansible.cfg has it: pipelining, and Ansible's default ssh_args (persistent connections) made explicit.
FRESH_SSH = {"ANSIBLE_PIPELINING": "True", "ANSIBLE_SSH_ARGS": "-C -o ControlMaster=auto -o ControlPersist=60s"}


def load():
    with open("/proc/loadavg") as handle:
        return float(handle.read().split()[0])


def host_name(index):
    return "d2-n%d" % index


def write_bed(base, count, checkout=ROOT, demo=None):
    """An inventory of `count` hosts in base/, with the checkout's demo catalog and its template (each version
    deploys its own demo: a catalog of one version may not parse in another), or those of the checkout ``demo``."""
    local = os.path.join(demo or checkout, "inventories", "local")
    shutil.copytree(os.path.join(local, "group_vars"), os.path.join(base, "group_vars"))
    shutil.copytree(os.path.join(local, "templates"), os.path.join(base, "templates"))
    with open(os.path.join(local, "hosts.yml")) as handle:
        models = yaml.safe_load(handle)["all"]["hosts"]
    hosts = {}
    for index in range(1, count + 1):
        model = models["node%d" % min(index, 3)]
        spec = dict(model, gangplank_publish_address="127.0.0.%d" % (FIRST_ADDRESS + index - 1))
        if index > 3:
            spec["gangplank_labels"] = {"zone": "east" if index % 2 else "west"}
        hosts[host_name(index)] = spec
    inventory = {"all": {"hosts": hosts, "children": {"gangplank_control": {"hosts": {host_name(1): {}}}}}}
    with open(os.path.join(base, "hosts.yml"), "w") as handle:
        yaml.safe_dump(inventory, handle)
    with open(os.path.join(base, "group_vars", "all", "zz_day2.yml"), "w") as handle:
        yaml.safe_dump({"gangplank_testbed_dir": os.path.join(base, "testbed"), "facts_show_table": False,
                        "gangplank_image_bundles": [{"path": BUNDLE, "images": ["localhost/gangplank-demo:1"]}]}, handle)
    return os.path.join(base, "hosts.yml")


def checkout_env(checkout):
    """ansible-playbook's environment for a checkout: its own collection shim first."""
    shim = os.path.join(checkout, ".build", "collections")
    link = os.path.join(shim, "ansible_collections", "gangplank", "platform")
    if not os.path.lexists(link):
        os.makedirs(os.path.dirname(link), exist_ok=True)
        os.symlink(os.path.join("..", "..", "..", ".."), link)
    return dict(os.environ, ANSIBLE_COLLECTIONS_PATH=shim + os.pathsep + sysconfig.get_paths()["purelib"],
                ANSIBLE_NOCOLOR="1", ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json")


def _instant(text):
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ")


def task_seconds(report):
    """'play / task' -> wall seconds, from the JSON callback's task durations (start to the last host's result);
    a task name that comes back in one play (an include run twice) adds up."""
    found = {}
    for play in report["plays"]:
        for task in play["tasks"]:
            duration = task["task"].get("duration") or {}
            if "start" not in duration or "end" not in duration:
                continue
            key = "%s / %s" % (play["play"]["name"], task["task"]["name"])
            found[key] = found.get(key, 0.0) + (_instant(duration["end"]) - _instant(duration["start"])).total_seconds()
    return found


def changed_count(report):
    """The changed results of a JSON callback report, summed over its hosts."""
    return sum(stats["changed"] for stats in report["stats"].values())


class Run:
    """One checkout on one bed size."""

    def __init__(self, checkout, inventory, count, names=None, environment=None):
        self.checkout = checkout
        self.inventory = inventory
        self.names = list(names or [host_name(index) for index in range(1, count + 1)])
        self.env = dict(checkout_env(checkout), ANSIBLE_FORKS=str(max(count, 5)), **(environment or {}))

    def playbook(self, name, *extra):
        started = time.monotonic()
        completed = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", self.inventory,
                                    os.path.join(self.checkout, "playbooks", name), *extra],
                                   cwd=self.checkout, env=self.env, capture_output=True, text=True, check=False)
        seconds = time.monotonic() - started
        tasks = changed = host_tasks = 0
        changed_hosts = []
        per_play = []
        per_task = {}
        try:
            report = json.loads(completed.stdout)
            tasks = sum(len(play["tasks"]) for play in report["plays"])
            # Tasks x hosts: each task's result on each host it ran (or was skipped) on.
            host_tasks = sum(len(task["hosts"]) for play in report["plays"] for task in play["tasks"])
            changed = changed_count(report)
            changed_hosts = sorted(host for host, stats in report["stats"].items() if stats["changed"])
            # Per play: its name, its tasks and its tasks x hosts (where the per-host work is).
            per_play = [[play["play"]["name"], len(play["tasks"]), sum(len(task["hosts"]) for task in play["tasks"])]
                        for play in report["plays"]]
            per_task = task_seconds(report)
        except (ValueError, KeyError):
            report = None
        error = None
        if completed.returncode != 0:
            error = "%s failed (rc %d): %s" % (name, completed.returncode, (completed.stdout + completed.stderr)[-2000:])
        return {"seconds": seconds, "tasks": tasks, "host_tasks": host_tasks, "changed": changed,
                "changed_hosts": changed_hosts, "per_play": per_play, "per_task": per_task, "error": error}

    def containers(self):
        out = subprocess.run(["podman", "ps", "-a", "--filter", "label=gangplank.io/managed=true", "--format", "json"],
                             capture_output=True, text=True, check=True).stdout
        found = {}
        for item in json.loads(out or "[]"):
            labels = item.get("Labels") or {}
            if labels.get("gangplank.io/node") in self.names:
                found[labels["gangplank.io/instance"] + ("/" + labels["gangplank.io/sidecar-of"]
                                                         if labels.get("gangplank.io/sidecar-of") else "")] = item["State"]
        return found

    def workers(self):
        found = self.containers()
        return sorted(name for name, state in found.items() if name.startswith("worker-") and state == "running")

    def teardown(self):
        return self.playbook("teardown.yml", "-e", "teardown_remove_data=true", "-e", "gangplank_break_lock=true")


def timed(run, label, name, *extra, expect=None):
    before = load()
    result = run.playbook(name, *extra)
    result.update(label=label, load=before)
    if result["error"] is None and expect is not None:
        problem = expect()
        if problem:
            result["error"] = problem
    return result


def expect_workers(run, count):
    def check():
        workers = run.workers()
        wanted = ["worker-%d" % n for n in range(count)]
        return None if workers == wanted else "running workers %s, expected %s" % (workers, wanted)
    return check


def expect_all_running(run):
    def check():
        stopped = sorted(name for name, state in run.containers().items() if state != "running")
        return "not running: %s" % stopped if stopped else None
    return check


def day2_steps(run, base, results, after_initial=None):
    """The timed steps, appended to results as they end; after_initial() runs (untimed) once the initial site.yml passed."""
    results.append(timed(run, "initial site.yml", "site.yml", expect=expect_all_running(run)))
    if results[-1]["error"] is not None:
        return
    if after_initial is not None:
        after_initial()
    results.append(timed(run, "scale +1 (request to healthy)", "scale.yml", "-e", "service=worker", "-e", "replicas=4",
                         expect=expect_workers(run, 4)))
    results.append(timed(run, "scale -1", "scale.yml", "-e", "service=worker", "-e", "replicas=3",
                         expect=expect_workers(run, 3)))
    results.append(timed(run, "no-change site.yml", "site.yml", expect=expect_all_running(run)))
    with open(os.path.join(base, "templates", "api.conf.j2"), "a") as handle:
        handle.write("# day-2 benchmark: a config change\n")
    results.append(timed(run, "config change (api) site.yml", "site.yml", expect=expect_all_running(run)))


def one_size(checkout, count, demo=None):
    with tempfile.TemporaryDirectory(prefix="gangplank-day2-") as base:
        inventory = write_bed(base, count, checkout, demo)
        run = Run(checkout, inventory, count)
        if run.containers():       # what an interrupted run left
            run.teardown()
        results = []
        try:
            day2_steps(run, base, results)
        finally:
            run.teardown()
    return results, {}


def fresh_host_name(index):
    return "d2s-%d" % index


def fresh_bed(base, count):
    """A FreshBed (tests/e2e/fresh.py) of `count` Podman hosts: d2s-1 and d2s-2 as fresh1 and fresh2, the rest like fresh3."""
    sys.path.insert(0, os.path.join(ROOT, ".build", "collections"))
    from ansible_collections.gangplank.platform.tests.e2e.fresh import FreshBed  # pylint: disable=import-outside-toplevel

    address = {index: "127.0.0.%d" % (FRESH_FIRST_ADDRESS + index - 1) for index in range(1, count + 1)}
    hosts = {"fresh%d" % index: (fresh_host_name(index), address[index]) for index in range(1, min(count, 2) + 1)}
    extra = {fresh_host_name(index): (address[index], {"gangplank_labels": {"zone": "west" if index == 3 or not index % 2 else "east"}})
             for index in range(3, count + 1)}
    bed = FreshBed(Path(base), hosts, extra)
    # Its paths as the real ones, not through the collection shim: an SSH control socket's path must stay under
    # 108 bytes (with ssh's temporary suffix), or ssh fails.
    settings = os.path.join(base, "group_vars", "all", "zz_e2e.yml")
    with open(settings) as handle:
        variables = yaml.safe_load(handle)
    for key in ("ansible_ssh_private_key_file", "ansible_control_path_dir"):
        variables[key] = os.path.realpath(variables[key])
    variables["gangplank_image_bundles"][0]["path"] = os.path.realpath(variables["gangplank_image_bundles"][0]["path"])
    with open(settings, "w") as handle:
        yaml.safe_dump(variables, handle)
    with open(os.path.join(base, "group_vars", "all", "zz_day2.yml"), "w") as handle:
        yaml.safe_dump({"facts_show_table": False}, handle)
    return bed


class FreshRun(Run):
    """One checkout on the fresh-host bed: what runs on each host is read inside it, not through Ansible."""

    def __init__(self, checkout, bed, count):
        super().__init__(checkout, str(bed.inventory), count, names=bed.names, environment=FRESH_SSH)
        self.bed = bed

    def containers(self):
        found = {}
        for state, _started, labels, _engine in self.bed.containers().values():
            if labels.get("gangplank.io/node") in self.names:
                found[labels["gangplank.io/instance"] + ("/" + labels["gangplank.io/sidecar-of"]
                                                         if labels.get("gangplank.io/sidecar-of") else "")] = state
        return found


def mem_available_mib():
    with open("/proc/meminfo") as handle:
        for line in handle:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // 1024
    return 0


def host_memory_mib(bed):
    """Memory each bed host uses (its container's cgroup: sshd, its engine and the demo's containers, which it nests):
    name -> (resident MiB, MiB with the page cache, which the kernel can reclaim)."""
    sys.path.insert(0, os.path.join(ROOT, ".build", "collections"))
    from ansible_collections.gangplank.platform.tests.e2e.fresh import ENV  # pylint: disable=import-outside-toplevel

    found = {}
    for name in bed.names:
        completed = subprocess.run(["podman", "inspect", "-f", "{{.State.Pid}}", "gangplank-fresh-" + name],
                                   env=ENV, capture_output=True, text=True, check=False, timeout=60)
        try:
            with open("/proc/%d/cgroup" % int(completed.stdout)) as handle:
                groups = dict(line.strip().split(":", 2)[1:] for line in handle)
            # cgroup v1: the memory controller's own hierarchy; v2: the unified one.
            if "memory" in groups:
                folder, resident, cache = "/sys/fs/cgroup/memory" + groups["memory"], ("total_rss", "total_shmem"), ("total_cache",)
            else:
                folder, resident, cache = "/sys/fs/cgroup" + groups[""], ("anon", "shmem"), ("file",)
            with open(os.path.join(folder, "memory.stat")) as handle:
                stat = dict((key, int(value)) for key, value in (line.split() for line in handle))
        except (OSError, ValueError, KeyError):
            continue
        # shmem is counted in the page cache too: resident is rss + shmem, with cache adds the rest of the cache.
        found[name] = (sum(stat.get(key, 0) for key in resident) / 2**20,
                       (stat.get(resident[0], 0) + sum(stat.get(key, 0) for key in cache)) / 2**20)
    return found


def one_size_fresh(checkout, count):
    with tempfile.TemporaryDirectory(prefix="gangplank-day2-ssh-") as base:
        bed = fresh_bed(base, count)
        run = FreshRun(checkout, bed, count)
        info = {"mem_available_mib_before": mem_available_mib()}
        bed.down()
        results = []
        try:
            started = time.monotonic()
            bed.up()
            info["hosts_up_seconds"] = round(time.monotonic() - started, 1)

            def after_initial():
                info["mem_available_mib_after_initial"] = mem_available_mib()
                info["host_memory_mib"] = host_memory_mib(bed)
            day2_steps(run, base, results, after_initial)
            info["host_memory_mib_at_end"] = host_memory_mib(bed)
        finally:
            bed.down()
    return results, info


def print_bed_info(count, info):
    if not info:
        return
    line = "  hosts up in %.1f s; MemAvailable %d MiB before them" % (info.get("hosts_up_seconds", 0), info["mem_available_mib_before"])
    if "mem_available_mib_after_initial" in info:
        line += ", %d MiB after the initial site.yml (%d MiB per host)" % (
            info["mem_available_mib_after_initial"],
            (info["mem_available_mib_before"] - info["mem_available_mib_after_initial"]) / count)
    print(line, flush=True)
    for key, when in (("host_memory_mib", "after the initial site.yml"), ("host_memory_mib_at_end", "at the end")):
        memory = info.get(key)
        if memory:
            resident = [pair[0] for pair in memory.values()]
            cached = [pair[1] for pair in memory.values()]
            print("  memory per host %s (its cgroup): resident mean %.0f MiB, max %.0f MiB; with the page cache mean %.0f MiB, "
                  "max %.0f MiB" % (when, sum(resident) / len(resident), max(resident), sum(cached) / len(cached), max(cached)),
                  flush=True)


def parse_checkouts(values, before):
    if before:
        if values:
            sys.exit("--before and --checkout: give one or the other")
        values = ["before=%s" % before, "after=%s" % ROOT]
    checkouts = []
    for value in values or ["current=%s" % ROOT]:
        name, sep, path = value.partition("=")
        if not sep or not name or not os.path.isdir(os.path.join(path, "playbooks")):
            sys.exit("--checkout NAME=PATH: %r is not a name and a checkout with playbooks/" % value)
        checkouts.append((name, os.path.abspath(path)))
    if len({name for name, _path in checkouts}) != len(checkouts):
        sys.exit("--checkout: every checkout needs a name of its own")
    return checkouts


@contextlib.contextmanager
def held(path):
    """An exclusive flock on path (as flock(1) takes it) for the block, or nothing without a path."""
    if not path:
        yield
        return
    with open(path, "a") as handle:
        started = time.monotonic()
        fcntl.flock(handle, fcntl.LOCK_EX)
        waited = time.monotonic() - started
        if waited > 1:
            print("  (waited %.0f s for %s)" % (waited, path), flush=True)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def print_run(result, reference, first_size):
    ratio = " %5.2fx of %d hosts" % (result["seconds"] / reference, first_size) if reference else ""
    print("  %-32s %7.1f s  %3d tasks  %5d tasks x hosts  %3d changed on %2d host(s)  load %5.2f%s%s"
          % (result["label"], result["seconds"], result["tasks"], result["host_tasks"], result["changed"],
             len(result["changed_hosts"]), result["load"], ratio,
             "  FAILED: " + result["error"] if result["error"] else ""), flush=True)
    print("    per play (tasks, tasks x hosts): %s" % "; ".join(
        "%s %d, %d" % tuple(play) for play in result.get("per_play", [])), flush=True)


def step_runs(figures, name, count, label):
    """Every run of one step: the results of that checkout and size, over the rounds, that did not fail."""
    return [result for results in figures.get((name, count), []) for result in results
            if result["label"] == label and result["error"] is None]


def print_summary(figures, checkouts, sizes, labels, top):
    names = [name for name, _path in checkouts]
    print("\nsummary: median seconds [every run; load range]; tasks, tasks x hosts per play from the last run")
    for count in sizes:
        print("\n%d hosts" % count)
        for label in labels:
            medians = {}
            for name in names:
                runs = step_runs(figures, name, count, label)
                failed = sum(1 for results in figures.get((name, count), []) for result in results
                             if result["label"] == label and result["error"] is not None)
                if not runs:
                    print("  %-32s %-8s -%s" % (label, name, " (%d failed)" % failed if failed else ""))
                    continue
                seconds = [result["seconds"] for result in runs]
                medians[name] = statistics.median(seconds)
                loads = [result["load"] for result in runs]
                ratio = "  %.2fx of %s" % (medians[name] / medians[names[0]], names[0]) \
                    if name != names[0] and medians.get(names[0]) else ""
                print("  %-32s %-8s %6.1f s [%s; load %.1f-%.1f]%s%s" % (
                    label, name, medians[name], ", ".join("%.1f" % value for value in seconds), min(loads), max(loads),
                    ratio, " (%d failed)" % failed if failed else ""))
                print("  %-32s %-8s %d tasks, %d tasks x hosts; per play %s" % (
                    "", "", runs[-1]["tasks"], runs[-1]["host_tasks"],
                    "; ".join("%s %d, %d" % tuple(play) for play in runs[-1]["per_play"])))
            if top and len(medians) >= 2 and names[0] in medians and names[1] in medians:
                print_task_differences(figures, names[0], names[1], count, label, top)


def print_task_differences(figures, first, second, count, label, top):
    """The tasks whose median wall time differs most between two checkouts on one step (a task in one of them only counts 0 in the other)."""
    median_tasks = {}
    for name in (first, second):
        runs = step_runs(figures, name, count, label)
        keys = {key for result in runs for key in result["per_task"]}
        median_tasks[name] = {key: statistics.median(result["per_task"].get(key, 0.0) for result in runs) for key in keys}
    keys = set(median_tasks[first]) | set(median_tasks[second])
    differences = sorted(((median_tasks[second].get(key, 0.0) - median_tasks[first].get(key, 0.0), key) for key in keys),
                         key=lambda pair: (-abs(pair[0]), pair[1]))
    total = sum(median_tasks[second].values()) - sum(median_tasks[first].values())
    print("  %-32s task walls %s - %s: %+.2f s in all; most different:" % ("", second, first, total))
    for difference, key in differences[:top]:
        walls = (median_tasks[first].get(key, 0.0), median_tasks[second].get(key, 0.0))
        print("  %-32s   %+6.2f s  %s (%.2f -> %.2f s)" % (("", difference, key) + walls))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--bed", choices=("local", "fresh"), default="local",
                        help="local: the local test bed's kind of hosts (default); fresh: new hosts over SSH (fresh-host bed)")
    parser.add_argument("--hosts", default="3,10,30", help="comma-separated bed sizes, 1-%d, --bed fresh 1-%d (default 3,10,30)"
                        % (MAX_HOSTS, FRESH_MAX_HOSTS))
    parser.add_argument("--checkout", action="append", help="NAME=PATH of a checkout to run (repeatable; default this one)")
    parser.add_argument("--before", metavar="PATH", help="a checkout of the version before: the same as "
                        "--checkout before=PATH --checkout after=<this checkout>")
    parser.add_argument("--demo", metavar="PATH", help="the checkout whose demo catalog (inventories/local) every "
                        "checkout deploys, so that two versions run the same catalog (default: each its own; local bed)")
    parser.add_argument("--repeat", type=int, default=1, help="rounds per size, each running every checkout once, in turn (default 1)")
    parser.add_argument("--lock", metavar="PATH", help="hold an flock on PATH for each round (e.g. .build/bed.lock)")
    parser.add_argument("--top", type=int, default=8, help="tasks listed per step where two checkouts differ (default 8; 0: none)")
    parser.add_argument("--json", action="store_true", help="also print every figure as one JSON document")
    parser.add_argument("--save", metavar="PATH", help="write every figure so far to PATH (JSON) after each run")
    parser.add_argument("--summarize", metavar="PATH", nargs="+",
                        help="print the summary of runs saved by --save (one or more files) and run nothing")
    args = parser.parse_args(argv)
    if args.summarize:
        return summarize(args.summarize, args.top)
    try:
        sizes = [int(size) for size in args.hosts.split(",") if size]
    except ValueError:
        parser.error("--hosts: expected comma-separated integers, got %r" % args.hosts)
    if args.bed == "fresh":
        if not sizes or any(size < 1 or size > FRESH_MAX_HOSTS for size in sizes):
            parser.error("--hosts: with --bed fresh each size must be 1-%d (the loopback range 127.0.0.%d-%d)"
                         % (FRESH_MAX_HOSTS, FRESH_FIRST_ADDRESS, FRESH_FIRST_ADDRESS + FRESH_MAX_HOSTS - 1))
    elif not sizes or any(size < 1 or size > MAX_HOSTS for size in sizes):
        parser.error("--hosts: each size must be 1-%d (the bed's loopback range 127.0.0.100-129)" % MAX_HOSTS)
    if not 1 <= args.repeat <= 20:
        parser.error("--repeat: expected 1-20, got %d" % args.repeat)
    if not os.path.exists(BUNDLE):
        sys.exit("the test bed image is missing: source scripts/lib/testbed.sh first (%s)" % BUNDLE)
    if args.demo and (args.bed == "fresh" or not os.path.isdir(os.path.join(args.demo, "inventories", "local"))):
        parser.error("--demo: expected a checkout with inventories/local, on the local bed")
    checkouts = parse_checkouts(args.checkout, args.before)
    figures = {}   # (checkout name, size) -> [results of each round]
    bed_info = {}
    for count in sizes:
        for round_number in range(1, args.repeat + 1):
            with held(args.lock):
                for name, path in checkouts:
                    print("== %s, %d hosts, round %d of %d (%s)%s" % (
                        name, count, round_number, args.repeat, path,
                        ", over SSH on the fresh-host bed" if args.bed == "fresh" else ""), flush=True)
                    results, info = (one_size_fresh(path, count) if args.bed == "fresh"
                                     else one_size(path, count, args.demo and os.path.abspath(args.demo)))
                    figures.setdefault((name, count), []).append(results)
                    bed_info.setdefault((name, count), []).append(info)
                    if args.save:
                        save(args.save, figures, bed_info, checkouts, args.bed)
                    print_bed_info(count, info)
                    first = figures.get((name, sizes[0]), [[]])[0]
                    for result in results:
                        reference = next((item["seconds"] for item in first if item["label"] == result["label"]), None)
                        print_run(result, reference if count != sizes[0] else None, sizes[0])
    print_summary(figures, checkouts, sizes, step_labels(figures), args.top)
    if args.json:
        print(json.dumps(document(figures, bed_info, checkouts, args.bed)))
    return 0


def step_labels(figures):
    labels = []
    for rounds in figures.values():
        for results in rounds:
            labels.extend(result["label"] for result in results if result["label"] not in labels)
    return labels


def document(figures, bed_info, checkouts, bed):
    return {"checkouts": checkouts, "runs": [{"checkout": name, "hosts": count, "bed": bed, "bed_info": bed_info[(name, count)],
                                              "rounds": rounds} for (name, count), rounds in figures.items()]}


def save(path, figures, bed_info, checkouts, bed):
    with open(path + ".tmp", "w") as handle:
        json.dump(document(figures, bed_info, checkouts, bed), handle)
    os.replace(path + ".tmp", path)


def summarize(paths, top):
    """The summary of saved runs; several files (e.g. one per size) are read as one."""
    figures, checkouts, sizes = {}, [], []
    for path in paths:
        with open(path) as handle:
            saved = json.load(handle)
        checkouts.extend(tuple(pair) for pair in saved["checkouts"] if tuple(pair) not in checkouts)
        for run in saved["runs"]:
            figures.setdefault((run["checkout"], run["hosts"]), []).extend(run["rounds"])
            if run["hosts"] not in sizes:
                sizes.append(run["hosts"])
    print_summary(figures, checkouts, sizes, step_labels(figures), top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
