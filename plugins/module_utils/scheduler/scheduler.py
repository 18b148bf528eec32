# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gang scheduler: every instance placed at once, or none.

``plan(mapping) -> mapping`` is the one entry point: a problem in, a result out,
byte-identical for the same input. Pipeline per attempt:

1. QueueSort orders the instances: those that already run somewhere first (they
   are pinned to their node), then the heaviest first.
2. Each instance goes through PreFilter, Filter, Score (normalized, weighted),
   picks the best node (ties: node name) and Reserves it on the attempt's state.
3. An instance that fits nowhere gets kube's "0/N nodes are available: ..."
   diagnosis. A repair pass then tries to make room for it: one placed instance
   that may go elsewhere leaves its node (Unreserve) and is scheduled again.
   PostFilter may ask for a second attempt in which stateless instances may move.
4. Permit approves the gang only if every instance was placed; Bind writes the plan.

Speed: a node's score depends only on that node (see framework.py), and the
replicas of a service are scheduled one after another, so each service keeps a
heap of its feasible nodes by score. After a bind only the bound node is
rescored; filters whose answer depends on the whole cluster (quotas) can only
turn stricter, so the node on top of the heap is re-checked before use.

Where each part lives: one greedy attempt in attempt.py, the class heaps in
candidates.py, the "0/N nodes" message in diagnosis.py, the repair pass in
repair.py, the exact solver in exact.py; this file chains them (plan, schedule_with).
"""

from __future__ import annotations

import time

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.framework import Framework
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler import exact
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.attempt import Attempt
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.candidates import equivalence_key
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.model import Instance
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.anti_affinity import service_conflicts
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.default_binder import DefaultBinder
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.extender import (
    every_node_left_out, extender_report, left_out_report,
)
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.profile import PLUGINS, WEIGHTS
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.problem import ProblemError, parse_problem
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.ranks import ranks
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.state import ClusterState

GREEDY = "greedy"
GREEDY_WITH_MOVES = "greedy_with_moves"
EXACT = "exact"
# Seconds CP-SAT may search when the greedy pass cannot place the gang; 0 turns it off.
EXACT_SECONDS = 5.0
# Re-orderings tried when greedy fails and the exact solver cannot answer (_reordered); one stops once it has left
# REORDER_SLACK times the failed attempt's unplaced instances (plus REORDER_SLACK) unplaced.
ORDERINGS = ("whole_gpus_first", "constrained_first", "previous_order")
REORDER_SLACK = 2
# ... and only after an attempt that left at most this many unplaced, or this share of the gang (near misses: on the
# openb trace an infeasible gang near capacity leaves 1-2% unplaced, and trying the re-orderings tripled its cost).
REORDER_UNPLACED = 8
REORDER_SHARE = 0.005
# The counting proof's bound: node names compared across classes (_counted_proof).
PROOF_WORK = 20000000


# Scheduling classes (services with instances that differ in what decides where they may go: equivalence_key)
# times nodes: every class runs its static filters and scores on every node. 1,000 x 1,000 takes about 6 CPU
# seconds here, 1,224 x 1,224 about 9, 2,000 x 2,000 about 20 (benchmarks/fuzz_benchmark.py --worst-cases); a trace
# of 8,000 pods of 337 shapes on 1,213 nodes is 4e5.
MAX_CLASS_NODE_PAIRS = 1000000


def check_class_work(problem):
    """ProblemError when the scheduling classes times the nodes pass MAX_CLASS_NODE_PAIRS (refused before any is
    checked: each bound alone allows 10,000 x 10,000)."""
    conflicts = service_conflicts(problem.services)
    classes = {equivalence_key(problem, service, conflicts) for service in problem.services.values()
               if not service.sidecar and service.replicas > 0}
    if len(classes) * len(problem.nodes) > MAX_CLASS_NODE_PAIRS:
        raise ProblemError([("services", "%d scheduling classes (services that differ in requests, node_selector, "
                                         "tolerations, anti_affinity, quota or image) x %d nodes = %d pairs; expected at most %d"
                             % (len(classes), len(problem.nodes), len(classes) * len(problem.nodes), MAX_CLASS_NODE_PAIRS))])


def plan(data, plugins=PLUGINS, weights=None, exact_seconds=EXACT_SECONDS, profile=None):
    """Schedule a problem mapping; raises ProblemError when the problem is malformed or too much work
    (check_class_work). ``profile`` (a profiles.Profile) replaces ``plugins`` and ``weights``."""
    started = time.monotonic()
    problem = parse_problem(data)
    check_class_work(problem)
    result = schedule(problem, plugins, weights, exact_seconds, profile)
    # The only part of a result that differs between runs of the same problem.
    result["seconds"] = round(time.monotonic() - started, 3)
    return result


def schedule(problem, plugins=PLUGINS, weights=None, exact_seconds=EXACT_SECONDS, profile=None):
    framework = framework_for(problem, plugins, weights, profile)
    # An every-node instance whose node an HTTP extender refused is not made (kube: that DaemonSet pod stays pending).
    problem = every_node_left_out(framework, problem)
    return with_extenders(framework, schedule_with(framework, problem, exact_seconds))


def framework_for(problem, plugins=PLUGINS, weights=None, profile=None):
    """The framework that plans ``problem``: the profile's (profiles.Profile) when given, else ``plugins``."""
    if profile is not None:
        return Framework(problem, profile.plugins, profile.weights, profile.disabled, profile.config)
    return Framework(problem, plugins, WEIGHTS if weights is None else weights)


