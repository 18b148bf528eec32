# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gangplank's GPU watchdog: a long-running process on each GPU host (docs/gpu-sharing.md).

    python3 gpu_watchdog.py CONFIG [--once]

Every ``interval`` seconds it lists the compute processes of every GPU (NVML's
nvmlDeviceGetComputeRunningProcesses: pid and used memory), maps each pid to a gangplank instance by
the container id its /proc/<pid>/cgroup names (only a cgroup the engine made, root's, from the
hierarchy's root: the outermost container; the engine says which container belongs to which instance
by its ``gangplank.io/instance`` label), sums each instance's memory per GPU and compares it with the
grant in CONFIG. An instance over its grant on some GPU for ``grace`` seconds is acted on
per ``policy``: ``warn`` (an event) or ``stop`` (its container is stopped, and an event). A process
on a GPU that maps to no instance bypasses the shares: it is reported (an event). MPS servers
(``nvidia-cuda-mps-server`` started by an instance's own MPS control daemon, in the daemon's container)
are listed apart: their memory is the scheduler's per-daemon overhead. A process of that name started
otherwise counts as any other.

It writes its state (per instance: used bytes per GPU, over since, action; bypasses; servers; the
last events; the last poll) atomically to ``state_file``, which the next run and status read.
SIGHUP reloads CONFIG; SIGTERM ends it.

On hosts with simulated GPUs (the test bed) ``source: simulated`` reads the processes from a JSON
file instead of NVML (``{"processes": [{"gpu": uuid, "pid": n, "used_memory": bytes}]}``): it is
named as simulated in the state, never as NVML.

Standard library only (and pynvml, nvidia-ml-py, for ``source: nvml``); Python 3.9+. It imports
nothing of the collection: the deploy role copies this one file to the host. The decisions are pure
functions (parse_config, container_id, classify, decide, state_document) that the unit tests drive
with fake process lists and fake /proc contents.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import signal
import stat
import subprocess
import sys
import tempfile
import time

VERSION = 1
# Bounds on what is read from outside: config, /proc, NVML, the engine, the simulated file.
MAX_CONFIG_BYTES = 1 << 20
MAX_STATE_BYTES = 4 << 20
MAX_SIMULATED_BYTES = 1 << 20
MAX_CGROUP_BYTES = 16384
MAX_CGROUP_LINES = 64
MAX_INSTANCES = 1024
MAX_GPUS = 64
MAX_PROCESSES = 4096           # per GPU
MAX_ENGINE_BYTES = 1 << 20
MAX_EVENTS = 50
MAX_BYTES = 1 << 50            # 1 PiB: no GPU has more memory; a larger "used" is a sentinel, not a size
MAX_PID = 1 << 22              # the kernel's pid_max limit
ENGINE_TIMEOUT = 30
STOP_TIMEOUT = 60
POLICIES = ("warn", "stop")
EVENT_KINDS = ("warn", "stop", "bypass")
# What was done about an instance over its grant, as the tracking and the state file name it.
ACTIONS = ("warned", "stopped", "stop failed")
SOURCES = ("nvml", "simulated")
ENGINES = ("podman", "docker")
SERVER_EXE = "nvidia-cuda-mps-server"
LABEL_NODE = "gangplank.io/node"
LABEL_INSTANCE = "gangplank.io/instance"

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,252}")
_UUID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
_ID = re.compile(r"[0-9a-f]{64}")
# The cgroups an engine makes for a container, from the root of a hierarchy (cgroup v1 and v2 alike): Podman's
# /libpod_parent/libpod-<id> (cgroupfs manager) and /machine.slice/libpod-<id>.scope (systemd manager), Docker's
# /docker/<id> (cgroupfs driver) and /system.slice/docker-<id>.scope (systemd driver). Only root can make these (their
# parents are root's, 0755), and each directory along the way is checked to be root's (cgroup_owner). A container's
# own sub-cgroups, an engine nested in it, or a cgroup the engine delegated to it are below: the outermost container is
# the one. A cgroup of the same name anywhere else (a user's own systemd slice, another container's subtree) names no
# container. conmon's cgroup (libpod-conmon-<id>) is not the container's.
_ENGINE_CGROUPS = (
    re.compile(r"/libpod_parent/libpod-([0-9a-f]{64})"),
    re.compile(r"/machine\.slice/libpod-([0-9a-f]{64})\.scope"),
    re.compile(r"/docker/([0-9a-f]{64})"),
    re.compile(r"/system\.slice/docker-([0-9a-f]{64})\.scope"),
)
MAX_MOUNTINFO_BYTES = 1 << 20
CONTROL_EXE = "nvidia-cuda-mps-control"
LABEL_MPS_OF = "gangplank.io/mps-of"
# Nesting of a JSON file read from outside: the files the watchdog reads and writes are a few levels deep.
MAX_JSON_DEPTH = 32


