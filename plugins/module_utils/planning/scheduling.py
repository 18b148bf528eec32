# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Scheduling the whole cluster (gangplank.platform.gang_schedule) as one pure step: ``schedule_cluster(inputs)``.

From the catalog, each live host's variables and the placement record it decides: the grace periods of the hosts that
are down and the instances replaced on the live hosts, a scale request, a rebalance, the plan and its table, the new
record, each host's bindings and diff, and the placement an AWX job keeps as an artifact. It changes nothing anywhere.

- ``ScheduleInputs``: the action's options (plugins/modules/gang_schedule.py), plus ``hostvars`` (each listed host's
  variables) and ``profile_base`` (the folder relative user_plugins paths start from).
- ``ScheduleOutcome``: what was decided; ``result()`` gives the action's result, key for key, but ``ansible_stats``
  (whose ``data`` is ``stats``).
- ``ScheduleError``: nothing was decided; ``msg`` says why, ``errors`` names each invalid input's path, if any.

Plain Python, no Ansible import.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Optional

from ansible_collections.gangplank.platform.plugins.module_utils.planning.catalog import has_volumes, plain_data, read_catalog
from ansible_collections.gangplank.platform.plugins.module_utils.planning.down_hosts import (
    DEFAULT_DOWN_GRACE, down_grace_error, down_grace_value, down_nodes, down_since, move_stateful_error, pending_lines,
    record_problems, replacement_groups, replacements, waiting, waiting_lines, without_previous,
)
from ansible_collections.gangplank.platform.plugins.module_utils.messages import show
from ansible_collections.gangplank.platform.plugins.module_utils.facts.node_facts import (
    HOST_NAME_EXPECTED, NodeFactsError, scheduler_node, valid_host_name,
)
from ansible_collections.gangplank.platform.plugins.module_utils.planning.planning import exact_seconds_error, plan_or_rebalance
from ansible_collections.gangplank.platform.plugins.module_utils.reader import ProblemError
from ansible_collections.gangplank.platform.plugins.module_utils.planning.retained import (
    removal_error, retained_after, retained_dirs, retained_of, volume_report, volumes_of, wanted_again, with_retained,
)
from ansible_collections.gangplank.platform.plugins.module_utils.planning.scale import applied_overrides, scale_overrides
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.extender import ExtenderError
from ansible_collections.gangplank.platform.plugins.module_utils.extender.transport import HTTPTransport
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.profiles import load_profile
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.rebalance import (
    DEFAULT_MAX_MOVES, describe, max_moves_error, max_moves_value,
)
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.report import render_table

# Where each part of the problem comes from, to name it in errors.
_SOURCES = (("services.", "gangplank_services."), ("quotas.", "gangplank_quotas."))


@dataclass(frozen=True)
class ScheduleInputs:
    """The options of gang_schedule (plugins/modules/gang_schedule.py, same names and defaults), and what the action
    reads beside them."""
    services: dict
    hosts: list
    hostvars: dict                      # each host's variables (facts, gangplank_* host variables), by host
    quotas: dict = field(default_factory=dict)
    record: dict = field(default_factory=dict)
    fail_on_infeasible: bool = True
    exact_timeout: float = 5.0
    profile: Optional[dict] = None
    profile_base: Optional[str] = None  # the folder relative user_plugins paths start from (the playbook's)
    scale: Optional[dict] = None
    rebalance: Optional[dict] = None
    down_hosts: list = field(default_factory=list)
    down_grace: Any = DEFAULT_DOWN_GRACE
    move_stateful: Optional[str] = None
    move_stateful_confirm: Optional[str] = None
    remove_retained: Optional[str] = None       # an instance whose retained volumes are removed, with its confirmation
    remove_retained_confirm: Optional[str] = None
    volume_dir: Optional[str] = None            # where disk volumes live on the hosts (to name the removed directories)
    port_range: Optional[list] = None           # the host ports dynamic ports are chosen from; None: the default
    now: Optional[float] = None         # the time grace periods are measured against; None: now
    # ``services`` as catalog.read_catalog() read it, when the caller did (the planner then does not read it again); else None
    catalog: Any = None


