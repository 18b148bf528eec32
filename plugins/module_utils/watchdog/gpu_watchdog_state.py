# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU watchdog's files, read on the controller and on the host (docs/gpu-sharing.md).

The watchdog (roles/deploy/files/gpu_watchdog.py, a program of its own on each GPU host) writes a state file; the
gpu_watchdog module writes its config. This module holds what the collection does with them, with no Ansible
import (Python 3.9+, standard library only):

- ``watchdog_config``: the config a run writes, from the host's bindings (``gpus: [{index, uuid, memory, cores?}]``),
  its GPU facts and the role's settings;
- ``parse_state``: the state file, checked field by field (it is read from a host: a file that is not what the
  watchdog writes is a ``StateError`` naming the file and the field, never a traceback);
- ``state_lines`` and ``event_lines``: what status and the next run show.
"""

from __future__ import annotations

import json
import re

VERSION = 1
MAX_STATE_BYTES = 4 << 20
MAX_BYTES = 1 << 50
MAX_ENTRIES = 1024
POLICIES = ("warn", "stop")
SOURCES = ("nvml", "simulated")
SHARING = ("mps", "none")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,252}")
_UUID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
_ACTIONS = (None, "warned", "stopped", "stop failed")
_KINDS = ("warn", "stop", "bypass")
GIB = float(1 << 30)


class StateError(ValueError):
    """The state file is not what the watchdog writes."""


def container_name(host, instance):
    """As plugins/module_utils/deploy.container_name names an instance's container (kept here without its import:
    the module that uses this runs on the host)."""
    return "%s-%s" % (host, instance.partition("@")[0])


def _share_of(gpu, totals):
    """Whether a binding's GPU entry is a share: its grant is less than the device's memory, or the device is unknown."""
    total = totals.get(gpu.get("uuid"))
    return not (isinstance(total, int) and gpu.get("memory", 0) >= total)


def watchdog_config(host, instances, gpus, sharing="none", engine="podman", policy="warn", grace=30, interval=5,
                    simulated=False, directory="/var/lib/gangplank/gpu-watchdog"):
    """The watchdog's config for ``host``: each bound instance with GPUs, its container, its grant per GPU (bytes),
    its SM share where asked, and whether the host enforces it (``sharing`` mps, for shares; a whole GPU is the
    instance's). ``gpus``: the host's gangplank_gpus facts (for each device's memory), possibly empty.
    ValueError naming the instance when a binding is not one."""
    if sharing not in SHARING:
        raise ValueError("sharing: got %r; expected one of %s" % (sharing, ", ".join(SHARING)))
    totals = {gpu.get("uuid"): gpu.get("memory_total") for gpu in gpus or [] if isinstance(gpu, dict)}
    config = {"version": VERSION, "node": host, "engine": engine, "policy": policy, "grace": grace,
              "interval": interval, "source": "simulated" if simulated else "nvml",
              "simulated_file": directory + "/simulated-processes.json" if simulated else "",
              "state_file": directory + "/state.json", "instances": {}}
    for name in sorted(instances or {}):
        binding = instances[name]
        bound = (binding or {}).get("gpus") if isinstance(binding, dict) else None
        if not bound:
            continue
        grants, cores, shares = {}, {}, []
        for position, gpu in enumerate(bound):
            if not (isinstance(gpu, dict) and isinstance(gpu.get("uuid"), str) and _UUID.fullmatch(gpu["uuid"])
                    and isinstance(gpu.get("memory"), int) and not isinstance(gpu.get("memory"), bool)
                    and 0 < gpu["memory"] <= MAX_BYTES):
                raise ValueError("instances.%s.gpus[%d]: expected a uuid and a memory grant in bytes" % (name, position))
            grants[gpu["uuid"]] = grants.get(gpu["uuid"], 0) + gpu["memory"]
            if isinstance(gpu.get("cores"), int) and not isinstance(gpu.get("cores"), bool) and 0 < gpu["cores"] <= 100:
                cores[gpu["uuid"]] = gpu["cores"]
            shares.append(_share_of(gpu, totals))
        config["instances"][name] = {"container": container_name(host, name), "grants": grants, "cores": cores,
                                     "enforced": sharing == "mps" and any(shares)}
    return config


def share_gpus(instances, totals=None):
    """The uuids of the GPUs that hold shares of ``instances`` (bindings), with how many share instances each holds:
    {uuid: count}. ``totals``: uuid -> the device's memory in bytes; a GPU of unknown size counts as shared."""
    held = {}
    for binding in (instances or {}).values():
        for gpu in (binding or {}).get("gpus") or [] if isinstance(binding, dict) else []:
            if isinstance(gpu, dict) and isinstance(gpu.get("uuid"), str) and _share_of(gpu, totals or {}):
                held[gpu["uuid"]] = held.get(gpu["uuid"], 0) + 1
    return held


# --- the state file -------------------------------------------------------------------------------


def _plain(name):
    """A key as an error message may name it: printable, at most 80 characters."""
    return "".join(char if char.isprintable() else "?" for char in name[:80]) if isinstance(name, str) else "?"


def _fail(path, field, expected):
    raise StateError("the GPU watchdog's state file %s: %s: expected %s" % (path, field, expected))


def _int(value, path, field, high=MAX_BYTES, none=False):
    if none and value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
        _fail(path, field, "a whole number from 0 to %d" % high)
    return value


def _time(value, path, field, none=False):
    if none and value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1e11:
        _fail(path, field, "a time in seconds since the epoch")
    return float(value)


def _text(value, path, field, limit=500, pattern=None):
    if not isinstance(value, str) or len(value) > limit or (pattern is not None and not pattern.fullmatch(value)):
        _fail(path, field, "a string of at most %d characters%s" % (limit, " of plain characters" if pattern else ""))
    return "".join(char if char.isprintable() else "?" for char in value)


def _sizes(value, path, field):
    if not isinstance(value, dict) or len(value) > 64:
        _fail(path, field, "an object of GPU uuids to sizes")
    return {_text(uuid, path, field, 128, _UUID): _int(size, path, "%s.%s" % (field, _plain(uuid))) for uuid, size in value.items()}


def _list(value, path, field):
    if not isinstance(value, list) or len(value) > MAX_ENTRIES:
        _fail(path, field, "a list of at most %d entries" % MAX_ENTRIES)
    return value


def _process(entry, path, field, extra):
    if not isinstance(entry, dict):
        _fail(path, field, "an object")
    found = {"pid": _int(entry.get("pid"), path, field + ".pid", 1 << 22),
             "gpu": _text(entry.get("gpu"), path, field + ".gpu", 128, _UUID),
             "used": _int(entry.get("used"), path, field + ".used", none=True)}
    if extra == "reason":
        found["reason"] = _text(entry.get("reason"), path, field + ".reason", 300)
    else:
        instance = entry.get("instance")
        found["instance"] = None if instance is None else _text(instance, path, field + ".instance", 253, _NAME)
    return found


def parse_state(text, path="state.json"):
    """The watchdog's state document from its text, every field checked; StateError naming ``path`` and the field."""
    if len(text) > MAX_STATE_BYTES:
        raise StateError("the GPU watchdog's state file %s is larger than %d bytes" % (path, MAX_STATE_BYTES))
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise StateError("the GPU watchdog's state file %s is not UTF-8 text" % path) from None
    try:
        data = json.loads(text)
    except RecursionError:
        raise StateError("the GPU watchdog's state file %s is not JSON: it is nested too deeply" % path) from None
    except ValueError:
        raise StateError("the GPU watchdog's state file %s is not JSON" % path) from None
    if not isinstance(data, dict):
        _fail(path, "the document", "a JSON object")
    if data.get("version") != VERSION:
        _fail(path, "version", str(VERSION))
    state = {
        "pid": _int(data.get("pid"), path, "pid", 1 << 22),
        "started": _time(data.get("started"), path, "started"),
        "last_poll": _time(data.get("last_poll"), path, "last_poll"),
        "source": _text(data.get("source"), path, "source", 4200),
        "policy": data.get("policy"),
        "grace": data.get("grace"),
        "interval": data.get("interval"),
        "error": _text(data.get("error", ""), path, "error", 1000),
        "notes": [_text(note, path, "notes", 500) for note in _list(data.get("notes", []), path, "notes")],
        "seq": _int(data.get("seq", 0), path, "seq", 1 << 62),
        "instances": {}, "bypasses": [], "servers": [], "events": [],
    }
    if state["policy"] not in POLICIES:
        _fail(path, "policy", "one of " + ", ".join(POLICIES))
    for key, high in (("grace", 86400), ("interval", 3600)):
        if isinstance(state[key], bool) or not isinstance(state[key], (int, float)) or not 0 <= state[key] <= high:
            _fail(path, key, "a number from 0 to %d" % high)
    instances = data.get("instances")
    if not isinstance(instances, dict) or len(instances) > MAX_ENTRIES:
        _fail(path, "instances", "an object of at most %d instances" % MAX_ENTRIES)
    for name, entry in instances.items():
        field = "instances.%s" % _plain(name)
        _text(name, path, field, 253, _NAME)
        if not isinstance(entry, dict):
            _fail(path, field, "an object")
        if not isinstance(entry.get("enforced"), bool):
            _fail(path, field + ".enforced", "true or false")
        for key in ("action", "last_action"):
            if entry.get(key) not in _ACTIONS:
                _fail(path, "%s.%s" % (field, key), "one of warned, stopped, stop failed or null")
        state["instances"][name] = {
            "container": _text(entry.get("container"), path, field + ".container", 253, _NAME),
            "enforced": entry["enforced"],
            "grants": _sizes(entry.get("grants"), path, field + ".grants"),
            "cores": _sizes(entry.get("cores", {}), path, field + ".cores"),
            "used": _sizes(entry.get("used"), path, field + ".used"),
            "over_since": _time(entry.get("over_since"), path, field + ".over_since", none=True),
            "action": entry.get("action"),
            "action_at": _time(entry.get("action_at"), path, field + ".action_at", none=True),
            "last_action": entry.get("last_action"),
            "last_action_at": _time(entry.get("last_action_at"), path, field + ".last_action_at", none=True),
        }
    for key, extra in (("bypasses", "reason"), ("servers", "instance")):
        state[key] = [_process(entry, path, "%s[%d]" % (key, index), extra)
                      for index, entry in enumerate(_list(data.get(key, []), path, key))]
    for index, event in enumerate(_list(data.get("events", []), path, "events")):
        field = "events[%d]" % index
        if not isinstance(event, dict) or event.get("kind") not in _KINDS:
            _fail(path, field, "an object with a kind of " + ", ".join(_KINDS))
        instance = event.get("instance")
        state["events"].append({"seq": _int(event.get("seq"), path, field + ".seq", 1 << 62),
                                "at": _time(event.get("at"), path, field + ".at"), "kind": event["kind"],
                                "instance": None if instance is None else _text(instance, path, field + ".instance", 253, _NAME),
                                "text": _text(event.get("text"), path, field + ".text")})
    return state


# --- what is shown --------------------------------------------------------------------------------


def size_text(size):
    return "?" if size is None else "%.1f" % (size / GIB)


def stale(state, now, slack=60):
    """Whether the watchdog stopped polling: its last poll is older than three intervals and ``slack`` seconds."""
    return now - state["last_poll"] > 3 * state["interval"] + slack


def event_lines(host, state, after=0):
    """'<host>: GPU watchdog: <text>' for each event with a sequence number above ``after``."""
    return ["%s: GPU watchdog %s: %s" % (host, event["kind"], event["text"]) for event in state["events"]
            if event["seq"] > after]


def condition_lines(host, state, now):
    """What is wrong now: the watchdog not polling or failing, instances over their grant, bypasses."""
    lines = []
    if stale(state, now):
        lines.append("%s: GPU watchdog: no poll for %ds (pid %d): it is not running" % (
            host, int(now - state["last_poll"]), state["pid"]))
    if state["error"]:
        lines.append("%s: GPU watchdog: %s" % (host, state["error"]))
    for name, entry in sorted(state["instances"].items()):
        if entry["over_since"] is not None:
            over = [uuid for uuid, size in sorted(entry["used"].items()) if size > entry["grants"].get(uuid, 0)]
            lines.append("%s: GPU watchdog: %s over its grant on %s since %ds%s" % (
                host, name, ", ".join(over) or "?", int(max(0, now - entry["over_since"])),
                ", %s" % entry["action"] if entry["action"] else ""))
    for bypass in state["bypasses"]:
        lines.append("%s: GPU watchdog: bypass: pid %d on %s uses %s GiB (%s)" % (
            host, bypass["pid"], bypass["gpu"], size_text(bypass["used"]), bypass["reason"]))
    return lines


def share_rows(host, instances, state, sharing="none"):
    """One row per GPU of each bound GPU instance of ``host``: node, instance, gpu, used (bytes or None: the watchdog's
    last poll), granted, cores, sharing (enforced by MPS, advisory, or whole GPU) and the watchdog's action."""
    rows = []
    watched = (state or {}).get("instances") or {}
    for name in sorted(instances or {}):
        binding = instances[name] if isinstance(instances[name], dict) else {}
        seen = watched.get(name)
        for gpu in binding.get("gpus") or []:
            if not isinstance(gpu, dict):
                continue
            uuid = str(gpu.get("uuid"))
            used = seen["used"].get(uuid, 0) if seen is not None else None
            if seen is not None:
                enforced = "enforced (mps)" if seen["enforced"] else "advisory"
            else:
                enforced = "enforced (mps)" if sharing == "mps" else "advisory"
            cores = gpu.get("cores")
            rows.append({"node": host, "instance": name, "gpu": uuid, "used": used, "granted": gpu.get("memory"),
                         "cores": cores if isinstance(cores, int) else None, "sharing": enforced,
                         "watchdog": _watchdog_cell(seen)})
    return rows


def _watchdog_cell(seen):
    """What the watchdog did about an instance: its action in the episode now, else over (within the grace period) or
    ok, with the last action of an earlier episode (a stopped instance is within its grant at once: it has no process)."""
    if seen is None:
        return "no data"
    if seen["action"]:
        return seen["action"]
    if seen["over_since"] is not None:
        return "over"
    return "ok (last: %s)" % seen["last_action"] if seen["last_action"] else "ok"


def render_share_rows(rows):
    """The GPU share table: memory used (the watchdog's NVML reading) against granted, in GiB; the SM share."""
    if not rows:
        return []
    columns = ("node", "instance", "gpu", "used/granted GiB", "sm %", "sharing", "watchdog")
    cells = [[row["node"], row["instance"], row["gpu"],
              "%s/%s" % (size_text(row["used"]), size_text(row["granted"]) if isinstance(row["granted"], int) else "?"),
              "-" if row["cores"] is None else str(row["cores"]), row["sharing"], row["watchdog"]]
             for row in sorted(rows, key=lambda row: (row["node"], row["instance"], row["gpu"]))]
    widths = [max([len(column)] + [len(line[index]) for line in cells]) for index, column in enumerate(columns)]
    lines = ["  ".join(column.ljust(width) for column, width in zip(columns, widths)).rstrip()]
    lines += ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in cells]
    return lines
