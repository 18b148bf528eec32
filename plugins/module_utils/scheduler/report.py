# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A plan as a table a person reads: per node, its usage and its instances."""

from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.quantity import format_cpu, format_size

_HEADERS = ("NODE", "CPU", "MEMORY", "GPU MEMORY (per device)", "NVME", "INSTANCES")


def _used_of(used, total, formatter=format_size):
    return "%s/%s" % (formatter(used), formatter(total))


def _path(result):
    """The path that gave the answer, with the exact solver's verdict and time when it ran."""
    path = result.get("path", "greedy")
    found = result.get("exact")
    if found:
        path += ", %s in %.2f s of %g s" % (found["status"], found["seconds"], found["time_limit"])
    return path


def render_table(result):
    """Render a plan result (feasible or not) as text lines joined by newlines."""
    if not result.get("feasible"):
        lines = ["plan: INFEASIBLE (%s): %s; nothing is placed" % (_path(result), result.get("summary", ""))]
        for instance, message in result.get("unschedulable", {}).items():
            lines.append("  %s: %s" % (instance, message))
        return "\n".join(lines + _extenders(result))
    sidecars = {name: placement["sidecars"] for name, placement in result["placements"].items()}
    rows = []
    # A DISK column only where some service asks for disk volumes: every other table stays as it was.
    disk = any("disk" in usage for usage in result["usage"].values())
    headers = _HEADERS[:-1] + ("DISK", _HEADERS[-1]) if disk else _HEADERS
    for node, usage in result["usage"].items():
        gpus = " ".join("%d:%s" % (gpu["index"], _used_of(gpu["used"], gpu["total"])) for gpu in usage["gpus"])
        nvme = " ".join("%s:%s" % (dev["name"], _used_of(dev["used"], dev["size"])) for dev in usage["nvme"])
        instances = ", ".join(name + ("(+%s)" % "+".join(sidecars[name]) if sidecars[name] else "")
                              for name in usage["instances"])
        row = (node,
               _used_of(usage["cpu_millicores"]["used"], usage["cpu_millicores"]["total"], format_cpu),
               _used_of(usage["memory"]["used"], usage["memory"]["total"]),
               gpus or "-", nvme or "-")
        if disk:
            space = usage.get("disk") or {}
            row += (_used_of(space["used"], space["total"]) if space.get("total") is not None else "-",)
        rows.append(row + (instances or "-",))
    widths = [max(len(row[column]) for row in rows + [headers]) for column in range(len(headers))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in [headers] + rows]
    used_nodes = sum(1 for usage in result["usage"].values() if usage["instances"])
    lines.append("")
    lines.append("plan: feasible (%s): %d instance(s) on %d of %d node(s), %d move(s)" % (
        _path(result), len(result["placements"]), used_nodes, len(result["usage"]), len(result["moves"])))
    for move in result["moves"]:
        lines.append("  move %s: %s -> %s" % (move["instance"], move["from"], move["to"]))
    restarts = result.get("restarts") or []
    if restarts:
        lines.append("restarts: %d instance(s) stay on their node with other devices" % len(restarts))
        for restart in restarts:
            changes = ["%s %s -> %s" % (what, ",".join(restart[what]["from"]) if what == "gpus" else restart[what]["from"],
                                        ",".join(restart[what]["to"]) if what == "gpus" else restart[what]["to"] or "-")
                       for what in ("gpus", "nvme") if what in restart]
            lines.append("  restart %s on %s: %s" % (restart["instance"], restart["node"], "; ".join(changes)))
    preempted = result.get("preempted") or {}
    if preempted:
        lines.append("preempted: %d preemptible instance(s) left out" % len(preempted))
        for instance, reason in preempted.items():
            lines.append("  %s: %s" % (instance, reason))
    lines.append("ranks: " + "  ".join("%d: %s" % (rank, ", ".join(services))
                                       for rank, services in enumerate(result["ranks"])))
    return "\n".join(lines + _extenders(result))


def _extenders(result):
    """One line per HTTP extender of the profile: its calls and time, and whether it was skipped (ignorable)."""
    return ["extender %s: %d filter and %d prioritize call(s), %.3f s%s" % (
        entry["urlPrefix"], entry["filter_calls"], entry["prioritize_calls"], entry["seconds"],
        "; SKIPPED: " + entry["warnings"][-1] if entry["skipped"] else "") for entry in result.get("extenders") or ()]
