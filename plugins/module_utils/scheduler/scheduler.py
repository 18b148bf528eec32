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
"""

from __future__ import annotations

import heapq
import time
import weakref

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.framework import (
    Framework, reasons_histogram,
)
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler import exact
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.model import Instance, Placement, PreviousPlacement
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.anti_affinity import service_conflicts
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
# The repair pass's bounds: (unplaced, placed) instance pairs it looks at, and swaps it tries.
REPAIR_PAIRS = 2000000
REPAIR_SWAPS = 20000
# Framework -> its static filters' answers, shared by its attempts (Attempt.static_ok); gone with the framework.
_STATIC = weakref.WeakKeyDictionary()
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


def schedule_with(framework, problem, exact_seconds):
    """Plan ``problem`` with ``framework`` (framework_for): greedy, the repair and re-orderings, then the exact pass."""
    attempt, path = _greedy(framework, problem)
    permit = framework.run_permit(attempt)
    if permit.ok:
        result = _feasible(framework, problem, attempt, path)
        if (result["moves"] or result["evictions"]) and exact_seconds > 0:
            # Greedy releases or re-packs more instances than needed, and evicts whatever lies under the
            # gang; the exact solver, started from greedy's plan, finds the fewest evictions, then moves.
            # Its plan is taken only when it is better in that order.
            found = exact.solve(problem, framework, exact_seconds, hint=attempt.placements)
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
    }
    if exact_seconds <= 0:
        return _not_by_order(framework, problem, attempt, path, infeasible)
    found = exact.solve(problem, framework, exact_seconds, around=attempt)
    report = {"status": found.status, "seconds": round(found.seconds, 3), "time_limit": exact_seconds}
    if found.placements is not None:
        if found.reason:
            report["scope"] = found.reason      # solved around the unplaced instances, not as a whole
        result = _feasible(framework, problem, _fill(framework, problem, found), EXACT)
        result["exact"] = report
        return result
    if found.status in (exact.SKIPPED, exact.UNAVAILABLE):
        # The solver never ran (or only around the unplaced part, without a plan): the cheap re-orderings may still
        # find one; else the answer is still the greedy pass's, and says why no more was tried.
        infeasible["summary"] = _exact_summary(found, infeasible["summary"], exact_seconds)
        return _not_by_order(framework, problem, attempt, path, infeasible)
    infeasible.update(path=EXACT, exact=report, summary=_exact_summary(found, infeasible["summary"], exact_seconds))
    return infeasible


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


def _not_by_order(framework, problem, failed, path, infeasible):
    """What greedy's failure means when the exact solver gave no answer for the whole problem: no placement exists
    when counting proves it (_counted_proof, cheap: near capacity most infeasible gangs end here), else the plan of a
    cheap re-ordering, else the infeasible result as it is."""
    proof = _counted_proof(failed)
    if proof:
        infeasible["summary"] = "%s; no placement exists: %s" % (infeasible["summary"], proof)
        return infeasible
    if len(failed.unplaced) > max(REORDER_UNPLACED, REORDER_SHARE * len(failed.gang)):
        return infeasible           # far from a plan: another order of the same pass will not close it
    return _reordered(framework, problem, failed, path) or infeasible


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
            return "no node accepts %s (nor %d more like it)" % (groups[key][0].name, len(groups[key]) - 1)
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


def _reordered(framework, problem, failed, path):
    """When greedy's queue order found no plan and the exact solver cannot answer for the whole problem: the same
    greedy pass in other cheap orders (ORDERINGS), each one attempt, with moves allowed as the failed attempt had them.
    The first that places the gang is the plan, its result naming the order (``ordering``); None when none does.
    An attempt stops early once it has left REORDER_SLACK times as many instances unplaced as the failed one (plus
    REORDER_SLACK) before its repair pass: it is not going to place the gang. At most len(ORDERINGS) attempts."""
    moves_allowed = failed.cluster.moves_allowed
    for name, order in _orderings(framework, failed):
        attempt = Attempt(framework, problem, moves_allowed=moves_allowed, order=order)
        attempt.give_up = REORDER_SLACK * len(failed.unplaced) + REORDER_SLACK
        attempt.run()
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
    highest first, compared as lists: one eviction of priority 2 costs more than any of priority 1), then moves."""
    priority = {name: service.priority for name, service in problem.services.items()}
    # An evicted instance is preemptible, so <service>-<ordinal> (every-node services are never preemptible).
    evicted = sorted((priority[entry["instance"].rsplit("-", 1)[0]] for entry in result["evictions"]), reverse=True)
    return (evicted, len(result["moves"]))


