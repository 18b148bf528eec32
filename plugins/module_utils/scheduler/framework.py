# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The scheduling framework: named extension points and the plugins that implement them.

Modelled on kube-scheduler's framework (pkg/scheduler/framework/interface.go): one
small interface per extension point, plugins implement only the points they need,
"does not fit" is a ``Status``, never an exception, and data computed once per
instance lives in a ``CycleState``.

One deliberate difference: kube's NormalizeScore sees every node's raw score and
rescales against the best one. Here a plugin normalizes against its own fixed
range (``normalize_score(raw) -> 0..100``), so a node's score depends only on that
node. That keeps results independent of which other nodes happen to be feasible
and lets the scheduler rescore only the node it just bound to (see scheduler.py).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

MAX_NODE_SCORE = 100.0

SUCCESS = "Success"
UNSCHEDULABLE = "Unschedulable"
SKIP = "Skip"


class Status:
    """The outcome of a plugin call: a code, the reasons, and who said it."""

    __slots__ = ("code", "reasons", "plugin", "ok")

    def __init__(self, code=SUCCESS, reasons=(), plugin=""):
        self.code = code
        self.reasons = tuple(reasons)
        self.plugin = plugin
        # An attribute, not a property: it is read for every filter of every node tried.
        self.ok = code == SUCCESS

    @classmethod
    def unschedulable(cls, reason, plugin=""):
        return cls(UNSCHEDULABLE, (reason,), plugin)

    def __repr__(self):
        return "Status(%s, %r, %s)" % (self.code, self.reasons, self.plugin)


OK = Status()
SKIPPED = Status(SKIP)


class CycleState(dict):
    """Scratch data for one instance's scheduling cycle.

    As in kube (framework/cycle_state.go), each plugin keeps its data under a key of its own, its ``STATE_KEY``
    (kube's ``"PreFilter" + name`` for what its PreFilter writes), and reads no other plugin's key: a plugin that
    depends on another's data reads it through that plugin's documented accessor (gpu.gpu_choice). A plain dict,
    read as ``cycle[KEY]``: plugins read it for every node tried.

    ``node_names`` is kube's PreFilterResult: when a PreFilter restricts the
    candidates, only those nodes are tried and the others are reported with
    ``outside_reason``.
    """

    node_names = None
    outside_reason = ""

    def restrict(self, names, reason):
        names = set(names)
        self.node_names = names if self.node_names is None else self.node_names & names
        self.outside_reason = reason


# --- extension points -------------------------------------------------------------

class Plugin:
    name = "Plugin"

    def __init__(self, problem):
        self.problem = problem

    def configure(self, args):
        """The plugin's args from a profile's plugin_config (already validated by profiles.py)."""

    def attach(self, framework):
        """Called once the framework is built, with it (plugins/extender.py reads the filters that run before it)."""

    def class_key(self, service):
        """What else this plugin's filter and score answers for ``service`` depend on, beyond the fields of
        scheduler.equivalence_key (hashable): services share an equivalence class only when it is equal too.
        plugins/extender.py returns what the extender answered for the service's Pod, which names the service."""
        return None


class QueueSortPlugin(Plugin):
    def sort_key(self, instance, moves_allowed):
        """Instances are scheduled in ascending order of this key."""
        raise NotImplementedError


class PreFilterPlugin(Plugin):
    # True when ``pre_filter`` answers from the instance's service alone (not its history, the cluster or the cycle,
    # which it leaves alone): the framework then asks it once per service, not once per instance.
    service_only = False

    def pre_filter(self, cycle, cluster, instance):
        """Node-independent checks and per-instance data. SKIP turns off this plugin's filters."""
        raise NotImplementedError


class FilterPlugin(Plugin):
    """Filters come in two halves so the scheduler can cache the half that cannot change.

    ``filter_static`` may read only the service and the node's spec (labels, taints,
    devices), never what is placed; ``staying`` tells it the instance already runs on
    that node. ``filter`` reads the attempt's state and must only get stricter as
    reservations are added (the scheduler re-checks a cached node just before binding).
    """

    # True when ``filter`` reads nothing of the attempt's state but this node's (what is reserved on it): a node
    # whose version has not changed since it passed still passes, and only the other filters are run again.
    node_local = False

    def filter_static(self, instance, node, staying):
        return OK

    def filter(self, cycle, cluster, instance, node_state):
        return OK


class Filters(list):
    """The Filter plugins an instance goes through, in order; ``dynamic``: those of them whose ``filter`` does
    something (the others decide in ``filter_static`` alone, which the scheduler remembers per node), for
    run_filters, which runs for every node tried."""

    def __init__(self, plugins=()):
        super().__init__(plugins)
        self.dynamic = [plugin for plugin in self if type(plugin).filter is not FilterPlugin.filter]