class WatchdogError(ValueError):
    """A config, state or source that is not what is expected: the message names the file and the place."""


# --- config ---------------------------------------------------------------------------------------


def _number(value, low, high, where):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise WatchdogError("%s: expected a number from %s to %s" % (where, low, high))
    return value


def _integer(value, low, high, where):
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise WatchdogError("%s: expected a whole number from %d to %d" % (where, low, high))
    return value


def _string(value, pattern, where):
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise WatchdogError("%s: expected a name of plain characters" % where)
    return value


def _path(value, where, empty=False):
    if empty and value == "":
        return value
    if not isinstance(value, str) or not value.startswith("/") or len(value) > 4096 or "\0" in value or "\n" in value:
        raise WatchdogError("%s: expected an absolute path" % where)
    return value


def _plain(name):
    """A key as an error message may name it: printable, at most 80 characters."""
    return "".join(char if char.isprintable() else "?" for char in name[:80]) if isinstance(name, str) else "?"


def parse_config(data, path="config"):
    """The config as a dict of checked values; WatchdogError naming ``path`` and the key when it is not one.

    Keys: version (1), node, engine, policy, grace, interval, source, simulated_file, state_file,
    instances: {name: {container, enforced, grants: {uuid: bytes}, cores: {uuid: percent}}}."""
    where = path
    if not isinstance(data, dict):
        raise WatchdogError("%s: expected a JSON object" % where)
    if data.get("version") != VERSION:
        raise WatchdogError("%s: version: expected %d" % (where, VERSION))
    known = {"version", "node", "engine", "policy", "grace", "interval", "source", "simulated_file", "state_file",
             "instances"}
    unknown = sorted(_plain(str(key))[:40] for key in data if key not in known)
    if unknown:
        raise WatchdogError("%s: unknown key %s" % (where, unknown[0]))
    config = {
        "version": VERSION,
        "node": _string(data.get("node"), _NAME, where + ": node"),
        "engine": data.get("engine"),
        "policy": data.get("policy", "warn"),
        "grace": _number(data.get("grace", 30), 0, 86400, where + ": grace"),
        "interval": _number(data.get("interval", 5), 0.1, 3600, where + ": interval"),
        "source": data.get("source", "nvml"),
        "simulated_file": _path(data.get("simulated_file", ""), where + ": simulated_file", empty=True),
        "state_file": _path(data.get("state_file"), where + ": state_file"),
        "instances": {},
    }
    for key, choices in (("engine", ENGINES), ("policy", POLICIES), ("source", SOURCES)):
        if config[key] not in choices:
            raise WatchdogError("%s: %s: expected one of %s" % (where, key, ", ".join(choices)))
    if config["source"] == "simulated" and not config["simulated_file"]:
        raise WatchdogError("%s: simulated_file: required with source simulated" % where)
    instances = data.get("instances", {})
    if not isinstance(instances, dict) or len(instances) > MAX_INSTANCES:
        raise WatchdogError("%s: instances: expected an object of at most %d instances" % (where, MAX_INSTANCES))
    for name in sorted(instances):
        entry = instances[name]
        here = "%s: instances.%s" % (where, _plain(name))
        _string(name, _NAME, here)
        if not isinstance(entry, dict):
            raise WatchdogError("%s: expected an object" % here)
        grants = entry.get("grants")
        if not isinstance(grants, dict) or not 0 < len(grants) <= MAX_GPUS:
            raise WatchdogError("%s.grants: expected an object of 1 to %d GPUs" % (here, MAX_GPUS))
        cores = entry.get("cores", {})
        if not isinstance(cores, dict) or len(cores) > MAX_GPUS:
            raise WatchdogError("%s.cores: expected an object of at most %d GPUs" % (here, MAX_GPUS))
        if not isinstance(entry.get("enforced"), bool):
            raise WatchdogError("%s.enforced: expected true or false" % here)
        config["instances"][name] = {
            "container": _string(entry.get("container"), _NAME, here + ".container"),
            "enforced": entry["enforced"],
            "grants": {_string(uuid, _UUID, here + ".grants"): _integer(size, 1, MAX_BYTES, here + ".grants." + _plain(uuid))
                       for uuid, size in sorted(grants.items())},
            "cores": {_string(uuid, _UUID, here + ".cores"): _integer(share, 1, 100, here + ".cores." + _plain(uuid))
                      for uuid, share in sorted(cores.items())},
        }
    return config


