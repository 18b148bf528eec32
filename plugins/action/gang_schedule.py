# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for gangplank.platform.gang_schedule: plan the whole cluster from live facts.

Runs once on the controller. It reads, and changes, nothing on the hosts: the
gangplank.platform.schedule role takes the lock and the record before it and
writes the new record and each node's bindings after it.
"""

from __future__ import annotations

import time

from ansible.plugins.action import ActionBase

from ansible_collections.gangplank.platform.plugins.module_utils.down_hosts import (
    DEFAULT_DOWN_GRACE, down_grace_error, down_grace_value, down_nodes, down_since, move_stateful_error, pending_lines,
    record_problems, replacement_groups, replacements, waiting, waiting_lines, without_previous,
)
from ansible_collections.gangplank.platform.plugins.module_utils.messages import show
from ansible_collections.gangplank.platform.plugins.module_utils.node_facts import (
    HOST_NAME_EXPECTED, NodeFactsError, scheduler_node, valid_host_name,
)
from ansible_collections.gangplank.platform.plugins.module_utils.scale import applied_overrides, scale_overrides
from ansible_collections.gangplank.platform.plugins.module_utils.catalog import (
    exact_seconds_error, plain_data, plan_catalog, rebalance_catalog,
)
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.extender import ExtenderError
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.problem import ProblemError
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.rebalance import (
    DEFAULT_MAX_MOVES, describe, max_moves_error, max_moves_value,
)
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.profiles import load_profile
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.report import render_table

ARGUMENT_SPEC = {
    "services": {"type": "dict", "required": True},
    "quotas": {"type": "dict", "default": {}},
    "hosts": {"type": "list", "elements": "str", "required": True},
    "record": {"type": "dict", "default": {}},
    "fail_on_infeasible": {"type": "bool", "default": True},
    "exact_timeout": {"type": "float", "default": 5.0},
    "profile": {"type": "dict", "default": None},
    "scale": {"type": "dict", "default": None},
    "rebalance": {"type": "dict", "default": None},
    "down_hosts": {"type": "list", "elements": "str", "default": []},
    "down_grace": {"type": "raw", "default": DEFAULT_DOWN_GRACE},
    "move_stateful": {"type": "str", "default": None},
    "move_stateful_confirm": {"type": "str", "default": None},
    "now": {"type": "float", "default": None},
}

# Where each part of the problem comes from, to name it in errors.
_SOURCES = (("services.", "gangplank_services."), ("quotas.", "gangplank_quotas."))


def _source_path(path):
    for prefix, variable in _SOURCES:
        if path.startswith(prefix):
            return variable + path[len(prefix):]
    if path.startswith("nodes."):
        return "host " + path[len("nodes."):] + " (from its facts and gangplank_* host variables)"
    return path


def build_problem(services, quotas, hosts, hostvars, record):
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
    return {"nodes": nodes, "services": services, "quotas": quotas, "previous": record.get("placement") or {}}


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


def hosts_changed(record, result, hosts):
    """The hosts whose bindings differ from the record's: where an instance is added, removed, moved or rebound.

    A change of the ranks changes every host's bindings (each instance carries its rank).
    """
    if (record.get("ranks") or []) != result["ranks"]:
        return sorted(hosts)
    old = record.get("placement") or {}
    new = result["placements"]
    touched = {placement["node"] for name, placement in new.items() if old.get(name) != placement}
    touched |= {placement.get("node") for name, placement in old.items() if isinstance(placement, dict) and new.get(name) != placement}
    return sorted(host for host in hosts if host in touched)


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


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    @staticmethod
    def _plan(problem, max_moves, exact_timeout, profile):
        if max_moves is None:
            return plan_catalog(problem, exact_seconds=exact_timeout, profile=profile)
        return rebalance_catalog(problem, max_moves, exact_timeout, profile=profile)

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        record = args["record"]
        if exact_seconds_error(args["exact_timeout"]):
            result.update(failed=True, changed=False, msg="exact_timeout: " + exact_seconds_error(args["exact_timeout"]))
            return result
        if down_grace_error(args["down_grace"]):
            result.update(failed=True, changed=False,
                          msg="down_grace (gangplank_down_grace): %s; nothing was changed" % down_grace_error(args["down_grace"]))
            return result
        grace = down_grace_value(args["down_grace"])
        # The time the grace periods are measured against; a test passes its own.
        now = time.time() if args["now"] is None else args["now"]
        max_moves = None
        if args["rebalance"] is not None:
            max_moves = _max_moves(args["rebalance"])
            if isinstance(max_moves, str):
                result.update(failed=True, changed=False, msg="rebalance.max_moves: %s; nothing was changed" % max_moves)
                return result
        if args["scale"] is not None:
            try:
                # playbooks/scale.yml: the new count is recorded and wins over the catalog until reset.
                record = dict(record, replicas=scale_overrides(args["services"], record.get("replicas"), args["scale"]))
            except ProblemError as error:
                errors = [{"path": path, "message": message} for path, message in error.errors]
                result.update(failed=True, changed=False, errors=errors,
                              msg="The scale request is not valid; nothing was changed:\n" +
                              "\n".join("%s: %s" % (e["path"], e["message"]) for e in errors))
                return result
        try:
            problem = build_problem(args["services"], args["quotas"], args["hosts"], task_vars["hostvars"], record)
            # A host that is down keeps its place: the node it was planned with, cordoned, with its instances.
            down = down_nodes(record, args["hosts"], args["down_hosts"])
            problem["nodes"].update(down)
            since = down_since(record, down, now)
            moving = set()
            if args["move_stateful"]:
                refused = move_stateful_error(args["move_stateful"], args["move_stateful_confirm"], problem["previous"],
                                              problem["services"], down)
                if refused:
                    result.update(failed=True, changed=False, msg=refused + "; nothing was changed")
                    return result
                moving = {args["move_stateful"]}
            # Stateless instances of a host down for longer than the grace period are placed again on the live hosts.
            replacing = replacements(problem["previous"], problem["services"], since, now, grace)
            # Relative user_plugins paths start from the playbook's folder.
            profile = load_profile(args["profile"], self._loader.get_basedir())
            planned = self._plan(without_previous(problem, moving | set(replacing)), max_moves, args["exact_timeout"], profile)
            kept_waiting = []
            if not planned["feasible"] and replacing:
                # Not all replacements fit on the live hosts: those of a service that does not fit keep waiting for
                # their host, one service at a time (replacement_groups bounds the tries); the rest goes on.
                fallback = self._plan(without_previous(problem, moving), max_moves, args["exact_timeout"], profile)
                if fallback["feasible"]:
                    taken = set()
                    for _service, names in replacement_groups(replacing):
                        attempt = self._plan(without_previous(problem, moving | taken | names), max_moves,
                                             args["exact_timeout"], profile)
                        if attempt["feasible"]:
                            fallback, taken = attempt, taken | names
                    planned, kept_waiting = fallback, sorted(set(replacing) - taken)
                    replacing = {name: why for name, why in replacing.items() if name in taken}
        except NodeFactsError as error:
            result.update(failed=True, changed=False, msg="Cannot describe a host to the scheduler: %s" % error)
            return result
        except ProblemError as error:
            errors = [{"path": _source_path(path), "message": message} for path, message in error.errors]
            result.update(failed=True, changed=False, errors=errors,
                          msg="The catalog or the cluster is not valid; nothing was changed:\n" +
                          "\n".join("%s: %s" % (e["path"], e["message"]) for e in errors))
            return result
        except ExtenderError as error:
            result.update(failed=True, changed=False,
                          msg="A scheduler extender failed; nothing was changed on any host: %s" % error)
            return result
        result["plan"] = planned
        if planned.get("warnings"):
            result["warnings"] = list(planned["warnings"])     # an ignorable extender that was skipped
        result["table"] = render_table(planned).splitlines()
        result["waiting"] = waiting(planned.get("placements") or {}, down)
        result["table"] += waiting_lines(result["waiting"])
        placements = planned.get("placements") or {}
        result["replaced"] = {name: dict(why, to=placements[name]["node"]) for name, why in replacing.items()
                              if name in placements}
        result["table"] += ["replaced: %s of %s (down for %ds, grace %ds) now on %s; the copy on %s is removed when it returns"
                            % (name, why["node"], why["down_for"], why["grace"], why["to"], why["node"])
                            for name, why in result["replaced"].items()]
        result["table"] += pending_lines(problem["previous"], problem["services"], since, now, grace, replacing)
        # Entries of the placement record of another shape were skipped: each is named, never its value.
        for problem_line in record_problems(record):
            result.setdefault("warnings", []).append(problem_line)
        if kept_waiting:
            result.setdefault("warnings", []).append(
                "%s could not be replaced on the live hosts (no room): they keep waiting for their host"
                % ", ".join(kept_waiting))
        if moving and planned["feasible"]:
            name = args["move_stateful"]
            result["moved_stateful"] = {"instance": name, "from": problem["previous"][name]["node"],
                                        "to": placements[name]["node"]}
            result.setdefault("warnings", []).append(
                "moved the stateful instance %(instance)s from %(from)s, which is down, to %(to)s: it starts there WITHOUT "
                "its data, which stays on %(from)s; when %(from)s returns, its old copy is removed (its data there is kept)"
                % result["moved_stateful"])
            result["table"].append("moved by hand: %(instance)s from %(from)s (down; its data stays there) to %(to)s"
                                   % result["moved_stateful"])
        if max_moves is not None:
            # What the rebalance gains, shown before anything is done.
            result["rebalance"] = describe(planned)
            result["table"] = result["rebalance"] + [""] + result["table"]
        if not planned["feasible"]:
            result["changed"] = False
            if args["fail_on_infeasible"]:
                result["failed"] = True
                result["msg"] = "The gang does not fit; nothing was changed on any host.\n" + render_table(planned)
            return result
        recorded_nodes = record.get("nodes") or {}
        new_record = {"placement": planned["placements"], "node_labels": planned["node_labels"],
                      "replicas": applied_overrides(args["services"], record.get("replicas")), "ranks": planned["ranks"],
                      # What each host was planned with: a host that is down later keeps its place with it.
                      "nodes": dict({host: problem["nodes"][host] for host in args["hosts"]},
                                    **{host: recorded_nodes[host] for host in down}),
                      # When each host that is down was first seen down: the grace period counts from there.
                      "down_since": since}
        delta = changes(record, planned)
        result["changed"] = any(delta.values()) or (record.get("ranks") or []) != planned["ranks"] or (
            (args["record"].get("replicas") or {}) != new_record["replicas"])
        result["changes"] = delta
        result["record"] = new_record
        result["hosts"] = bindings(planned, args["hosts"])
        result["ranks"] = planned["ranks"]
        result["preempted"] = planned["preempted"]
        if args["scale"] is not None and not args["scale"].get("reset"):
            # A preemptible service may run fewer than asked: the record keeps the asked count.
            service = args["scale"]["service"]
            result["scale"] = {"service": service, "asked": new_record["replicas"].get(service),
                               "running": sum(1 for p in planned["placements"].values() if p["service"] == service)}
        # A host that was down and is live again has its waiting instances to start and its replaced ones to remove.
        returned = set(record.get("down_since") or {}) & set(args["hosts"]) if isinstance(record.get("down_since"), dict) else set()
        result["hosts_changed"] = sorted(set(hosts_changed(record, planned, args["hosts"])) | returned)
        result["diff"] = host_diffs(record, planned, args["hosts"])
        # An AWX job's artifacts carry the placement (set_stats semantics).
        result["ansible_stats"] = {"data": {"gangplank_placement": {
            "placements": planned["placements"], "ranks": planned["ranks"], "moves": planned["moves"]}},
            "per_host": False, "aggregate": False}
        return result
