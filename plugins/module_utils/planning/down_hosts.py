# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hosts that are down: in the inventory and in the placement record, but not reachable in this run.

Like a NotReady node in Kubernetes, a down host keeps its place: its recorded instances and what they
reserve stay in the plan (the node it was planned with, from the record, cordoned), nothing new goes
there, and everything else is planned and deployed on the live hosts. Its instances wait for it.
Plain Python, no Ansible import.
"""

from __future__ import annotations

import copy
import re

from ansible_collections.gangplank.platform.plugins.module_utils.validation import one_line, well_formed

MAX_DOWN_HOSTS = 1000
# A host as the inventory names it (node_facts.valid_host_name) and an instance as the record names it.
HOST_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]*")
MAX_HOST_NAME = 253
# The record's entries read at most (a record is written by the schedule role; a larger one is not its own).
MAX_RECORD_ENTRIES = 100000


def _host(value):
    return well_formed(value, HOST_NAME, MAX_HOST_NAME)


def _mapping(record, key):
    value = record.get(key) if isinstance(record, dict) else None
    return value if isinstance(value, dict) else {}


def record_problems(record):
    """One line for each entry of the placement record that is skipped, naming the entry (never its value): a
    placement that is not a mapping with a host name as its ``node``, a node entry whose key is not a host name or
    whose value is not a mapping. At most 10 lines."""
    problems = []
    if not isinstance(record, dict):
        return ["the placement record is not a mapping (%s): it is not read" % type(record).__name__]
    for key in ("placement", "nodes"):
        if record.get(key) is not None and not isinstance(record.get(key), dict):
            problems.append("record.%s is not a mapping (%s): it is not read" % (key, type(record[key]).__name__))
    for name, entry in list(_mapping(record, "placement").items())[:MAX_RECORD_ENTRIES]:
        if not isinstance(entry, dict) or not _host(entry.get("node")):
            problems.append("record.placement[%s] is skipped: its node is not a host name (%s)" % (
                one_line(name, 80), type(entry.get("node") if isinstance(entry, dict) else entry).__name__))
    for host, entry in list(_mapping(record, "nodes").items())[:MAX_RECORD_ENTRIES]:
        if not _host(host) or not isinstance(entry, dict):
            problems.append("record.nodes[%s] is skipped: %s" % (one_line(host, 80), "the key is not a host name"
                            if not _host(host) else "not a mapping (%s)" % type(entry).__name__))
    return problems[:10]


def recorded_hosts(record):
    """The hosts the record places instances on or has a node entry for (entries of another shape are skipped:
    record_problems names them)."""
    placement = _mapping(record, "placement")
    hosts = {entry["node"] for entry in list(placement.values())[:MAX_RECORD_ENTRIES]
             if isinstance(entry, dict) and _host(entry.get("node"))}
    hosts |= {host for host in list(_mapping(record, "nodes"))[:MAX_RECORD_ENTRIES] if _host(host)}
    return hosts


def down_nodes(record, live_hosts, inventory_hosts):
    """{host: node entry} for each host of the inventory that the record knows and that is not live: the node it was
    last planned with, cordoned. A host without a recorded node entry (a record of an older version) is left out
    (as if removed). The inventory's hosts are bounded by the caller's inventory; at most MAX_DOWN_HOSTS are kept."""
    nodes = _mapping(record, "nodes")
    live = {host for host in live_hosts if isinstance(host, str)}
    down = {}
    for host in sorted(recorded_hosts(record) & {host for host in inventory_hosts if isinstance(host, str)} - live)[:MAX_DOWN_HOSTS]:
        entry = nodes.get(host)
        if isinstance(entry, dict):
            down[host] = dict(copy.deepcopy(entry), unschedulable=True)
    return down


def waiting(placements, down):
    """{host: [instance, ...]}: the instances of the plan that wait for their down host."""
    result = {host: [] for host in down}
    for name, placement in placements.items():
        node = placement.get("node") if isinstance(placement, dict) else None
        if isinstance(node, str) and node in result:
            result[node].append(name)
    return {host: sorted(names) for host, names in sorted(result.items())}


def waiting_lines(waits):
    """The report of what waits for which host, one line per host."""
    return ["down: %s (unreachable or left out of this run): %s wait for it"
            % (host, ", ".join(names) if names else "no instances") for host, names in waits.items()]


# How long a host may be down before its stateless instances are replaced on the live hosts: Kubernetes evicts the
# pods of a NotReady node after 300 s (the default tolerationSeconds for node.kubernetes.io/unreachable).
DEFAULT_DOWN_GRACE = 300
MAX_DOWN_GRACE = 365 * 86400
DOWN_GRACE_EXPECTED = "a whole number of seconds from 0 to %d (a year)" % MAX_DOWN_GRACE
MAX_INSTANCE_NAME = 253


def down_grace_error(value):
    """Why ``value`` is not a grace period (a string), or None. Integers and strings of ASCII digits (``-e`` gives
    text) are taken; booleans, fractions, negatives and more than a year are not."""
    seconds = down_grace_value(value)
    if seconds is None:
        return "got %r; expected %s" % (value if not isinstance(value, str) else value[:40], DOWN_GRACE_EXPECTED)
    return None


def down_grace_value(value):
    """The grace period in whole seconds, or None when ``value`` is not one (see down_grace_error)."""
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit() and len(value.strip()) <= 12:
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_DOWN_GRACE:
        return None
    return value


def _valid_time(value, now):
    # NaN fails 0 <= value.
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= now


def down_since(record, down, now):
    """{host: seconds since the epoch}: when each host of ``down`` was first seen down, from the record's
    ``down_since``; a host newly down is down since ``now``. Hosts that are live again are dropped, so the grace
    period starts afresh the next time. A recorded time that is not a number, or lies after ``now`` (a clock that
    moved back), counts from ``now``: the grace period is never shortened by a bad record."""
    recorded = _mapping(record, "down_since")
    return {host: (int(recorded[host]) if _valid_time(recorded.get(host), now) else int(now)) for host in sorted(down)}


def _stateless(placement, services):
    """The catalog entry of a recorded instance whose service may be replaced elsewhere, or None."""
    service = services.get(placement.get("service")) if isinstance(placement.get("service"), str) else None
    if not isinstance(service, dict) or service.get("stateful") is True or service.get("every_node") is True \
            or service.get("sidecar") is True:
        return None
    return service


def _on(placement, hosts):
    return isinstance(placement, dict) and isinstance(placement.get("node"), str) and placement["node"] in hosts


def replacements(previous, services, since, now, grace):
    """The instances to place again on the live hosts, each with why: {instance: {node, service, down_for}}.

    ``previous`` is the record's placement, ``services`` the catalog, ``since`` down_since(), ``now`` the time,
    ``grace`` the default grace period in seconds (a service's own ``down_grace`` wins). An instance of a host that
    has been down for its grace period or longer is replaced when it is stateless: while it waits, its service has
    fewer healthy replicas than asked. Stateful instances (their data is on that host), every-node instances (they
    belong to that host) and sidecars (they go with their instance) are never replaced."""
    chosen = {}
    previous = previous if isinstance(previous, dict) else {}
    for name in sorted(name for name in previous if isinstance(name, str)):
        placement = previous[name]
        service = _stateless(placement, services) if _on(placement, since) else None
        if service is None:
            continue
        own = down_grace_value(service.get("down_grace")) if service.get("down_grace") is not None else None
        limit = grace if own is None else own
        down_for = int(now - since[placement["node"]])
        if down_for >= limit:
            chosen[name] = {"node": placement["node"], "service": placement["service"], "down_for": down_for, "grace": limit}
    return chosen


# Plans tried, one service at a time, when the replacements do not all fit: bounds the work of a plan (each try may
# run the exact solver for its time limit).
MAX_REPLACEMENT_TRIES = 8


def replacement_groups(chosen):
    """The replacements grouped per service, in name order: [(service, {instance, ...}), ...], at most
    MAX_REPLACEMENT_TRIES groups (the rest keep waiting)."""
    services = sorted({why["service"] for why in chosen.values()})[:MAX_REPLACEMENT_TRIES]
    return [(service, {name for name, why in chosen.items() if why["service"] == service}) for service in services]


def pending_lines(previous, services, since, now, grace, replaced):
    """For each stateless instance that waits for its host, when it will be replaced (one line per host)."""
    lines = []
    previous = previous if isinstance(previous, dict) else {}
    for host in sorted(since):
        soonest = None
        for name, placement in previous.items():
            service = _stateless(placement, services) if _on(placement, {host}) and name not in replaced else None
            if service is None:
                continue
            own = down_grace_value(service.get("down_grace")) if service.get("down_grace") is not None else None
            left = (grace if own is None else own) - int(now - since[host])
            soonest = left if soonest is None else min(soonest, left)
        if soonest is not None and soonest > 0:
            lines.append("down: %s since %ds; its stateless instances are replaced on the live hosts in %ds unless it returns"
                         % (host, int(now - since[host]), soonest))
    return lines


def without_previous(problem, names):
    """``problem`` with the recorded placement of ``names`` left out, so the scheduler places them afresh."""
    previous = problem["previous"]
    if not isinstance(previous, dict):
        return problem          # the scheduler's own check names a record of another shape
    return dict(problem, previous={name: entry for name, entry in previous.items() if name not in names})


def move_stateful_error(name, confirm, previous, services, down):
    """Why the operator's request to move the stateful instance ``name`` away from its down host may not be carried
    out (a string), or None. ``confirm`` must repeat the name: its data stays on the dead host."""
    if not isinstance(name, str) or not name or len(name) > MAX_INSTANCE_NAME:
        return "move_stateful: got %r; expected the name of a stateful instance of the record, such as db-0" % (name,)
    previous = previous if isinstance(previous, dict) else {}
    placement = previous.get(name)
    if not isinstance(placement, dict):
        known = sorted(entry for entry, value in previous.items() if isinstance(value, dict)
                       and isinstance(value.get("service"), str)
                       and isinstance(services.get(value["service"]), dict) and services[value["service"]].get("stateful") is True)[:10]
        return "move_stateful: %s is not an instance of the placement record (stateful instances: %s)" % (
            name, ", ".join(known) or "none")
    service = services.get(placement.get("service")) if isinstance(placement.get("service"), str) else None
    if not isinstance(service, dict) or service.get("stateful") is not True:
        return ("move_stateful: %s is stateless (service %s): it is replaced on the live hosts by itself once its host "
                "has been down for the grace period (gangplank_down_grace); only stateful instances are moved by hand"
                % (name, one_line(placement.get("service"), 80)))
    if not _on(placement, down):
        return ("move_stateful: %s runs on %s, which is not down in this run; a stateful instance is moved only away "
                "from a host that is down" % (name, one_line(placement.get("node"), 80)))
    if confirm != name:
        return ("move_stateful: moving %s away from %s starts it on a live host WITHOUT its data, which stays on %s. "
                "To do it, re-run with -e gangplank_move_stateful=%s -e gangplank_move_stateful_confirm=%s (got "
                "confirmation %r)" % (name, placement["node"], placement["node"], name, name, confirm))
    return None