def _exact_summary(found, greedy_summary, exact_seconds):
    """The greedy pass's summary, then the exact solver's verdict, which never confuses a proof with a timeout."""
    if found.status == exact.INFEASIBLE:
        # No timing here: it is in exact.seconds, and the same problem must give the same summary.
        return "%s; no placement exists: the exact solver proved it (%s)" % (greedy_summary, found.reason)
    if found.status == exact.TIMEOUT:
        return ("%s; no plan found within %g s: the exact solver found neither a plan nor a proof that none exists "
                "(a longer exact time limit may find one)" % (greedy_summary, exact_seconds))
    return "%s (%s, so the exact solver did not run)" % (greedy_summary, found.reason)


def equivalence_key(problem, service, conflicts=None, extra=()):
    """What decides where an instance of ``service`` may go and how nodes score for it (kube's
    equivalence classes): services with the same key share one candidate heap. The name is left out;
    anti-affinity enters through the services each one conflicts with. The image is in it for user plugins
    (profiles.py), which may read it."""
    requests = problem.requests()[service.name]
    conflicts = service_conflicts(problem.services) if conflicts is None else conflicts
    return (service.resources, requests.cpu, requests.memory, requests.ports,
            tuple(sorted(conflicts[service.name])), tuple(sorted(service.node_selector.items())),
            service.tolerations, service.quota, service.image) + extra


class _Candidates:
    """The feasible nodes of one equivalence class, as a heap of (-score, node name, node version).

    Nodes bound since the heap last looked (``seen``, a position in the attempt's bind log) are
    rescored before it answers, so every class keeps its heap for the whole attempt.
    """

    def __init__(self, attempt, service):
        self.attempt = attempt
        # A stand-in replica with no history: what every instance of the class shares.
        self.instance = Instance(service, 0, None)
        framework, cluster = attempt.framework, attempt.cluster
        self.status, self.cycle, self.filters = framework.run_pre_filter(cluster, self.instance)
        # What a node on top of the heap is checked against again before use: its version says whether its own
        # state changed; only filters that read the rest of the cluster (quotas) can have turned stricter.
        self.recheck = [plugin for plugin in self.filters.dynamic if not plugin.node_local]
        self.heap = []
        self.diagnosis = None
        self.seen = len(attempt.bound)
        self.generation = attempt.generation
        if self.status.ok:
            self._fill()

    def _fill(self):
        self.heap = []
        self.generation = self.attempt.generation
        for node_state in self.attempt.cluster.nodes.values():
            self.push(node_state, heap=False)
        heapq.heapify(self.heap)

    def push(self, node_state, heap=True):
        attempt = self.attempt
        if not attempt.static_ok(self.instance, node_state.node, self.filters):
            return
        if not attempt.framework.run_filters(self.filters.dynamic, self.cycle, attempt.cluster, self.instance,
                                             node_state).ok:
            return
        score = attempt.framework.run_score(attempt.framework.shared_scorers, self.cycle, attempt.cluster,
                                            self.instance, node_state)
        entry = (-score, node_state.name, node_state.version)
        if heap:
            heapq.heappush(self.heap, entry)
        else:
            self.heap.append(entry)

    def refresh(self):
        """Rescore the nodes bound since this heap last looked (all of them, past a third of the cluster)."""
        bound = self.attempt.bound
        if self.generation != self.attempt.generation:
            # A score of every node changed (Framework.run_expect): all of them are scored again.
            self.seen = len(bound)
            self._fill()
            return
        if self.seen == len(bound):
            return
        changed = set(bound[self.seen:])
        self.seen = len(bound)
        nodes = self.attempt.cluster.nodes
        if 3 * len(changed) > len(nodes):
            self._fill()
            return
        for name in sorted(changed):
            self.push(nodes[name])

    def best(self, skip):
        """The best feasible node other than ``skip``, as (score, name), or None."""
        attempt = self.attempt
        self.refresh()
        set_aside = []
        found = None
        while self.heap:
            negative, name, version = self.heap[0]
            node_state = attempt.cluster.nodes[name]
            if version != node_state.version:
                heapq.heappop(self.heap)        # stale: its node was rescored after a bind
                continue
            if name == skip:
                set_aside.append(heapq.heappop(self.heap))
                continue
            if self.recheck and not attempt.framework.run_filters(self.recheck, self.cycle, attempt.cluster,
                                                                  self.instance, node_state).ok:
                heapq.heappop(self.heap)        # a cluster-wide limit (quota) was reached
                continue
            found = (-negative, name)
            break
        for entry in set_aside:
            heapq.heappush(self.heap, entry)
        return found