NO_FILTERS = Filters()


class PostFilterPlugin(Plugin):
    def post_filter(self, attempt, instance, diagnosis):
        """Called when an instance fits nowhere. Returns a Status; SUCCESS asks for another attempt."""
        raise NotImplementedError


class ScorePlugin(Plugin):
    # True when the score depends on the instance's history and is non-zero only on
    # its previous node; the scheduler then scores that node per instance.
    instance_specific = False

    def score(self, cycle, cluster, instance, node_state):
        raise NotImplementedError

    def expect(self, remaining):
        """The work an attempt has still to place, told as it moves on to another equivalence class:
        ``remaining`` maps a service name to its instances not yet tried (read during the call only), None when
        the attempt is over. Returns True when that changed this plugin's score of every node (the scheduler
        then scores every node again). Most plugins ignore it."""
        return False

    def scores_alike(self):
        """True when this plugin would give every node the same score for this problem (kube's PreScore
        answering Skip, decided once per problem): the framework then leaves it out, which changes no choice."""
        return False

    def scores_alike_for(self, service):
        """The same per service (kube's PreScore answering Skip for one pod): True when every node scores the
        same for instances of ``service``, whatever their history; the framework then skips this plugin for
        them. It must depend on the service alone."""
        return False


class NormalizeScorePlugin(Plugin):
    def normalize_score(self, raw):
        """Map this plugin's raw score onto 0..MAX_NODE_SCORE."""
        raise NotImplementedError


class ReservePlugin(Plugin):
    def reserve(self, cycle, cluster, instance, node_state, placement):
        """Record the instance's use of the node; may fill in the placement's devices."""
        raise NotImplementedError

    def unreserve(self, cycle, cluster, instance, node_state, placement):
        """Undo ``reserve`` for this placement (a model.Placement): kube's Unreserve. The scheduler's repair pass
        uses it to take an instance off its node again."""
        raise NotImplementedError


class PermitPlugin(Plugin):
    def permit(self, attempt):
        """Approve or reject the whole gang once every instance has been tried."""
        raise NotImplementedError


class BindPlugin(Plugin):
    def bind(self, placements, cluster):
        """Turn the approved placements into the plan's result mapping (or part of it)."""
        raise NotImplementedError