def read_json_file(path, limit, what):
    """A JSON object from ``path`` (at most ``limit`` bytes); WatchdogError naming the file otherwise."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(limit + 1)
    except OSError as error:
        raise WatchdogError("%s %s cannot be read: %s" % (what, path, error.strerror or error)) from None
    if len(raw) > limit:
        raise WatchdogError("%s %s is larger than %d bytes" % (what, path, limit))
    try:
        text = raw.decode("utf-8")
        if nested_deeper(text, MAX_JSON_DEPTH):
            raise WatchdogError("%s %s is nested more than %d levels deep" % (what, path, MAX_JSON_DEPTH))
        data = json.loads(text)
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        if isinstance(error, WatchdogError):
            raise
        raise WatchdogError("%s %s is not JSON" % (what, path)) from None
    if not isinstance(data, dict):
        raise WatchdogError("%s %s is not a JSON object" % (what, path))
    return data, hashlib.sha256(raw).hexdigest()


# A string, or what is left of one that does not end: matched without going back, in time linear in the text.
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEPS = [0] * 256
_STEPS[ord("[")] = _STEPS[ord("{")] = 1
_STEPS[ord("]")] = _STEPS[ord("}")] = -1


def nested_deeper(text, limit):
    """Whether the arrays and objects of a JSON text nest more than ``limit`` levels (strings left out), counted
    without recursion (a running sum of the brackets, in C): the parser recurses once per level."""
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text)).encode("ascii")
    return max(itertools.accumulate(map(_STEPS.__getitem__, brackets)), default=0) > limit


def load_config(path):
    data, digest = read_json_file(path, MAX_CONFIG_BYTES, "the watchdog config")
    config = parse_config(data, path)
    config["sha256"] = digest
    return config


# --- processes: NVML, simulated -------------------------------------------------------------------


def checked_processes(entries, known_gpus=None):
    """[(uuid, pid, used)] from raw entries (dicts with gpu, pid, used_memory): a pid that is not a plain pid is left out,
    a used size that is not a plain size (NVML's 'not available' sentinel, a negative or absurd number) is None. At most
    MAX_PROCESSES per GPU and MAX_GPUS GPUs; returns (processes, notes)."""
    found, per_gpu, notes = [], {}, []
    for entry in entries:
        if not isinstance(entry, dict):
            notes.append("an entry that is not an object was left out")
            continue
        uuid, pid, used = entry.get("gpu"), entry.get("pid"), entry.get("used_memory")
        if not isinstance(uuid, str) or not _UUID.fullmatch(uuid):
            notes.append("an entry without a plain GPU uuid was left out")
            continue
        if isinstance(pid, bool) or not isinstance(pid, int) or not 0 < pid <= MAX_PID:
            notes.append("an entry on %s without a plain pid was left out" % uuid)
            continue
        if isinstance(used, bool) or not isinstance(used, int) or not 0 <= used <= MAX_BYTES:
            used = None
        if uuid not in per_gpu and len(per_gpu) >= MAX_GPUS:
            notes.append("more than %d GPUs: the rest were left out" % MAX_GPUS)
            break
        per_gpu[uuid] = per_gpu.get(uuid, 0) + 1
        if per_gpu[uuid] > MAX_PROCESSES:
            if per_gpu[uuid] == MAX_PROCESSES + 1:
                notes.append("more than %d processes on %s: the rest were left out" % (MAX_PROCESSES, uuid))
            continue
        found.append((uuid, pid, used))
    return found, sorted(set(notes))


class SimulatedSource:
    """Processes from a JSON file a test writes (hosts with simulated GPUs): never NVML."""

    def __init__(self, path):
        self.path = path
        self.name = "simulated (%s)" % path

    def processes(self):
        if not os.path.exists(self.path):
            return [], []
        data, _digest = read_json_file(self.path, MAX_SIMULATED_BYTES, "the simulated GPU processes file")
        entries = data.get("processes")
        if not isinstance(entries, list):
            raise WatchdogError("the simulated GPU processes file %s: processes: expected a list" % self.path)
        return checked_processes(entries)


class NvmlSource:
    """Processes from NVML: nvmlDeviceGetComputeRunningProcesses of every device."""

    name = "nvml"

    def __init__(self, nvml=None):
        self._nvml = nvml
        self._ready = False

    def _init(self):
        if self._nvml is None:
            try:
                import pynvml  # pylint: disable=import-outside-toplevel
            except ImportError:
                raise WatchdogError("NVML is not available: the pynvml module (nvidia-ml-py) is not installed") from None
            self._nvml = pynvml
        if not self._ready:
            self._nvml.nvmlInit()
            self._ready = True

    def processes(self):
        nvml = self._nvml
        try:
            self._init()
            nvml = self._nvml
            entries = []
            count = min(int(nvml.nvmlDeviceGetCount()), MAX_GPUS)
            for index in range(count):
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                uuid = nvml.nvmlDeviceGetUUID(handle)
                if isinstance(uuid, bytes):
                    uuid = uuid.decode("ascii", "replace")
                for process in list(nvml.nvmlDeviceGetComputeRunningProcesses(handle))[:MAX_PROCESSES]:
                    entries.append({"gpu": uuid, "pid": getattr(process, "pid", None),
                                    "used_memory": getattr(process, "usedGpuMemory", None)})
        except WatchdogError:
            raise
        except Exception as error:  # pylint: disable=broad-except
            # NVMLError and its kin: the next poll initialises again.
            self._ready = False
            raise WatchdogError("NVML: %s" % (str(error)[:200] or type(error).__name__)) from None
        return checked_processes(entries)


# --- /proc and the engine -------------------------------------------------------------------------


def container_id(cgroup_text, owner=None):
    """The full id of the container a process runs in, from its /proc/<pid>/cgroup text; (id, reason) with id None
    when it names no container, or when its lines name different ones.

    A line names a container only by a cgroup its engine made (_ENGINE_CGROUPS, from the hierarchy's root: the
    outermost container). With ``owner`` (cgroup_owner: controllers, path -> the uid of the first directory along the
    path that is not root's, 0 when all are root's, None when they cannot be looked at), each such cgroup must be
    root's: a line whose cgroup cannot be looked at does not count, and one that is not root's names no container."""
    if not isinstance(cgroup_text, str):
        return None, "no cgroup"
    lines = cgroup_text.split("\n")
    if len(cgroup_text) > MAX_CGROUP_BYTES or len(lines) > MAX_CGROUP_LINES + 1:
        return None, "cgroup file larger than expected"
    found = set()
    for line in lines:
        if not line:
            continue
        parts = line.split(":", 2)
        if len(parts) != 3 or not parts[2].startswith("/"):
            return None, "cgroup line not in the form hierarchy:controllers:/path"
        for pattern in _ENGINE_CGROUPS:
            match = pattern.match(parts[2])
            if match and parts[2][match.end():match.end() + 1] in ("", "/"):
                break
        else:
            continue
        if owner is not None:
            uid = owner(parts[1], match.group(0))
            if uid is None:
                continue
            if uid != 0:
                return None, "in a cgroup named like container %s's that uid %d owns, not the engine" % (
                    match.group(1)[:12], uid)
        found.add(match.group(1))
    if not found:
        return None, "not in a container"
    if len(found) > 1:
        return None, "cgroup lines name different containers"
    return found.pop(), ""


def _unescape_mount(text):
    """A mountinfo field as a path (the kernel writes a space, a tab, a line break and a backslash as \\ooo)."""
    return re.sub(r"\\([0-7]{3})", lambda match: chr(int(match.group(1), 8)), text)


def cgroup_mounts(mountinfo):
    """{controllers: mount point} of the cgroup hierarchies mounted at their root, from /proc/self/mountinfo's text:
    "" for cgroup v2, frozenset of a v1 hierarchy's controllers (``name=systemd`` too) otherwise."""
    mounts = {}
    for line in mountinfo.split("\n")[:100000]:
        left, _sep, right = line.partition(" - ")
        fields, tail = left.split(" "), right.split(" ")
        if len(fields) < 5 or len(tail) < 3 or fields[3] != "/":
            continue
        if tail[0] == "cgroup2":
            mounts.setdefault("", _unescape_mount(fields[4]))
        elif tail[0] == "cgroup":
            options = frozenset(tail[2].split(",")) - {"rw", "ro"}
            mounts.setdefault(options, _unescape_mount(fields[4]))
    return mounts


def read_mounts():
    try:
        with open("/proc/self/mountinfo", "rb") as handle:
            return cgroup_mounts(handle.read(MAX_MOUNTINFO_BYTES).decode("utf-8", "replace"))
    except OSError:
        return {}


def cgroup_owner(controllers, path, mounts=None):
    """The uid of the first directory from the hierarchy's root down to the cgroup ``path`` that is not root's (a
    cgroup the engine made is root's all the way), 0 when all are, None when the hierarchy is not mounted here or a
    directory is gone (the process with it)."""
    mounts = read_mounts() if mounts is None else mounts
    if controllers:
        wanted = frozenset(controllers.split(","))
        mount = next((point for options, point in sorted(mounts.items(), key=lambda item: str(item[1]))
                      if options and wanted <= options), None)
    else:
        mount = mounts.get("")
    parts = path.strip("/").split("/")
    if mount is None or any(part in ("", ".", "..") for part in parts):
        return None
    directory = mount
    for part in [""] + parts:
        directory = os.path.join(directory, part) if part else directory
        try:
            info = os.lstat(directory)
        except OSError:
            return None
        if not stat.S_ISDIR(info.st_mode):
            return None
        if info.st_uid != 0:
            return info.st_uid
    return 0


def read_proc(pid, name, limit=MAX_CGROUP_BYTES):
    """/proc/<pid>/<name> as text (at most ``limit`` + 1 bytes, so a larger one is seen as larger); None when gone."""
    try:
        with open("/proc/%d/%s" % (pid, name), "rb") as handle:
            return handle.read(limit + 1).decode("utf-8", "replace")
    except OSError:
        return None


def exe_name(pid):
    try:
        return os.path.basename(os.readlink("/proc/%d/exe" % pid))[:255]
    except OSError:
        return ""


def parse_engine_containers(text, node):
    """({container id: instance}, {container id: (instance, instance container)}) from the lines '<id> <node label>
    <instance label> <mps-of label>' the engine printed: the instances' containers, and the MPS daemons' (labelled
    gangplank.io/mps-of with their instance's container, mps.py). Lines of another shape, other nodes or without an
    instance label are left out."""
    found, daemons = {}, {}
    for line in text.splitlines()[:100000]:
        parts = line.strip().split(" ")
        if len(parts) not in (3, 4) or not _ID.fullmatch(parts[0]) or parts[1] != node or not _NAME.fullmatch(parts[2]):
            continue
        if len(parts) == 3:
            found[parts[0]] = parts[2]
        elif _NAME.fullmatch(parts[3]):
            daemons[parts[0]] = (parts[2], parts[3])
    return found, daemons


def parent_pid(stat_text):
    """The parent's pid from /proc/<pid>/stat's text (the fields after the name in parentheses); None when it is not one."""
    if not isinstance(stat_text, str):
        return None
    fields = stat_text.rpartition(")")[2].split()
    if len(fields) < 2 or not fields[1].isdigit() or not fields[1].isascii() or len(fields[1]) > 8:
        return None
    pid = int(fields[1])
    return pid if 0 < pid <= MAX_PID else None


def _run(argv, timeout):
    """(returncode, stdout text) of a bounded command; (None, reason) when it cannot run or runs too long."""
    try:
        completed = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError) as error:
        return None, str(error)[:200]
    out = completed.stdout[:MAX_ENGINE_BYTES].decode("utf-8", "replace")
    if completed.returncode != 0:
        return completed.returncode, completed.stderr[:300].decode("utf-8", "replace").strip().split("\n")[0]
    return 0, out


