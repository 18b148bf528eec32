# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rebalance (defragment): pack stateless instances onto fewer nodes and leave more whole GPUs free.

Over time scaling and failures leave stateless instances spread thinly: many GPUs hold one small
instance each, nodes run one instance. Kubernetes leaves that to a descheduler (Koordinator's
"LowNodeLoad", the descheduler's "HighNodeUtilization"); here the exact solver does it on demand:

1. The current plan: ``schedule`` with every instance where it runs (the normal plan; it moves
   nothing unless the gang no longer fits as it is).
2. The same CP-SAT model the exact solver builds for a plan (``exact._Model``: every filter, CPU,
   memory, ports, anti-affinity, GPU memory per device, NVMe, quotas; stateful instances pinned),
   with at most ``max_moves`` disruptions and another objective, lexicographic: fewest GPUs touched
   (most whole GPUs free), then fewest nodes used (most nodes free), then fewest disruptions.
   A disruption is a stateless instance that moves to another node, or that stays but would get other
   GPUs or another NVMe device (a restart too). Stateful instances never move.
3. The result is a plan like any other (``placements``, ``moves``, ``usage``; path ``rebalance``)
   plus ``rebalance``: the gain (whole GPUs and nodes freed), before and after, and the solver's
   verdict. A plan that gains nothing is never taken: the current one stands, with no moves.

Plain Python; no Ansible import.
"""

from __future__ import annotations

import dataclasses
import re
import time

from ansible_collections.gangplank.platform.plugins.module_utils.messages import show
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler import exact
from ansible_collections.gangplank.platform.plugins.module_utils.problem_format import MAX_GPU_CORES
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.model import QUOTA_DIMENSIONS, GPUClaim, Placement, gpu_overhead
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.extender import every_node_left_out
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.profile import PLUGINS, WEIGHTS
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.problem import ProblemError, parse_problem
from ansible_collections.gangplank.platform.plugins.module_utils.quantity import BLANKS
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.ranks import ranks
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.scheduler import (
    check_class_work, framework_for, schedule_with, with_extenders)
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.state import ClusterState

REBALANCE = "rebalance"
DEFAULT_MAX_MOVES = 3           # small: a rebalance is a disruption, taken a few instances at a time
MAX_MOVES = 100000              # as many as there may be instances
# Instance-node pairs the model covers at most: above them it covers the most fragmented part of the
# cluster (benchmarks/rebalance_benchmark.py: the whole 50 nodes x 1,000 instances did not finish presolving
# within 30 s on a busy 2-CPU machine; a part of this size improves within seconds).
PART_PAIRS = 5000
DEFAULT_SECONDS = 30.0          # CP-SAT's time for the rebalance model: an operator's on-demand run, not a plan on every deploy


_DIGITS = re.compile(r"[0-9]{1,%d}" % len(str(MAX_MOVES)))


def max_moves_value(value):
    """``value`` as max_moves: an int as is, a string of ASCII digits (``-e max_moves=2`` gives "2") as its int; other
    values as they are, for max_moves_error to name. str.isdigit() also accepts "²", which int() refuses."""
    if isinstance(value, str) and _DIGITS.fullmatch(value.strip(BLANKS)):
        return int(value.strip(BLANKS))
    return value


def max_moves_error(value):
    """Why ``value`` is not a valid max_moves, or ""."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_MOVES:
        return "got %s; expected a whole number from 0 to %d" % (show(value), MAX_MOVES)
    return ""


def fragmentation(usage):
    """What a plan's usage leaves free: whole GPUs (nobody uses them), free nodes (no instance), and GPUs
    used in part (memory left that only small requests can use)."""
    gpus = [gpu for node in usage.values() for gpu in node["gpus"]]
    return {
        "whole_free_gpus": sum(1 for gpu in gpus if gpu["used"] == 0),
        "free_nodes": sum(1 for node in usage.values() if not node["instances"]),
        "partly_used_gpus": sum(1 for gpu in gpus if 0 < gpu["used"] < gpu["total"]),
        "gpus": len(gpus),
        "nodes": len(usage),
    }


def _restarted(result, problem):
    """Stateless instances that stay on their node but would get other GPUs or another NVMe device."""
    restarted = []
    for name, placement in result["placements"].items():
        previous = problem.previous.get(name)
        if previous is None or previous.node != placement["node"]:
            continue
        gpus = tuple(sorted(claim["uuid"] for claim in placement["gpus"]))
        nvme = (placement["nvme"] or {}).get("name")
        if (previous.gpu_uuids and gpus != tuple(sorted(previous.gpu_uuids))) or (
                previous.nvme is not None and nvme != previous.nvme):
            restarted.append(name)
    return restarted


class _RebalanceModel(exact._Model):  # pylint: disable=protected-access
    """The exact solver's model of the problem with the rebalance objective and a budget of disruptions."""

    def __init__(self, problem, framework, instances=None, max_moves=DEFAULT_MAX_MOVES, outside=None, capacity=None):
        self.max_moves = max_moves
        # A model of a part of the cluster: what the instances outside it hold, per quota group (None: no group)
        # and dimension, and the whole cluster's capacity, so that quotas still count the whole cluster.
        self.outside = outside or {}
        self.capacity = capacity
        super().__init__(problem, framework, instances)

    def _quotas(self):
        """exact._Model's quota constraints, plus what the instances outside the modelled part hold."""
        model, problem = self.model, self.problem
        outside = self.outside
        usage = {group: self._quota_usage(group) for group in problem.quotas}
        for group, quota in problem.quotas.items():
            for dimension, limit in quota.max.items():
                model.Add(usage[group][dimension] + outside.get(group, {}).get(dimension, 0) <= limit)
        reserved = sorted({dimension for quota in problem.quotas.values() for dimension in quota.min})
        if not reserved:
            return
        capacity = self.capacity or ClusterState(problem).capacity
        ungrouped = self._quota_usage(None)
        for dimension in reserved:
            total = [ungrouped[dimension] + outside.get(None, {}).get(dimension, 0)]
            for group, quota in problem.quotas.items():
                held = model.NewIntVar(0, max(capacity[dimension], quota.min.get(dimension, 0)) + 1,
                                       "m_%a_%s" % (group, dimension))
                model.Add(held >= quota.min.get(dimension, 0))
                model.Add(held >= usage[group][dimension] + outside.get(group, {}).get(dimension, 0))
                total.append(held)
            model.Add(sum(total) <= capacity[dimension])

    def index_of(self, name):
        """The position of an instance in the model."""
        return self._index[name]

    def hint(self, placements):
        """Start from a whole plan: nodes, GPUs and NVMe devices (exact._Model.hint leaves NVMe out, and goes
        over every variable once per placement, which at 1,000 instances takes seconds)."""
        self.model.ClearHints()
        where = {}
        for placement in placements:
            if placement.instance.name not in self._index:
                continue
            where[self._index[placement.instance.name]] = (
                placement.node, {claim.device.uuid for claim in placement.gpus}, placement.nvme.name if placement.nvme else None)
        for (index, node), var in self.place.items():
            if index in where:
                self.model.AddHint(var, node == where[index][0])
        for (index, node, position), (var, _take) in self.gpu.items():
            if index in where:
                self.model.AddHint(var, node == where[index][0] and self.problem.nodes[node].gpus[position].uuid in where[index][1])
        for (index, node, position), var in self.nvme.items():
            if index in where:
                self.model.AddHint(var, node == where[index][0] and self.problem.nodes[node].nvme[position].name == where[index][2])

    def _objective(self):
        model, problem = self.model, self.problem
        # A rebalance evicts nothing: every preemptible instance of the current plan stays placed.
        for placed in getattr(self, "placed", {}).values():
            if not isinstance(placed, int):
                model.Add(placed == 1)
        disrupted = []
        for index, instance in enumerate(self.instances):
            previous = instance.previous_node()
            if previous is None or instance.service.stateful:
                continue
            stay = self.place.get((index, previous))
            disrupted.append(1 if stay is None else 1 - stay)
        restarts = {}
        for (index, node_name, position), (var, _take) in self.gpu.items():
            previous = self.instances[index].previous
            if previous is not None and previous.node == node_name and previous.gpu_uuids and \
                    problem.nodes[node_name].gpus[position].uuid not in previous.gpu_uuids:
                restarts.setdefault(index, []).append(var)
        for (index, node_name, position), var in self.nvme.items():
            previous = self.instances[index].previous
            if previous is not None and previous.node == node_name and previous.nvme is not None and \
                    problem.nodes[node_name].nvme[position].name != previous.nvme:
                restarts.setdefault(index, []).append(var)
        for index, members in sorted(restarts.items()):
            restart = model.NewBoolVar("r_%d" % index)
            for var in members:
                model.AddImplication(var, restart)
            disrupted.append(restart)
        model.Add(sum(disrupted) <= self.max_moves)
        used_nodes, touched = self._in_use()
        disrupted_weight = 1
        nodes_weight = len(disrupted) + 1
        gpus_weight = nodes_weight * (len(used_nodes) + 1)
        model.Minimize(gpus_weight * sum(touched) + nodes_weight * sum(used_nodes) + disrupted_weight * sum(disrupted))


def rebalance(data, max_moves=DEFAULT_MAX_MOVES, exact_seconds=DEFAULT_SECONDS, plugins=PLUGINS, profile=None):
    """A rebalance plan for a problem mapping whose ``previous`` is the running placement; ``profile`` a parsed
    scheduler profile (scheduler/profiles.py) or None: its filters bind the rebalance as they bind a plan.

    Raises ProblemError for a malformed problem or max_moves. The result is a plan result
    (docs/problem-format.md) with ``path`` ``rebalance`` when it moves anything, and ``rebalance``:
    {max_moves, moves, current_moves, restarts, before, after, gain, status, seconds, reason}.
    """
    started = time.monotonic()
    error = max_moves_error(max_moves)
    if error:
        raise ProblemError([("max_moves", error)])
    if isinstance(exact_seconds, bool) or not isinstance(exact_seconds, (int, float)) or not 0 <= exact_seconds <= 3600:
        raise ProblemError([("exact_seconds", "got %s; expected a number of seconds from 0 to 3600" % show(exact_seconds))])
    problem = parse_problem(data)
    check_class_work(problem)
    # The profile's framework: its filters (a user filter, a disabled NodeSelector) decide where the model may put
    # an instance, as they decide it for the current plan; otherwise the next plan would move the instances back.
    # One framework for the current plan and the rebalance: a profile's HTTP extenders are asked once.
    framework = framework_for(problem, plugins, WEIGHTS, profile)
    problem = every_node_left_out(framework, problem)
    current = schedule_with(framework, problem, exact_seconds)
    if not current["feasible"]:
        current["rebalance"] = {"max_moves": max_moves, "status": "not_run",
                                "reason": "the current catalog does not fit the cluster, so there is nothing to rebalance"}
        current["seconds"] = round(time.monotonic() - started, 3)
        return with_extenders(framework, current)
    before = fragmentation(current["usage"])
    report = {"max_moves": max_moves, "before": before, "after": before,
              "gain": {"whole_gpus_freed": 0, "nodes_freed": 0}, "moves": len(current["moves"]),
              # Moves the current plan itself makes (the catalog no longer fits as it runs): not the rebalance's,
              # so not bounded by max_moves; said apart so that "moves 1" with max_moves 0 is no broken bound.
              "current_moves": len(current["moves"]),
              "restarts": len(_restarted(current, problem))}
    report["current_restarts"] = report["restarts"]         # the same: the current plan's own restarts
    found = _solve(problem, framework, max_moves, exact_seconds, current)
    report.update(status=found.status, seconds=round(found.seconds, 3))
    if found.placements is not None and found.reason:
        report["scope"] = found.reason
    result = current
    if found.placements is not None:
        better = framework.run_bind(found.placements, found.cluster)
        after = fragmentation(better["usage"])
        gain = {"whole_gpus_freed": after["whole_free_gpus"] - before["whole_free_gpus"],
                "nodes_freed": after["free_nodes"] - before["free_nodes"]}
        if (gain["whole_gpus_freed"], gain["nodes_freed"]) > (0, 0):
            result = {"feasible": True, "path": REBALANCE}
            result.update(better)
            for key in ("preempted", "evictions"):      # what the current plan leaves out stays out
                if key in current:
                    result[key] = current[key]
            result["ranks"] = ranks(problem.services)
            report.update(after=after, gain=gain, moves=len(better["moves"]),
                          restarts=len(_restarted(result, problem)))
        else:
            report["reason"] = "no plan within %d move(s) frees a whole GPU or a node" % max_moves
    else:
        report["reason"] = found.reason
    result["rebalance"] = report
    result["seconds"] = round(time.monotonic() - started, 3)
    return with_extenders(framework, result)


def _part(problem, current):
    """The nodes the model covers, and a description when that is not the whole cluster.

    The whole problem when it has at most PART_PAIRS instance-node pairs. Otherwise the most fragmented
    nodes: those with the most GPUs used in part first (the GPUs to drain and the room to fill), then
    the fewest instances (cheapest to empty), as many as keep nodes x their instances within PART_PAIRS.
    """
    usage = current["usage"]
    total = len(current["placements"])
    if len(problem.nodes) * total <= PART_PAIRS:
        return list(problem.nodes), None

    def fragmented_first(name):
        partly = sum(1 for gpu in usage[name]["gpus"] if 0 < gpu["used"] < gpu["total"])
        return (-partly, len(usage[name]["instances"]), name)
    chosen, instances = [], 0
    for name in sorted(problem.nodes, key=fragmented_first):
        here = len(usage[name]["instances"])
        if (len(chosen) + 1) * (instances + here) > PART_PAIRS:
            continue
        chosen.append(name)
        instances += here
    return sorted(chosen), "the %d most fragmented of %d nodes, with their %d of %d instances" % (
        len(chosen), len(problem.nodes), instances, total)


def _quota_usage_of(problem, placements):
    """Per quota group (None: no group) and dimension, what ``placements`` hold (as exact._Model counts it)."""
    usage = {}
    devices = {}
    for placement in placements:
        service = placement.instance.service
        group = usage.setdefault(service.quota, dict.fromkeys(QUOTA_DIMENSIONS, 0))
        request = problem.requests()[service.name]
        group["cpu"] += request.cpu
        group["memory"] += request.memory
        group["nvme"] += placement.nvme_size if placement.nvme is not None else 0
        for claim in placement.gpus:
            group["gpu_memory"] += claim.memory
            devices.setdefault(service.quota, set()).add((placement.node, claim.device.uuid))
    for quota, occupied in devices.items():
        usage[quota]["gpu"] = len(occupied)
    return usage


def _solve(problem, framework, max_moves, seconds, current):
    """An exact.ExactResult for the rebalance model, started from the current plan."""
    began = time.monotonic()
    if not exact.available():
        return exact.ExactResult(exact.UNAVAILABLE, 0.0, reason="rebalance needs OR-Tools (pip install ortools)")
    if seconds <= 0:
        return exact.ExactResult(exact.SKIPPED, 0.0, reason="the exact solver is turned off (exact_seconds 0)")
    nodes, scope = _part(problem, current)
    on_part = set(nodes)
    current_placements = _current_placements(problem, current)
    inside = [placement for placement in current_placements if placement.node in on_part]
    outside = [placement for placement in current_placements if placement.node not in on_part]
    part = dataclasses.replace(problem, nodes={name: problem.nodes[name] for name in nodes}) if scope else problem
    instances = sorted((placement.instance for placement in inside), key=lambda instance: (instance.service.name, instance.ordinal))
    # The instances the current plan places, and only them: preempted work stays out, as in the current plan.
    builder = _RebalanceModel(part, framework, instances, max_moves,
                              _quota_usage_of(problem, outside), ClusterState(problem).capacity)
    if builder.reason is not None:
        return exact.ExactResult(exact.INFEASIBLE, time.monotonic() - began, reason=builder.reason)
    invalid = exact._unrepresentable(builder)  # pylint: disable=protected-access
    if invalid:
        return exact.ExactResult(exact.SKIPPED, time.monotonic() - began, reason=invalid)
    builder.hint(inside)
    status, solver = _search(builder, seconds, began, _drained(builder, inside, max_moves))
    elapsed = time.monotonic() - began
    if status not in (exact.cp_model.OPTIMAL, exact.cp_model.FEASIBLE):
        return exact.ExactResult(exact.TIMEOUT, elapsed, reason="no rebalance plan found within %g s" % seconds)
    placements, cluster = builder.extract(solver)
    if scope:
        placements = outside + placements
        cluster = ClusterState(problem)
        for placement in placements:
            exact._apply(cluster, placement, builder.requests[placement.instance.service.name])  # pylint: disable=protected-access
    # Optimal only within the part when the model covers a part.
    verdict = exact.OPTIMAL if status == exact.cp_model.OPTIMAL and not scope else exact.FEASIBLE
    return exact.ExactResult(verdict, elapsed, placements, cluster, reason=scope)


def _solver(seconds, workers, **parameters):
    solver = exact.cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(max(seconds, 0.001))
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = 0
    for name, value in parameters.items():
        setattr(solver.parameters, name, value)
    return solver


def _search(builder, seconds, began, drained):
    """CP-SAT in steps, each starting from the best plan so far.

    1. The current plan, completed by a search with the hint fixed: a plan to improve on within a second,
       even where the whole model would take CP-SAT longer than the limit to find any plan by itself.
    2. The same with ``drained`` (a greedy drain of the emptiest GPUs, ``_drained``) when there is one: it
       is taken when CP-SAT finds it valid, and it gives the search a plan that already frees something.
    3. One worker with a fixed seed for the rest of the limit, without symmetry detection (which at
       50 nodes / 1,000 instances takes seconds of presolve). One worker searches the same way every
       time, and on a busy controller of 2 CPUs it improved on the plan where 4 and 8 workers found
       nothing within the limit (benchmarks/README.md, "Rebalance benchmark").
    """
    model = builder.model
    fixed = _solver(seconds - (time.monotonic() - began), 1, fix_variables_to_their_hinted_value=True)
    status = fixed.Solve(model)
    if status not in (exact.cp_model.OPTIMAL, exact.cp_model.FEASIBLE):
        return status, fixed
    best = (exact.cp_model.FEASIBLE, fixed)     # optimal only with everything fixed: a plan, not the best one
    if drained:
        builder.hint(drained)
        trial = _solver(max(0.05, seconds - (time.monotonic() - began)), 1, fix_variables_to_their_hinted_value=True)
        status = trial.Solve(model)
        if status in (exact.cp_model.OPTIMAL, exact.cp_model.FEASIBLE) and trial.ObjectiveValue() < fixed.ObjectiveValue():
            best = (exact.cp_model.FEASIBLE, trial)
    builder.keep(best[1])
    left = seconds - (time.monotonic() - began)
    if left > 0.05:
        solver = _solver(left, 1, symmetry_level=0)
        status = solver.Solve(model)
        if status in (exact.cp_model.OPTIMAL, exact.cp_model.FEASIBLE) and (
                status == exact.cp_model.OPTIMAL or solver.ObjectiveValue() <= best[1].ObjectiveValue()):
            best = (status, solver)
    return best


def _drained(builder, placements, max_moves):
    """A greedy start for the search: empty the GPUs with the fewest instances, moving each of their instances to
    the fullest other GPU it may use that has room (best fit; node CPU, memory, host ports and an NVMe device
    checked), within max_moves. Only stateless instances of one GPU with a memory request and no anti-affinity
    are moved. CP-SAT takes the result only if it is valid. The placements with the moves applied, or None."""
    return _Drain(builder, placements).run(max_moves)


def _drain_movable(service):
    """Whether _drained may move an instance of ``service``: stateless, one GPU with a memory request, no
    anti-affinity."""
    gpu = service.resources.gpu
    return (not service.stateful and not service.anti_affinity and gpu is not None and gpu.count == 1
            and gpu.memory is not None)


class _Drain:
    """_drained's greedy pass: what is free per GPU, node (CPU, memory), NVMe device and node's host ports, and who
    uses each GPU, as the moves change them."""

    def __init__(self, builder, placements):
        self.builder = builder
        self.problem = problem = builder.problem
        self.placements = placements
        self.by_name = {placement.instance.name: placement for placement in placements}
        # Per GPU: free memory (a share's MPS server counted, model.gpu_overhead) and the cores its shares ask.
        self.state = {"gpu": {}, "cores": {}, "node": {}, "nvme": {}, "ports": {}}
        self.users = {}         # (node, GPU uuid) -> names of the instances on it
        for name, node in problem.nodes.items():
            # CPU, memory and the host ports of the dynamic port range still free on the node.
            self.state["node"][name] = [node.cpu, node.memory, problem.port_range[1] - problem.port_range[0] + 1]
            self.state["ports"][name] = set()
            for device in node.gpus:
                self.state["gpu"][name, device.uuid] = device.memory
                self.state["cores"][name, device.uuid] = 0
            for device in node.nvme:
                self.state["nvme"][name, device.name] = device.size
        for placement in placements:
            self._take(self.state, placement)
        self.positions = {(name, device.uuid): position for name, node in problem.nodes.items()
                          for position, device in enumerate(node.gpus)}

    def _take(self, state, placement):
        """Count ``placement`` as using its node, NVMe device and GPUs in ``state``."""
        request = self.builder.requests[placement.instance.service.name]
        state["node"][placement.node][0] -= request.cpu
        state["node"][placement.node][1] -= request.memory
        state["node"][placement.node][2] -= len(placement.instance.service.dynamic_ports)
        state["ports"][placement.node].update(request.ports)
        if placement.nvme is not None:
            state["nvme"][placement.node, placement.nvme.name] -= placement.nvme_size
        request = placement.instance.service.resources.gpu
        for claim in placement.gpus:
            state["gpu"][placement.node, claim.device.uuid] -= claim.memory + gpu_overhead(self.problem.nodes[placement.node], request)
            state["cores"][placement.node, claim.device.uuid] += request.cores or 0
            self.users.setdefault((placement.node, claim.device.uuid), []).append(placement.instance.name)

    def run(self, max_moves):
        left, drained = max_moves, set()
        users = self.users
        for source in sorted(users, key=lambda key: (len(users[key]), -self.state["gpu"][key], key)):
            names = users[source]
            if not names or len(names) > left or \
                    not all(_drain_movable(self.by_name[name].instance.service) for name in names):
                continue
            trial = {kind: {key: (list(value) if isinstance(value, list) else set(value) if isinstance(value, set)
                                  else value) for key, value in values.items()} for kind, values in self.state.items()}
            moved = self._moves_off(trial, source, names, drained)
            if moved is None:
                continue
            self._commit(trial, source, moved)
            drained.add(source)
            left -= len(names)
        if left == max_moves:
            return None
        return [self.by_name[placement.instance.name] for placement in self.placements]

    def _moves_off(self, trial, source, names, drained):
        """Each instance of ``names`` on the fullest other GPU that takes it (GPUs already drained and unused ones
        left out), applied to ``trial``: name -> new placement, or None when one of them fits on none."""
        moved = {}
        for name in names:
            placement = self.by_name[name]
            targets = sorted((key for key in trial["gpu"]
                              if key != source and key not in drained and self.users.get(key)),
                             key=lambda key: (trial["gpu"][key], key))
            for key in targets:
                result = self._place(trial, placement, key)
                if result:
                    moved[name] = result
                    break
            else:
                return None
        return moved

    def _commit(self, trial, source, moved):
        """Keep the moves off ``source``: what they free on their old nodes is given back; ``trial`` becomes the
        state."""
        for name, placement in moved.items():
            old = self.by_name[name]
            if old.node != placement.node:     # what it frees on its old node
                request = self.builder.requests[old.instance.service.name]
                trial["node"][old.node][0] += request.cpu
                trial["node"][old.node][1] += request.memory
                trial["node"][old.node][2] += len(old.instance.service.dynamic_ports)
                trial["ports"][old.node].difference_update(request.ports)
                if old.nvme is not None:
                    trial["nvme"][old.node, old.nvme.name] += old.nvme_size
            gpu = old.instance.service.resources.gpu
            trial["gpu"][source] += old.gpus[0].memory + gpu_overhead(self.problem.nodes[old.node], gpu)
            trial["cores"][source] -= gpu.cores or 0
            self.by_name[name] = placement
            self.users[placement.node, placement.gpus[0].device.uuid].append(name)
        self.state = trial
        self.users[source] = []

    def _nvme_on(self, trial, placement, node_name):
        """The NVMe device an instance would use on ``node_name`` (its own when it stays), or False when none fits."""
        request = placement.instance.service.resources.nvme
        if request is None:
            return None
        if node_name == placement.node:
            return placement.nvme
        fits = [device for device in self.problem.nodes[node_name].nvme
                if request.label in device.labels and trial["nvme"][node_name, device.name] >= request.size]
        return min(fits, key=lambda device: (trial["nvme"][node_name, device.name], device.name)) if fits else False

    def _place(self, trial, placement, key):
        """Move ``placement`` onto GPU ``key`` in ``trial``; False when it does not fit."""
        builder = self.builder
        memory = placement.gpus[0].memory
        request = builder.requests[placement.instance.service.name]
        node_name = key[0]
        gpu = placement.instance.service.resources.gpu
        taken = memory + gpu_overhead(self.problem.nodes[node_name], gpu)
        if trial["gpu"][key] < taken or trial["cores"][key] + (gpu.cores or 0) > MAX_GPU_CORES:
            return False
        if (builder.index_of(placement.instance.name), node_name, self.positions[key]) not in builder.gpu:
            return False
        nvme = self._nvme_on(trial, placement, node_name)
        if nvme is False:
            return False
        if node_name != placement.node:
            dynamic = len(placement.instance.service.dynamic_ports)
            if trial["node"][node_name][0] < request.cpu or trial["node"][node_name][1] < request.memory or \
                    trial["node"][node_name][2] < dynamic or trial["ports"][node_name] & set(request.ports):
                return False
            trial["node"][node_name][0] -= request.cpu
            trial["node"][node_name][1] -= request.memory
            trial["node"][node_name][2] -= dynamic
            trial["ports"][node_name].update(request.ports)
            if nvme is not None:
                trial["nvme"][node_name, nvme.name] -= placement.nvme_size
        trial["gpu"][key] -= taken
        trial["cores"][key] += gpu.cores or 0
        device = self.problem.nodes[node_name].gpus[self.positions[key]]
        return dataclasses.replace(placement, node=node_name, gpus=(GPUClaim(device, memory),), nvme=nvme)


def _current_placements(problem, current):
    """The current plan as model Placements, for the solver's hint."""
    instances = {instance.name: instance for instance in problem.instances()}
    placements = []
    for name, entry in current["placements"].items():
        node = problem.nodes[entry["node"]]
        devices = {device.uuid: device for device in node.gpus}
        claims = tuple(GPUClaim(devices[claim["uuid"]], claim["memory"]) for claim in entry["gpus"])
        nvme = None
        if entry["nvme"]:
            nvme = next(device for device in node.nvme if device.name == entry["nvme"]["name"])
        placements.append(Placement(instances[name], entry["node"], claims, nvme, entry["nvme"]["size"] if nvme else 0))
    return placements


def describe(result):
    """The rebalance's gain as lines a person reads, shown before anything is done."""
    report = result.get("rebalance") or {}
    if "before" not in report:
        return ["rebalance: %s" % report.get("reason", "not run")]
    before, after, gain = report["before"], report["after"], report["gain"]
    lines = ["rebalance (at most %d move(s); solver %s in %.2f s): %d move(s), %d restart(s) in place" % (
        report["max_moves"], report["status"], report.get("seconds", 0.0), report["moves"], report["restarts"])]
    lines.append("  whole GPUs free: %d -> %d of %d (%+d)" % (
        before["whole_free_gpus"], after["whole_free_gpus"], after["gpus"], gain["whole_gpus_freed"]))
    lines.append("  nodes free:      %d -> %d of %d (%+d)" % (
        before["free_nodes"], after["free_nodes"], after["nodes"], gain["nodes_freed"]))
    lines.append("  GPUs used in part: %d -> %d" % (before["partly_used_gpus"], after["partly_used_gpus"]))
    if report.get("current_moves"):
        lines.append("  the current plan itself makes %d move(s) (the catalog does not fit as it runs): the plan's, "
                     "not the rebalance's, and made with or without it" % report["current_moves"])
    if report.get("scope"):
        lines.append("  solved over %s" % report["scope"])
    if report.get("reason"):
        lines.append("  nothing to do: %s" % report["reason"])
    return lines
