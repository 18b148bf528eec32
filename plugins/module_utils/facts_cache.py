# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The hardware facts of the last full gathering, kept on the host, and a cheap check that they still hold.

``fingerprint`` hashes what the scheduler's view of a host is made from and can be read in
milliseconds: the CPU count, MemTotal, the machine and system, the NVIDIA driver version and its
GPUs (``/proc/driver/nvidia/gpus/*/information``, and the capability entries that MIG instances
add), the NVMe namespaces with their sizes and mounts, and the facts role's own inputs (simulated
devices, NVMe labels). ``cached_facts`` returns the stored facts only when the fingerprint is the
same; anything else (no file, another fingerprint, a file that is not ours) means gather again.

Standard library and state_files.py only: this runs on the managed host.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import platform
import shlex

from ansible_collections.gangplank.platform.plugins.module_utils.state_files import json_object, read_json

CACHE_VERSION = 1
# Facts the scheduler's node entry (module_utils/node_facts.py) and the facts table read, and nothing else.
CACHED_KEYS = ("processor_vcpus", "memtotal_mb", "architecture", "system", "gangplank_gpus", "gangplank_gpu_driver", "gangplank_nvme")
MAX_CACHE_BYTES = 4 * 1024 * 1024
_MAX_ENTRIES = 4096
# The module's options: the module and its action plugin (plugins/action/facts_cache.py) validate the same.
ARGUMENT_SPEC = {
    "path": {"type": "path", "required": True},
    "state": {"type": "str", "choices": ["read", "write"], "default": "read"},
    "inputs": {"type": "raw", "default": {}},
    "facts": {"type": "dict", "default": {}},
    "bindings_path": {"type": "path"},
    # Checked by the action plugin on the controller, before it reads the host; the module takes and ignores them.
    "check_roles": {"type": "list", "elements": "str", "default": []},
    "check_reject": {"type": "str"},
}


def _read(path, limit=65536):
    try:
        with open(path, "rb") as handle:
            return handle.read(limit).decode("utf-8", errors="replace")
    except OSError:
        return None


def _listdir(path):
    try:
        return sorted(os.listdir(path))[:_MAX_ENTRIES]
    except OSError:
        return []


def _walk_names(root):
    """Every path below ``root`` (names only, bounded): MIG instances appear as capability entries."""
    names = []
    for directory, subdirectories, files in os.walk(root):
        subdirectories.sort()
        names.extend(os.path.relpath(os.path.join(directory, name), root) for name in sorted(files))
        if len(names) > _MAX_ENTRIES:
            break
    return names[:_MAX_ENTRIES]


def _memtotal():
    for line in (_read("/proc/meminfo") or "").splitlines():
        if line.startswith("MemTotal:"):
            return " ".join(line.split()[1:])
    return None


def hardware_view():
    """What the fingerprint is made of, as plain data."""
    gpus = {bus: _read(os.path.join("/proc/driver/nvidia/gpus", bus, "information"))
            for bus in _listdir("/proc/driver/nvidia/gpus")}
    blocks = {name: _read(os.path.join("/sys/block", name, "size")) for name in _listdir("/sys/block") if name.startswith("nvme")}
    mounts = sorted(line for line in (_read("/proc/mounts", 1 << 20) or "").splitlines() if line.startswith("/dev/nvme"))
    return {
        "cpus": os.cpu_count(),
        "memtotal": _memtotal(),
        "machine": platform.machine(),
        "system": platform.system(),
        "nvidia_driver": _read("/proc/driver/nvidia/version"),
        "gpus": gpus,
        "nvidia_capabilities": _walk_names("/proc/driver/nvidia/capabilities"),
        "nvme_controllers": _listdir("/sys/class/nvme"),
        "nvme_namespaces": blocks,
        "nvme_mounts": mounts,
    }


def fingerprint(inputs, view=None):
    """sha256 of the host's hardware view and the facts role's inputs (``inputs``: any JSON data)."""
    data = {"version": CACHE_VERSION, "hardware": hardware_view() if view is None else view, "inputs": inputs}
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode("utf-8")).hexdigest()


def cache_content(facts, print_):
    """The cache file's content: the fingerprint and the scheduler's facts only."""
    return {"version": CACHE_VERSION, "fingerprint": print_, "facts": {key: facts[key] for key in CACHED_KEYS if key in facts}}


def cached_facts(content, print_):
    """(facts, reason): the stored facts when ``content`` is a cache of this fingerprint, else (None, why not)."""
    if content is None:
        return None, "no cache yet"
    if not isinstance(content, dict) or content.get("version") != CACHE_VERSION or not isinstance(content.get("facts"), dict):
        return None, "the cache file is not one this version wrote"
    if content.get("fingerprint") != print_:
        return None, "the hardware or the facts role's inputs changed since the cache was written"
    facts = content["facts"]
    missing = [key for key in CACHED_KEYS[:2] if key not in facts]
    if missing:
        return None, "the cache lacks %s" % ", ".join(missing)
    # A GPU that could not be read (an Xid error, say) is read again on every run until it reads well: the fingerprint
    # does not see it recover, and site.yml reuses the facts too.
    gpus = facts.get("gangplank_gpus")
    if isinstance(gpus, list) and any(isinstance(gpu, dict) and gpu.get("error") for gpu in gpus):
        return None, "a GPU could not be read at the last gathering"
    return {key: facts[key] for key in CACHED_KEYS if key in facts}, "the hardware is unchanged"


def read_cache(path):
    """The cache file's (or the node's fact file's) content, or None when it is missing, too large, not a regular file
    or not JSON (then it is simply not used). The size is bounded while reading: a link to /dev/zero has size 0 and
    no end."""
    try:
        return read_json(path, limit=MAX_CACHE_BYTES)
    except (OSError, ValueError):
        return None


def read_state(path, inputs, bindings_path):
    """What facts_cache returns with state=read: the stored facts when the fingerprint still holds, and the node's fact
    file when ``bindings_path`` is given. The module's read; the action plugin reads the same with SHELL_READ."""
    return state_of(hardware_view(), read_cache(path), read_cache(bindings_path) if bindings_path else None, inputs,
                    bool(bindings_path))


def state_of(view, content, bindings, inputs, with_bindings):
    """read_state's result from what was read: the hardware view, the cache file's and the fact file's content."""
    print_ = fingerprint(inputs, view)
    facts, reason = cached_facts(content, print_)
    result = {"changed": False, "valid": facts is not None, "reason": reason, "fingerprint": print_}
    if facts is not None:
        result["ansible_facts"] = facts
    if with_bindings:
        result.setdefault("ansible_facts", {})["gangplank_node_bindings"] = bindings
    return result


# The same read as one shell on the host (no Python there: a Python process costs ~20 ms of a CPU per host and run,
# on every day-2 run), printing tagged lines that parse_read turns into hardware_view's data and the two files' content.
# Files are sent as base64 of the bytes hardware_view would read (the same limits); lists of names are sorted here.
# $1 the cache file, $2 the fact file ('' for none). The last line, "end", tells a complete read.
SHELL_READ = r"""cache=$1 fact=$2
put() { # tag, key, file, byte limit: the file's first bytes, or that it cannot be read
  if [ -f "$3" ] && [ -r "$3" ] && data=$(head -c "$4" "$3" | base64 | tr -d '\n'); then printf '%s %s =%s\n' "$1" "$2" "$data"
  else printf '%s %s\n' "$1" "$2"; fi
}
json_file() { # tag, file: a regular file within the limit (its size read only then: a FIFO would block), else why not
  if [ ! -e "$2" ]; then printf '%s missing\n' "$1"; return; fi
  size=; [ ! -f "$2" ] || size=$(wc -c < "$2" | tr -dc 0-9)
  if [ -n "$size" ] && [ "$size" -le {limit} ]; then put "$1" file "$2" $(({limit} + 1))
  else printf '%s refused\n' "$1"; fi
}
printf 'cpus %s\n' "$(getconf _NPROCESSORS_ONLN 2>/dev/null)"
printf 'uname %s %s\n' "$(uname -m)" "$(uname -s)"
grep -m 1 '^MemTotal:' /proc/meminfo 2>/dev/null | sed 's/^/meminfo /'
put driver - /proc/driver/nvidia/version 65536 2>/dev/null
for bus in $(ls -A /proc/driver/nvidia/gpus 2>/dev/null); do
  put gpu "$bus" "/proc/driver/nvidia/gpus/$bus/information" 65536 2>/dev/null
done
if [ -d /proc/driver/nvidia/capabilities ]; then
  (cd /proc/driver/nvidia/capabilities && find . -mindepth 1 ! -xtype d 2>/dev/null | head -n 65536 | sed 's/^/capability /')
fi
ls -A /sys/class/nvme 2>/dev/null | sed 's/^/nvme /'
for name in $(ls -A /sys/block 2>/dev/null); do case $name in nvme*) put block "$name" "/sys/block/$name/size" 65536 2>/dev/null;; esac; done
head -c 1048576 /proc/mounts 2>/dev/null | grep '^/dev/nvme' | sed 's/^/mount /'
json_file cache "$cache" 2>/dev/null
[ -z "$fact" ] || json_file fact "$fact" 2>/dev/null
echo end
""".replace("{limit}", str(MAX_CACHE_BYTES))


def read_command(path, bindings_path):
    """The shell command line of the read."""
    return " ".join(shlex.quote(arg) for arg in ["sh", "-c", SHELL_READ, "sh", path or "", bindings_path or ""])


def _decoded(value):
    """A `put` line's value: the file's text as _read gives it, or None."""
    if not value.startswith("="):
        return None
    try:
        return base64.b64decode(value[1:], validate=True).decode("utf-8", errors="replace")
    except (binascii.Error, ValueError):
        return None


def _walk_order(name):
    """os.walk's order (top-down, sorted, a directory's files before its subdirectories) as a sort key."""
    parts = name.split("/")
    return [(1, part) for part in parts[:-1]] + [(0, parts[-1])]


def _json_content(value, path):
    """A `json_file` line's value as read_cache gives it: the JSON object, or None."""
    text = value[len("file "):] if value.startswith("file ") else ""
    if not text.startswith("="):
        return None
    try:
        return json_object(base64.b64decode(text[1:], validate=True), path)
    except (binascii.Error, ValueError):
        return None


def parse_read(stdout, path, bindings_path):
    """(view, cache content, fact file content) from SHELL_READ's output; None when the read did not end (run the
    module instead). Lines may end in a carriage return (a terminal over SSH); untagged lines are ignored."""
    lines = [line.rstrip("\r") for line in stdout.splitlines()]
    if "end" not in lines:
        return None
    view = {"cpus": None, "memtotal": None, "machine": "", "system": "", "nvidia_driver": None, "gpus": {},
            "nvidia_capabilities": [], "nvme_controllers": [], "nvme_namespaces": {}, "nvme_mounts": []}
    files = {}
    blocks = {}
    for line in lines:
        tag, _sep, rest = line.partition(" ")
        if tag == "cpus":
            view["cpus"] = int(rest) if rest.isdigit() else None
        elif tag == "uname":
            view["machine"], _sep, view["system"] = rest.partition(" ")
        elif tag == "meminfo" and view["memtotal"] is None:
            view["memtotal"] = " ".join(rest.split()[1:])
        elif tag in ("driver", "gpu", "block"):
            key, _sep, value = rest.partition(" ")
            text = _decoded(value)
            if tag == "driver":
                view["nvidia_driver"] = text
            elif tag == "gpu":
                view["gpus"][key] = text
            else:
                blocks[key] = text
        elif tag == "capability" and rest.startswith("./"):
            view["nvidia_capabilities"].append(rest[2:])
        elif tag == "nvme" and rest:
            view["nvme_controllers"].append(rest)
        elif tag == "mount":
            view["nvme_mounts"].append(rest)
        elif tag in ("cache", "fact"):
            files[tag] = rest
    view["gpus"] = {bus: view["gpus"][bus] for bus in sorted(view["gpus"])[:_MAX_ENTRIES]}
    view["nvidia_capabilities"] = sorted(view["nvidia_capabilities"], key=_walk_order)[:_MAX_ENTRIES]
    view["nvme_controllers"] = sorted(view["nvme_controllers"])[:_MAX_ENTRIES]
    # hardware_view keeps the NVMe names among /sys/block's first _MAX_ENTRIES: the same unless a host has more.
    view["nvme_namespaces"] = {name: blocks[name] for name in sorted(blocks)[:_MAX_ENTRIES]}
    view["nvme_mounts"] = sorted(view["nvme_mounts"])
    return view, _json_content(files.get("cache", ""), path), _json_content(files.get("fact", ""), bindings_path)