def engine_containers(engine, node):
    """This node's gangplank containers, as the engine labels them: parse_engine_containers."""
    code, out = _run([engine, "ps", "-aq", "--no-trunc", "--filter", "label=%s=%s" % (LABEL_NODE, node)], ENGINE_TIMEOUT)
    if code != 0:
        raise WatchdogError("%s ps: %s" % (engine, out))
    ids = [line.strip() for line in out.splitlines() if _ID.fullmatch(line.strip())][:10000]
    if not ids:
        return {}, {}
    template = '{{.Id}} {{index .Config.Labels "%s"}} {{index .Config.Labels "%s"}} {{index .Config.Labels "%s"}}' % (
        LABEL_NODE, LABEL_INSTANCE, LABEL_MPS_OF)
    code, out = _run([engine, "inspect", "--format", template] + ids, ENGINE_TIMEOUT)
    if code != 0:
        # A container removed between the two commands fails the inspect: the next poll asks again.
        raise WatchdogError("%s inspect: %s" % (engine, out))
    return parse_engine_containers(out, node)


def stop_container(engine, name):
    """'' when the engine stopped the container, else why not (one line)."""
    code, out = _run([engine, "stop", "-t", "10", name], STOP_TIMEOUT)
    return "" if code == 0 else ("%s stop %s: %s" % (engine, name, out))[:300]