class ScheduleError(Exception):
    """Nothing was decided and nothing changes: ``msg`` says why; ``errors`` ({"path", "message"} each) names every
    invalid input, or is None."""

    def __init__(self, msg, errors=None):
        super().__init__(msg)
        self.msg = msg
        self.errors = errors

    @classmethod
    def of_problem(cls, error, what, source=str):
        """From a ProblemError: each mistake at its path as ``source`` names it, all of them listed after ``what``."""
        errors = [{"path": source(path), "message": message} for path, message in error.errors]
        return cls("%s; nothing was changed:\n" % what + "\n".join("%s: %s" % (e["path"], e["message"]) for e in errors),
                   errors)

    def result(self):
        """The failed result's entries besides failed and changed."""
        return {"errors": self.errors, "msg": self.msg} if self.errors is not None else {"msg": self.msg}


@dataclass
class ScheduleOutcome:
    """What schedule_cluster decided. The entries after ``rebalance`` are those of a plan that fits (None otherwise)."""
    plan: dict                          # the scheduler's result (scheduler/scheduler.py)
    table: list                         # lines: the plan's table, then what waits, is replaced, pending or moved
    waiting: dict                       # per host that is down: its instances that wait for it
    replaced: dict                      # per instance replaced on a live host: its host, down for, grace, and where to
    warnings: list = field(default_factory=list)
    moved_stateful: Optional[dict] = None   # the stateful instance moved by hand: instance, from, to
    rebalance: Optional[list] = None    # a rebalance: what it gains, as lines (scheduler/rebalance.describe)
    volumes: Optional[list] = None      # per instance with volumes: created, kept, reattached, moved or retained
    removed_retained: Optional[dict] = None     # the retained volumes removed by hand: instance, node, directories
    failed: bool = False                # the plan does not fit and fail_on_infeasible holds
    msg: Optional[str] = None
    changed: bool = False
    changes: Optional[dict] = None      # instances added, removed, moved, rebound; hosts whose labels change
    record: Optional[dict] = None       # the new placement record
    hosts: Optional[dict] = None        # per live host: its labels and its instances, each with its rank
    scale: Optional[dict] = None        # a scale request: the service, the replicas asked and those running
    hosts_changed: Optional[list] = None
    diff: Optional[list] = None         # --diff: per host, its labels and instances before and after
    stats: Optional[dict] = None        # the placement for an AWX job's artifacts (set_stats data)

    def result(self):
        """The action's result entries, in the order it writes them; ansible_stats aside (its data is ``stats``)."""
        result = {"plan": self.plan}
        if self.warnings:
            result["warnings"] = list(self.warnings)
        result.update(table=self.table, waiting=self.waiting, replaced=self.replaced)
        if self.moved_stateful is not None:
            result["moved_stateful"] = self.moved_stateful
        if self.rebalance is not None:
            result["rebalance"] = self.rebalance
        if self.volumes:
            result["volumes"] = self.volumes
        if self.removed_retained is not None:
            result["removed_retained"] = self.removed_retained
        result["changed"] = self.changed
        if not self.plan["feasible"]:
            if self.failed:
                result.update(failed=True, msg=self.msg)
            return result
        result.update(changes=self.changes, record=self.record, hosts=self.hosts, ranks=self.plan["ranks"],
                      preempted=self.plan["preempted"])
        if self.scale is not None:
            result["scale"] = self.scale
        result.update(hosts_changed=self.hosts_changed, diff=self.diff)
        return result


def _source_path(path):
    for prefix, variable in _SOURCES:
        if path.startswith(prefix):
            return variable + path[len(prefix):]
    if path.startswith("nodes."):
        return "host " + path[len("nodes."):] + " (from its facts and gangplank_* host variables)"
    return path


def build_problem(services, quotas, hosts, hostvars, record, port_range=None):
    """The scheduler's problem: nodes from each host's facts, the catalog, the last placement."""
    bad = [host for host in hosts if not valid_host_name(host)]
    if bad:
        raise NodeFactsError("; ".join("host %s: the inventory name is not %s" % (show(host), HOST_NAME_EXPECTED)
                                       for host in bad[:10]))
    missing = [host for host in hosts if host not in hostvars]
    if missing:
        raise NodeFactsError("; ".join("host %s: no host variables (not in the inventory)" % show(host) for host in missing[:10]))
    nodes = {host: scheduler_node(hostvars[host]) for host in hosts}
    services = plain_data(services, "services")          # plain data, and a copy we may change
    replicas_of = record.get("replicas") or {}
    if not isinstance(replicas_of, dict):
        raise ProblemError([("record.replicas", "got %s; expected a mapping of service to replicas" % show(replicas_of))])
    for name, replicas in applied_overrides(services, replicas_of).items():
        # Scaling (playbooks/scale.yml) records replica counts that win over the catalog.
        if isinstance(services.get(name), dict):
            services[name]["replicas"] = replicas
    if not has_volumes(services):
        # The data filesystem matters only to disk volumes: without them the problem (and the record) stays as it was.
        nodes = {host: {key: value for key, value in node.items() if key != "disk"} for host, node in nodes.items()}
    problem = {"nodes": nodes, "services": services, "quotas": quotas, "previous": record.get("placement") or {}}
    if port_range is not None:
        # Only a site that sets the range says so: every other problem stays as it was.
        problem["port_range"] = plain_data(port_range, "port_range")
    # Retained volumes (retained.py): a wanted ordinal goes back to its node, the others keep their disk space.
    return with_retained(problem, retained_of(record))


