# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Exact: OR-Tools CP-SAT over the greedy pipeline's constraints, for gangs greedy cannot place.

Heavy-first greedy is a bin-packing heuristic: it can miss a packing that exists. When both
greedy attempts fail, ``solve`` states the whole problem as one constraint model and lets
CP-SAT either find a placement, prove that none exists, or run out of its time budget, and
says which, so that "infeasible" and "not found in time" are never confused.

What each instance may use is not re-implemented here: the framework's PreFilter and static
Filter plugins (selectors, taints, unschedulable, stateful pins, GPU models, capacities) give
each instance's allowed nodes, exactly as in a greedy attempt; a stateful instance on its node keeps its previous GPUs
where they still fit its request (as the GPU plugin keeps them first). The model adds what depends on
the other instances: CPU and memory (with sidecars), host ports, anti-affinity, GPU memory per
device (a whole-GPU request takes a device alone; a share on an MPS node also its server's memory),
GPU cores per device (at most 100 in sum), NVMe space per device, disk volumes per node's data filesystem, quotas
(max per group; min reservations against the cluster's totals), ``topology_spread`` DoNotSchedule (per eligible domain,
the service's instances there at most ``max_skew`` above a lower bound of every eligible domain's count: the
TopologySpread plugin's rule for the final plan), ``gpu.topology: required`` (no two of an instance's GPUs
on a node without NVLink between them), and ``cpu_pinning: numa`` (an instance takes only GPUs whose NUMA node's CPUs are
known, and its CPU request flows to the NUMA nodes of the GPUs it takes, each giving at most its CPUs: the NUMAPinning
plugin's rule, as integer flow variables). ``preferred`` topology is not modelled: a plan the solver finds
takes any devices that fit, as the greedy would on a node without links.

Preemptible instances that run are in the model too, each placed at most once; new preemptible work
is not (the scheduler fills it in after, in priority order).

Objective, lexicographic: fewest running preemptible instances evicted; then fewest stateless moves; then fewest instances that stay but would get
other GPUs or another NVMe device (a restart); then fewest nodes used; then fewest GPUs touched
(whole GPUs kept free), as the greedy scores prefer.
"""

from __future__ import annotations

import dataclasses
import time

from ansible_collections.gangplank.platform.plugins.module_utils.problem_format import (
    CPU_PINNING_NUMA, GPU_TOPOLOGY_REQUIRED, MAX_GPU_CORES,
)
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.model import (
    QUOTA_DIMENSIONS, GPUClaim, Placement, gpu_overhead, numa_capacity, pinnable, pod_requests,
)
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.anti_affinity import service_conflicts
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.topology_spread import spread_domains
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.state import ClusterState
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.topology import link_matrix, nvlinked

# OR-Tools' CP-SAT, imported on first use (available()), not with this module: Ansible's controller loads the
# gang_schedule action plugin in its main process, which forks a worker for every task and host; with OR-Tools (and the
# numpy and pandas it imports) each fork costs more (day 2 at 30 hosts, benchmarks/README.md). None where it is missing:
# plan() then says so instead of failing.
_NOT_LOADED = object()
cp_model = _NOT_LOADED

OPTIMAL = "optimal"             # a plan, and no better one exists
FEASIBLE = "feasible"           # a plan, the best found within the time budget
INFEASIBLE = "infeasible"       # proved: no plan exists
TIMEOUT = "timeout"             # neither a plan nor a proof within the time budget
UNAVAILABLE = "unavailable"     # ortools is not installed
SKIPPED = "skipped"             # the problem is too large to model in the time a plan may take

# Instance x node pairs above which the model is not built: at a few dozen servers it is far below;
# at 1,000 nodes x 10,000 instances building it alone would take minutes.
MAX_CANDIDATES = 250000
_MAX_WEIGHT = 2 ** 62           # the objective's largest weight times what it counts stays a 64-bit integer


class ExactResult:
    def __init__(self, status, seconds, placements=None, cluster=None, reason=None):
        self.status = status
        self.seconds = seconds
        self.placements = placements
        self.cluster = cluster
        self.reason = reason


def available():
    global cp_model  # pylint: disable=global-statement
    if cp_model is _NOT_LOADED:
        try:
            from ortools.sat.python import cp_model as loaded  # pylint: disable=import-outside-toplevel
        except ImportError:
            loaded = None
        cp_model = loaded
    return cp_model is not None


def solve(problem, framework, time_limit, hint=None, workers=8, around=None):
    """An ExactResult for ``problem``; ``time_limit`` in seconds of wall time.

    ``hint`` (greedy's placements) gives CP-SAT a plan to start from and improve on. ``around`` (a failed
    greedy attempt) lets a problem too large to model whole be solved around its unplaced instances.
    """
    started = time.monotonic()
    if not available():
        return ExactResult(UNAVAILABLE, 0.0, reason="the exact solver needs OR-Tools (pip install ortools)")
    if not models_whole(problem):
        reason = too_large_reason(problem)
        if around is not None:
            # One worker only, the deterministic phase: no plan for the part proves nothing for the whole, and CP-SAT's
            # portfolio searching it for the rest of the limit cost up to workers x the limit of CPU on infeasible
            # gangs near capacity (27-41 s on openb traces).
            found = _solve_around(problem, framework, time_limit, around, 1, started)
            if found.placements is not None:
                return found
            reason = "%s, and %s" % (reason, found.reason)
        return ExactResult(SKIPPED, time.monotonic() - started, reason=reason)
    builder = _Model(problem, framework, modelled(problem.instances()), deadline=started + time_limit)
    if builder.out_of_time:
        return ExactResult(TIMEOUT, time.monotonic() - started, reason="no plan found within %g s" % time_limit)
    if builder.reason is not None:
        return ExactResult(INFEASIBLE, time.monotonic() - started, reason=builder.reason)
    invalid = builder.too_large or _unrepresentable(builder)
    if invalid:
        return ExactResult(SKIPPED, time.monotonic() - started, reason=invalid)
    if hint:
        builder.hint(hint)
    status, solver = _two_phases(builder, time_limit, workers, started)
    seconds = time.monotonic() - started
    if status == cp_model.INFEASIBLE:
        return ExactResult(INFEASIBLE, seconds, reason="CP-SAT proved that no placement satisfies every constraint")
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return ExactResult(TIMEOUT, seconds, reason="no plan found within %g s" % time_limit)
    placements, cluster = builder.extract(solver)
    return ExactResult(OPTIMAL if status == cp_model.OPTIMAL else FEASIBLE, seconds, placements, cluster)


def _candidates(problem):
    """The instance-node pairs a whole model of ``problem`` would have."""
    return len(problem.nodes) * sum(service.replicas for service in problem.services.values() if not service.sidecar)


def models_whole(problem):
    """Whether the problem is small enough (MAX_CANDIDATES instance-node pairs) to be modelled whole; a larger one is
    only solved around the unplaced instances of a failed greedy attempt (solve's ``around``)."""
    return _candidates(problem) <= MAX_CANDIDATES


def too_large_reason(problem):
    """Why a problem that models_whole refuses is not modelled whole."""
    return "%d instance-node pairs exceed the exact solver's limit of %d" % (_candidates(problem), MAX_CANDIDATES)


def modelled(instances):
    """The instances the model decides: the gang, and the preemptible instances that run (evicting one is
    what the objective counts first). New preemptible work is filled in after, in priority order."""
    return [instance for instance in instances if not instance.service.preemptible or instance.previous is not None]


def _solve_around(problem, framework, time_limit, attempt, workers, started):
    """The unplaced instances of a failed greedy attempt, the nodes they could use and what greedy put on
    those nodes, solved exactly; every other placement stays where greedy put it.

    A plan found this way is a plan of the whole problem (status FEASIBLE: optimal only within the part).
    No plan for the part proves nothing for the whole, so that is reported as not found. Quotas count
    across the whole cluster, so a problem with quotas is not cut.
    """
    if problem.quotas:
        return ExactResult(SKIPPED, 0.0, reason="quotas count across the whole cluster, so it cannot be cut around "
                                                "the unplaced instances")
    if any(constraint.required for service in problem.services.values() for constraint in service.topology_spread):
        return ExactResult(SKIPPED, 0.0, reason="a topology spread counts across the whole cluster, so it cannot be "
                                                "cut around the unplaced instances")
    placed = {placement.instance.name for placement in attempt.placements}
    unplaced = [instance for instance in attempt.gang if instance.name not in placed]
    cluster = ClusterState(problem)
    cluster.moves_allowed = True
    cluster.released = set()
    usable = set()
    for instance in unplaced:
        status, cycle, filters = framework.run_pre_filter(cluster, instance)
        if not status.ok:
            return ExactResult(SKIPPED, 0.0, reason="%s: %s" % (instance.name, "; ".join(status.reasons)))
        names = cycle.node_names if cycle.node_names is not None else problem.nodes
        usable.update(name for name in names if name in problem.nodes and framework.run_static_filters(
            filters, instance, problem.nodes[name], instance.previous_node() == name).ok)
    on_node = {}
    for placement in attempt.placements:
        on_node.setdefault(placement.node, []).append(placement)
    # Nodes with the least placed on them first: they leave the most room for the fewest pairs.
    nodes = sorted(usable, key=lambda name: (len(on_node.get(name, ())), name))
    while nodes:
        freed = [placement for name in nodes for placement in on_node.get(name, ())]
        if len(nodes) * (len(freed) + len(unplaced)) <= MAX_CANDIDATES:
            break
        nodes = nodes[:len(nodes) * 4 // 5]
    if not nodes:
        return ExactResult(SKIPPED, 0.0, reason="no part around the unplaced instances is small enough to model")
    part = dataclasses.replace(problem, nodes={name: problem.nodes[name] for name in sorted(nodes)})
    freed_names = {placement.instance.name for placement in freed}
    instances = sorted([placement.instance for placement in freed] + unplaced,
                       key=lambda instance: (instance.service.name, instance.ordinal))
    scope = "the part around %d unplaced instance(s): %d instance(s) on %d of %d nodes" % (
        len(unplaced), len(instances), len(nodes), len(problem.nodes))
    short = _too_little_room(part, instances)
    if short:
        # Near capacity the part is often short of room in sum: said at once, not searched for.
        return ExactResult(SKIPPED, 0.0, reason="%s has no plan (%s)" % (scope, short))
    builder = _Model(part, framework, instances, deadline=started + time_limit)
    if builder.out_of_time:
        # Building the model is part of the limit: near capacity a part of 566 instances on 316 GPU nodes took 6 s.
        return ExactResult(SKIPPED, 0.0, reason="%s has no plan found within %g s (its model took longer to build)"
                           % (scope, time_limit))
    if builder.reason is not None:
        return ExactResult(SKIPPED, 0.0, reason="%s has no plan (%s)" % (scope, builder.reason))
    invalid = builder.too_large or _unrepresentable(builder)
    if invalid:
        return ExactResult(SKIPPED, 0.0, reason="%s: %s" % (scope, invalid))
    builder.hint(freed)
    status, solver = _two_phases(builder, time_limit, workers, started)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return ExactResult(SKIPPED, 0.0, reason="%s has no plan found within %g s" % (scope, time_limit))
    inside, _cluster = builder.extract(solver)
    placements = [placement for placement in attempt.placements if placement.instance.name not in freed_names]
    placements.extend(inside)
    whole = ClusterState(problem)
    for placement in placements:
        _apply(whole, placement, builder.requests[placement.instance.service.name])
    return ExactResult(FEASIBLE, time.monotonic() - started, placements, whole, reason=scope)


def _too_little_room(part, instances):
    """Why the part's nodes cannot hold its instances that must be placed (all but the preemptible ones) in sum (CPU,
    memory, GPUs counted as devices: whole ones, and shares as their memory over the largest device), or "". A
    necessary condition only."""
    requests = part.requests()
    cpu = memory = whole = 0
    shared = 0
    for instance in instances:
        if instance.service.preemptible:
            continue            # may be evicted: not a need
        request = requests[instance.service.name]
        cpu += request.cpu
        memory += request.memory
        gpu = instance.service.resources.gpu
        if gpu is not None:
            if gpu.memory is None:
                whole += gpu.count
            else:
                shared += gpu.count * gpu.memory
    nodes = list(part.nodes.values())
    devices = [device.memory for node in nodes for device in node.gpus]
    if cpu > sum(node.cpu for node in nodes):
        return "its instances ask %d millicores of CPU, its nodes have %d" % (cpu, sum(node.cpu for node in nodes))
    if memory > sum(node.memory for node in nodes):
        return "its instances ask %d bytes of memory, its nodes have %d" % (memory, sum(node.memory for node in nodes))
    if whole and (whole > len(devices) or whole + shared / float(max(devices)) > len(devices)):
        return "its instances ask %d whole GPU(s) and %d bytes of shared GPU memory, its nodes have %d GPU(s)" % (
            whole, shared, len(devices))
    if shared and shared > sum(devices):
        return "its instances ask %d bytes of GPU memory, its nodes have %d" % (shared, sum(devices))
    return ""


def _apply(cluster, placement, request):
    """Record a placement's use of its node in ``cluster`` (what the binder reports)."""
    node_state = cluster.nodes[placement.node]
    node_state.cpu_used += request.cpu
    node_state.memory_used += request.memory
    node_state.ports.update(request.ports)
    node_state.dynamic_ports += len(placement.instance.service.dynamic_ports)
    node_state.add_services(request.services)
    node_state.add_gpu_claims(placement.gpus, placement.instance.service.resources.gpu)
    if placement.nvme is not None:
        node_state.add_nvme(placement.nvme, placement.nvme_size)
    node_state.disk_used += placement.instance.service.resources.disk


def _unrepresentable(builder):
    """Why CP-SAT would refuse the model, or "".

    Sums of large sizes over many terms can pass int64 even when every value is within bounds; CP-SAT
    then answers MODEL_INVALID, which must not read as "no plan found within the limit".
    """
    problem = builder.model.Validate()
    if not problem:
        return ""
    return "the problem's sizes are too large for CP-SAT's 64-bit arithmetic (%s)" % problem.splitlines()[0][:160]


def _two_phases(builder, time_limit, workers, started):
    """First one worker with a fixed seed, which searches the same way every time, so a problem it settles
    gives the same plan on every run; then, for what remains of the budget, CP-SAT's portfolio of workers."""
    remaining = max(0.001, time_limit - (time.monotonic() - started))
    status, solver = _search(builder.model, min(remaining, max(1.0, time_limit / 4.0)), 1)
    if status in (cp_model.FEASIBLE, cp_model.UNKNOWN) and workers > 1 and time.monotonic() - started < time_limit:
        remaining = time_limit - (time.monotonic() - started)
        if status == cp_model.FEASIBLE:
            builder.keep(solver)
        status, solver = _search(builder.model, remaining, workers)
    return status, solver


def _search(model, seconds, workers):
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(max(seconds, 0.001))
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = 0
    # Stronger linear relaxations: they prove quota pigeonholes (count x memory) that the default misses.
    solver.parameters.linearization_level = 2
    return solver.Solve(model), solver


class _Model:
    """The CP-SAT model of one problem; ``reason`` is set when some instance can go nowhere at all."""

    def __init__(self, problem, framework, instances=None, deadline=None):
        self.problem = problem
        # Building stops once the monotonic clock passes ``deadline`` (out_of_time): the build is part of the
        # solver's time limit.
        self.deadline = float("inf") if deadline is None else deadline
        self.out_of_time = False
        self.model = cp_model.CpModel()
        self.reason = None
        self.instances = problem.instances() if instances is None else instances
        self._index = {instance.name: index for index, instance in enumerate(self.instances)}
        self.requests = problem.requests()
        self.place = {}         # (instance index, node name) -> BoolVar
        self.gpu = {}           # (instance index, node name, device position) -> (BoolVar, bytes taken)
        self.nvme = {}          # (instance index, node name, device position) -> BoolVar
        self.numa_flow = {}     # (node name, NUMA node) -> the millicores pinned instances take there (IntVars)
        self.placed = {}        # instance index of a preemptible instance -> 1 when placed, as a linear expression
        self.too_large = None   # why the objective cannot be stated in CP-SAT's 64 bits, or None
        self._by_node = None
        self._domains(framework)
        if self.reason is None and not self.out_of_time:
            self._constraints()
        if self.reason is None and not self.out_of_time:
            self._objective()

    def _past_deadline(self):
        if time.monotonic() > self.deadline:
            self.out_of_time = True
        return self.out_of_time

    def _domains(self, framework):
        cluster = ClusterState(self.problem)
        cluster.moves_allowed = True
        cluster.released = set()
        for index, instance in enumerate(self.instances):
            if self._past_deadline():
                return
            status, cycle, filters = framework.run_pre_filter(cluster, instance)
            if not status.ok:
                if instance.service.preemptible:
                    self.placed[index] = 0
                    continue
                self.reason = "%s: %s" % (instance.name, "; ".join(status.reasons))
                return
            names = sorted(cycle.node_names) if cycle.node_names is not None else list(self.problem.nodes)
            allowed = [name for name in names if name in self.problem.nodes and framework.run_static_filters(
                filters, instance, self.problem.nodes[name], instance.previous_node() == name).ok]
            optional = instance.service.preemptible
            if not allowed and not optional:
                self.reason = "%s: no node passes its filters" % instance.name
                return
            for name in allowed:
                # Names hold node names through ascii() (%a): OR-Tools takes UTF-8, which a lone surrogate is not.
                self.place[index, name] = self.model.NewBoolVar("x_%d_%a" % (index, name))
            if optional:
                # Not part of the gang: placed once, or left out (the objective counts it).
                self.model.AddAtMostOne(self.place[index, name] for name in allowed)
                self.placed[index] = sum(self.place[index, name] for name in allowed) if allowed else 0
            else:
                self.model.AddExactlyOne(self.place[index, name] for name in allowed)
            self._devices(index, instance, allowed)

    def _devices(self, index, instance, allowed):
        resources = instance.service.resources
        for name in allowed:
            node = self.problem.nodes[name]
            chosen = self.place[index, name]
            if resources.gpu is not None:
                request = resources.gpu
                options = []
                positions = []
                needed = None if request.memory is None else request.memory + gpu_overhead(node, request)
                pinned = instance.service.cpu_pinning == CPU_PINNING_NUMA
                for position, device in enumerate(node.gpus):
                    if request.matches(device) and (needed is None or device.memory >= needed) and \
                            (not pinned or pinnable(node, device)):
                        take = device.memory if request.memory is None else request.memory
                        var = self.model.NewBoolVar("g_%d_%a_%d" % (index, name, position))
                        self.gpu[index, name, position] = (var, take)
                        options.append(var)
                        positions.append(position)
                self.model.Add(sum(options) == request.count * chosen)
                kept = _kept_gpus(instance, name, node, positions, request)
                if kept is not None:
                    # A stateful instance on its node keeps its GPUs where they still fit the request: it never moves.
                    for position, var in zip(positions, options):
                        if position in kept:
                            self.model.Add(var == chosen)
                        else:
                            self.model.Add(var == 0)
                if pinned:
                    self._numa_flow(index, instance, name, node, options, positions, chosen)
                if request.topology == GPU_TOPOLOGY_REQUIRED and request.count > 1:
                    # Every pair of the set NVLinked: two devices without NVLink between them are never both taken.
                    matrix = link_matrix(node)
                    for first in range(len(positions)):
                        for second in range(first + 1, len(positions)):
                            if not nvlinked(matrix, positions[first], positions[second]):
                                self.model.Add(options[first] + options[second] <= 1)
            if resources.nvme is not None:
                request = resources.nvme
                options = []
                for position, device in enumerate(node.nvme):
                    if request.label in device.labels and device.size >= request.size:
                        var = self.model.NewBoolVar("n_%d_%a_%d" % (index, name, position))
                        self.nvme[index, name, position] = var
                        options.append(var)
                self.model.Add(sum(options) == chosen)

    def _numa_flow(self, index, instance, name, node, options, positions, chosen):
        """cpu_pinning numa: the instance's CPU request (sidecars included) flows to the NUMA nodes of the GPUs it takes
        on this node (none to a NUMA node where it takes none); _constraints bounds each NUMA node by its CPUs."""
        amount = self.requests[instance.service.name].cpu
        if not amount:
            return
        by_numa = {}
        for var, position in zip(options, positions):
            by_numa.setdefault(node.gpus[position].numa_node, []).append(var)
        flows = []
        for numa_node, members in sorted(by_numa.items()):
            flow = self.model.NewIntVar(0, amount, "c_%d_%a_%d" % (index, name, numa_node))
            self.model.Add(flow <= amount * sum(members))
            flows.append(flow)
            self.numa_flow.setdefault((name, numa_node), []).append(flow)
        self.model.Add(sum(flows) == amount * chosen)

    def _on(self, name):
        if self._by_node is None:
            self._by_node = {}
            for (index, node), var in self.place.items():
                self._by_node.setdefault(node, []).append((index, var))
        return self._by_node.get(name, [])

    def _constraints(self):
        model, problem = self.model, self.problem
        # Per service, the services it conflicts with: a node looks up the pairs of what may be on it, not every
        # pair of the problem (10,000 services with 90 conflicts each were 9e5 pairs on each node).
        partners = {}
        for first, second in _conflicting_services(problem):
            partners.setdefault(first, []).append(second)
        gpu_takes, gpu_cores, nvme_takes = {}, {}, {}
        for (index, node_name, position), (var, take) in self.gpu.items():
            request = self.instances[index].service.resources.gpu
            # The device holds the grant and, for a share on an MPS node, its server (0 elsewhere: the same model).
            gpu_takes.setdefault((node_name, position), []).append((var, take + gpu_overhead(problem.nodes[node_name], request)))
            if request.cores is not None:
                gpu_cores.setdefault((node_name, position), []).append((var, request.cores))
        for (index, node_name, position), var in self.nvme.items():
            nvme_takes.setdefault((node_name, position), []).append((var, self.instances[index].service.resources.nvme.size))
        for name, node in problem.nodes.items():
            if self._past_deadline():
                return
            here = self._on(name)
            requests = [(self.requests[self.instances[index].service.name], var) for index, var in here]
            model.Add(sum(request.cpu * var for request, var in requests) <= node.cpu)
            model.Add(sum(request.memory * var for request, var in requests) <= node.memory)
            disks = [(self.instances[index].service.resources.disk, var) for index, var in here
                     if self.instances[index].service.resources.disk]
            if disks:
                # Disk volumes on the node's data filesystem (plugins/disk.py: a node that did not report it is no
                # candidate, so its size here is a number).
                model.Add(sum(size * var for size, var in disks) <= (node.disk or 0))
            for port in sorted({port for request, _var in requests for port in request.ports}):
                model.Add(sum(var for request, var in requests if port in request.ports) <= 1)
            dynamic = [(len(self.instances[index].service.dynamic_ports), var) for index, var in here
                       if self.instances[index].service.dynamic_ports]
            if dynamic:
                # A dynamic port needs one free host port of the range on its node (static ports lie outside it).
                model.Add(sum(count * var for count, var in dynamic)
                          <= problem.port_range[1] - problem.port_range[0] + 1)
            by_service = {}
            for index, var in here:
                by_service.setdefault(self.instances[index].service.name, []).append(var)
            present = {}
            for service, members in by_service.items():
                present[service] = model.NewBoolVar("p_%s_%a" % (service, name))
                for var in members:
                    model.AddImplication(var, present[service])
            # In the order of the sorted pairs, as before: the model, and so CP-SAT's search, stays the same.
            for first, second in sorted((first, second) for first in by_service for second in partners.get(first, ())
                                        if second in present):
                if first == second:
                    model.Add(sum(by_service[first]) <= 1)
                else:
                    model.Add(present[first] + present[second] <= 1)
            for position, device in enumerate(node.gpus):
                takes = gpu_takes.get((name, position))
                if takes:
                    model.Add(sum(take * var for var, take in takes) <= device.memory)
                cores = gpu_cores.get((name, position))
                if cores:
                    model.Add(sum(share * var for var, share in cores) <= MAX_GPU_CORES)
            for position, device in enumerate(node.nvme):
                takes = nvme_takes.get((name, position))
                if takes:
                    model.Add(sum(size * var for var, size in takes) <= device.size)
        for (name, numa_node), flows in sorted(self.numa_flow.items()):
            model.Add(sum(flows) <= numa_capacity(problem.nodes[name], numa_node))
        self._spread()
        self._quotas()

    def _spread(self):
        """topology_spread DoNotSchedule: per constraint, a variable at most every eligible domain's count of the
        service's instances, and every domain's count at most ``max_skew`` above it (so the largest minus the
        smallest is at most ``max_skew``, as plugins/topology_spread.py's Permit checks)."""
        model, problem = self.model, self.problem
        by_service = {}
        for (index, node_name), var in sorted(self.place.items(), key=lambda item: item[0]):
            by_service.setdefault(self.instances[index].service.name, []).append((node_name, var))
        for name in sorted(by_service):
            service = problem.services[name]
            for position, constraint in enumerate(service.topology_spread):
                if not constraint.required:
                    continue
                domain_of, eligible = spread_domains(problem, service, constraint)
                if not eligible:
                    continue
                counts = {domain: [] for domain in eligible}
                for node_name, var in by_service[name]:
                    domain = domain_of.get(node_name)
                    if domain is not None:
                        counts.setdefault(domain, []).append(var)
                least = model.NewIntVar(0, service.replicas, "s_%a_%d" % (name, position))
                for domain in eligible:
                    model.Add(least <= sum(counts[domain]))
                for domain in sorted(counts, key=str):
                    if counts[domain]:
                        model.Add(sum(counts[domain]) - least <= constraint.max_skew)

    def _quota_usage(self, group):
        """Per dimension, the usage of a quota group (None: the services outside any group) as a linear expression."""
        members = [index for index, instance in enumerate(self.instances) if instance.service.quota == group]
        usage = dict.fromkeys(QUOTA_DIMENSIONS, 0)
        occupied = {}
        for index in members:
            service = self.instances[index].service
            placed = self.placed.get(index, 1)      # a preemptible instance counts only when placed
            usage["cpu"] += self.requests[service.name].cpu * placed
            usage["memory"] += self.requests[service.name].memory * placed
            if service.resources.nvme is not None:
                usage["nvme"] += service.resources.nvme.size * placed
        takes = {}
        for (index, node_name, position), (var, take) in self.gpu.items():
            if self.instances[index].service.quota == group:
                usage["gpu_memory"] += take * var
                key = (node_name, position)
                if key not in occupied:
                    occupied[key] = self.model.NewBoolVar("q_%a_%a_%d" % (group, node_name, position))
                self.model.AddImplication(var, occupied[key])
                takes.setdefault(key, []).append((var, take))
        for (node_name, position), members in takes.items():
            # Redundant with the device's own capacity, but it ties memory to occupied devices for the solver's bounds.
            memory = self.problem.nodes[node_name].gpus[position].memory
            self.model.Add(sum(take * var for var, take in members) <= memory * occupied[node_name, position])
        usage["gpu"] = sum(occupied.values())
        return usage

    def _quotas(self):
        model, problem = self.model, self.problem
        usage = {group: self._quota_usage(group) for group in problem.quotas}
        for group, quota in problem.quotas.items():
            for dimension, limit in quota.max.items():
                model.Add(usage[group][dimension] <= limit)
        reserved = sorted({dimension for quota in problem.quotas.values() for dimension in quota.min})
        if not reserved:
            return
        capacity = ClusterState(problem).capacity
        outside = self._quota_usage(None)
        for dimension in reserved:
            total = [outside[dimension]]
            for group, quota in problem.quotas.items():
                held = model.NewIntVar(0, max(capacity[dimension], quota.min.get(dimension, 0)) + 1,
                                       "m_%a_%s" % (group, dimension))
                model.Add(held >= quota.min.get(dimension, 0))
                model.Add(held >= usage[group][dimension])
                total.append(held)
            model.Add(sum(total) <= capacity[dimension])

    def _objective(self):
        model = self.model
        moves = []
        dropped = {}            # priority -> the running preemptible instances of that priority left out
        for index, instance in enumerate(self.instances):
            previous = instance.previous_node()
            placed = self.placed.get(index, 1)
            if index in self.placed:
                dropped.setdefault(instance.service.priority, []).append(1 - placed)
            if previous is None or instance.service.stateful:
                continue
            stay = self.place.get((index, previous))
            moves.append(placed if stay is None else placed - stay)
        used_nodes, touched = self._in_use()
        rebound = self._rebound()
        gpus_weight = 1
        nodes_weight = len(touched) + 1
        rebound_weight = nodes_weight * (len(used_nodes) + 1)
        moves_weight = rebound_weight * (len(rebound) + 1)
        # Evictions by priority, lowest first: one eviction of a priority weighs more than all those of the lower
        # ones together, so a running instance is never evicted to keep lower-priority ones (greedy's rule; counting
        # evictions alone evicted one of priority 2 to keep two of priority 1).
        weight = moves_weight * (len(moves) + 1)
        evictions = 0
        for priority in sorted(dropped):
            evictions += weight * sum(dropped[priority])
            weight *= len(dropped[priority]) + 1
        if weight > _MAX_WEIGHT:
            self.too_large = "the objective's weights (evictions per priority, moves, nodes, GPUs) exceed 64 bits"
            return
        model.Minimize(evictions + moves_weight * sum(moves) + rebound_weight * sum(rebound) + nodes_weight * sum(used_nodes)
                       + gpus_weight * sum(touched))

    def _in_use(self):
        """Indicators of what the plan occupies, as (nodes, GPU devices): each is 1 when any instance is on it."""
        model = self.model
        used_nodes = []
        for name in self.problem.nodes:
            here = self._on(name)
            if here:
                used = model.NewBoolVar("u_%a" % name)
                for _index, var in here:
                    model.AddImplication(var, used)
                used_nodes.append(used)
        devices = {}
        for (_index, node_name, position), (var, _take) in self.gpu.items():
            devices.setdefault((node_name, position), []).append(var)
        touched = []
        for (node_name, position), members in sorted(devices.items()):
            busy = model.NewBoolVar("t_%a_%d" % (node_name, position))
            for var in members:
                model.AddImplication(var, busy)
            touched.append(busy)
        return used_nodes, touched

    def _rebound(self):
        """Device choices that would restart an instance that stays on its node: GPUs or an NVMe device it did not use."""
        penalties = []
        for (index, node_name, position), (var, _take) in self.gpu.items():
            previous = self.instances[index].previous
            if previous is not None and previous.node == node_name and \
                    self.problem.nodes[node_name].gpus[position].uuid not in previous.gpu_uuids:
                penalties.append(var)
        for (index, node_name, position), var in self.nvme.items():
            previous = self.instances[index].previous
            if previous is not None and previous.node == node_name and previous.nvme is not None and \
                    self.problem.nodes[node_name].nvme[position].name != previous.nvme:
                penalties.append(var)
        return penalties

    def hint(self, placements):
        """Start the search from a known plan (greedy's)."""
        self.model.ClearHints()
        # The variables by instance, once: scanning every variable per placement was quadratic (near capacity,
        # 566 instances on 316 nodes, 33 s of the plan's 55).
        places, gpus = {}, {}
        for (index, node), var in self.place.items():
            places.setdefault(index, []).append((node, var))
        for (index, node, position), (var, _take) in self.gpu.items():
            gpus.setdefault(index, []).append((node, position, var))
        for placement in placements:
            index = self._index.get(placement.instance.name)
            if index is None:
                continue        # new preemptible work: filled in after the solver
            for node, var in places.get(index, ()):
                self.model.AddHint(var, node == placement.node)
            claimed = {claim.device.uuid for claim in placement.gpus}
            for node, position, var in gpus.get(index, ()):
                self.model.AddHint(var, node == placement.node and self.problem.nodes[node].gpus[position].uuid in claimed)

    def keep(self, solver):
        """Carry the solution found so far into the next search as its hint."""
        self.model.ClearHints()
        for var in list(self.place.values()) + [entry[0] for entry in self.gpu.values()] + list(self.nvme.values()):
            self.model.AddHint(var, bool(solver.Value(var)))

    def extract(self, solver):
        """The placements of the solution, and a cluster state holding their usage for the binder."""
        cluster = ClusterState(self.problem)
        placements = []
        chosen = {index: node for (index, node), var in self.place.items() if solver.Value(var)}
        for index, instance in enumerate(self.instances):
            name = chosen.get(index)
            if name is None:
                continue        # a preemptible instance left out
            node = cluster.nodes[name].node
            claims = []
            for position in range(len(node.gpus)):
                entry = self.gpu.get((index, name, position))
                if entry is not None and solver.Value(entry[0]):
                    claims.append(GPUClaim(node.gpus[position], entry[1]))
            device, size = None, 0
            for position in range(len(node.nvme)):
                var = self.nvme.get((index, name, position))
                if var is not None and solver.Value(var):
                    device, size = node.nvme[position], instance.service.resources.nvme.size
            placement = Placement(instance, name, tuple(sorted(claims, key=lambda claim: claim.device.index)), device, size)
            _apply(cluster, placement, self.requests[instance.service.name])
            placements.append(placement)
        return placements, cluster


def _kept_gpus(instance, name, node, positions, request):
    """The positions of the GPUs a stateful instance keeps on node ``name``: its previous GPUs, when it ran there and they
    are all among the devices that fit the request (``positions``), as many as it asks; else None."""
    previous = instance.previous
    if not instance.service.stateful or previous is None or previous.node != name or not previous.gpu_uuids:
        return None
    kept = {position for position in positions if node.gpus[position].uuid in previous.gpu_uuids}
    return kept if len(kept) == request.count == len(set(previous.gpu_uuids)) else None


def _conflicting_services(problem):
    """Pairs of services whose instances may not share a node (the AntiAffinity plugin's rule, which is symmetric)."""
    services = problem.services
    conflicts = service_conflicts(services)
    # Through the services each pod holds, not over every pair of services: 10,000 services were 1e8 pairs.
    holders = {}
    for name, service in services.items():
        for member in pod_requests(services, service).services:
            holders.setdefault(member, set()).add(name)
    return sorted({(first, second) for first in services for avoided in conflicts[first]
                   for second in holders.get(avoided, ()) if first <= second})
