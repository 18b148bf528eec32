# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Extender: an HTTP scheduler extender (scheduler/extender.py) as a Filter and Score plugin.

kube-scheduler calls its extenders after its own filters and scores, per pod (pkg/scheduler/extender.go,
schedule_one.go's findNodesThatPassExtenders and prioritizeNodes). Here the call is per service, once per
plan and verb, and its answer is kept: the filter verdict is a static filter (``filter_static``: the exact
solver honours it like NodeSelector) and the score depends on the service and the node only (rule 3 of
docs/scheduler-design.md).

- The filter verb gets the nodes that the built-in static filters accept for the service (with
  ``staying``, the widest set any instance of it may use): kube's "nodes that passed the filters",
  without what the attempt has placed, which would make the verdict change within an attempt. A node
  the answer leaves out gets its FailedNodes reason (or FailedAndUnresolvableNodes'), which the
  "0/N nodes are available" line counts like any filter's.
- The prioritize verb gets the same nodes (kube sends those that also passed the filter; here both are
  asked at once and the scores of refused nodes are never read); a score 0..10 counts ``weight`` x
  score x 10 (kube: score x weight x MaxNodeScore / MaxExtenderPriority).
- kube's IsInterested: with ``managedResources``, a service whose Pod requests none of them is not sent.
- All calls are made in one round when the first answer is needed (every service needs its answers for its
  equivalence class before the first placement), through the plugin's transport: ``transport`` (the class
  attribute extender_class sets to the one whoever builds the profile handed in, never picked here:
  module_utils/extender/transport.py's HTTPTransport for real HTTP, kept-alive connections, at most 8 calls at
  once). A test hands it a fake with the same ``call_round``; the transport
  brings back the bytes of each answer, and this file decodes and reads them (extender.answer_decoder).
- A failed call (extender.ExtenderError): an ``ignorable`` extender is left out of the whole plan (every
  node passes, every score 0) and the result says why; any other fails the plan with the error.
"""

from __future__ import annotations

import collections
import dataclasses
import time

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler import extender as wire
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.framework import (
    MAX_NODE_SCORE, OK, FilterPlugin, ScorePlugin, Status,
)
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.model import Instance
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.profile import PLUGINS

FILTER = "filter"
PRIORITIZE = "prioritize"


def _whole_shape(service, requests):
    return (service.every_node, service.tolerations, tuple(sorted(service.node_selector.items())), requests.cpu,
            requests.memory, service.resources.gpu, service.resources.nvme)


# What each built-in static filter reads of a service (plugins/*.py, filter_static, as for an instance that stays);
# a built-in filter not listed here is taken to read all of it.
_READS = {
    "NodeUnschedulable": lambda service, requests: service.every_node,
    "TaintToleration": lambda service, requests: service.tolerations,
    "NodeSelector": lambda service, requests: tuple(sorted(service.node_selector.items())),
    "NodeResourcesFit": lambda service, requests: (requests.cpu, requests.memory),
    "GPU": lambda service, requests: service.resources.gpu,
    "NVMe": lambda service, requests: service.resources.nvme,
}


class Extender(FilterPlugin, ScorePlugin):
    """One configured extender; profiles.py makes a subclass per entry with ``name`` and ``config`` set."""

    name = "Extender"
    config = None           # an extender.ExtenderConfig
    transport = None        # what makes the calls (call_round): extender_class sets the one handed in

    def __init__(self, problem):
        super().__init__(problem)
        self.built_in = ()
        self._static = ()
        self._verdicts = None       # service name -> {node name: Status} of the nodes it filtered out
        self._scores = None         # service name -> {node name: 0..10}
        self._scaled = None         # service name -> {node name: its score on 0..MAX_NODE_SCORE} (runs per node scored)
        self._pods = {}             # service name -> (Pod JSON text, resource names)
        self._bodies = {}           # service name -> its ExtenderArgs (bytes), or None when it is not sent
        self._node_json = {}        # node name -> Node JSON, UTF-8 bytes (built once per plan)
        self._node_lists = {}       # id of a candidate list -> (the list, its NodeList items as JSON bytes)
        self._candidates_of = {}    # what the built-in static filters read of a service -> the nodes they accept
        self._sent = {}             # service name -> (its candidates, the same as a frozenset)
        self._passing = {}          # (a built-in filter, what it reads of a service) -> the nodes it accepts
        self.calls = {FILTER: 0, PRIORITIZE: 0}
        self.seconds = 0.0
        self.skipped = None         # why an ignorable extender was left out of this plan
        self.left_out = {}          # every-node instance name -> why it was not made (every_node_left_out)
        self.warnings = list(self.config.notes) if self.config is not None else []

    def attach(self, framework):
        # The built-in filters only: a user plugin's PreFilter may skip its own filter, which filter_static
        # alone cannot know, and a node left out of the call is one the extender never judged.
        self.built_in = [plugin for plugin in framework.filters if type(plugin) in PLUGINS]
        # Those with a static half: FilterPlugin's own filter_static passes every node, so its pass is left out.
        self._static = [plugin for plugin in self.built_in
                        if type(plugin).filter_static is not FilterPlugin.filter_static]

    # --- Filter, Score, class key: all read the answers of one round of calls ----------------------

    def filter_static(self, instance, node, staying):
        if self._verdicts is None:
            self._ask()
        return self._verdicts[instance.service.name].get(node.name, OK)

    def scores_alike_for(self, service):
        return not self.config.prioritize_verb or not self._interested(service)

    def score(self, cycle, cluster, instance, node_state):
        if self._scores is None:
            self._ask()
        return self._scaled[instance.service.name].get(node_state.name, 0.0)

    def class_key(self, service):
        """What the extender answered for the service: services of one shape share a class heap when the extender
        refused the same nodes for the same reasons and gave the same scores (the Pod names the service, so the
        answers may differ)."""
        if self._verdicts is None:
            self._ask()
        refused = tuple(sorted((name, status.reasons) for name, status in self._verdicts[service.name].items()))
        return refused, tuple(sorted((name, score) for name, score in self._scores[service.name].items() if score))

    def _candidates(self, service):
        """The nodes the built-in static filters accept for ``service`` (as if every instance stayed: the widest
        set), in the problem's node order; kept per service with the same as a set (a round reads them 4 times)."""
        return self._sent_to(service)[0]

    def _sent_to(self, service):
        """(the candidates of ``service``, the same as a frozenset)."""
        found = self._sent.get(service.name)
        if found is None:
            names = self._accepted(service)
            found = self._sent[service.name] = (names, frozenset(names))
        return found

    def _accepted(self, service):
        """The candidates of ``service`` (_candidates). Each filter's pass over the nodes is kept per what it reads of
        a service (_READS), so services that differ in one respect cost one more pass of that filter only."""
        requests = self.problem.requests()[service.name]
        reads = [(plugin, _READS.get(plugin.name, _whole_shape)(service, requests)) for plugin in self._static]
        shape = tuple(read for _plugin, read in reads)
        names = self._candidates_of.get(shape)
        if names is None:
            stand_in = Instance(service, 0, None)
            passing = []
            for plugin, read in reads:
                key = (plugin.name, read)
                accepted = self._passing.get(key)
                if accepted is None:
                    accepted = self._passing[key] = frozenset(
                        name for name, node in self.problem.nodes.items()
                        if plugin.filter_static(stand_in, node, True).ok)
                passing.append(accepted)
            # The sets meet in C, smallest first; the problem's node order is kept.
            common = frozenset.intersection(*sorted(passing, key=len)) if passing else None
            names = self._candidates_of[shape] = [name for name in self.problem.nodes
                                                  if common is None or name in common]
        return names

    # --- the calls ---------------------------------------------------------------------------

    def _ask(self):
        """One round of calls, the first time an answer is needed: the filter verb and the prioritize verb for every
        service that the extender manages and that has candidate nodes, a few calls in flight at once (the
        transport's bound). Every service of the problem needs its answers before the first placement (its equivalence class),
        so asking all at once adds no call and waits about one round trip, not two per service. The prioritize
        verb gets the same candidates as the filter verb (kube sends it those that passed the filter; asking both
        at once halves the wait, and the scores of refused nodes are never read). Should a call fail, an ignorable
        extender is left out of the whole plan (none of its answers is used, whichever call failed first); any
        other raises the error of the first failed call, filter calls first, in service name order."""
        config = self.config
        self._verdicts = {service.name: {} for service in self.problem.services.values()}
        self._scores = {service.name: {} for service in self.problem.services.values()}
        self._scaled = {service.name: {} for service in self.problem.services.values()}
        services = [service for service in self.problem.services.values() if not service.sidecar]
        # Filter calls first, each verb in the problem's service order; a service that is not sent (_body) gets none.
        jobs = [(kind, verb, service) for kind, verb in ((FILTER, config.filter_verb), (PRIORITIZE, config.prioritize_verb))
                if verb for service in services]
        try:
            answers = self._round(jobs)
        except wire.ExtenderError as error:
            if not config.ignorable:
                raise
            self.skipped = str(error)
            self.warnings.append("%s; ignorable, so it is left out of this plan" % error)
            return
        fallback = "node(s) didn't pass %s" % config.name
        for (kind, _verb, service), answer in zip(jobs, answers):
            if answer is None:
                continue            # not sent
            if kind == FILTER:
                passed, failed = answer
                names = self._candidates(service)
                self._verdicts[service.name] = {name: Status.unschedulable(failed.get(name, fallback), self.name)
                                                for name in names if name not in passed}
            else:
                scores, found = answer
                self._scores[service.name] = scores
                # kube: score x weight x MaxNodeScore / MaxExtenderPriority (the weight is the framework's).
                self._scaled[service.name] = {name: score * (MAX_NODE_SCORE / wire.MAX_EXTENDER_PRIORITY)
                                              for name, score in scores.items()}
                for warning in found:
                    if len(self.warnings) < wire.MAX_WARNINGS:
                        self.warnings.append("%s (service %s)" % (warning, service.name))

    def _round(self, jobs):
        """The answers read for ``jobs`` [(kind, verb, service)], in order (filter: (passed, failed); prioritize:
        (scores, warnings); None for a service that is not sent); raises the ExtenderError of the first job that
        failed. Once one failed or the plan's time bound is spent, no further call starts.

        A service's body is built once for both verbs, when its first call goes out or, sooner, while the round waits
        for answers (the transport's call_round's ``ahead``): the calls of the first services do not wait for the bodies of
        the last (their candidates, and in the nodes mode their Node objects)."""
        config = self.config
        transport = self.transport
        decode = wire.answer_decoder(config)
        started = time.monotonic()
        spent = self.seconds
        waiting = collections.deque(job[2] for job in jobs)

        def ahead():
            while waiting:
                service = waiting.popleft()
                if service.name not in self._bodies:
                    self._body(service)
                    break
            return bool(waiting)

        def prepare(job):
            kind, verb, service = job
            body = self._body(service)
            if body is None:
                return None
            if spent + time.monotonic() - started >= wire.MAX_PLAN_SECONDS:
                return wire.ExtenderError("%s: reached its bound of %g s in this plan; not called again (service %s)"
                                          % (config.name, wire.MAX_PLAN_SECONDS, service.name))
            self.calls[kind] += 1
            return verb, body

        def finish(job, answer):
            kind, verb, service = job
            try:
                if isinstance(answer, wire.ExtenderError):
                    raise answer
                if isinstance(answer, Exception):
                    # The transport's error: its message names the extender and the verb, never the token.
                    raise wire.ExtenderError(str(answer))
                answer = decode(verb, answer)
                sent = self._sent_to(service)[1]
                if kind == FILTER:
                    return wire.read_filter_result(config, verb, answer, sent)
                found = []
                return wire.read_priorities(config, verb, answer, sent, found), found
            except wire.ExtenderError as error:
                return wire.ExtenderError("%s (service %s)" % (error, service.name))

        try:
            answers = transport.call_round(config, jobs, prepare, finish, ahead)
        finally:
            self.seconds += time.monotonic() - started
        for answer in answers:
            if isinstance(answer, Exception):
                raise answer
        return answers

    def _body(self, service):
        """The ExtenderArgs sent for ``service`` (bytes), built once for both verbs; None when it is not sent: the
        extender does not manage it (managedResources), or the built-in filters accept no node for it."""
        if service.name not in self._bodies:
            body = None
            if self._interested(service):
                names = self._candidates(service)
                if names:
                    # In the nodes mode the NodeList of one candidate list is joined once and shared by its services.
                    body = wire.args_body(self._pod(service)[0], names, self._node_list(names),
                                          self.config.node_cache_capable)
            self._bodies[service.name] = body
        return self._bodies[service.name]

    def _node_list(self, names):
        """The encoded items of the NodeList sent with ``names`` (None in the names mode): one per candidate list
        (services of one shape share the list, _candidates)."""
        if self.config.node_cache_capable:
            return None
        entry = self._node_lists.get(id(names))
        if entry is None or entry[0] is not names:
            entry = self._node_lists[id(names)] = (names, b",".join([self._node(name) for name in names]))
        return entry[1]

    def _interested(self, service):
        """kube's IsInterested: no managedResources, or the Pod requests one of them."""
        managed = self.config.managed_resources
        return not managed or bool(set(managed) & self._pod(service)[1])

    def _pod(self, service):
        pod = self._pods.get(service.name)
        if pod is None:
            obj = wire.pod_object(self.problem, service)
            pod = self._pods[service.name] = (wire.encode(obj), wire.resource_names(obj))
        return pod

    def _node(self, name):
        text = self._node_json.get(name)
        if text is None:
            text = self._node_json[name] = wire.encode(wire.node_object(self.problem.nodes[name])).encode("utf-8")
        return text

    def report(self):
        """What the result says about this extender: calls, seconds, whether it was skipped and why."""
        entry = {"urlPrefix": self.config.url_prefix, "filter_calls": self.calls[FILTER],
                 "prioritize_calls": self.calls[PRIORITIZE], "seconds": round(self.seconds, 3),
                 "skipped": self.skipped is not None}
        if self.warnings:
            entry["warnings"] = list(self.warnings)
        return entry


def every_node_left_out(framework, problem):
    """``problem`` without the every-node instances (``<service>@<node>``) whose node an HTTP extender of
    ``framework`` refused for their service, as kube leaves the DaemonSet pod of that node alone pending: the other
    nodes get theirs and the plan goes on. Each one is named, with the extender's reason, in the extender's
    ``left_out`` (the result's ``left_out``) and in a warning per service. ``problem`` itself when nothing is left
    out. Asks the extenders (their one round of calls per plan) only when the problem has an every-node service.

    The extender's verdict is for the nodes the built-in static filters accept (the nodes it is sent): an every-node
    instance whose node a built-in filter refuses (it does not fit) stays, and fails the gang with that reason."""
    extenders = [plugin for plugin in framework.filters if isinstance(plugin, Extender)]
    if not extenders or not any(service.every_node and not service.sidecar for service in problem.services.values()):
        return problem
    left_out = {}
    refused = collections.defaultdict(dict)       # (extender, service name) -> {node: reason}
    for instance in problem.instances():
        if instance.node is None:
            continue
        node = problem.nodes[instance.node]
        for plugin in extenders:
            status = plugin.filter_static(instance, node, True)
            if not status.ok:
                why = status.reasons[0] if status.reasons else "node(s) didn't pass %s" % plugin.name
                reason = "%s refused node %s: %s" % (plugin.name, instance.node, why)
                plugin.left_out[instance.name] = left_out[instance.name] = reason
                refused[plugin, instance.service.name][instance.node] = status
                break
    if not left_out:
        return problem
    for (plugin, service), nodes in refused.items():
        if len(plugin.warnings) < wire.MAX_WARNINGS:
            names = sorted(nodes)
            shown = ", ".join(names[:5]) + (" and %d more" % (len(names) - 5) if len(names) > 5 else "")
            plugin.warnings.append("%s: every-node service %s gets no instance on %d node(s) it refused: %s"
                                   % (plugin.name, service, len(names), shown))
    return dataclasses.replace(problem, left_out=frozenset(left_out))


def left_out_report(framework):
    """The result's ``left_out``: every-node instance name -> why no instance was made (every_node_left_out)."""
    found = {}
    for plugin in framework.plugins:
        if isinstance(plugin, Extender):
            found.update(plugin.left_out)
    return dict(sorted(found.items()))


def extender_class(config, transport):
    """A plugin class for one configured extender (its name is what errors and the result call it); ``transport``
    makes its calls (an object with extender/transport.py's HTTPTransport's ``call_round``), handed in by whoever builds
    the profile: the plugin picks none."""
    return type("Extender%d" % config.index, (Extender,), {"name": config.name, "config": config,
                                                           "transport": transport})


def extender_report(framework):
    """The result's ``extenders`` entries, or None when the profile has none."""
    entries = [plugin.report() for plugin in framework.plugins if isinstance(plugin, Extender)]
    return entries or None