# --- decisions ------------------------------------------------------------------------------------


def classify(processes, cgroups, exes, instance_of, config, daemons=None, parents=None, owner=None):
    """Who uses what: ``processes`` [(uuid, pid, used)], ``cgroups`` pid -> cgroup text (None: gone), ``exes`` pid ->
    executable name, ``instance_of`` container id -> instance and ``daemons`` container id -> (instance, the instance
    container it is the MPS daemon of) (the engine's labels), ``parents`` pid -> parent pid (of the processes named as
    MPS servers; ``cgroups`` and ``exes`` hold the parents too), ``owner`` as container_id takes it.

    Returns {"used": {instance: {uuid: bytes}}, "pids": {instance: [pid]}, "servers": [...], "bypasses": [...],
    "unknown_ids": [container ids no label maps]}. A process of an instance's container or of its MPS daemon's counts
    against the instance's grant; an MPS server is listed apart only when it is the child of that instance's own MPS
    daemon (nvidia-cuda-mps-control in the daemon's container). A process of a container that maps to an instance
    without a grant in the config, or to none, and a process outside every container, is a bypass (with its reason)."""
    used, pids, servers, bypasses, unknown = {}, {}, [], [], set()
    granted = config["instances"]
    daemons, parents = daemons or {}, parents or {}
    for uuid, pid, size in processes:
        text = cgroups.get(pid)
        if text is None:
            # Gone between NVML's answer and this look: nothing to act on.
            continue
        cid, reason = container_id(text, owner)
        instance = (instance_of.get(cid) or (daemons.get(cid) or (None,))[0]) if cid else None
        if exes.get(pid) == SERVER_EXE:
            if _own_server(pid, cid, cgroups, exes, daemons, parents, granted, owner):
                servers.append({"pid": pid, "gpu": uuid, "used": size, "instance": instance})
                continue
            reason = "named %s, not started by its instance's MPS daemon; %s" % (SERVER_EXE, reason or "")
        if instance is not None and instance in granted:
            per_gpu = used.setdefault(instance, {})
            # At most MAX_BYTES: the sum of sizes that are each possible may not be (and the state holds at most that).
            per_gpu[uuid] = min(MAX_BYTES, per_gpu.get(uuid, 0) + (size or 0))
            pids.setdefault(instance, []).append(pid)
            continue
        if cid and instance is None:
            unknown.add(cid)
            reason = "in container %s, which is no gangplank instance of this node" % cid[:12]
        elif instance is not None:
            reason = "in instance %s, which holds no GPU grant here" % instance
        bypasses.append({"pid": pid, "gpu": uuid, "used": size, "reason": reason.rstrip("; ")})
    return {"used": used, "pids": pids, "servers": servers, "bypasses": bypasses, "unknown_ids": sorted(unknown)}


