# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One greedy attempt: every instance of the gang through the framework, against a fresh, empty cluster state.

The attempt orders the work (``run``: what keeps running, what stays in place, the rest in queue order), finds each
instance a node (``_schedule_one``: a restricted instance tries its nodes, the others ask their class heap,
candidates.py), reserves it there (``_bind``), and records why an instance fits nowhere (diagnosis.py). The repair
pass (repair.py) then makes room for what is left, one swap at a time.
"""

from __future__ import annotations

import weakref

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.candidates import Candidates, better, equivalence_key
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.diagnosis import unschedulable_message
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.model import Instance, Placement, PreviousPlacement
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.anti_affinity import service_conflicts
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.repair import RepairPass
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.state import ClusterState

# Framework -> its static filters' answers, shared by its attempts (Attempt.static_ok); gone with the framework.
_STATIC = weakref.WeakKeyDictionary()


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
            key = self._class_key(service)
            if key not in by_class:
                stand_in = Instance(service, 0, None)
                status, _cycle, filters = self.framework.run_pre_filter(self.cluster, stand_in)
                by_class[key] = 0 if not status.ok else sum(
                    1 for state in self.cluster.nodes.values() if self.static_ok(stand_in, state.node, filters))
            counts[service.name] = by_class[key]
        return counts

    def run(self):
        """The greedy pass: running preemptible work kept where it is, the instances that stay in place, the rest in
        queue order; then the repair pass for what fits nowhere, and the preemptible work into what is left."""
        queue_sort = self.framework.queue_sort
        if hasattr(queue_sort, "feasible_nodes"):
            queue_sort.feasible_nodes = self.feasible_nodes()
        later = self._keep_running_extra()
        free = self._place_in_place()
        order = self.order or queue_sort.sort_key
        free.sort(key=lambda instance: order(instance, True))
        self._schedule_all(free)
        if self.unplaced and (self.give_up is None or len(self.unplaced) <= self.give_up):
            self._repair()
        self.fill(later)
        return self

    def _keep_running_extra(self):
        """Running preemptible instances keep their node when it still has room, before the gang: they are evicted
        only when an attempt that keeps them cannot place the gang (scheduler._greedy). Returns the preemptible
        instances still to place."""
        later = list(self.extra)
        if not self.keep_running or not later:
            return later
        sort_key = self.framework.queue_sort.sort_key
        nodes = self.cluster.nodes
        running = [i for i in later if i.previous is not None and i.previous.node in nodes]
        running.sort(key=lambda instance: sort_key(instance, False))
        kept = {instance.name for instance in running if self._place_on(instance, instance.previous.node)}
        return [instance for instance in later if instance.name not in kept]

    def _place_in_place(self):
        """The gang's instances that stay where they run (pinned ones; all that ran, when moves are not allowed),
        placed first; returns the rest of the gang, those whose node no longer takes them included (they move)."""
        sort_key = self.framework.queue_sort.sort_key
        moves_allowed = self.cluster.moves_allowed
        nodes = self.cluster.nodes
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
        return free

    def _repair(self):
        """The repair pass (repair.py) over what the greedy pass left unplaced."""
        RepairPass(self).run()

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
                    best = better(best, self._evaluate(instance, cycle, filters, cluster.nodes[name]))
            else:
                candidates = self._candidates_for(instance.service)
                if candidates.status.ok:
                    previous = instance.previous_node()
                    best = candidates.best(skip=previous)
                    if previous in cluster.nodes:
                        best = better(best, self._evaluate(instance, cycle, filters, cluster.nodes[previous]))
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
            candidates = self._classes[key] = Candidates(self, service)
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
        """Record why ``instance`` fits nowhere: a preemptible one is left out, a gang member is unplaced (and the
        PostFilter plugins may ask for another attempt)."""
        message = unschedulable_message(self, instance, status, cycle, filters)
        if instance.service.preemptible:
            # Not part of the gang: left out, and nothing is retried for it.
            if instance.previous is not None:
                message = "evicted from %s: %s" % (instance.previous.node, message)
            self.preempted[instance.name] = message
            return
        self.unplaced[instance.name] = message
        if self.framework.run_post_filter(self, instance, message) is not None:
            self.retry = True
