# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Replay a GPU-sharing trace (Alibaba's openb, the FGD paper's) and print our GPU allocation ratio
beside the published ones.

    .venv/bin/python benchmarks/trace_benchmark.py NODES.csv PODS.csv [PODS.csv ...]
        [--expected analysis_allo_discrete.csv] [--seeds 42-51] [--modes online,gang,moves,plan]
        [--weights GPUFragmentation=0,...] [--policy ours|fgd] [--check] [--json] [--restrict-models 0.33]
        [--cpu-nodes 310]
    .venv/bin/python benchmarks/trace_benchmark.py NODES.csv PODS.csv [...] --gap-analysis

The trace files are arguments; nothing of the trace ships here. They are public: Alibaba's
alibaba/clusterdata repository, folder cluster-trace-gpu-v2023/csv/ (openb_node_list_gpu_node.csv and
openb_pod_list_*.csv), and the FGD paper's published results in hkust-adsl/kubernetes-scheduler-simulator,
experiments/analysis/expected_results/analysis_allo_discrete.csv (--expected); benchmarks/README.md says
how a pod maps to a problem. A benchmark, not a test: it exits 0 (2 on bad
arguments). See benchmarks/README.md ("Trace benchmark").

How it measures, per pod list and seed (the paper's way, plus ours):

- arrivals: the pod list in a random order (``random.Random(seed)``), and, when its GPUs fall short of
  130% of the cluster's, pods drawn from it at random until they reach it (the simulator's workload
  inflation);