def _own_server(pid, cid, cgroups, exes, daemons, parents, granted, owner):
    """Whether the process ``pid`` (named as an MPS server, in container ``cid``) is the child of the MPS control daemon
    of an instance with a grant, in that daemon's own container."""
    if cid not in daemons:
        return False
    instance, of = daemons[cid]
    if instance not in granted or granted[instance]["container"] != of:
        return False
    parent = parents.get(pid)
    return parent is not None and exes.get(parent) == CONTROL_EXE and container_id(cgroups.get(parent), owner)[0] == cid


def over_grant(used, grants):
    """The GPUs where ``used`` ({uuid: bytes}) exceeds the grant; memory on a GPU without a grant is over."""
    return sorted(uuid for uuid, size in used.items() if size > grants.get(uuid, 0))


def decide(previous, usage, config, now):
    """The next tracking of each instance and the actions due, from the last ``previous`` tracking
    ({instance: {over_since, action, action_at, last_action, last_action_at}}), this poll's ``usage`` (classify's "used") and the config.

    An instance over its grant on some GPU since ``over_since`` is acted on once ``grace`` seconds have passed:
    ``warn`` once, or ``stop`` once (an instance stopped and still over is not stopped again in the same episode).
    Back within its grant, its episode ends (over_since and action cleared). Returns (tracking, actions) with actions
    [{"instance", "action": "warn"|"stop", "over": [uuid], "used": {...}, "grants": {...}, "over_since"}]."""
    tracking, actions = {}, []
    for name in sorted(config["instances"]):
        grants = config["instances"][name]["grants"]
        used = usage.get(name, {})
        over = over_grant(used, grants)
        before = previous.get(name) or {}
        # The last action stays known after its episode (a stopped instance has no process left, so it is back within
        # its grant at once): status shows it.
        last = before.get("last_action") if before.get("last_action") in ACTIONS else None
        entry = {"over_since": None, "action": None, "action_at": None, "last_action": last,
                 "last_action_at": _when(before.get("last_action_at"), now) if last else None}
        if over:
            since = before.get("over_since")
            entry["over_since"] = _when(since, now)
            if before.get("action") in ACTIONS:
                entry["action"], entry["action_at"] = before["action"], _when(before.get("action_at"), now)
            if entry["action"] is None and now - entry["over_since"] >= config["grace"]:
                action = "stop" if config["policy"] == "stop" else "warn"
                entry["action"], entry["action_at"] = ("stopped" if action == "stop" else "warned"), now
                entry["last_action"], entry["last_action_at"] = entry["action"], now
                actions.append({"instance": name, "action": action, "over": over, "used": dict(used),
                                "grants": dict(grants), "over_since": entry["over_since"]})
        tracking[name] = entry
    return tracking, actions