def bindings(result, hosts):
    """Per host: its labels and its instances, each with the rank its service deploys in."""
    rank_of = {service: rank for rank, services in enumerate(result["ranks"]) for service in services}
    per_host = {host: {"labels": result["node_labels"].get(host, {}), "instances": {}} for host in hosts}
    for name, placement in result["placements"].items():
        if placement["node"] not in per_host:       # a host that is down: its instances wait for it
            continue
        entry = dict(placement, rank=rank_of[placement["service"]])
        per_host[placement["node"]]["instances"][name] = entry
    return per_host


def changes(record, result):
    """What the new plan changes against the recorded one: instances added, removed, moved, labels."""
    old = record.get("placement") or {}
    new = result["placements"]
    old_labels = record.get("node_labels") or {}
    return {
        "added": sorted(name for name in new if name not in old),
        "removed": sorted(name for name in old if name not in new),
        "moved": [{"instance": name, "from": old[name]["node"], "to": new[name]["node"]}
                  for name in sorted(new) if name in old and old[name]["node"] != new[name]["node"]],
        "rebound": sorted(name for name in new if name in old and old[name]["node"] == new[name]["node"]
                          and old[name] != new[name]),
        "labels": sorted(host for host in set(old_labels) | set(result["node_labels"])
                         if old_labels.get(host, {}) != result["node_labels"].get(host, {})),
    }


def hosts_changed(record, result, hosts, services=None):
    """The hosts whose bindings differ from the record's: where an instance is added, removed, moved or rebound; and,
    given the catalog (``services``), the hosts of the instances that depend on a service with dynamic ports whose
    endpoints (node and host ports of each instance) change: their endpoint variables and config files are worked out
    again (a site without dynamic ports deploys the hosts it did); with them, the hosts of the instances of a service
    with a config file that changes in place (``change`` signal or none), whatever it depends on.

    A change of the ranks changes every host's bindings (each instance carries its rank).
    """
    if (record.get("ranks") or []) != result["ranks"]:
        return sorted(hosts)
    old = record.get("placement") or {}
    new = result["placements"]
    touched = {placement["node"] for name, placement in new.items() if old.get(name) != placement}
    touched |= {placement.get("node") for name, placement in old.items() if isinstance(placement, dict) and new.get(name) != placement}
    moved = _endpoints_changed(old, new) if isinstance(services, dict) else set()
    moved = {service for service in moved if isinstance(services.get(service), dict)
             and isinstance(services[service].get("ports"), list)
             and any(isinstance(port, dict) for port in services[service]["ports"])}
    if moved:
        for placement in new.values():
            spec = services.get(placement["service"])
            depends_on = spec.get("depends_on") if isinstance(spec, dict) else None
            if (isinstance(depends_on, list) and moved & set(depends_on)) or _changes_in_place(spec):
                touched.add(placement["node"])
    return sorted(host for host in hosts if host in touched)


def _changes_in_place(spec):
    """Whether a service has a config file that changes in place (``change`` signal or none): a template may list any
    service's endpoints, and such a file is updated without a restart, so its hosts are deployed when endpoints move."""
    config = spec.get("config") if isinstance(spec, dict) else None
    return isinstance(config, list) and any(isinstance(entry, dict) and entry.get("change") in ("signal", "none")
                                            for entry in config)


def _endpoints_changed(old, new):
    """The services whose instances' nodes or host ports differ between two placements."""
    def where(placements):
        found = {}
        for name, entry in placements.items():
            if isinstance(entry, dict) and isinstance(entry.get("service"), str):
                found.setdefault(entry["service"], set()).add(
                    (name, str(entry.get("node")), json.dumps(entry.get("host_ports"), sort_keys=True)))
        return found
    before, after = where(old), where(new)
    return {service for service in set(before) | set(after) if before.get(service) != after.get(service)}


