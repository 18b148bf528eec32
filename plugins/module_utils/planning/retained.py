# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Retained volumes: what a stateful instance leaves on its node when it is no longer placed, and how it comes back.

A stateful instance's volumes (the catalog's ``volumes``, docs/catalog.md) live on its node. When a scale-down (or a
service removed from the catalog, or a preemption) leaves an instance out of the plan, its volumes stay where they are:
the placement record keeps them under ``retained`` (instance -> its service, ordinal, node, NVMe device and volumes),
as kube's StatefulSet keeps a removed ordinal's PersistentVolumeClaims (``whenScaled: Retain``). When the ordinal is
wanted again, the retained entry is its previous placement: the planner pins it to that node, as it pins a running
stateful instance (plugins/stickiness.py), and the instance gets its data back (Nomad's sticky volumes). Retained disk
volumes keep their size on their node's data filesystem while nobody uses them. Data is removed only by a teardown
with ``teardown_remove_data`` or by an explicit, confirmed removal of one instance's retained volumes.

- ``volumes_of(deploy)``: service -> its volumes, from the parsed catalog's deploy specs.
- ``retained_of(record)``: the record's retained entries that have the shape this module writes (others are skipped).
- ``with_retained(problem, retained)``: the problem with each wanted retained ordinal pinned to its node and the
  others' disk volumes taken from their node's data filesystem.
- ``retained_after(record, placements, volumes)``: the new record's ``retained``.
- ``volume_report(record, placements, retained, volumes)``: per instance with volumes, created, kept, reattached,
  moved or retained, as rows and as the plan table's lines.
- ``removal_error(name, confirm, retained)``: why an explicit removal of one instance's retained volumes may not be
  carried out, or None.

Plain Python, no Ansible import; every input from the record is read as hostile (shapes checked, sizes bounded).
"""

from __future__ import annotations

import posixpath
import re

from ansible_collections.gangplank.platform.plugins.module_utils.planning.down_hosts import MAX_INSTANCE_NAME
from ansible_collections.gangplank.platform.plugins.module_utils.messages import show
from ansible_collections.gangplank.platform.plugins.module_utils.facts.node_facts import valid_host_name
from ansible_collections.gangplank.platform.plugins.module_utils.quantity import MAX_SIZE, format_size

MAX_RETAINED = 100000
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,252}")
_VOLUME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,62}")


def volumes_of(deploy):
    """Service -> its volumes (name, where, size), for the services of the parsed catalog that have some."""
    return {name: [{"name": volume["name"], "where": volume["where"], "size": volume["size"]}
                   for volume in spec.get("volumes") or []]
            for name, spec in sorted(deploy.items()) if spec.get("volumes")}


def _size(value):
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_SIZE)


def _entry(name, entry):
    """A retained entry as this module writes it, or None for any other shape."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or not isinstance(entry, dict):
        return None
    service, node, ordinal = entry.get("service"), entry.get("node"), entry.get("ordinal")
    volumes = entry.get("volumes")
    if not (isinstance(service, str) and _NAME.fullmatch(service) and valid_host_name(node)
            and isinstance(ordinal, int) and not isinstance(ordinal, bool) and ordinal >= 0
            and isinstance(volumes, list) and len(volumes) <= 64):
        return None
    checked = []
    for volume in volumes:
        if not (isinstance(volume, dict) and isinstance(volume.get("name"), str) and _VOLUME.fullmatch(volume["name"])
                and volume.get("where") in ("disk", "nvme") and _size(volume.get("size"))):
            return None
        checked.append({"name": volume["name"], "where": volume["where"], "size": volume.get("size")})
    nvme = entry.get("nvme")
    if nvme is not None and not (isinstance(nvme, dict) and isinstance(nvme.get("name"), str)
                                 and isinstance(nvme.get("mount"), str) and nvme["mount"].startswith("/")):
        return None
    return {"service": service, "ordinal": ordinal, "node": node, "volumes": checked,
            "nvme": None if nvme is None else {"name": nvme["name"], "mount": nvme["mount"]}}


def retained_of(record):
    """The record's retained entries (instance -> entry) of the shape this module writes, in name order."""
    raw = record.get("retained") if isinstance(record, dict) else None
    if not isinstance(raw, dict):
        return {}
    found = {}
    for name in sorted((key for key in raw if isinstance(key, str)))[:MAX_RETAINED]:
        entry = _entry(name, raw[name])
        if entry is not None:
            found[name] = entry
    return found


def wanted_again(services, name, entry):
    """Whether the catalog (with its replica overrides applied) asks for the retained instance again."""
    spec = services.get(entry["service"])
    if not isinstance(spec, dict) or name != "%s-%d" % (entry["service"], entry["ordinal"]):
        return False
    replicas = spec.get("replicas", 1)
    return isinstance(replicas, int) and not isinstance(replicas, bool) and entry["ordinal"] < replicas


def disk_bytes(entry):
    return sum(volume["size"] or 0 for volume in entry["volumes"] if volume["where"] == "disk")


def with_retained(problem, retained):
    """``problem`` (the scheduler's, as scheduling.build_problem makes it) with the retained volumes in it: each wanted
    ordinal's entry becomes its previous placement (the planner pins a stateful instance there), and the disk volumes of
    the others keep their size on their node's data filesystem. The same problem when nothing is retained."""
    if not retained:
        return problem
    previous = dict(problem["previous"])
    nodes = dict(problem["nodes"])
    for name, entry in retained.items():
        if name in previous:
            continue
        if wanted_again(problem["services"], name, entry):
            previous[name] = {"node": entry["node"], "service": entry["service"], "ordinal": entry["ordinal"],
                              "gpus": [], "nvme": entry["nvme"]}
        elif disk_bytes(entry) and isinstance(nodes.get(entry["node"]), dict) \
                and isinstance(nodes[entry["node"]].get("disk"), int):
            node = nodes[entry["node"]] = dict(nodes[entry["node"]])
            node["disk"] = max(0, node["disk"] - disk_bytes(entry))
    return dict(problem, previous=previous, nodes=nodes)


def retained_after(record, placements, volumes):
    """The new record's ``retained``: the entries still not placed, and each instance of the recorded placement with
    volumes that the new plan leaves out (its service's volumes as the catalog has them now, or, for a service gone
    from the catalog, as they were retained)."""
    retained = {name: entry for name, entry in retained_of(record).items() if name not in placements}
    old = record.get("placement") if isinstance(record, dict) and isinstance(record.get("placement"), dict) else {}
    for name in sorted(key for key in old if isinstance(key, str)):
        placement = old[name]
        if name in placements or not isinstance(placement, dict) or placement.get("service") not in volumes:
            continue
        nvme = placement.get("nvme") if isinstance(placement.get("nvme"), dict) else None
        entry = _entry(name, {"service": placement["service"], "ordinal": placement.get("ordinal"),
                              "node": placement.get("node"), "volumes": volumes[placement["service"]],
                              "nvme": None if nvme is None else {"name": nvme.get("name"), "mount": nvme.get("mount")}})
        if entry is not None:
            retained[name] = entry
    return dict(sorted(retained.items()))


def _volumes_text(volumes, nvme):
    parts = []
    for volume in volumes:
        where = "disk" if volume["where"] == "disk" else "nvme %s" % ((nvme or {}).get("name") or "?")
        parts.append("%s (%s%s)" % (volume["name"], where, ", " + format_size(volume["size"]) if volume["size"] else ""))
    return ", ".join(parts)


def volume_report(record, placements, retained, volumes):
    """Per instance with volumes, what the plan does with its data: ``created`` (a new instance: empty volumes),
    ``kept`` (it stays on its node), ``reattached`` (a retained ordinal placed again on its node: its data back),
    ``moved`` (placed elsewhere: it starts without its data, which stays on the old node) or ``retained`` (left out:
    its volumes stay on its node). Returns (rows, lines): rows as {instance, state, node, volumes, size (disk bytes),
    from (moved only)}; lines for the plan table, empty when no service has volumes and nothing is retained."""
    old = record.get("placement") if isinstance(record, dict) and isinstance(record.get("placement"), dict) else {}
    before = retained_of(record)
    rows = []
    for name in sorted(placements):
        placement = placements[name]
        service = placement.get("service")
        if service not in volumes:
            continue
        row = {"instance": name, "node": placement["node"], "volumes": volumes[service],
               "nvme": placement.get("nvme"), "size": sum(v["size"] or 0 for v in volumes[service] if v["where"] == "disk")}
        previous = old.get(name) if isinstance(old.get(name), dict) else None
        if previous is not None and previous.get("node") == placement["node"]:
            row["state"] = "kept"
        elif previous is None and name in before and before[name]["node"] == placement["node"]:
            row["state"] = "reattached"
        elif previous is not None or name in before:
            row.update(state="moved", **{"from": (previous or before[name])["node"]})
        else:
            row["state"] = "created"
        rows.append(row)
    for name, entry in retained.items():
        rows.append({"instance": name, "state": "retained", "node": entry["node"], "volumes": entry["volumes"],
                     "nvme": entry["nvme"], "size": disk_bytes(entry)})
    lines = []
    if rows:
        lines.append("volumes:")
        for row in rows:
            text = "  %s %s on %s: %s" % (row["state"], row["instance"], row["node"],
                                          _volumes_text(row["volumes"], row["nvme"]))
            if row["state"] == "moved":
                text += "; its data stays on %s" % row["from"]
            elif row["state"] == "retained":
                text += "; kept until removed (docs/deploy.md, Retained volumes)"
            lines.append(text)
    for row in rows:
        row.pop("nvme")
    return rows, lines


def removal_error(name, confirm, retained):
    """Why removing the retained volumes of instance ``name`` may not be carried out (a string), or None. ``confirm``
    must repeat the name: the data is deleted."""
    if not isinstance(name, str) or not name or len(name) > MAX_INSTANCE_NAME:
        return "remove_retained: got %s; expected the name of an instance with retained volumes" % show(name)
    if name not in retained:
        return "remove_retained: %s has no retained volumes (instances with retained volumes: %s)" % (
            show(name), ", ".join(sorted(retained)[:10]) or "none")
    if confirm != name:
        entry = retained[name]
        return ("remove_retained: removing the retained volumes of %s deletes its data on %s (%s) for good. To do it, "
                "re-run with -e gangplank_remove_retained=%s -e gangplank_remove_retained_confirm=%s (got confirmation %s)"
                % (name, entry["node"], _volumes_text(entry["volumes"], entry["nvme"]), name, name, show(confirm)))
    return None


def retained_dirs(name, entry, volume_dir):
    """The host directories of a retained instance's volumes (deploy.volume_source's layout)."""
    dirs = []
    for volume in entry["volumes"]:
        if volume["where"] == "disk":
            dirs.append(posixpath.join(volume_dir, entry["service"], name, volume["name"]))
        elif entry["nvme"] is not None:
            dirs.append(posixpath.join(entry["nvme"]["mount"], "gangplank", entry["service"], name, volume["name"]))
    return dirs
