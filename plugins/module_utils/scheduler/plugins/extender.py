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
- The prioritize verb gets the nodes that also passed this extender's filter; a score 0..10 counts
  ``weight`` x score x 10 (kube: score x weight x MaxNodeScore / MaxExtenderPriority).
- kube's IsInterested: with ``managedResources``, a service whose Pod requests none of them is not sent.
- A failed call (extender.ExtenderError): an ``ignorable`` extender is skipped for the rest of the plan
  (every node passes, every score 0) and the result says why; any other fails the plan with the error.
"""

from __future__ import annotations

import time

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler import extender as wire
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.framework import (
    MAX_NODE_SCORE, OK, FilterPlugin, ScorePlugin, Status,
)
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.model import Instance
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.profile import PLUGINS

FILTER = "filter"
PRIORITIZE = "prioritize"


class Extender(FilterPlugin, ScorePlugin):
    """One configured extender; profiles.py makes a subclass per entry with ``name`` and ``config`` set."""

    name = "Extender"
    config = None           # an extender.ExtenderConfig
    per_service = True      # the Pod it is sent carries the service's name and labels

    def __init__(self, problem):
        super().__init__(problem)
        self.built_in = ()
        self._verdicts = {}         # service name -> {node name: Status} of the nodes it filtered out
        self._scores = {}           # service name -> {node name: 0..10}
        self._pods = {}             # service name -> (Pod JSON text, resource names)
        self._node_json = {}        # node name -> Node JSON text (built once per plan)
        self.calls = {FILTER: 0, PRIORITIZE: 0}
        self.seconds = 0.0
        self.skipped = None         # why an ignorable extender is no longer asked
        self.warnings = []

    def attach(self, framework):
        # The built-in filters only: a user plugin's PreFilter may skip its own filter, which filter_static
        # alone cannot know, and a node left out of the call is one the extender never judged.
        self.built_in = [plugin for plugin in framework.filters if type(plugin) in PLUGINS]

    # --- Filter ---------------------------------------------------------------------------

    def filter_static(self, instance, node, staying):
        verdicts = self._verdicts.get(instance.service.name)
        if verdicts is None:
            verdicts = self._verdicts[instance.service.name] = self._filter(instance.service)
        return verdicts.get(node.name, OK)

    def _filter(self, service):
        config = self.config
        if not config.filter_verb or not self._interested(service):
            return {}
        candidates = self._candidates(service)
        if not candidates:
            return {}
        answer = self._call(FILTER, config.filter_verb, service, candidates)
        if answer is None:
            return {}
        passed, failed = answer
        fallback = "node(s) didn't pass %s" % config.name
        return {name: Status.unschedulable(failed.get(name, fallback), self.name)
                for name in candidates if name not in passed}

    def _candidates(self, service):
        """The nodes the built-in static filters accept for ``service`` (as if every instance stayed: the widest
        set), in the problem's node order."""
        stand_in = Instance(service, 0, None)
        return [name for name, node in self.problem.nodes.items()
                if all(plugin.filter_static(stand_in, node, True).ok for plugin in self.built_in)]

    # --- Score ------------------------------------------------------------------------------

    def scores_alike_for(self, service):
        return not self.config.prioritize_verb or not self._interested(service)

    def score(self, cycle, cluster, instance, node_state):
        scores = self._scores.get(instance.service.name)
        if scores is None:
            scores = self._scores[instance.service.name] = self._prioritize(instance.service)
        return scores.get(node_state.name, 0) * (MAX_NODE_SCORE / wire.MAX_EXTENDER_PRIORITY)

    def _prioritize(self, service):
        stand_in = Instance(service, 0, None)
        nodes = [name for name in self._candidates(service)
                 if self.filter_static(stand_in, self.problem.nodes[name], True).ok]
        if not nodes:
            return {}
        answer = self._call(PRIORITIZE, self.config.prioritize_verb, service, nodes)
        return answer or {}

    # --- the call ---------------------------------------------------------------------------

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

    def _call(self, kind, verb, service, names):
        """The answer read (filter: (passed, failed); prioritize: scores), or None when the extender is skipped."""
        config = self.config
        if self.skipped is not None:
            return None
        if self.seconds >= wire.MAX_PLAN_SECONDS:
            return self._failed(wire.ExtenderError("%s: spent %g s in this plan already (the bound is %g s); not "
                                                   "called again" % (config.name, self.seconds, wire.MAX_PLAN_SECONDS)))
        node_jsons = () if config.node_cache_capable else [self._node(name) for name in names]
        body = wire.args_body(self._pod(service)[0], names, node_jsons, config.node_cache_capable)
        self.calls[kind] += 1
        started = time.monotonic()
        try:
            answer = config.post(verb, body)
            sent = set(names)
            if kind == FILTER:
                return wire.read_filter_result(config, verb, answer, sent)
            return wire.read_priorities(config, verb, answer, sent, self._warn_list())
        except wire.ExtenderError as error:
            return self._failed(wire.ExtenderError("%s (service %s)" % (error, service.name)))
        finally:
            self.seconds += time.monotonic() - started

    def _node(self, name):
        text = self._node_json.get(name)
        if text is None:
            text = self._node_json[name] = wire.encode(wire.node_object(self.problem.nodes[name]))
        return text

    def _warn_list(self):
        return self.warnings if len(self.warnings) < wire.MAX_WARNINGS else []

    def _failed(self, error):
        if not self.config.ignorable:
            raise error
        self.skipped = str(error)
        self.warnings.append("%s; ignorable, so it is skipped for the rest of this plan" % error)
        return None

    def report(self):
        """What the result says about this extender: calls, seconds, whether it was skipped and why."""
        entry = {"urlPrefix": self.config.url_prefix, "filter_calls": self.calls[FILTER],
                 "prioritize_calls": self.calls[PRIORITIZE], "seconds": round(self.seconds, 3),
                 "skipped": self.skipped is not None}
        if self.warnings:
            entry["warnings"] = list(self.warnings)
        return entry


def extender_class(config):
    """A plugin class for one configured extender (its name is what errors and the result call it)."""
    return type("Extender%d" % config.index, (Extender,), {"name": config.name, "config": config})


def extender_report(framework):
    """The result's ``extenders`` entries, or None when the profile has none."""
    entries = [plugin.report() for plugin in framework.plugins if isinstance(plugin, Extender)]
    return entries or None