def _host_text(placement, labels, host):
    lines = ["labels:"] + ["  %s: %s" % item for item in sorted(labels.get(host, {}).items())]
    lines.append("instances:")
    for name in sorted(placement):
        entry = placement[name]
        if entry["node"] == host:
            gpus = ",".join("%s:%d" % (gpu["uuid"], gpu["memory"]) for gpu in entry.get("gpus") or [])
            nvme = (entry.get("nvme") or {}).get("name")
            lines.append("  %s%s%s" % (name, " gpus=" + gpus if gpus else "", " nvme=" + nvme if nvme else ""))
    return "\n".join(lines) + "\n"


def host_diffs(record, result, hosts):
    """--diff: per host, its labels and instances before and after."""
    old_placement, old_labels = record.get("placement") or {}, record.get("node_labels") or {}
    diffs = []
    for host in sorted(set(hosts) | set(old_labels)):
        before = _host_text(old_placement, old_labels, host)
        after = _host_text(result["placements"], result["node_labels"], host)
        if before != after:
            diffs.append({"before_header": "%s (revision %s)" % (host, record.get("revision", 0)),
                          "after_header": "%s (planned)" % host, "before": before, "after": after})
    return diffs


def _max_moves(request):
    """The rebalance request's max_moves as an int, or why it is not valid (a string). ``-e max_moves=2`` gives "2"."""
    unknown = sorted(set(request) - {"max_moves"})
    if unknown:
        return "unknown key %s; expected only max_moves" % show(unknown[0])
    value = request.get("max_moves")
    if value is None:
        return DEFAULT_MAX_MOVES
    value = max_moves_value(value)
    return max_moves_error(value) or value


@dataclass
class _Planned:
    """The plan and what it was made from."""
    problem: dict
    down: dict                          # the nodes of the hosts that are down, from the record
    since: dict                         # per host that is down: when it was first seen down
    moving: set                         # the stateful instance moved by hand, if any
    replacing: dict                     # the instances replaced on the live hosts, and why
    kept_waiting: list                  # those that found no room there and wait for their host
    plan: dict


def _settings(inputs):
    """(down grace in seconds, the rebalance's max_moves or None), or ScheduleError."""
    if exact_seconds_error(inputs.exact_timeout):
        raise ScheduleError("exact_timeout: " + exact_seconds_error(inputs.exact_timeout))
    if down_grace_error(inputs.down_grace):
        raise ScheduleError("down_grace (gangplank_down_grace): %s; nothing was changed" % down_grace_error(inputs.down_grace))
    grace = down_grace_value(inputs.down_grace)
    max_moves = None
    if inputs.rebalance is not None:
        max_moves = _max_moves(inputs.rebalance)
        if isinstance(max_moves, str):
            raise ScheduleError("rebalance.max_moves: %s; nothing was changed" % max_moves)
    return grace, max_moves


def _scaled(inputs, record):
    """The record with the scale request's replicas (playbooks/scale.yml: they win over the catalog until reset)."""
    if inputs.scale is None:
        return record
    try:
        return dict(record, replicas=scale_overrides(inputs.services, record.get("replicas"), inputs.scale))
    except ProblemError as error:
        raise ScheduleError.of_problem(error, "The scale request is not valid") from None


def _plan(inputs, record, grace, max_moves, now):
    """The plan, with the down hosts' instances kept or replaced; ScheduleError for what cannot be planned."""
    try:
        problem = build_problem(inputs.services, inputs.quotas, inputs.hosts, inputs.hostvars, record, inputs.port_range)
        # A host that is down keeps its place: the node it was planned with, cordoned, with its instances.
        down = down_nodes(record, inputs.hosts, inputs.down_hosts)
        problem["nodes"].update(down)
        since = down_since(record, down, now)
        moving = set()
        if inputs.move_stateful:
            refused = move_stateful_error(inputs.move_stateful, inputs.move_stateful_confirm, problem["previous"],
                                          problem["services"], down)
            if refused:
                raise ScheduleError(refused + "; nothing was changed")
            moving = {inputs.move_stateful}
        # Stateless instances of a host down for longer than the grace period are placed again on the live hosts.
        replacing = replacements(problem["previous"], problem["services"], since, now, grace)
        profile = load_profile(inputs.profile, inputs.profile_base, HTTPTransport())
        plan, replacing, kept_waiting = _with_replacements(problem, moving, replacing, lambda part: plan_or_rebalance(
            part, max_moves, inputs.exact_timeout, profile, catalog=inputs.catalog))
        return _Planned(problem, down, since, moving, replacing, kept_waiting, plan)
    except NodeFactsError as error:
        raise ScheduleError("Cannot describe a host to the scheduler: %s" % error) from None
    except ProblemError as error:
        raise ScheduleError.of_problem(error, "The catalog or the cluster is not valid", _source_path) from None
    except ExtenderError as error:
        raise ScheduleError("A scheduler extender failed; nothing was changed on any host: %s" % error) from None