def _when(value, now):
    """A time of the tracking as the state file holds it: seconds since the epoch, not after ``now``."""
    return value if not isinstance(value, bool) and isinstance(value, (int, float)) and 0 <= value <= now else now


def size_text(size):
    if size is None:
        return "unknown"
    return "%.1f GiB" % (size / float(1 << 30))


def action_text(action, config):
    gpu = action["over"][0]
    text = "%s uses %s of its %s on %s for %ds (grace %ds)" % (
        action["instance"], size_text(action["used"].get(gpu, 0)), size_text(action["grants"].get(gpu, 0)), gpu,
        int(action.get("for", 0)), int(config["grace"]))
    if action["action"] == "stop":
        return text + "; policy stop: container %s stopped" % config["instances"][action["instance"]]["container"]
    return text + "; policy warn"


def bypass_text(bypass):
    return "pid %d on %s uses %s outside every GPU share (%s)" % (
        bypass["pid"], bypass["gpu"], size_text(bypass["used"]), bypass["reason"])


def add_event(events, seq, now, kind, text, instance=None):
    """events with one more (the last MAX_EVENTS kept); returns (events, seq)."""
    seq += 1
    events = (events + [{"seq": seq, "at": now, "kind": kind, "instance": instance, "text": text[:500]}])[-MAX_EVENTS:]
    return events, seq


def state_document(config, source_name, tracking, seen, started, now, events, seq, error="", notes=()):
    """The state file's content (docs/gpu-sharing.md): what status and the next run read."""
    instances = {}
    for name in sorted(config["instances"]):
        entry = config["instances"][name]
        track = tracking.get(name) or {}
        instances[name] = {"container": entry["container"], "enforced": entry["enforced"], "grants": entry["grants"],
                           "cores": entry["cores"], "used": dict(seen["used"].get(name, {})),
                           "pids": sorted(seen["pids"].get(name, []))[:64], "over_since": track.get("over_since"),
                           "action": track.get("action"), "action_at": track.get("action_at"),
                           "last_action": track.get("last_action"), "last_action_at": track.get("last_action_at")}
    return {"version": VERSION, "pid": os.getpid(), "started": started, "last_poll": now, "source": source_name,
            "policy": config["policy"], "grace": config["grace"], "interval": config["interval"],
            "config_sha256": config.get("sha256", ""), "error": error, "notes": list(notes)[:20],
            "instances": instances, "bypasses": seen["bypasses"][:100], "servers": seen["servers"][:100],
            "events": events, "seq": seq}


def previous_events(path):
    """(events, seq) kept from an earlier state file, so that a restart does not lose them; empty when unreadable."""
    try:
        data, _digest = read_json_file(path, MAX_STATE_BYTES, "the watchdog state")
    except WatchdogError:
        return [], 0
    events, seq = data.get("events"), data.get("seq")
    if not isinstance(events, list) or isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq < (1 << 62):
        return [], 0
    return [event for event in events[-MAX_EVENTS:] if _event_shape(event)], seq


def _event_shape(event):
    """Whether an event of an earlier state file is one add_event writes (flat: it is written back as it is)."""
    if not isinstance(event, dict) or set(event) != {"seq", "at", "kind", "instance", "text"}:
        return False
    number, at = event["seq"], event["at"]
    return (not isinstance(number, bool) and isinstance(number, int) and 0 <= number < (1 << 62)
            and not isinstance(at, bool) and isinstance(at, (int, float)) and 0 <= at < 1e11
            and event["kind"] in EVENT_KINDS
            and (event["instance"] is None or isinstance(event["instance"], str) and _NAME.fullmatch(event["instance"]))
            and isinstance(event["text"], str) and len(event["text"]) <= 500)


# --- the loop -------------------------------------------------------------------------------------