def with_extenders(framework, result):
    """``result`` with the framework's HTTP extender report added, when its profile has extenders."""
    extenders = extender_report(framework)
    if extenders is not None:
        # The calls, the time spent and the warnings of the profile's HTTP extenders (plugins/extender.py).
        result["extenders"] = extenders
        warnings = [warning for entry in extenders for warning in entry.get("warnings", ())]
        if warnings:
            result["warnings"] = warnings
        left_out = left_out_report(framework)
        if left_out:
            # Every-node instances not made: the node was refused by an extender (every_node_left_out).
            result["left_out"] = left_out
    return result


class Steps:
    """The steps one plan took, in order, each with the seconds it took: the result's ``steps`` (which step found
    the plan or the proof is the last one; the path, ordering and exact keys say how)."""

    def __init__(self):
        self.taken = []

    def timed(self, name, call, *args, **kwargs):
        started = time.monotonic()
        try:
            return call(*args, **kwargs)
        finally:
            self.taken.append({"step": name, "seconds": round(time.monotonic() - started, 3)})


def schedule_with(framework, problem, exact_seconds):
    """Plan ``problem`` with ``framework`` (framework_for): greedy, the repair and re-orderings, then the exact pass.
    The result's ``steps`` lists the steps taken and their seconds."""
    steps = Steps()
    result = _schedule_steps(framework, problem, exact_seconds, steps)
    result["steps"] = steps.taken
    return result