class Framework:
    """Runs the configured plugins at each extension point, in order."""

    def __init__(self, problem, plugin_classes, weights, disabled=None, config=None):
        self.plugins = [cls(problem) for cls in plugin_classes]
        self.weights = dict(weights)
        disabled = disabled or {}
        config = config or {}
        for plugin in self.plugins:
            if plugin.name in config:
                plugin.configure(config[plugin.name])

        def at(point):
            # A profile may disable a plugin at one extension point (profiles.py names them).
            off = disabled.get(_POINT_NAMES.get(point), ())
            return [plugin for plugin in self.plugins if isinstance(plugin, point) and plugin.name not in off]

        self.queue_sort = at(QueueSortPlugin)[0]
        self.pre_filters = at(PreFilterPlugin)
        self.filters = at(FilterPlugin)
        self.post_filters = at(PostFilterPlugin)
        self.scorers = [p for p in at(ScorePlugin) if self.weights.get(p.name, 0) and not p.scores_alike()]
        self._normalizers = {p.name for p in self.scorers if isinstance(p, NormalizeScorePlugin)}
        self.shared_scorers = [p for p in self.scorers if not p.instance_specific]
        self.expecting = [p for p in self.scorers if type(p).expect is not ScorePlugin.expect]
        self.specific_scorers = [p for p in self.scorers if p.instance_specific]
        self._steps = {}
        self._filters_without = {}
        self._pre_filter_plans = {}
        self.reservers = at(ReservePlugin)
        self.permits = at(PermitPlugin)
        self.binders = at(BindPlugin)
        self._class_keyers = [plugin for plugin in self.plugins if type(plugin).class_key is not Plugin.class_key]
        for plugin in self.plugins:
            plugin.attach(self)

    def class_key(self, service):
        """The plugins' part of ``service``'s equivalence key (Plugin.class_key); () without such plugins."""
        return tuple(plugin.class_key(service) for plugin in self._class_keyers)

    def run_pre_filter(self, cluster, instance):
        """Returns (status, cycle, filters to run)."""
        cycle = CycleState()
        plan = self._pre_filter_plans.get(instance.service.name)
        if plan is None:
            plan = self._pre_filter_plans[instance.service.name] = self._pre_filter_plan(cluster, instance)
        steps, skipped, failure = plan
        for plugin in steps:
            status = plugin.pre_filter(cycle, cluster, instance)
            if status.code == SKIP:
                skipped += (plugin.name,)
            elif not status.ok:
                status.plugin = status.plugin or plugin.name
                return status, cycle, NO_FILTERS
        if failure is not None:
            return failure, cycle, NO_FILTERS
        # One list per set of skipped plugins (a handful per problem); callers only read it.
        filters = self._filters_without.get(skipped)
        if filters is None:
            filters = self._filters_without[skipped] = Filters(p for p in self.filters if p.name not in skipped)
        return OK, cycle, filters

    def _pre_filter_plan(self, cluster, instance):
        """Per service: (the PreFilter plugins to run per instance, those the service-only ones skip, the first
        service-only failure or None). Only the plugins before that failure run per instance: the first to fail
        speaks, as when each runs in turn."""
        steps = []
        skipped = ()
        for plugin in self.pre_filters:
            if not plugin.service_only:
                steps.append(plugin)
                continue
            status = plugin.pre_filter(CycleState(), cluster, instance)
            if status.code == SKIP:
                skipped += (plugin.name,)
            elif not status.ok:
                status.plugin = status.plugin or plugin.name
                return steps, skipped, status
        return steps, skipped, None

    @staticmethod
    def run_static_filters(filters, instance, node, staying):
        for plugin in filters:
            status = plugin.filter_static(instance, node, staying)
            if not status.ok:
                return status
        return OK

    @staticmethod
    def run_filters(filters, cycle, cluster, instance, node_state):
        """``filters``: a Filters' ``dynamic`` part (or some of it)."""
        for plugin in filters:
            status = plugin.filter(cycle, cluster, instance, node_state)
            if not status.ok:
                return status
        return OK

    def run_score(self, scorers, cycle, cluster, instance, node_state):
        total = 0.0
        service = instance.service
        key = (id(scorers), service.name)
        steps = self._steps.get(key)
        if steps is None or steps[0] is not scorers:
            # Per list of scorers and service, once: the bound methods and weights of the plugins that do not skip
            # the service (this runs for every node scored).
            steps = self._steps[key] = (scorers, [
                (plugin.score, plugin.normalize_score if plugin.name in self._normalizers else None,
                 self.weights[plugin.name]) for plugin in scorers if not plugin.scores_alike_for(service)])
        for score, normalize, weight in steps[1]:
            raw = score(cycle, cluster, instance, node_state)
            if normalize is not None:
                raw = normalize(raw)
            # Clamped onto 0..MAX_NODE_SCORE (inline: this runs for every scorer of every node scored).
            total += weight * (0.0 if raw < 0.0 else MAX_NODE_SCORE if raw > MAX_NODE_SCORE else raw)
        return total

    def run_expect(self, remaining):
        """Tell the scorers that follow the work still to place; True when a score of every node changed."""
        changed = False
        for plugin in self.expecting:
            changed = plugin.expect(remaining) or changed
        return changed

    def run_reserve(self, cycle, cluster, instance, node_state, placement):
        for plugin in self.reservers:
            plugin.reserve(cycle, cluster, instance, node_state, placement)
        node_state.version += 1

    def run_unreserve(self, cycle, cluster, instance, node_state, placement):
        """Undo run_reserve, in reverse order (as kube runs Unreserve)."""
        for plugin in reversed(self.reservers):
            plugin.unreserve(cycle, cluster, instance, node_state, placement)
        node_state.version += 1

    def run_post_filter(self, attempt, instance, diagnosis) -> Optional[Status]:
        for plugin in self.post_filters:
            status = plugin.post_filter(attempt, instance, diagnosis)
            if status.ok:
                return status
        return None

    def run_permit(self, attempt):
        for plugin in self.permits:
            status = plugin.permit(attempt)
            if not status.ok:
                return status
        return OK

    def run_bind(self, placements, cluster) -> Dict:
        result: Dict = {}
        for plugin in self.binders:
            result.update(plugin.bind(placements, cluster))
        return result


_POINT_NAMES = {PreFilterPlugin: "pre_filter", FilterPlugin: "filter", ScorePlugin: "score"}


def reasons_histogram(node_statuses: List[Tuple[str, Status]], details=None):
    """kube's FitError message body: '1 Insufficient cpu, 2 node(s) didn't match node selector'. ``details``: reason ->
    what to add after it in parentheses (diagnosis.py: what was asked and the most a node had)."""
    counts: Dict[str, int] = {}
    for _node, status in node_statuses:
        for reason in status.reasons:
            counts[reason] = counts.get(reason, 0) + 1
    details = details or {}
    return ", ".join(sorted("%d %s" % (count, _detailed(reason, details.get(reason))) for reason, count in counts.items()))


def _detailed(reason, detail):
    """``reason`` with ``detail`` in parentheses, inside the reason's own when it ends with one."""
    if not detail:
        return reason
    if reason.endswith(")"):
        return "%s; %s)" % (reason[:-1], detail)
    return "%s (%s)" % (reason, detail)