def write_atomic(path, data):
    directory = os.path.dirname(path) or "."
    fd, temporary = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=directory)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(json.dumps(data, sort_keys=True, indent=1) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


class Watchdog:
    """One process's loop: load, poll, decide, act, write."""

    def __init__(self, config_path, source=None, engine_lookup=engine_containers, stopper=stop_container,
                 proc=read_proc, exe=exe_name, clock=time.time, owner=None):
        self.config_path = config_path
        self.config = load_config(config_path)
        self._given_source = source
        self.source = source or self._source()
        self.engine_lookup, self.stopper, self.proc, self.exe, self.clock = engine_lookup, stopper, proc, exe, clock
        # Who owns a cgroup (cgroup_owner, over the mounts read once per poll): only the engine's cgroups name instances.
        self.owner = owner
        self.started = clock()
        self.tracking, self.instance_of, self.daemons, self.reported_bypasses = {}, {}, {}, set()
        self.events, self.seq = previous_events(self.config["state_file"])
        self.reload_error = ""

    def _source(self):
        if self.config["source"] == "simulated":
            return SimulatedSource(self.config["simulated_file"])
        return NvmlSource()

    def reload(self):
        try:
            config = load_config(self.config_path)
        except WatchdogError as error:
            # The last good config stays; the state says why the new one was not taken.
            self.reload_error = str(error)
            return
        self.reload_error = ""
        source_changed = (config["source"], config["simulated_file"]) != (self.config["source"], self.config["simulated_file"])
        self.config = config
        if source_changed and self._given_source is None:
            self.source = self._source()
        self.tracking = {name: entry for name, entry in self.tracking.items() if name in config["instances"]}

    def _event(self, now, kind, text, instance=None):
        self.events, self.seq = add_event(self.events, self.seq, now, kind, text, instance)
        sys.stderr.write("%s %s: %s\n" % (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)), kind, text))
        sys.stderr.flush()

    def poll(self):
        """One look: returns the state document written."""
        now = self.clock()
        config = self.config
        error, notes = "", []
        try:
            processes, notes = self.source.processes()
        except WatchdogError as failure:
            processes, error = [], str(failure)
        pids = sorted({pid for _uuid, pid, _used in processes})
        cgroups = {pid: self.proc(pid, "cgroup") for pid in pids}
        exes = {pid: self.exe(pid) for pid in pids}
        parents = {}
        for pid in pids:
            # An MPS server is known by its parent: its instance's MPS control daemon, in the daemon's container.
            parent = parent_pid(self.proc(pid, "stat")) if exes[pid] == SERVER_EXE else None
            if parent is not None:
                parents[pid] = parent
                cgroups.setdefault(parent, self.proc(parent, "cgroup"))
                exes.setdefault(parent, self.exe(parent))
        owner = self.owner
        if owner is None:
            mounts = read_mounts()

            def owner(controllers, path):
                return cgroup_owner(controllers, path, mounts)
        seen = classify(processes, cgroups, exes, self.instance_of, config, self.daemons, parents, owner)
        if seen["unknown_ids"]:
            # A container started since the last look: ask the engine once, then classify again.
            try:
                self.instance_of, self.daemons = self.engine_lookup(config["engine"], config["node"])
            except WatchdogError as failure:
                notes.append(str(failure)[:300])
            seen = classify(processes, cgroups, exes, self.instance_of, config, self.daemons, parents, owner)
        self.tracking, actions = decide(self.tracking, seen["used"], config, now)
        for action in actions:
            action["for"] = now - action["over_since"]
            text = action_text(action, config)
            if action["action"] == "stop":
                failed = self.stopper(config["engine"], config["instances"][action["instance"]]["container"])
                if failed:
                    text = text.replace(" stopped", " not stopped: " + failed)
                    self.tracking[action["instance"]]["action"] = "stop failed"
                    self.tracking[action["instance"]]["last_action"] = "stop failed"
            self._event(now, action["action"], text, action["instance"])
        current = set()
        for bypass in seen["bypasses"]:
            key = (bypass["pid"], bypass["gpu"])
            current.add(key)
            if key not in self.reported_bypasses:
                self._event(now, "bypass", bypass_text(bypass))
        self.reported_bypasses = current
        error = error or self.reload_error
        document = state_document(config, self.source.name, self.tracking, seen, self.started, now, self.events,
                                  self.seq, error=error, notes=notes)
        write_atomic(config["state_file"], document)
        return document


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    once = "--once" in argv
    paths = [arg for arg in argv if arg != "--once"]
    if len(paths) != 1:
        sys.stderr.write("usage: gpu_watchdog.py CONFIG [--once]\n")
        return 2
    try:
        watchdog = Watchdog(paths[0])
    except WatchdogError as error:
        sys.stderr.write("gangplank GPU watchdog: %s\n" % error)
        return 1
    flags = {"stop": False, "reload": False}

    def on_term(_signum, _frame):
        flags["stop"] = True

    def on_hup(_signum, _frame):
        flags["reload"] = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    signal.signal(signal.SIGHUP, on_hup)
    while True:
        if flags["reload"]:
            flags["reload"] = False
            watchdog.reload()
        try:
            watchdog.poll()
        except OSError as error:
            sys.stderr.write("gangplank GPU watchdog: the state file cannot be written: %s\n" % error)
        if once or flags["stop"]:
            return 0
        deadline = time.monotonic() + watchdog.config["interval"]
        while not flags["stop"] and not flags["reload"] and time.monotonic() < deadline:
            time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
        if flags["stop"]:
            return 0


if __name__ == "__main__":
    sys.exit(main())