def _schedule_steps(framework, problem, exact_seconds, steps):
    attempt, path = steps.timed(GREEDY, _greedy, framework, problem)
    permit = framework.run_permit(attempt)
    if permit.ok:
        result = _feasible(framework, problem, attempt, path)
        if (result["moves"] or result["evictions"] or result.get("restarts")) and exact_seconds > 0:
            # Greedy releases or re-packs more instances than needed, and evicts whatever lies under the
            # gang; the exact solver, started from greedy's plan, finds the fewest evictions, then moves, then restarts.
            # Its plan is taken only when it is better in that order.
            found = steps.timed(EXACT, exact.solve, problem, framework, exact_seconds, hint=attempt.placements)
            if found.placements is not None:
                filled = _fill(framework, problem, found)
                better = _feasible(framework, problem, filled, EXACT)
                if _cost(better, problem) < _cost(result, problem):
                    better["exact"] = {"status": found.status, "seconds": round(found.seconds, 3),
                                       "time_limit": exact_seconds}
                    result = better
        return result
    order = {instance.name: (instance.service.name, instance.ordinal) for instance in attempt.instances}
    infeasible = {
        "feasible": False,
        "path": path,
        "summary": permit.reasons[0],
        "placements": {},
        "unschedulable": {name: attempt.unplaced[name] for name in sorted(attempt.unplaced, key=order.get)},
        "ranks": ranks(problem.services),
        # The nodes with nothing placed (what the picture draws beside the unplaced instances): nothing is placed.
        "usage": DefaultBinder(problem).bind([], ClusterState(problem))["usage"],
    }
    if exact_seconds <= 0:
        return _not_by_order(framework, problem, attempt, path, infeasible, steps)
    if exact.available() and not exact.models_whole(problem):
        return _too_large_to_model(framework, problem, attempt, path, infeasible, steps, exact_seconds)
    found = steps.timed(EXACT, exact.solve, problem, framework, exact_seconds)
    if found.placements is not None:
        return _exact_plan(framework, problem, found, exact_seconds)
    if found.status in (exact.SKIPPED, exact.UNAVAILABLE):
        # The solver never ran (OR-Tools missing, a model CP-SAT cannot take): the cheap re-orderings may still
        # find one; else the answer is still the greedy pass's, and says why no more was tried.
        infeasible["summary"] = _exact_summary(found, infeasible["summary"], exact_seconds)
        return _not_by_order(framework, problem, attempt, path, infeasible, steps)
    report = {"status": found.status, "seconds": round(found.seconds, 3), "time_limit": exact_seconds}
    infeasible.update(path=EXACT, exact=report, summary=_exact_summary(found, infeasible["summary"], exact_seconds))
    return infeasible


def _exact_plan(framework, problem, found, time_limit):
    """The result of the exact solver's plan; ``scope`` when it was solved around the unplaced instances only."""
    report = {"status": found.status, "seconds": round(found.seconds, 3), "time_limit": time_limit}
    if found.reason:
        report["scope"] = found.reason
    result = _feasible(framework, problem, _fill(framework, problem, found), EXACT)
    result["exact"] = report
    return result


def _too_large_to_model(framework, problem, failed, path, infeasible, steps, exact_seconds):
    """Greedy failed on a problem too large for the exact solver to model whole (near capacity, thousands of
    instances): the cheap steps first (the counting proof, the re-orderings, each about one greedy pass), then the
    exact solver around the unplaced instances. The exact time limit covers them all, counted from here: near
    capacity the part's model alone took 6 s to build, and before this budget an infeasible gang of 6,421 pods on
    1,213 nodes took 13 s, one that only a re-ordering places up to 4 greedy passes more."""
    deadline = time.monotonic() + exact_seconds
    too_large = exact.too_large_reason(problem)
    proof, reordered = _cheap_steps(framework, problem, failed, path, steps, deadline)
    if proof:
        infeasible["summary"] = "%s (%s, so the exact solver did not run); no placement exists: %s" % (
            infeasible["summary"], too_large, proof)
        return infeasible
    if reordered is not None:
        return reordered
    left = deadline - time.monotonic()
    if left <= 0:
        infeasible["summary"] = "%s (%s, and the re-orderings took its %g s, so the exact solver did not run)" % (
            infeasible["summary"], too_large, exact_seconds)
        return infeasible
    found = steps.timed(EXACT, exact.solve, problem, framework, max(0.1, round(left, 1)), around=failed)
    if found.placements is not None:
        return _exact_plan(framework, problem, found, exact_seconds)
    infeasible["summary"] = _exact_summary(found, infeasible["summary"], exact_seconds)
    return infeasible


def _near_miss(failed):
    """Whether greedy left few enough unplaced (REORDER_UNPLACED, REORDER_SHARE) for another order to close it."""
    return len(failed.unplaced) <= max(REORDER_UNPLACED, REORDER_SHARE * len(failed.gang))


def _greedy(framework, problem):
    """The greedy attempts, as (attempt, path): everything kept in place; then stateless instances may
    move; then, when preemptible instances run, attempts in which the gang goes before them (they are
    evicted where it needs their room)."""
    attempt = Attempt(framework, problem, moves_allowed=False).run()
    path = GREEDY
    if attempt.unplaced and attempt.retry:
        attempt = Attempt(framework, problem, moves_allowed=True).run()
        path = GREEDY_WITH_MOVES
    if attempt.unplaced and any(instance.previous is not None for instance in attempt.extra):
        for moves_allowed in (False, True):
            other = Attempt(framework, problem, moves_allowed=moves_allowed, keep_running=False).run()
            if not other.unplaced:
                return other, GREEDY_WITH_MOVES if moves_allowed else GREEDY
            if not other.retry:
                break
    return attempt, path