def _with_replacements(problem, moving, replacing, plan):
    """(plan, the instances replaced, those that keep waiting). When the replacements do not all fit on the live
    hosts, those of a service that does not fit keep waiting for their host, one service at a time
    (replacement_groups bounds the tries), and the rest goes on."""
    planned = plan(without_previous(problem, moving | set(replacing)))
    if planned["feasible"] or not replacing:
        return planned, replacing, []
    fallback = plan(without_previous(problem, moving))
    if not fallback["feasible"]:
        return planned, replacing, []
    taken = set()
    for _service, names in replacement_groups(replacing):
        attempt = plan(without_previous(problem, moving | taken | names))
        if attempt["feasible"]:
            fallback, taken = attempt, taken | names
    return fallback, {name: why for name, why in replacing.items() if name in taken}, sorted(set(replacing) - taken)


def _report(inputs, record, planned, grace, now):
    """The outcome's table, waits, replacements, warnings and stateful move, for any plan."""
    plan, problem = planned.plan, planned.problem
    placements = plan.get("placements") or {}
    outcome = ScheduleOutcome(plan=plan, table=render_table(plan).splitlines(),
                              waiting=waiting(placements, planned.down), replaced={},
                              warnings=list(plan.get("warnings") or ()))     # an ignorable extender that was skipped
    outcome.table += waiting_lines(outcome.waiting)
    outcome.replaced = {name: dict(why, to=placements[name]["node"]) for name, why in planned.replacing.items()
                        if name in placements}
    outcome.table += ["replaced: %s of %s (down for %ds, grace %ds) now on %s; the copy on %s is removed when it returns"
                      % (name, why["node"], why["down_for"], why["grace"], why["to"], why["node"])
                      for name, why in outcome.replaced.items()]
    outcome.table += pending_lines(problem["previous"], problem["services"], planned.since, now, grace, planned.replacing)
    # Entries of the placement record of another shape were skipped: each is named, never its value.
    outcome.warnings += record_problems(record)
    if planned.kept_waiting:
        outcome.warnings.append("%s could not be replaced on the live hosts (no room): they keep waiting for their host"
                                % ", ".join(planned.kept_waiting))
    if planned.moving and plan["feasible"]:
        name = inputs.move_stateful
        outcome.moved_stateful = {"instance": name, "from": problem["previous"][name]["node"],
                                  "to": placements[name]["node"]}
        outcome.warnings.append(
            "moved the stateful instance %(instance)s from %(from)s, which is down, to %(to)s: it starts there WITHOUT "
            "its data, which stays on %(from)s; when %(from)s returns, its old copy is removed (its data there is kept)"
            % outcome.moved_stateful)
        outcome.table.append("moved by hand: %(instance)s from %(from)s (down; its data stays there) to %(to)s"
                             % outcome.moved_stateful)
    return outcome


def _removed_retained(inputs, record):
    """(the record without the retained volumes removed by hand, what is removed: instance, node, directories) for an
    explicit, confirmed removal; (record, None) without one; ScheduleError for one that may not be carried out."""
    if not inputs.remove_retained:
        return record, None
    retained = retained_of(record)
    refused = removal_error(inputs.remove_retained, inputs.remove_retained_confirm, retained)
    if refused:
        raise ScheduleError(refused + "; nothing was changed")
    name = inputs.remove_retained
    entry = retained[name]
    services = {service: dict(spec) for service, spec in inputs.services.items() if isinstance(spec, dict)}
    for service, replicas in applied_overrides(services, record.get("replicas") or {}).items():
        if service in services:
            services[service]["replicas"] = replicas
    if wanted_again(services, name, entry):
        raise ScheduleError("remove_retained: %s is wanted again (its service has %s replicas): it is reattached to its "
                            "data on %s. Scale the service below ordinal %d first; nothing was changed"
                            % (name, services[entry["service"]].get("replicas", 1), entry["node"], entry["ordinal"]))
    kept = {key: value for key, value in retained.items() if key != name}
    return dict(record, retained=kept), {"instance": name, "node": entry["node"],
                                         "dirs": retained_dirs(name, entry, inputs.volume_dir or "/var/lib/gangplank/volumes")}