- ``online`` (the issue's measurement): pods arrive in batches, a batch being the pods that arrive while the
  arrived workload (requested GPUs over the cluster's GPUs) grows by 1%; each batch is planned by the
  scheduler (queue order, then its own loop: one attempt kept across batches, ``Attempt.place``) with every
  earlier placement pinned where it is; a pod that fits nowhere is dropped, nothing ever moves;
- ``arrival`` (the paper's simulator): the same, but each pod is placed alone, in arrival order;
- ``gang``: every pod that arrived up to 100% planned at once, as one gang, in queue order, then the
  repair pass (one placed pod makes room for one that fits nowhere); what does not fit is dropped;
- ``moves``: online, but when a batch does not fit as it is, the whole cluster (earlier pods and the
  batch) is planned again with stateless moves allowed, and that plan is kept when it places more;
- ``plan`` (the product's path, scale.yml on a living cluster): pods arrive in 2% batches; each batch is one
  ``plan()`` of problem text (the mapping as JSON, parsed again) whose catalog is the services that have arrived,
  every earlier pod ``stateful`` and in ``previous`` with its node and GPU UUIDs, with plan()'s own exact time limit
  (``--exact-seconds``); a refused batch is planned again without the pods it refused (dropped), nothing moves;
- the figure: the GPU allocation ratio (GPUs allocated, a shared GPU's share counted as a fraction,
  over all GPUs) when the arrived workload reaches 100%.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import re
from bisect import bisect_left, insort
import statistics
import sys
import time

try:
    from ortools.linear_solver import pywraplp
except ImportError:     # the gang's upper bound needs OR-Tools, as the exact solver does; it is "-" without
    pywraplp = None

# Puts the collection (through its shim) and this folder on sys.path.
import collection_path  # noqa: E402,F401  pylint: disable=unused-import,wrong-import-position

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.framework import Framework  # noqa: E402
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.model import Instance, PreviousPlacement  # noqa: E402
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.gpu_fragmentation import GPUFragmentation  # noqa: E402
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.profile import PLUGINS, WEIGHTS  # noqa: E402
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.problem import parse_problem  # noqa: E402
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.default_binder import DefaultBinder  # noqa: E402
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.scheduler import EXACT_SECONDS, Attempt, plan  # noqa: E402
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.plan_checker import check_plan  # noqa: E402

DEFAULT_SEEDS = tuple(range(42, 52))
ARRIVE_UNTIL = 1.30             # arrivals stop when the requested GPUs reach 130% of the cluster's
MEASURE_AT = 100                # the figure: allocation when the arrived workload reaches 100%
MILLI = 1000                    # a device is modelled as 1000Mi: a pod's gpu_milli is its Mi of it
POLICIES = ("Random", "DotProd", "GpuClustering", "GpuPacking", "BestFit", "FGD")
MODES = ("online", "arrival", "gang", "moves", "plan")
PLAN_STEP = 2                   # plan mode: each batch the pods that arrive while the arrived workload grows by 2%
# --spread SKEW: every service gets topology_spread [{max_skew: SKEW}] (over the nodes, DoNotSchedule), to measure
# what a spread costs in packing; None (the default) plans the trace as it is.
SPREAD = None
PLAN_RETRIES = 8                # plan mode: plan() calls per batch at most (each refusal drops the refused pods)


class PaperFGD(GPUFragmentation):
    """FGD as the paper defines it, through this scheduler: the expected fragmentation of the catalog's mix
    and nothing more (no idle GPUs starved of CPU or memory, no weighting by model scarcity, no mix that
    follows the work left), scored alone. ``--policy fgd``: a baseline for traces without published figures,
    to be checked first against the published FGD figures of the traces that have them."""

    starvation = False

    def _use(self, mix):
        super()._use(mix)
        # A shape that cannot use a node's models sees all of its idle GPUs as fragment, at its own weight.
        self._scarcity = {request: weight for request, weight, _shapes in mix}

    def expect(self, remaining):
        return False


def policy(name):
    """(plugins, weights) of ``--policy``: this scheduler's default profile, or PaperFGD's score alone."""
    if name == "ours":
        return PLUGINS, dict(WEIGHTS)
    return tuple(PaperFGD if plugin is GPUFragmentation else plugin for plugin in PLUGINS), {"GPUFragmentation": 1}


def read_nodes(path):
    nodes = {}
    gpus = 0
    with open(path, newline="") as handle:
        for row in csv.DictReader(handle):
            count = int(row["gpu"])
            gpus += count
            nodes[row["sn"]] = {
                "cpu": "%sm" % row["cpu_milli"], "memory": "%sMi" % row["memory_mib"],
                "gpus": [{"index": index, "uuid": "%s-gpu%d" % (row["sn"], index), "model": row["model"],
                          "memory": "%dMi" % MILLI} for index in range(count)],
            }
    return nodes, gpus


def read_pods(path):
    """(cpu_milli, memory_mib, num_gpu, gpu_milli, models) per pod, in file order."""
    pods = []
    with open(path, newline="") as handle:
        for row in csv.DictReader(handle):
            models = tuple(sorted({m for m in (row.get("gpu_spec") or "").split("|") if m}))
            pods.append((int(row["cpu_milli"]), int(row["memory_mib"]), int(row["num_gpu"]), int(row["gpu_milli"]),
                         models))
    return pods


def restrict_models(pods, nodes, fraction, seed=0):
    """The issue's first scenario: ``fraction`` of the GPU pods that accept any model, drawn at random
    (``random.Random(seed)``), restricted to one model, drawn in proportion to the cluster's GPUs of each."""
    supply = {}
    for spec in nodes.values():
        for device in spec["gpus"]:
            supply[device["model"]] = supply.get(device["model"], 0) + 1
    models = sorted(supply)
    weights = [supply[model] for model in models]
    rng = random.Random(seed)
    result = []
    for pod in pods:
        cpu, memory, count, milli, accepted = pod
        if count and not accepted and rng.random() < fraction:
            pod = (cpu, memory, count, milli, (rng.choices(models, weights)[0],))
        result.append(pod)
    return result


def add_cpu_nodes(nodes, count):
    """The issue's second scenario: ``count`` CPU-only nodes, each with the CPU and memory of a GPU node
    (taken in turn, by name), named cpu-node-0000...; the cluster's GPUs are unchanged."""
    sizes = [(spec["cpu"], spec["memory"]) for _name, spec in sorted(nodes.items())]
    result = dict(nodes)
    for index in range(count):
        cpu, memory = sizes[index % len(sizes)]
        result["cpu-node-%04d" % index] = {"cpu": cpu, "memory": memory, "gpus": []}
    return result


def pod_gpus(pod):
    _cpu, _memory, count, milli, _models = pod
    return count * milli / float(MILLI) if count else 0.0


def arrivals(pods, gpus, seed):
    rng = random.Random(seed)
    order = list(pods)
    rng.shuffle(order)
    requested = sum(pod_gpus(pod) for pod in order)
    while requested < ARRIVE_UNTIL * gpus:
        pod = pods[rng.randrange(len(pods))]
        order.append(pod)
        requested += pod_gpus(pod)
    # Inflated copies arrive anywhere, not last.
    rng.shuffle(order)
    arrived, kept = 0.0, []
    for pod in order:
        if arrived >= ARRIVE_UNTIL * gpus:
            break
        kept.append(pod)
        arrived += pod_gpus(pod)
    return kept


def problem_for(nodes, order):
    """The problem: one service per distinct pod shape, its replicas the arrivals of that shape (the
    catalog, from which GPUFragmentation takes the expected mix)."""
    shapes = sorted(set(order))
    names = {shape: "pod-%03d" % index for index, shape in enumerate(shapes)}
    counts = {}
    for pod in order:
        counts[pod] = counts.get(pod, 0) + 1
    services = {}
    for shape in shapes:
        cpu, memory, count, milli, models = shape
        resources = {"cpu": "%dm" % cpu, "memory": "%dMi" % memory}
        if count:
            gpu = {"count": count}
            if milli < MILLI:
                gpu["memory"] = "%dMi" % milli
            if models:
                gpu["models"] = list(models)
            resources["gpu"] = gpu
        services[names[shape]] = {"replicas": counts[shape], "resources": resources}
        if SPREAD is not None:
            services[names[shape]]["topology_spread"] = [{"max_skew": SPREAD}]
    return {"nodes": nodes, "services": services}, names


def _beside_free_gpus(result, refused):
    """How many of the refused whole-GPU pods (2 GPUs or more) a node still had that many wholly free GPUs of their
    models for, once the rest of their batch was placed (they were short of CPU or memory there)."""
    free = []
    for usage in result["usage"].values():
        free.append([gpu["model"] for gpu in usage["gpus"] if gpu["used"] == 0])
    count = 0
    for instance in refused:
        gpu = instance.service.resources.gpu
        if gpu is None or gpu.memory is not None or gpu.count < 2:
            continue
        if any(sum(1 for model in models if not gpu.models or model in gpu.models) >= gpu.count for models in free):
            count += 1
    return count


class Replay:
    """One seed of one pod list: the arrivals as instances, and the batches they come in."""

    def __init__(self, nodes, gpus, pods, seed, weights, plugins=PLUGINS):
        self.gpus = gpus
        self.order = arrivals(pods, gpus, seed)
        self.mapping, names = problem_for(nodes, self.order)
        self.problem = parse_problem(self.mapping)
        self.framework = Framework(self.problem, plugins, weights)
        ordinals = {}
        self.instances = []
        for pod in self.order:
            service = self.problem.services[names[pod]]
            ordinal = ordinals.get(service.name, 0)
            ordinals[service.name] = ordinal + 1
            self.instances.append((Instance(service, ordinal), pod_gpus(pod)))
        self.batches = []           # (arrived percent at its end, [(instance, gpus), ...])
        batch, arrived, step = [], 0.0, 1
        for entry in self.instances:
            batch.append(entry)
            arrived += entry[1]
            while arrived >= step * gpus / 100.0:
                if batch:
                    self.batches.append((step, batch))
                batch = []
                step += 1
        if batch:
            self.batches.append((step, batch))

    def _sorted(self, batch):
        sort_key = self.framework.queue_sort.sort_key
        return sorted(batch, key=lambda entry: sort_key(entry[0], True))

    def online(self, moves=False, in_arrival_order=False, foresight=False):
        """Allocation ratio per arrived percent; with ``moves``, a batch that does not fit as it is may re-pack;
        ``in_arrival_order``: each pod alone, as it arrives, not the batch in queue order; ``foresight``: before
        each batch GPUFragmentation is told exactly what is still to arrive (no scheduler can know it: a
        ceiling of what looking ahead by the mix can give)."""
        attempt = Attempt(self.framework, self.problem, moves_allowed=False)
        to_come = {}                # foresight: service -> its arrivals not yet placed
        for instance, _gpus in (self.instances if foresight else ()):
            to_come[instance.service.name] = to_come.get(instance.service.name, 0) + 1
        attempt.instances = attempt.gang = []
        attempt.extra = []
        attempt.total = 0
        # What Attempt.run does before sorting: the queue sort's constrained-first key.
        self.framework.queue_sort.feasible_nodes = attempt.feasible_nodes()
        placed = {}                 # instance name -> (instance, gpus)
        curve = {}
        replans = 0
        for percent, batch in self.batches:
            if foresight:
                # A new mix rescores every node: the attempt's cached scores go (as Attempt._schedule_all does).
                if self.framework.run_expect(None) | self.framework.run_expect(to_come):
                    attempt.generation += 1
                for entry in batch:
                    to_come[entry[0].service.name] -= 1
            failed = [entry for entry in (batch if in_arrival_order else self._sorted(batch))
                      if not attempt.place(entry[0])]
            for entry in batch:
                if entry not in failed:
                    placed[entry[0].name] = entry
            if failed and moves:
                better = self._repack(attempt, placed, failed)
                replans += 1
                if better is not None:
                    attempt, placed = better
            curve[percent] = sum(entry[1] for entry in placed.values()) / self.gpus
            if percent >= MEASURE_AT and moves:
                break
        return curve, attempt, replans

    def _repack(self, attempt, placed, failed):
        """Everything placed so far plus the batch's failures, planned again with stateless moves allowed."""
        where = {p.instance.name: p for p in attempt.placements}
        entries = []
        for name in sorted(placed):
            instance, gpus = placed[name]
            placement = where[name]
            previous = PreviousPlacement(placement.node, tuple(claim.device.uuid for claim in placement.gpus))
            entries.append((Instance(instance.service, instance.ordinal, previous), gpus))
        entries.extend(failed)
        again = Attempt(self.framework, self.problem, moves_allowed=True)
        again.instances = again.gang = [entry[0] for entry in entries]
        again.extra = []
        again.total = len(entries)
        again.run()
        now = {p.instance.name for p in again.placements}
        if any(name not in now for name in placed):
            return None         # an earlier pod would be dropped: keep what runs
        if len(now) <= len(placed):
            return None
        kept = {entry[0].name: entry for entry in entries if entry[0].name in now}
        return again, kept

    def plan_path(self, exact_seconds=EXACT_SECONDS):
        """The product's path (scale.yml on a living cluster): each PLAN_STEP% batch is one ``plan()`` of problem
        text (the mapping serialised to JSON and parsed again), the catalog being the services that have arrived
        (replicas: the running pods and the batch), every earlier pod ``stateful`` and in ``previous`` with its node
        and GPU UUIDs, the repair and exact passes as configured by default. A refused batch is planned again without
        the refused pods (they are dropped, as the paper's simulator drops them); nothing moves.

        Returns (allocation per arrived percent, first refusal as arrived %, refusals by reason, the last result, the
        last mapping, plan() calls, CPU seconds in plan(), paths taken)."""
        running = {}                # service name -> [(node, GPU UUIDs), ...] in ordinal order
        gpus_of = {}                # service name -> GPUs of one of its pods
        curve, refusals, paths = {}, {}, {}
        first_refusal = None
        calls, cpu_seconds = 0, 0.0
        arrived = 0.0
        result = mapping = None
        batch, step = [], PLAN_STEP
        pending = list(self.instances) + [None]
        for entry in pending:
            if entry is not None:
                batch.append((entry, arrived + entry[1]))
                arrived += entry[1]
                if arrived < step * self.gpus / 100.0:
                    continue
            if not batch:
                break
            while arrived >= step * self.gpus / 100.0:
                step += PLAN_STEP
            percent = step - PLAN_STEP if entry is not None else step
            waiting = list(batch)
            batch = []
            refused_here = []
            for _try in range(PLAN_RETRIES):
                mapping, names = self._plan_problem(running, waiting)
                text = json.dumps(mapping, sort_keys=True)
                started = time.process_time()
                result = plan(json.loads(text), exact_seconds=exact_seconds)
                cpu_seconds += time.process_time() - started
                calls += 1
                paths[result["path"]] = paths.get(result["path"], 0) + 1
                if result["feasible"]:
                    refusals["whole_gpu_pods_refused_beside_free_gpus"] = refusals.get(
                        "whole_gpu_pods_refused_beside_free_gpus", 0) + _beside_free_gpus(result, refused_here)
                    for name, ((instance, gpus), _at) in zip(names, waiting):
                        placed = result["placements"][name]
                        running.setdefault(instance.service.name, []).append(
                            (placed["node"], [gpu["uuid"] for gpu in placed["gpus"]]))
                        gpus_of[instance.service.name] = gpus
                    break
                refused = set(result["unschedulable"])
                for name, ((instance, _gpus), at) in zip(names, waiting):
                    if name in refused:
                        refused_here.append(instance)
                        if first_refusal is None:
                            first_refusal = 100.0 * at / self.gpus
                        message = result["unschedulable"][name]
                        for reason in ("Insufficient cpu", "Insufficient memory", "Insufficient GPU"):
                            if reason in message:
                                refusals[reason] = refusals.get(reason, 0) + 1
                        refusals["pods"] = refusals.get("pods", 0) + 1
                waiting = [item for name, item in zip(names, waiting) if name not in refused]
                if not refused or not waiting:
                    break
            curve[percent] = sum(gpus_of[name] * len(pods) for name, pods in running.items()) / self.gpus
        return curve, first_refusal, refusals, result, mapping, calls, cpu_seconds, paths

    def _plan_problem(self, running, waiting):
        """The problem of one plan() call: running pods pinned, the batch new. Returns (mapping, the batch's instance
        names in batch order)."""
        replicas = {name: len(pods) for name, pods in running.items()}
        previous = {}
        for name, pods in running.items():
            for ordinal, (node, uuids) in enumerate(pods):
                previous["%s-%d" % (name, ordinal)] = {"node": node, "gpus": [{"uuid": uuid} for uuid in uuids]}
        names = []
        for (instance, _gpus), _at in waiting:
            service = instance.service.name
            names.append("%s-%d" % (service, replicas.get(service, 0)))
            replicas[service] = replicas.get(service, 0) + 1
        services = {}
        for name in sorted(replicas):
            spec = dict(self.mapping["services"][name], replicas=replicas[name], stateful=True)
            services[name] = spec
        mapping = {"nodes": self.mapping["nodes"], "services": services}
        if previous:
            mapping["previous"] = previous
        return mapping, names

    def arrived(self):
        """(instance, GPUs) of every pod that arrived up to 100%."""
        return [entry for percent, batch in self.batches if percent <= MEASURE_AT for entry in batch]

    def gang(self):
        """Every pod that arrived up to 100%, planned at once."""
        entries = self.arrived()
        attempt = Attempt(self.framework, self.problem, moves_allowed=False)
        # The gang is what Attempt.run places (preemptible instances are its ``extra``).
        attempt.instances = attempt.gang = [entry[0] for entry in entries]
        attempt.extra = []
        attempt.total = len(entries)
        attempt.run()
        gpus = {entry[0].name: entry[1] for entry in entries}
        return sum(gpus[p.instance.name] for p in attempt.placements) / self.gpus, attempt


def share_ceiling(entries, gpus):
    """How much of the arrived GPU work could be placed at all, judged by GPU memory alone (CPU, memory, models
    and node boundaries ignored; every whole-GPU pod counted as placed), in % of the cluster's GPUs:
    (best-fit decreasing of the shares onto the devices the whole-GPU pods leave, a packing; an upper bound: an
    LP in which a share above half a device has a device of its own, the room beside a share of size s takes
    only shares <= 1000 - s, and smaller shares split freely; or, tighter, the LP over whole device fillings,
    pattern_bound: the smaller of the two)."""
    whole = sum(instance.service.resources.gpu.count for instance, _gpus in entries
                if instance.service.resources.gpu is not None and instance.service.resources.gpu.memory is None)
    # A request for several shared devices is one share per device (relaxed: they need not be on one node).
    shares = sorted((instance.service.resources.gpu.memory >> 20 for instance, _gpus in entries
                     if instance.service.resources.gpu is not None and instance.service.resources.gpu.memory is not None
                     for _device in range(instance.service.resources.gpu.count)), reverse=True)
    devices = gpus - whole
    room, opened, packed = [], 0, 0
    for share in shares:
        position = bisect_left(room, share)
        if position < len(room):
            left = room.pop(position) - share
        elif opened < devices:
            opened += 1
            left = MILLI - share
        else:
            continue
        insort(room, left)
        packed += share
    sizes = {}
    for share in shares:
        sizes[share] = sizes.get(share, 0) + 1
    if pywraplp is None:
        return 100.0 * (whole + packed / float(MILLI)) / gpus, None
    solver = pywraplp.Solver.CreateSolver("GLOP")
    big = {size: solver.NumVar(0, count, "big%d" % size) for size, count in sizes.items() if 2 * size > MILLI}
    flows = {}
    for size in sizes:
        if 2 * size > MILLI:
            continue
        for beside in list(big) + [None]:
            if beside is None or size <= MILLI - beside:
                flows[size, beside] = solver.NumVar(0, solver.infinity(), "f%d_%s" % (size, beside))
    for beside, count in big.items():
        solver.Add(sum(var for (_size, where), var in flows.items() if where == beside) <= (MILLI - beside) * count)
    solver.Add(sum(big.values()) <= devices)
    solver.Add(sum(var for (_size, where), var in flows.items() if where is None) <= MILLI * (devices - sum(big.values())))
    for size, count in sizes.items():
        if 2 * size <= MILLI:
            solver.Add(sum(var for (of, _where), var in flows.items() if of == size) <= size * count)
    solver.Maximize(sum(size * var for size, var in big.items()) + sum(flows.values()))
    solver.Solve()
    # Both LPs are upper bounds; the device-filling LP (pattern_bound) is the tighter by 0.4-0.8 points on the traces.
    bound = min(solver.Objective().Value(), pattern_bound(sizes, devices))
    return 100.0 * (whole + packed / float(MILLI)) / gpus, 100.0 * (whole + bound / MILLI) / gpus


def pattern_bound(sizes, devices, iterations=500):
    """An upper bound of the share memory (in thousandths of a device) that ``devices`` devices hold, ``sizes`` being
    {share size: count}: the LP over device fillings (Gilmore-Gomory's cutting-stock LP, by column generation with
    a bounded-knapsack pricing), far tighter than the flow LP (two shares of 300 never fit beside one of 590 there).
    Valid at any iteration: the LP's value plus ``devices`` times the best filling's reduced cost (Farley's bound),
    which is the LP's value once no filling improves it. None without OR-Tools."""
    if pywraplp is None or devices <= 0 or not sizes:
        return None if pywraplp is None else 0.0
    order = sorted(sizes)
    fillings = [{size: 1} for size in order]
    best = float("inf")
    for _iteration in range(iterations):
        solver = pywraplp.Solver.CreateSolver("GLOP")
        used = [solver.NumVar(0, solver.infinity(), "p%d" % index) for index in range(len(fillings))]
        opened = solver.Add(sum(used) <= devices)
        limits = {size: solver.Add(sum(used[index] * filling.get(size, 0) for index, filling in enumerate(fillings)
                                       if size in filling) <= sizes[size]) for size in order}
        solver.Maximize(sum(used[index] * sum(size * count for size, count in filling.items())
                            for index, filling in enumerate(fillings)))
        solver.Solve()
        value = solver.Objective().Value()
        price = {size: limits[size].dual_value() for size in order}
        filling, gain = _best_filling(order, sizes, price)
        reduced = gain - opened.dual_value()
        best = min(best, value + devices * max(0.0, reduced))
        if reduced <= 1e-6 or filling in fillings:
            return min(best, value) if reduced <= 1e-6 else best
        fillings.append(filling)
    return best


def _best_filling(order, sizes, price):
    """The filling of one device (size -> count, at most MILLI in all) of the largest sum of size - price."""
    return _knapsack([(size, size, size - price[size], sizes[size]) for size in order])


def _knapsack(items):
    """The filling of one device (key -> count) of the largest value from ``items`` [(key, size in thousandths of a
    device, value of one, copies at most)]: a bounded knapsack by dynamic programming over the device's MILLI
    thousandths (each copy one 0/1 pass). (filling, its value)."""
    best = [0.0] * (MILLI + 1)
    chosen = [{} for _room in range(MILLI + 1)]
    for key, size, value, copies in items:
        if value <= 0:
            continue
        for _copy in range(min(copies, MILLI // size)):
            for room in range(MILLI, size - 1, -1):
                candidate = best[room - size] + value
                if candidate > best[room] + 1e-12:
                    best[room] = candidate
                    filling = dict(chosen[room - size])
                    filling[key] = filling.get(key, 0) + 1
                    chosen[room] = filling
    room = max(range(MILLI + 1), key=lambda at: best[at])
    return chosen[room], best[room]


def kind_bound(nodes, pods, iterations=300):
    """An upper bound of the GPUs (in % of the cluster's) that ``pods`` (read_pods tuples) can hold on ``nodes``
    (read_nodes), with CPU, memory and models kept per node kind (nodes of the same CPU, memory, GPU count and
    model; boundaries between the nodes of one kind relaxed) and shares packed per device: the device-filling LP
    of pattern_bound per kind, whole-GPU pods as variables, every column charged its CPU and memory, by column
    generation with Farley's bound (valid at any iteration). CPU-only pods add no GPUs: the bound leaves them out.
    (bound, LP iterations); None without OR-Tools."""
    if pywraplp is None:
        return None
    kinds = {}
    for spec in nodes.values():
        if spec["gpus"]:
            key = (int(spec["cpu"][:-1]), int(spec["memory"][:-2]), len(spec["gpus"]), spec["gpus"][0]["model"])
            kinds[key] = kinds.get(key, 0) + 1
    supply = {}
    for pod in pods:
        if pod[2]:
            supply[pod] = supply.get(pod, 0) + 1
    order = sorted(kinds)
    usable = {kind: [pod for pod in sorted(supply) if pod[0] <= kind[0] and pod[1] <= kind[1] and pod[2] <= kind[2]
                     and (not pod[4] or kind[3] in pod[4])] for kind in order}
    fillings = {kind: [{pod: 1} for pod in usable[kind] if pod[3] < MILLI] for kind in order}
    gpus = sum(kind[2] * count for kind, count in kinds.items())
    best = float("inf")
    for iteration in range(1, iterations + 1):
        solver = pywraplp.Solver.CreateSolver("GLOP")
        terms = {pod: [] for pod in supply}
        value, limits = [], {}
        for kind in order:
            devices, cpu, memory = [], [], []
            for pod in usable[kind]:
                if pod[3] >= MILLI:
                    var = solver.NumVar(0, supply[pod], "")
                    terms[pod].append(var)
                    devices.append(pod[2] * var)
                    cpu.append(pod[0] * var)
                    memory.append(pod[1] * var)
                    value.append(pod[2] * MILLI * var)
            for filling in fillings[kind]:
                var = solver.NumVar(0, solver.infinity(), "")
                devices.append(var)
                cpu.append(sum(pod[0] * count for pod, count in filling.items()) * var)
                memory.append(sum(pod[1] * count for pod, count in filling.items()) * var)
                value.append(sum(pod[3] * count for pod, count in filling.items()) * var)
                for pod, count in filling.items():
                    terms[pod].append(count * var)
            limits[kind] = (solver.Add(sum(devices) <= kinds[kind] * kind[2]), solver.Add(sum(cpu) <= kinds[kind] * kind[0]),
                            solver.Add(sum(memory) <= kinds[kind] * kind[1]))
        arrived = {pod: solver.Add(sum(terms[pod]) <= supply[pod]) for pod in supply if terms[pod]}
        solver.Maximize(sum(value))
        solver.Solve()
        found = solver.Objective().Value()
        gain, added = 0.0, False
        for kind in order:
            device_price, cpu_price, memory_price = (limit.dual_value() for limit in limits[kind])
            price = {pod: (arrived[pod].dual_value() + cpu_price * pod[0] + memory_price * pod[1])
                     for pod in usable[kind] if pod[3] < MILLI}
            # The pods differ in CPU and memory too: each is its own item.
            filling, worth = _knapsack([(pod, pod[3], pod[3] - price[pod], supply[pod]) for pod in sorted(price)])
            reduced = worth - device_price
            if reduced > 1e-6:
                gain += kinds[kind] * kind[2] * reduced
                if filling not in fillings[kind]:
                    fillings[kind].append(filling)
                    added = True
        best = min(best, found + gain)
        if not added:
            break
    return 100.0 * best / MILLI / gpus, iteration


def gap_analysis(nodes, gpus, pods, seed):
    """What the gap between the online figure and the upper bound is made of (first seed): the bound again with CPU,
    memory and models per node kind; online with foresight (the mix told exactly what is still to arrive); and at
    100% arrived, where the free GPU memory is and whether any refused pod would fit it by GPU memory alone."""
    replay = Replay(nodes, gpus, pods, seed, dict(WEIGHTS))
    pod_of = {instance.name: pod for pod, (instance, _gpus) in zip(replay.order, replay.instances)}
    arrived = [pod_of[instance.name] for instance, _gpus in replay.arrived()]
    replay.batches = [(percent, batch) for percent, batch in replay.batches if percent <= MEASURE_AT]
    curve, attempt, _replans = replay.online()
    holes = {}
    largest = 0
    for node_state in attempt.cluster.nodes.values():
        for device, used in zip(node_state.node.gpus, node_state.gpu_used):
            free = (device.memory - used) >> 20
            if free:
                holes[free // 100 * 100] = holes.get(free // 100 * 100, 0) + 1
                largest = max(largest, free)
    refused = [pod_of[name] for name in attempt.unplaced]
    smallest = min((pod[3] for pod in refused if pod[2]), default=None)
    started = time.process_time()
    bound = kind_bound(nodes, arrived)
    seconds = time.process_time() - started
    foresight, _attempt, _replans = Replay(nodes, gpus, pods, seed, dict(WEIGHTS)).online(foresight=True)
    return {"online": 100.0 * curve[MEASURE_AT], "online_foresight": 100.0 * foresight[MEASURE_AT],
            "bound": share_ceiling(replay.arrived(), gpus)[1], "kind_bound": None if bound is None else bound[0],
            "kind_bound_iterations": None if bound is None else bound[1], "kind_bound_seconds": seconds,
            "refused": len(refused), "refused_gpus": sum(pod_gpus(pod) for pod in refused),
            "smallest_refused_gpu_memory": smallest, "largest_hole": largest,
            "holes_by_100": sorted(holes.items())}


def diagnosis(attempt):
    """Why pods failed, and where the free GPUs are stranded (the issue's measurement)."""
    reasons = {}
    for message in attempt.unplaced.values():
        for part in message.split(": ", 1)[-1].rstrip(".").split(", "):
            count, _space, reason = part.partition(" ")
            if count.isdigit():
                # Without the amounts the message adds ("Insufficient cpu (asked 8 CPUs; ...)"): one line per reason.
                reason = re.sub(r" \(asked [^)]*\)|; asked [^)]*", "", reason)
                reasons[reason] = reasons.get(reason, 0) + 1
    free_gpu = stranded = 0.0
    cpu_used = cpu_total = 0
    for node_state in attempt.cluster.nodes.values():
        node = node_state.node
        free = sum(device.memory - used for device, used in zip(node.gpus, node_state.gpu_used)) / float(MILLI * 2 ** 20)
        free_gpu += free
        if node.cpu - node_state.cpu_used < 2000:
            stranded += free
        cpu_used += node_state.cpu_used
        cpu_total += node.cpu
    top = sorted(reasons.items(), key=lambda item: (-item[1], item[0]))[:3]
    return {"failed": len(attempt.unplaced), "reasons": top, "free_gpus": free_gpu,
            "free_gpus_on_nodes_under_2_cores": stranded, "cpu_allocated": cpu_used / float(cpu_total)}


def published(path):
    """(workload, policy) -> mean over seeds of the ratio at 100% arrived."""
    values = {}
    with open(path, newline="") as handle:
        for row in csv.DictReader(handle):
            workload = row["workload"].replace("openb_pod_list_", "")
            policy = row["sc_policy"].split("-", 1)[-1]
            values.setdefault((workload, policy), []).append(float(row[str(MEASURE_AT)]))
    return {key: statistics.mean(seeds) for key, seeds in values.items()}


def _seeds(text):
    seeds = []
    for part in text.split(","):
        first, _dash, last = part.partition("-")
        seeds.extend(range(int(first), int(last or first) + 1))
    return seeds


def _weights(text):
    weights = {}
    for part in filter(None, text.split(",")):
        name, _equals, value = part.partition("=")
        weights[name] = float(value)
    return weights


def check(replay, attempt):
    """The final plan of a replay through the independent plan checker."""
    placed = {p.instance.name for p in attempt.placements}
    mapping = dict(replay.mapping)
    # Only the placed pods are the gang the checker sees: renumber nothing, drop services with holes.
    services = {}
    for name, spec in mapping["services"].items():
        ordinals = {p.instance.ordinal for p in attempt.placements if p.instance.service.name == name}
        if ordinals and ordinals == set(range(len(ordinals))):
            services[name] = dict(spec, replicas=len(ordinals))
    kept = [p for p in attempt.placements if p.instance.service.name in services]
    # What scheduler._feasible returns besides the binder's plan (nothing here is preemptible).
    result = {"feasible": True, "path": "greedy", "preempted": {}, "evictions": []}
    result.update(DefaultBinder(replay.problem).bind(kept, attempt.cluster))
    mapping = {"nodes": mapping["nodes"], "services": services}
    result["ranks"] = [sorted(services)]
    violations = check_plan(mapping, result)
    if len(kept) < len(placed):
        # Usage is the whole replay's, services left out included: only then are its totals not comparable.
        violations = [v for v in violations if not v.startswith("usage")]
    return len(placed), len(kept), violations


def one_plan(nodes, pods, seed, count, node_count, exact_seconds=0.0):
    """One plan() of the first ``count`` arrivals, each pod its own single-replica service, on the first
    ``node_count`` GPU nodes (and every CPU-only node): (seconds, CPU seconds, the result, placed, unplaced,
    violations from the plan checker)."""
    ordered = sorted(nodes.items())
    # The first NODES GPU nodes, and every CPU-only node (--cpu-nodes).
    kept_nodes = dict([item for item in ordered if item[1]["gpus"]][:node_count] + [item for item in ordered if not item[1]["gpus"]])
    gpus = sum(len(spec["gpus"]) for spec in kept_nodes.values())
    order = arrivals(pods, gpus, seed)[:count]
    services = {}
    for index, (cpu, memory, gpu_count, milli, models) in enumerate(order):
        resources = {"cpu": "%dm" % cpu, "memory": "%dMi" % memory}
        if gpu_count:
            resources["gpu"] = {"count": gpu_count}
            if milli < MILLI:
                resources["gpu"]["memory"] = "%dMi" % milli
            if models:
                resources["gpu"]["models"] = list(models)
        services["pod-%05d" % index] = {"resources": resources}
    mapping = {"nodes": kept_nodes, "services": services}
    started, cpu_started = time.perf_counter(), time.process_time()
    result = plan(json.loads(json.dumps(mapping)), exact_seconds=exact_seconds)
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    violations = check_plan(mapping, result)
    placed = len(result["placements"])
    return seconds, cpu_seconds, result, placed, len(result.get("unschedulable", {})), violations


def near_capacity(nodes, pods, seed, exact_seconds, low=1000):
    """The planner's cost at the boundary: the largest prefix of the arrivals that plan() places as one gang (bisected
    over plan()'s own answer), then one plan() of it and of prefixes just past it. Per plan: pods, feasible, CPU
    seconds, the greedy step's seconds and the steps taken (the result's ``steps``)."""
    node_count = sum(1 for spec in nodes.values() if spec["gpus"])
    gpus = sum(len(spec["gpus"]) for spec in nodes.values())
    total = len(arrivals(pods, gpus, seed))
    measured = {}

    def measure(count):
        if count not in measured:
            _seconds, cpu_seconds, result, _placed, unplaced, violations = one_plan(
                nodes, pods, seed, count, node_count, exact_seconds)
            measured[count] = {"pods": count, "feasible": result["feasible"], "cpu_seconds": cpu_seconds,
                               "greedy_seconds": result["steps"][0]["seconds"], "steps": result["steps"],
                               "unplaced": unplaced, "violations": len(violations),
                               "summary": result.get("summary", "")[-160:]}
        return measured[count]

    if not measure(low)["feasible"]:
        return low, [measured[low]]
    high = total
    while high - low > 1:
        middle = (low + high) // 2
        if measure(middle)["feasible"]:
            low = middle
        else:
            high = middle
    return low, [measure(count) for count in (low, low + 1, low + 10, low + 100) if count <= total]


def main(argv=None):
    parser = argparse.ArgumentParser(description="Replay a GPU-sharing trace the FGD paper's way.")
    parser.add_argument("nodes", help="node list CSV (sn,cpu_milli,memory_mib,gpu,model)")
    parser.add_argument("pods", nargs="+", help="pod list CSV(s) (name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec])")
    parser.add_argument("--expected", help="published results CSV (the FGD artifact's analysis_allo_discrete.csv)")
    parser.add_argument("--seeds", type=_seeds, default=list(DEFAULT_SEEDS), help="e.g. 42-51 or 42,45 (default 42-51)")
    parser.add_argument("--modes", default="online,gang", help="comma-separated of %s (default online,gang)" % ",".join(MODES))
    parser.add_argument("--weights", type=_weights, default=None, help="score weights to change, e.g. GPUFragmentation=0")
    parser.add_argument("--policy", choices=("ours", "fgd"), default="ours",
                        help="ours (the default profile) or fgd (the paper's FGD score alone, re-implemented here: "
                        "a baseline for traces without published figures)")
    parser.add_argument("--spread", type=int, default=None, metavar="SKEW",
                        help="give every service topology_spread [{max_skew: SKEW}] (over the nodes, DoNotSchedule)")
    parser.add_argument("--check", action="store_true", help="run the plan checker on each final online and gang plan")
    parser.add_argument("--json", action="store_true", help="one JSON document instead of the table")
    parser.add_argument("--one-plan", metavar="PODSxNODES", help="instead: time one plan() of the first PODS arrivals "
                        "(first seed), each pod its own service, on the first NODES nodes, e.g. 7500x1200")
    parser.add_argument("--restrict-models", type=float, default=0.0, metavar="FRACTION",
                        help="restrict this fraction of the GPU pods that accept any model to one model (drawn by "
                        "GPU supply; the issue's scenario: 0.33)")
    parser.add_argument("--cpu-nodes", type=int, default=0, metavar="COUNT",
                        help="add COUNT CPU-only nodes (the issue's scenario: 310); more capacity must never place less")
    parser.add_argument("--exact-seconds", type=float, default=None,
                        help="the exact solver's time limit: with --one-plan (default 0: greedy only), with the plan mode "
                        "(default %g, plan()'s own)" % EXACT_SECONDS)
    parser.add_argument("--gap-analysis", action="store_true",
                        help="instead: per pod list (first seed), what the online figure's gap to the upper bound is made "
                        "of: the bound with CPU, memory and models per node kind, online with foresight of what is still to "
                        "arrive, and the free GPU memory at 100%% arrived against the refused pods")
    parser.add_argument("--near-capacity", action="store_true",
                        help="instead: per pod list (first seed), the largest prefix of the arrivals plan() places as one "
                        "gang on all nodes, and the CPU time of plan() there and just past it, with its steps")
    args = parser.parse_args(argv)
    if args.exact_seconds is None:
        args.exact_seconds = 0.0 if args.one_plan and not args.near_capacity else EXACT_SECONDS
    if not 0.0 <= args.restrict_models <= 1.0 or args.cpu_nodes < 0 or not 0.0 <= args.exact_seconds <= 3600.0:
        parser.error("--restrict-models is a fraction 0..1, --cpu-nodes a count >= 0, --exact-seconds 0..3600")
    if args.spread is not None:
        if args.spread < 1:
            parser.error("--spread is a max_skew >= 1")
        global SPREAD  # pylint: disable=global-statement
        SPREAD = args.spread
    nodes, gpus = read_nodes(args.nodes)
    nodes = add_cpu_nodes(nodes, args.cpu_nodes)

    def pods_of(path):
        pods = read_pods(path)
        return restrict_models(pods, nodes, args.restrict_models) if args.restrict_models else pods

    if args.gap_analysis:
        for path in args.pods:
            found = gap_analysis(nodes, gpus, pods_of(path), args.seeds[0])
            print("%s (seed %d): online %.2f%%; with foresight of what is still to arrive %.2f%%; upper bound %.2f%%, "
                  "with CPU, memory and models per node kind %s (%s LP iterations, %.1f s); refused at 100%% arrived: "
                  "%d pods, %.2f GPUs, the smallest asking %s Mi of a 1000 Mi device; the free memory's largest hole %d Mi, "
                  "holes by 100 Mi %s" % (
                      path.rsplit("/", 1)[-1], args.seeds[0], found["online"], found["online_foresight"], found["bound"],
                      "-" if found["kind_bound"] is None else "%.2f%%" % found["kind_bound"], found["kind_bound_iterations"],
                      found["kind_bound_seconds"], found["refused"], found["refused_gpus"],
                      found["smallest_refused_gpu_memory"], found["largest_hole"],
                      " ".join("%d-%d: %d" % (low, low + 99, count) for low, count in found["holes_by_100"])), flush=True)
        return 0
    if args.near_capacity:
        for path in args.pods:
            boundary, rows = near_capacity(nodes, pods_of(path), args.seeds[0], args.exact_seconds)
            print("%s: the largest prefix planned as one gang: %d pods (seed %d, exact %g s)" % (
                path.rsplit("/", 1)[-1], boundary, args.seeds[0], args.exact_seconds), flush=True)
            for row in rows:
                ratio = row["cpu_seconds"] / row["greedy_seconds"] if row["greedy_seconds"] > 0 else float("nan")
                print("  %5d pods: %s, %.2f s of CPU, greedy step %.2f s (%.2fx), %d unplaced, %d violation(s); steps %s%s" % (
                    row["pods"], "feasible" if row["feasible"] else "infeasible", row["cpu_seconds"], row["greedy_seconds"],
                    ratio, row["unplaced"], row["violations"],
                    " ".join("%s %.2f" % (step["step"], step["seconds"]) for step in row["steps"]),
                    "" if row["feasible"] else "\n         " + row["summary"]), flush=True)
        return 0
    if args.one_plan:
        count, node_count = (int(part) for part in args.one_plan.lower().split("x"))
        for path in args.pods:
            seconds, cpu_seconds, result, placed, unplaced, violations = one_plan(
                nodes, pods_of(path), args.seeds[0], count, node_count, args.exact_seconds)
            shown = "".join("\n  " + v for v in violations[:5])
            exact = result.get("exact")
            print("%s: %d single-replica services on %d nodes: plan() %.2f s (%.2f s of CPU), feasible %s, path %s%s, "
                  "%d placed, %d unplaced, plan checker: %d violation(s)%s"
                  % (path.rsplit("/", 1)[-1], count, node_count, seconds, cpu_seconds, result["feasible"], result["path"],
                     " (exact %s)" % json.dumps(exact, sort_keys=True) if exact else "", placed, unplaced,
                     len(violations), shown))
            if not result["feasible"]:
                print("  summary: %s" % result["summary"][:400])
        return 0
    modes = [mode for mode in args.modes.split(",") if mode]
    if any(mode not in MODES for mode in modes):
        parser.error("--modes: expected some of %s" % ", ".join(MODES))

    plugins, weights = policy(args.policy)
    if args.weights is not None:
        weights.update(args.weights)
    label = "ours" if args.policy == "ours" else "FGD here"
    started = time.monotonic()
    expected = published(args.expected) if args.expected else {}
    rows = []
    for path in args.pods:
        workload = path.rsplit("/", 1)[-1].replace("openb_pod_list_", "").replace(".csv", "")
        pods = pods_of(path)
        figures = {mode: [] for mode in modes}
        details = []
        for seed in args.seeds:
            seed_started = time.monotonic()
            replay = Replay(nodes, gpus, pods, seed, weights, plugins)
            detail = {"seed": seed}
            # The upper bound of the allocation at 100% arrived: everything that arrived, placed anew (no pins).
            detail["bound"] = share_ceiling(replay.arrived(), gpus)[1]
            figures.setdefault("bound", []).append(detail["bound"])
            if "online" in modes:
                curve, attempt, _replans = replay.online()
                figures["online"].append(100.0 * curve[MEASURE_AT])
                detail["online"] = 100.0 * curve[MEASURE_AT]
                detail["at_130"] = 100.0 * curve[max(curve)]
                detail["diagnosis"] = diagnosis(attempt)
                if args.check:
                    detail["check"] = check(replay, attempt)
            if "arrival" in modes:
                curve, _attempt, _replans = replay.online(in_arrival_order=True)
                figures["arrival"].append(100.0 * curve[MEASURE_AT])
                detail["arrival"] = 100.0 * curve[MEASURE_AT]
            if "gang" in modes:
                ratio, gang_attempt = replay.gang()
                figures["gang"].append(100.0 * ratio)
                detail["gang"] = 100.0 * ratio
                detail["gang_packing"], detail["gang_bound"] = share_ceiling(replay.arrived(), gpus)
                figures.setdefault("gang packing", []).append(detail["gang_packing"])
                figures.setdefault("gang bound", []).append(detail["gang_bound"])
                if args.check:
                    detail["gang_check"] = check(replay, gang_attempt)
            if "plan" in modes:
                cpu_started = time.process_time()
                curve, first, refusals, result, mapping, calls, _plan_cpu, paths = replay.plan_path(args.exact_seconds)
                figures["plan"].append(100.0 * curve[MEASURE_AT])
                detail["plan"] = 100.0 * curve[MEASURE_AT]
                detail["plan_at_130"] = 100.0 * curve[max(curve)]
                detail["plan_first_refusal"] = first
                detail["plan_refusals"] = refusals
                detail["plan_calls"] = calls
                detail["plan_paths"] = paths
                detail["plan_cpu_seconds"] = time.process_time() - cpu_started
                if args.check:
                    violations = check_plan(mapping, result) if result["feasible"] else ["last plan infeasible"]
                    detail["plan_check"] = (len(result["placements"]), len(result["placements"]), violations)
            if "moves" in modes:
                curve, _attempt, replans = replay.online(moves=True)
                figures["moves"].append(100.0 * curve[MEASURE_AT])
                detail["moves"] = 100.0 * curve[MEASURE_AT]
                detail["replans"] = replans
            detail["seconds"] = time.monotonic() - seed_started
            details.append(detail)
            if not args.json:
                ceiling = ""
                if "gang_packing" in detail:
                    ceiling = " (by GPU memory alone: best-fit packing %.2f%%, at most %s)" % (
                        detail["gang_packing"], "-" if detail["gang_bound"] is None else "%.2f%%" % detail["gang_bound"])
                print("%s seed %d: %s%s (%.0f s)" % (workload, seed, ", ".join(
                    "%s %.2f%%" % (mode, detail[mode]) for mode in modes), ceiling, detail["seconds"]), flush=True)
                if "plan" in detail:
                    print("    plan: first refusal at %s arrived, %.2f%% at 130%%, refusals %s, %d plan() calls %s, "
                          "%.0f s CPU" % ("-" if detail["plan_first_refusal"] is None else "%.2f%%" % detail["plan_first_refusal"],
                                          detail["plan_at_130"], json.dumps(detail["plan_refusals"], sort_keys=True),
                                          detail["plan_calls"], json.dumps(detail["plan_paths"], sort_keys=True),
                                          detail["plan_cpu_seconds"]), flush=True)
                if "diagnosis" in detail:
                    print("    %s" % json.dumps(detail["diagnosis"], sort_keys=True), flush=True)
                for key, what in (("check", "online"), ("gang_check", "gang"), ("plan_check", "plan")):
                    if key in detail:
                        print("    plan checker (%s): %d placed, %d checked, %d violation(s)%s" % (
                            what, detail[key][0], detail[key][1], len(detail[key][2]),
                            "".join("\n      " + v for v in detail[key][2][:5])), flush=True)
        row = {"workload": workload, "seeds": args.seeds, "details": details,
               "ours": {mode: None if None in values else statistics.mean(values) for mode, values in figures.items()},
               "published": {policy: expected.get((workload, policy)) for policy in POLICIES}}
        rows.append(row)
    seconds = time.monotonic() - started
    if args.json:
        json.dump({"rows": rows, "seconds": seconds}, sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
        return 0
    print()
    print("GPU allocation ratio (%%) at %d%% arrived, mean over seeds %s; %.0f s in all" % (
        MEASURE_AT, ",".join(str(seed) for seed in args.seeds), seconds))
    columns = modes + (["gang packing", "gang bound"] if "gang" in modes else [])
    header = ["workload"] + ["%s %s" % (label, mode) if mode in modes else mode for mode in columns] + list(POLICIES)
    lines = [header]
    for row in rows:
        published_row = ["%.2f" % row["published"][p] if row["published"][p] is not None else "-" for p in POLICIES]
        lines.append([row["workload"]] + ["-" if row["ours"][mode] is None else "%.2f" % row["ours"][mode]
                                          for mode in columns] + published_row)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for position, line in enumerate(lines):
        print("  ".join(cell.rjust(width) for cell, width in zip(line, widths)))
        if position == 0:
            print("  ".join("-" * width for width in widths))
    for row in rows:
        bound, fgd = row["ours"].get("bound"), row["published"]["FGD"]
        if bound is not None:
            print("%s: upper bound %.2f%%; gap to it: %s%s" % (row["workload"], bound, ", ".join(
                "%s %s %.2f" % (label, mode, bound - row["ours"][mode]) for mode in modes if row["ours"].get(mode) is not None),
                "" if fgd is None else ", FGD (published) %.2f" % (bound - fgd)))
    for row in rows:
        fgd = row["published"]["FGD"]
        if args.policy == "ours" and fgd is not None and "online" in row["ours"] and row["ours"]["online"] < fgd:
            print("BELOW FGD: %s online %.2f%% < %.2f%%" % (row["workload"], row["ours"]["online"], fgd))
    return 0


if __name__ == "__main__":
    sys.exit(main())