class Attempt:
    """One pass over the gang against a fresh, empty cluster state."""

    def __init__(self, framework, problem, moves_allowed, keep_running=True, order=None):
        self.framework = framework
        self.order = order              # the sort key of the instances to place; None: the queue sort's
        self.give_up = None             # stop placing once more instances than this are unplaced (re-orderings)
        self.problem = problem
        self.cluster = ClusterState(problem)
        self.cluster.moves_allowed = moves_allowed
        self.cluster.released = set()
        self.instances = problem.instances()
        # The gang: every instance that is not preemptible; all of it is placed or the attempt fails.
        self.gang = [instance for instance in self.instances if not instance.service.preemptible]
        self.extra = [instance for instance in self.instances if instance.service.preemptible]
        self.keep_running = keep_running
        self.total = len(self.gang)
        self.placements = []
        self.unplaced = {}
        self.preempted = {}             # preemptible instances left out -> why
        self.retry = False
        # Static filters read only the service, the node and whether the instance stays: their answers hold for every
        # attempt of one framework (the second attempt, the re-orderings, the exact solver's fill), so they share them.
        self._static = _STATIC.setdefault(framework, {})
        self.bound = []                 # node names in bind order: what each class heap must rescore
        self._conflicts = service_conflicts(problem.services)
        self._class_of = {}             # service name -> equivalence key
        self._classes = {}              # equivalence key -> _Candidates
        self.generation = 0             # bumped when every node's score changed: class heaps refill
        self._removed = set()           # ids of placements the repair pass took back, until _compact drops them

    def static_ok(self, instance, node, filters, staying=False):
        key = (instance.service.name, node.name, staying)
        status = self._static.get(key)
        if status is None:
            status = self._static[key] = self.framework.run_static_filters(filters, instance, node, staying)
        return status.ok

    def feasible_nodes(self):
        """Per service, the nodes its static filters accept: one count per equivalence class."""
        counts, by_class = {}, {}
        for service in self.problem.services.values():
            if service.sidecar or service.replicas == 0:
                continue            # no instance asks (a catalog may hold thousands of services scaled to 0)
            key = self._class_of.get(service.name)
            if key is None:
                key = self._class_of[service.name] = equivalence_key(
                    self.problem, service, self._conflicts, self.framework.class_key(service))
            if key not in by_class:
                stand_in = Instance(service, 0, None)
                status, _cycle, filters = self.framework.run_pre_filter(self.cluster, stand_in)
                by_class[key] = 0 if not status.ok else sum(
                    1 for state in self.cluster.nodes.values() if self.static_ok(stand_in, state.node, filters))
            counts[service.name] = by_class[key]
        return counts

    def run(self):
        queue_sort = self.framework.queue_sort
        if hasattr(queue_sort, "feasible_nodes"):
            queue_sort.feasible_nodes = self.feasible_nodes()
        sort_key = queue_sort.sort_key
        moves_allowed = self.cluster.moves_allowed
        nodes = self.cluster.nodes
        later = list(self.extra)
        if self.keep_running and later:
            # Running preemptible instances keep their node when it still has room, before the gang: they
            # are evicted only when an attempt that keeps them cannot place the gang (schedule()).
            running = [i for i in later if i.previous is not None and i.previous.node in nodes]
            running.sort(key=lambda instance: sort_key(instance, False))
            kept = {instance.name for instance in running if self._place_on(instance, instance.previous.node)}
            later = [instance for instance in later if instance.name not in kept]
        # Stateless instances whose node is gone are new work: they must not go before those that stay.
        in_place = [i for i in self.gang if i.pinned or (
            i.previous is not None and not moves_allowed and i.previous.node in nodes)]
        in_place.sort(key=lambda instance: sort_key(instance, moves_allowed))
        chosen = {instance.name for instance in in_place}
        free = [instance for instance in self.gang if instance.name not in chosen]
        for instance in in_place:
            if not self._schedule_one(instance, may_fail=instance.service.stateful):
                # Its node no longer takes it: it moves, placed with the new work.
                self.cluster.released.add(instance.name)
                free.append(instance)
        order = self.order or sort_key
        free.sort(key=lambda instance: order(instance, True))
        self._schedule_all(free)
        if self.unplaced and (self.give_up is None or len(self.unplaced) <= self.give_up):
            self._repair()
        self.fill(later)
        return self

    def _movable(self, instance):
        """Whether the repair pass may take this placed instance off its node: it was placed anew by this attempt,
        or it is stateless and this attempt lets such instances move; never a pinned or every-node instance."""
        if instance.pinned or instance.node is not None or instance.service.preemptible:
            return False
        return instance.previous is None or (self.cluster.moves_allowed and not instance.service.stateful)

    def _repair(self):
        """Local search after the greedy pass: each instance that fits nowhere (in the gang's order, by name) looks
        for a node where it would fit without one placed, movable instance, which is then scheduled again elsewhere
        (its class heap, as in the greedy pass); when that fails, both go back as they were. Greedy fills nodes one
        request at a time and leaves holes no single request fits: one swap often closes one. Bounded by
        REPAIR_PAIRS pairs looked at and REPAIR_SWAPS swaps tried; a class that found no swap is not looked
        at again until another swap succeeds (nothing changed for it)."""
        framework, cluster = self.framework, self.cluster
        waiting = [instance for instance in self.gang if instance.name in self.unplaced]
        by_node = {}
        for placement in self.placements:
            by_node.setdefault(placement.node, []).append(placement)
        requests = self.problem.requests()
        pairs = swaps = 0
        hopeless = set()            # classes that found no swap since the last one that succeeded
        for instance in waiting:
            key = self._class_key(instance.service)
            if key in hopeless:
                continue
            status, cycle, filters = framework.run_pre_filter(cluster, instance)
            if not status.ok or cycle.node_names is not None:
                continue
            wanted = requests[instance.service.name]
            gpu = instance.service.resources.gpu
            done = False
            for name, node_state in cluster.nodes.items():
                node = node_state.node
                if not self.static_ok(instance, node, filters):
                    continue
                cpu_free, memory_free = node.cpu - node_state.cpu_used, node.memory - node_state.memory_used
                for placement in list(by_node.get(name, ())):
                    pairs += 1
                    if pairs > REPAIR_PAIRS or swaps >= REPAIR_SWAPS:
                        self._compact()
                        return
                    other = placement.instance
                    got = requests[other.service.name]
                    if cpu_free + got.cpu < wanted.cpu or memory_free + got.memory < wanted.memory:
                        continue
                    if gpu is not None and not _gpu_room(node_state, placement, gpu):
                        continue
                    if not self._movable(other) or not self._fits_elsewhere(other, name):
                        continue
                    swaps += 1
                    placed, other_placed = self._swap(instance, node_state, placement)
                    here = by_node[name]
                    here.remove(placement)
                    if placed is not None:
                        here.append(placed)
                    if other_placed is not None:
                        by_node.setdefault(other_placed.node, []).append(other_placed)
                    if placed is not None:
                        del self.unplaced[instance.name]
                        hopeless.clear()
                        done = True
                        break
                if done:
                    break
            if not done:
                hopeless.add(key)
        self._compact()

    def _fits_elsewhere(self, instance, node_name):
        """Whether a node other than ``node_name`` takes ``instance`` now: its class heap's answer. That holds for
        a movable instance with a history too: it may move (else it is not movable), and its history only widens
        what its own node accepts (a NoSchedule taint lets it stay), which is the node it leaves."""
        candidates = self._candidates_for(instance.service)
        return candidates.status.ok and candidates.best(skip=node_name) is not None

    def _swap(self, instance, node_state, placement):
        """``instance`` onto ``node_state`` in place of ``placement``'s instance, which is scheduled again. Returns
        (the instance's placement, the other's new placement) when it worked, else (None, the other's placement
        restored where it was)."""
        framework, cluster = self.framework, self.cluster
        other = placement.instance
        status, other_cycle, _filters = framework.run_pre_filter(cluster, other)
        if not status.ok:
            return None, placement
        self._unbind(placement, other_cycle)
        status, cycle, filters = framework.run_pre_filter(cluster, instance)
        if status.ok and cycle.node_names is None and \
                self._evaluate(instance, cycle, filters, node_state, scored=False) is not None:
            placed = self._bind(instance, cycle, node_state)
            if self._schedule_one(other, may_fail=False):
                return placed, self.placements[-1]
            self._unbind(placed, cycle)
        # Back where it was, on the same devices (its placement as history: Stickiness keeps it to that node). The
        # node took it before and has the same room again; should it not, it is scheduled like any other.
        count = len(self.placements)
        self.adopt(placement)
        if len(self.placements) == count and not self._schedule_one(other, may_fail=True):
            return None, None
        return None, self.placements[-1]

    def _unbind(self, placement, cycle):
        node_state = self.cluster.nodes[placement.node]
        self.framework.run_unreserve(cycle, self.cluster, placement.instance, node_state, placement)
        self.bound.append(node_state.name)      # class heaps rescore it
        self._removed.add(id(placement))

    def _compact(self):
        """Drop the placements the repair pass took back (held until now, so no id is reused)."""
        if self._removed:
            self.placements = [p for p in self.placements if id(p) not in self._removed]
        self._removed = set()

    def _schedule_all(self, queue):
        """Schedule the queue in order; scorers that follow the work still to place (GPUFragmentation's
        expected mix) are told what is left whenever the queue moves on to another equivalence class."""
        framework = self.framework
        if not framework.expecting:
            for instance in queue:
                self._schedule_one(instance, may_fail=True)
                if self.give_up is not None and len(self.unplaced) > self.give_up:
                    return
            return
        remaining = {}
        for instance in queue:
            remaining[instance.service.name] = remaining.get(instance.service.name, 0) + 1
        current = None
        for instance in queue:
            key = self._class_key(instance.service)
            if key != current:
                current = key
                if framework.run_expect(remaining):
                    self.generation += 1
            self._schedule_one(instance, may_fail=True)
            remaining[instance.service.name] -= 1
            if self.give_up is not None and len(self.unplaced) > self.give_up:
                break
        if framework.run_expect(None):
            self.generation += 1        # later use of this attempt (Attempt.place) scores against the catalog

    def fill(self, extra):
        """Preemptible work into what the gang left: priority first (the queue sort's order); those that
        fit nowhere are left out, with the reason, in ``preempted``. One that ran may move (the previous
        node still scores best)."""
        sort_key = self.framework.queue_sort.sort_key
        self.cluster.released.update(instance.name for instance in extra)
        for instance in sorted(extra, key=lambda instance: sort_key(instance, True)):
            self._schedule_one(instance, may_fail=True)

    def adopt(self, placement):
        """Reserve a placement decided elsewhere (the exact solver's) on its node, with its devices;
        False when the node does not take it."""
        instance = placement.instance
        chosen = Instance(instance.service, instance.ordinal, PreviousPlacement(
            placement.node, tuple(claim.device.uuid for claim in placement.gpus),
            placement.nvme.name if placement.nvme is not None else None), instance.node)
        return self._place_on(chosen, placement.node, record_as=instance, exact=placement)

    def _place_on(self, instance, node_name, record_as=None, exact=None):
        """Place ``instance`` on ``node_name`` or nowhere; True when it was placed."""
        framework, cluster = self.framework, self.cluster
        status, cycle, filters = framework.run_pre_filter(cluster, instance)
        if not status.ok or (cycle.node_names is not None and node_name not in cycle.node_names):
            return False
        if self._evaluate(instance, cycle, filters, cluster.nodes[node_name], scored=False) is None:
            return False
        placement = self._bind(instance, cycle, cluster.nodes[node_name], record_as)
        return exact is None or (placement.gpus == exact.gpus and placement.nvme == exact.nvme)

    def _schedule_one(self, instance, may_fail):
        framework, cluster = self.framework, self.cluster
        status, cycle, filters = framework.run_pre_filter(cluster, instance)
        best = None
        if status.ok:
            if cycle.node_names is not None:
                for name in sorted(cycle.node_names):
                    best = _better(best, self._evaluate(instance, cycle, filters, cluster.nodes[name]))
            else:
                candidates = self._candidates_for(instance.service)
                if candidates.status.ok:
                    previous = instance.previous_node()
                    best = candidates.best(skip=previous)
                    if previous in cluster.nodes:
                        best = _better(best, self._evaluate(instance, cycle, filters, cluster.nodes[previous]))
        if best is None:
            if may_fail:
                self._fail(instance, status, cycle, filters)
            return False
        self._bind(instance, cycle, cluster.nodes[best[1]])
        return True

    def _bind(self, instance, cycle, node_state, record_as=None):
        placement = {"gpus": (), "nvme": None, "nvme_size": 0}
        self.framework.run_reserve(cycle, self.cluster, instance, node_state, placement)
        placed = Placement(record_as or instance, node_state.name, **placement)
        self.placements.append(placed)
        self.bound.append(node_state.name)
        return placed

    def place(self, instance):
        """Schedule one more instance into this attempt (online use: earlier ones stay where they are);
        False, with the reason in ``unplaced``, when it fits nowhere."""
        self.total += 1
        return self._schedule_one(instance, may_fail=True)

    def _class_key(self, service):
        key = self._class_of.get(service.name)
        if key is None:
            key = self._class_of[service.name] = equivalence_key(
                self.problem, service, self._conflicts, self.framework.class_key(service))
        return key

    def _candidates_for(self, service):
        key = self._class_key(service)
        candidates = self._classes.get(key)
        if candidates is None:
            candidates = self._classes[key] = _Candidates(self, service)
        return candidates

    def _evaluate(self, instance, cycle, filters, node_state, scored=True):
        """Full per-instance evaluation of one node: (score, name) or None."""
        staying = instance.previous_node() == node_state.name
        if not self.static_ok(instance, node_state.node, filters, staying):
            return None
        if not self.framework.run_filters(filters.dynamic, cycle, self.cluster, instance, node_state).ok:
            return None
        if not scored:
            return (0.0, node_state.name)
        score = self.framework.run_score(self.framework.scorers, cycle, self.cluster, instance, node_state)
        return (score, node_state.name)

    def _fail(self, instance, status, cycle, filters):
        nodes = len(self.cluster.nodes)
        if not status.ok:
            message = "0/%d nodes are available: %s." % (nodes, "; ".join(status.reasons))
        else:
            shared = cycle.node_names is None and instance.previous is None
            candidates = self._candidates_for(instance.service) if shared else None
            if shared and candidates.diagnosis is not None and candidates.diagnosis[0] == len(self.bound):
                message = candidates.diagnosis[1]
            else:
                message = "0/%d nodes are available: %s." % (nodes, reasons_histogram(
                    self._diagnose(instance, cycle, filters)))
                if shared:
                    # Nothing was bound since: the next instance of the class fails the same way.
                    candidates.diagnosis = (len(self.bound), message)
        if instance.service.preemptible:
            # Not part of the gang: left out, and nothing is retried for it.
            if instance.previous is not None:
                message = "evicted from %s: %s" % (instance.previous.node, message)
            self.preempted[instance.name] = message
            return
        self.unplaced[instance.name] = message
        if self.framework.run_post_filter(self, instance, message) is not None:
            self.retry = True

    def _diagnose(self, instance, cycle, filters):
        statuses = []
        previous = instance.previous_node()
        for name, node_state in self.cluster.nodes.items():
            if cycle.node_names is not None and name not in cycle.node_names:
                statuses.append((name, _Reason(cycle.outside_reason)))
                continue
            status = self.framework.run_static_filters(filters, instance, node_state.node, name == previous)
            if status.ok:
                status = self.framework.run_filters(filters.dynamic, cycle, self.cluster, instance, node_state)
            statuses.append((name, status))
        return statuses


def _gpu_room(node_state, placement, request):
    """Whether ``request`` could have its devices on this node once ``placement`` has left it: a quick bound
    before the real check (the filters)."""
    given = {claim.device.uuid: claim.memory for claim in placement.gpus}
    usable = 0
    for position, device in enumerate(node_state.node.gpus):
        if not request.matches(device):
            continue
        used = node_state.gpu_used[position] - given.get(device.uuid, 0)
        if (used == 0) if request.memory is None else (device.memory - used >= request.memory):
            usable += 1
    return usable >= request.count


class _Reason:
    def __init__(self, reason):
        self.reasons = (reason,)


def _better(current, candidate):
    """Higher score wins; on a tie the node name that sorts first."""
    if candidate is None:
        return current
    if current is None:
        return candidate
    if candidate[0] > current[0] or (candidate[0] == current[0] and candidate[1] < current[1]):
        return candidate
    return current