def _volumes(inputs, record, planned, outcome, volumes):
    """The plan's report of each instance's volumes (retained.volume_report), in the table and the result."""
    placements = planned.plan["placements"]
    retained = retained_after(record, placements, volumes)
    outcome.volumes, lines = volume_report(record, placements, retained, volumes)
    outcome.table += lines
    return retained


def _decide(inputs, record, planned, outcome, retained=None):
    """For a plan that fits: the new record, what changes, each host's bindings and diff, the AWX stats data."""
    plan, hosts = planned.plan, inputs.hosts
    recorded_nodes = record.get("nodes") or {}
    outcome.record = {"placement": plan["placements"], "node_labels": plan["node_labels"],
                      "replicas": applied_overrides(inputs.services, record.get("replicas")), "ranks": plan["ranks"],
                      # What each host was planned with: a host that is down later keeps its place with it.
                      "nodes": dict({host: planned.problem["nodes"][host] for host in hosts},
                                    **{host: recorded_nodes[host] for host in planned.down}),
                      # When each host that is down was first seen down: the grace period counts from there.
                      "down_since": planned.since}
    if retained or (record.get("retained") is not None and retained is not None):
        # Only a site with volumes records them: every other record stays as it was.
        outcome.record["retained"] = retained
    outcome.changes = changes(record, plan)
    outcome.changed = any(outcome.changes.values()) or (record.get("ranks") or []) != plan["ranks"] or (
        (inputs.record.get("replicas") or {}) != outcome.record["replicas"])
    outcome.hosts = bindings(plan, hosts)
    if inputs.scale is not None and not inputs.scale.get("reset"):
        # A preemptible service may run fewer than asked: the record keeps the asked count.
        service = inputs.scale["service"]
        outcome.scale = {"service": service, "asked": outcome.record["replicas"].get(service),
                         "running": sum(1 for p in plan["placements"].values() if p["service"] == service)}
    # A host that was down and is live again has its waiting instances to start and its replaced ones to remove.
    returned = set(record.get("down_since") or {}) & set(hosts) if isinstance(record.get("down_since"), dict) else set()
    outcome.hosts_changed = sorted(set(hosts_changed(record, plan, hosts, inputs.services)) | returned)
    outcome.diff = host_diffs(record, plan, hosts)
    outcome.stats = {"gangplank_placement": {"placements": plan["placements"], "ranks": plan["ranks"],
                                             "moves": plan["moves"]}}


def schedule_cluster(inputs):
    """The ScheduleOutcome of ``inputs`` (ScheduleInputs), or ScheduleError when nothing can be decided."""
    grace, max_moves = _settings(inputs)
    now = time.time() if inputs.now is None else inputs.now
    record = _scaled(inputs, inputs.record)
    record, removed = _removed_retained(inputs, record)
    planned = _plan(inputs, record, grace, max_moves, now)
    outcome = _report(inputs, record, planned, grace, now)
    outcome.removed_retained = removed
    if removed is not None:
        outcome.table.append("removed by hand: the retained volumes of %s on %s (%s)"
                             % (removed["instance"], removed["node"], ", ".join(removed["dirs"])))
    if max_moves is not None:
        # What the rebalance gains, shown before anything is done.
        outcome.rebalance = describe(planned.plan)
        outcome.table = outcome.rebalance + [""] + outcome.table
    if not planned.plan["feasible"]:
        if inputs.fail_on_infeasible:
            outcome.failed = True
            outcome.msg = "The gang does not fit; nothing was changed on any host.\n" + render_table(planned.plan)
        return outcome
    volumes = volumes_of((inputs.catalog or read_catalog(inputs.services)).deploy) if has_volumes(inputs.services) else {}
    retained = _volumes(inputs, record, planned, outcome, volumes) if volumes or retained_of(record) or removed else None
    _decide(inputs, record, planned, outcome, retained)
    if removed is not None:
        outcome.changed = True
    return outcome