def _not_by_order(framework, problem, failed, path, infeasible, steps):
    """What greedy's failure means when the exact solver gave no answer for the whole problem: no placement exists
    when counting proves it (_counted_proof, cheap: near capacity most infeasible gangs end here), else the plan of a
    cheap re-ordering, else the infeasible result as it is."""
    proof, reordered = _cheap_steps(framework, problem, failed, path, steps)
    if proof:
        infeasible["summary"] = "%s; no placement exists: %s" % (infeasible["summary"], proof)
    return reordered or infeasible


def _cheap_steps(framework, problem, failed, path, steps, deadline=None):
    """(proof, plan) after greedy's failure: the counting proof that no placement exists ("" when it finds none),
    else, after a near miss, the plan of a cheap re-ordering started before ``deadline`` (None when none places the
    gang; far from a plan, another order of the same pass will not close it, so none is tried)."""
    proof = steps.timed("counting_proof", _counted_proof, failed)
    if proof or not _near_miss(failed):
        return proof, None
    return proof, _reordered(framework, problem, failed, path, steps, deadline)


def _counted_proof(attempt):
    """Why no order can place the gang, by counting, or "". For each class of the instances left unplaced, S being the
    nodes its static filters accept: (1) the class asks more instances than S holds, each node counted alone for it (its
    CPU, memory and matching GPUs over one instance's request); (2) the instances that only S can take (their own
    accepted nodes within S; a pinned or every-node instance, its node) ask more CPU, memory or GPUs (whole ones, and
    shares over S's largest device) than S has. Both are necessary for any placement; what runs elsewhere is ignored,
    which only weakens them. Bounded: one pass over classes x nodes (the static answers are cached), then at most
    PROOF_WORK node names compared (unplaced classes x classes x nodes); past that, no proof."""
    problem, framework, cluster = attempt.problem, attempt.framework, attempt.cluster
    requests = problem.requests()
    nodes = problem.nodes
    groups = {}                 # class key, or ("node", name) for a fixed node -> [instance, ...]
    accepted = {}               # the same key -> frozenset of node names
    for instance in attempt.gang:
        fixed = instance.node if instance.node is not None else (instance.previous.node if instance.pinned else None)
        if fixed is not None:
            key = ("node", fixed, instance.service.name)
            if key not in accepted:
                accepted[key] = frozenset((fixed,)) if fixed in nodes else frozenset()
        else:
            key = attempt._class_key(instance.service)
            if key not in accepted:
                stand_in = Instance(instance.service, 0, None)
                status, cycle, filters = framework.run_pre_filter(cluster, stand_in)
                if not status.ok:
                    return ""
                names = cycle.node_names if cycle.node_names is not None else nodes
                accepted[key] = frozenset(name for name in names if name in nodes and attempt.static_ok(
                    stand_in, nodes[name], filters))
            if instance.previous is not None and instance.previous.node in nodes:
                # Staying widens what a node accepts (a NoSchedule taint lets it stay): its node counts as accepted.
                accepted[key] = accepted[key] | {instance.previous.node}
        groups.setdefault(key, []).append(instance)
    unplaced = {attempt._class_key(instance.service) for instance in attempt.gang
                if instance.name in attempt.unplaced and instance.node is None and not instance.pinned}
    work = 0
    for key in sorted(unplaced, key=lambda k: min(i.name for i in groups.get(k, ()))):
        if key not in groups:
            continue
        where = accepted[key]
        service = groups[key][0].service
        # (1) the class alone.
        fits = sum(_holds(nodes[name], requests[service.name], service.resources.gpu) for name in where)
        if not where:
            others = len(groups[key]) - 1
            return "no node accepts %s%s" % (groups[key][0].name, " (nor the %d more like it)" % others if others else "")
        if len(groups[key]) > fits:
            return "%d instance(s) like %s ask more than the %d node(s) that accept them hold (%d at most)" % (
                len(groups[key]), groups[key][0].name, len(where), fits)
        # (2) everything that only those nodes take.
        largest = max([float(device.memory) for name in where for device in nodes[name].gpus] or [1.0])
        cpu = memory = gpus = 0.0
        count = 0
        for other, members in groups.items():
            work += len(accepted[other])
            if work > PROOF_WORK:
                return ""           # bounded: unplaced classes x classes x nodes could reach 10^12
            if not accepted[other] <= where:
                continue
            count += len(members)
            for instance in members:
                request = requests[instance.service.name]
                cpu += request.cpu
                memory += request.memory
                gpu = instance.service.resources.gpu
                if gpu is not None:
                    gpus += gpu.count * (1.0 if gpu.memory is None else gpu.memory / largest)
        have = (sum(nodes[name].cpu for name in where), sum(nodes[name].memory for name in where),
                sum(len(nodes[name].gpus) for name in where))
        for what, asked, total in (("CPU (millicores)", cpu, have[0]), ("memory (bytes)", memory, have[1]),
                                   ("GPUs", gpus, have[2])):
            if asked > total + 1e-9:
                return "the %d instance(s) that only the %d node(s) accepting %s can take ask %s of %s, they have %d" % (
                    count, len(where), groups[key][0].name, ("%.2f" % asked) if what == "GPUs" else "%d" % asked, what,
                    total)
    return ""


def _holds(node, request, gpu):
    """How many instances of this request a node holds when nothing else runs there."""
    counts = []
    if request.cpu:
        counts.append(node.cpu // request.cpu)
    if request.memory:
        counts.append(node.memory // request.memory)
    if gpu is not None:
        matching = [device for device in node.gpus if gpu.matches(device)]
        if gpu.memory is None:
            counts.append(len(matching) // gpu.count)
        else:
            counts.append(sum(device.memory // gpu.memory for device in matching) // gpu.count)
    return min(counts) if counts else 10 ** 9      # asks nothing countable: no bound


def _reordered(framework, problem, failed, path, steps, deadline=None):
    """When greedy's queue order found no plan and the exact solver cannot answer for the whole problem: the same
    greedy pass in other cheap orders (ORDERINGS), each one attempt, with moves allowed as the failed attempt had them.
    The first that places the gang is the plan, its result naming the order (``ordering``); None when none does.
    An attempt stops early once it has left REORDER_SLACK times as many instances unplaced as the failed one (plus
    REORDER_SLACK) before its repair pass: it is not going to place the gang. At most len(ORDERINGS) attempts."""
    moves_allowed = failed.cluster.moves_allowed
    for name, order in _orderings(framework, failed):
        if deadline is not None and time.monotonic() >= deadline:
            return None
        attempt = Attempt(framework, problem, moves_allowed=moves_allowed, order=order)
        attempt.give_up = REORDER_SLACK * len(failed.unplaced) + REORDER_SLACK
        steps.timed("reordering:" + name, attempt.run)
        if attempt.unplaced or not framework.run_permit(attempt).ok:
            continue
        result = _feasible(framework, problem, attempt, path)
        result["ordering"] = name
        return result
    return None


def _orderings(framework, failed):
    """(name, sort key of the instances to place) of each re-ordering, in the order tried: whole-GPU shapes first
    (most devices first), then the most constrained (fewest nodes passing the static filters, exactly rather than
    in the queue sort's power-of-two buckets), then the previous plan's order (instances that ran, by the node and
    devices they had, before new work). Ties: the queue sort's own key. Orders equal to one already tried are
    skipped."""
    sort_key = framework.queue_sort.sort_key
    feasible = failed.feasible_nodes()

    def whole(instance):
        gpu = instance.service.resources.gpu
        return gpu.count if gpu is not None and gpu.memory is None else 0

    def whole_first(instance, moves_allowed):
        return (-instance.service.priority, -whole(instance), feasible.get(instance.service.name, 0),
                sort_key(instance, moves_allowed))

    def constrained_first(instance, moves_allowed):
        return (-instance.service.priority, feasible.get(instance.service.name, 0), -whole(instance),
                sort_key(instance, moves_allowed))

    def previous_order(instance, moves_allowed):
        previous = instance.previous
        if previous is None:
            return (1, "", (), sort_key(instance, moves_allowed))
        return (0, previous.node, previous.gpu_uuids, sort_key(instance, moves_allowed))

    orderings = [("whole_gpus_first", whole_first), ("constrained_first", constrained_first)]
    if any(instance.previous is not None for instance in failed.gang):
        orderings.append(("previous_order", previous_order))
    orderings = [(name, order) for name, order in orderings if name in ORDERINGS]
    seen = [[instance.name for instance in sorted(failed.gang, key=lambda i: sort_key(i, True))]]
    for name, order in orderings:
        names = [instance.name for instance in sorted(failed.gang, key=lambda i, order=order: order(i, True))]
        if names in seen:
            continue
        seen.append(names)
        yield name, order


def _fill(framework, problem, found):
    """The exact solver's plan (the gang and the preemptible instances that ran) with the new preemptible
    work filled in greedily, as an attempt; or the plan alone when a node does not take it back."""
    attempt = Attempt(framework, problem, moves_allowed=True)
    queue_sort = framework.queue_sort
    if hasattr(queue_sort, "feasible_nodes"):
        queue_sort.feasible_nodes = attempt.feasible_nodes()
    placed = set()
    for placement in sorted(found.placements, key=lambda p: (p.instance.service.name, p.instance.ordinal)):
        if not attempt.adopt(placement):
            return _Found(found, problem)
        placed.add(placement.instance.name)
    attempt.fill([instance for instance in attempt.extra if instance.name not in placed])
    return attempt


class _Found:
    """An exact plan as the parts of an attempt that _feasible reads."""

    def __init__(self, found, problem):
        self.placements = found.placements
        self.cluster = found.cluster
        placed = {p.instance.name for p in found.placements}
        self.preempted = {instance.name: "left out: no room after the exact solver's plan" for instance
                          in problem.instances() if instance.service.preemptible and instance.name not in placed}


def _feasible(framework, problem, attempt, path):
    """The result of an approved attempt: the binder's plan, what was preempted (and evicted), the ranks."""
    result = {"feasible": True, "path": path}
    result.update(framework.run_bind(attempt.placements, attempt.cluster))
    by_name = {}
    if attempt.preempted:
        by_name = {instance.name: instance for instance in problem.instances() if instance.service.preemptible}
    order = sorted(attempt.preempted, key=lambda name: (by_name[name].service.name, by_name[name].ordinal))
    result["preempted"] = {name: attempt.preempted[name] for name in order}
    result["evictions"] = [{"instance": name, "from": by_name[name].previous.node}
                           for name in order if by_name[name].previous is not None]
    result["ranks"] = ranks(problem.services)
    return result


def _cost(result, problem):
    """What the exact solver minimises first: evictions, the highest priority first (the priorities of the evicted,
    highest first, compared as lists: one eviction of priority 2 costs more than any of priority 1), then moves, then
    restarts on the same node (other GPUs or NVMe device)."""
    priority = {name: service.priority for name, service in problem.services.items()}
    # An evicted instance is preemptible, so <service>-<ordinal> (every-node services are never preemptible).
    evicted = sorted((priority[entry["instance"].rsplit("-", 1)[0]] for entry in result["evictions"]), reverse=True)
    return (evicted, len(result["moves"]), len(result.get("restarts", ())))


def _exact_summary(found, greedy_summary, exact_seconds):
    """The greedy pass's summary, then the exact solver's verdict, which never confuses a proof with a timeout."""
    if found.status == exact.INFEASIBLE:
        # No timing here: it is in exact.seconds, and the same problem must give the same summary.
        return "%s; no placement exists: the exact solver proved it (%s)" % (greedy_summary, found.reason)
    if found.status == exact.TIMEOUT:
        return ("%s; no plan found within %g s: the exact solver found neither a plan nor a proof that none exists "
                "(a longer exact time limit may find one)" % (greedy_summary, exact_seconds))
    return "%s (%s, so the exact solver did not run)" % (greedy_summary, found.reason)
