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
import re
import shlex

from ansible_collections.gangplank.platform.plugins.module_utils.state_files import json_object, read_json
from ansible_collections.gangplank.platform.plugins.module_utils.validation import has_control, one_line, well_formed

# 2: the GPU topology (gangplank_gpu_links, numa_node and cpu_affinity per GPU); a cache version 1 wrote lacks it and is
# gathered again once (a new version is also a new fingerprint).
CACHE_VERSION = 2
# Facts the scheduler's node entry (module_utils/facts/node_facts.py) and the facts table read, and nothing else.
CACHED_KEYS = ("processor_vcpus", "memtotal_mb", "architecture", "system", "gangplank_gpus", "gangplank_gpu_driver", "gangplank_nvme",
               "gangplank_gpu_links", "gangplank_data_filesystem")
MAX_CACHE_BYTES = 4 * 1024 * 1024
_MAX_ENTRIES = 4096
# The largest count (CPUs, MiB of memory) a fact may hold: 2**53, what a JSON reader anywhere keeps exact.
MAX_COUNT = 2 ** 53
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


class ReadError(ValueError):
    """The shell read printed a line that is not what the read prints: the message names the host and the line."""


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
    if not all(_count(facts.get(key)) for key in CACHED_KEYS[:2]) or not all(
            well_formed(facts[key], _NAME, 64) for key in ("architecture", "system") if key in facts):
        return None, "the cache file is not one this version wrote"
    # A GPU that could not be read (an Xid error, say) is read again on every run until it reads well: the fingerprint
    # does not see it recover, and site.yml reuses the facts too.
    gpus = facts.get("gangplank_gpus")
    if isinstance(gpus, list) and any(isinstance(gpu, dict) and gpu.get("error") for gpu in gpus):
        return None, "a GPU could not be read at the last gathering"
    return {key: facts[key] for key in CACHED_KEYS if key in facts}, "the hardware is unchanged"


def _count(value):
    """Whether ``value`` is a count as the facts give one: a whole number, not a boolean, within MAX_COUNT."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT


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


# What each line of the shell read may hold (whole-string matches, bounded): the CPU count, uname's machine and
# system, MemTotal's value, the names of GPUs (PCI bus ids), NVMe controllers and namespaces, capability paths, and
# a `put` line's value (base64 of at most 65536 bytes, or nothing).
_CPUS = re.compile(r"[0-9]{1,7}")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:+-]*")
_MEMTOTAL = re.compile(r"[0-9]{1,20}( kB)?")
_CAPABILITY = re.compile(r"\./[A-Za-z0-9_.:+/-]{1,4096}")
_PUT_VALUE = re.compile(r"(=[A-Za-z0-9+/]*={0,2})?")
_MAX_PUT = 4 * (65536 // 3 + 1) + 1
_MAX_MOUNT = 8192


def _line_error(host, number, what):
    return ReadError("%sline %d of the facts read: %s" % ("%s: " % one_line(host, 100) if host else "", number, what))


def parse_read(stdout, path, bindings_path, host=""):
    """(view, cache content, fact file content) from SHELL_READ's output; None when the read did not end (run the
    module instead). Lines may end in a carriage return (a terminal over SSH); untagged lines are ignored.

    Every field is checked whole (bounded ASCII digits for numbers, plain characters for names): any other raises
    ReadError, naming ``host`` and the line (never quoting it)."""
    # Lines as the shell ends them: a line break only. (str.splitlines() also breaks at \x1c, \x85 or U+2028, which a
    # field could hold, and would make a line of its rest.)
    lines = [line[:-1] if line.endswith("\r") else line for line in stdout.split("\n")]
    if "end" not in lines:
        return None
    view = {"cpus": None, "memtotal": None, "machine": "", "system": "", "nvidia_driver": None, "gpus": {},
            "nvidia_capabilities": [], "nvme_controllers": [], "nvme_namespaces": {}, "nvme_mounts": []}
    files = {}
    blocks = {}
    for number, line in enumerate(lines, 1):
        tag, _sep, rest = line.partition(" ")
        if tag == "cpus":
            if rest and not _CPUS.fullmatch(rest):
                raise _line_error(host, number, "the CPU count is not a whole number of at most 7 digits")
            view["cpus"] = int(rest) if rest else None
        elif tag == "uname":
            machine, _sep, system = rest.partition(" ")
            if any(word and not well_formed(word, _NAME, 64) for word in (machine, system)):
                raise _line_error(host, number, "the machine or system (uname) is not a name of at most 64 plain characters")
            view["machine"], view["system"] = machine, system
        elif tag == "meminfo" and view["memtotal"] is None:
            value = " ".join(rest.split()[1:])
            if not _MEMTOTAL.fullmatch(value) or not rest.isascii():
                raise _line_error(host, number, "MemTotal is not a whole number of kB of at most 20 digits")
            view["memtotal"] = value
        elif tag in ("driver", "gpu", "block"):
            key, _sep, value = rest.partition(" ")
            if not (key == "-" if tag == "driver" else well_formed(key, _NAME, 255)):
                raise _line_error(host, number, "a %s line's name is not a name of at most 255 plain characters" % tag)
            if len(value) > _MAX_PUT or not _PUT_VALUE.fullmatch(value):
                raise _line_error(host, number, "a %s line's content is not base64 of at most 65536 bytes" % tag)
            text = _decoded(value)
            if tag == "driver":
                view["nvidia_driver"] = text
            elif tag == "gpu":
                view["gpus"][key] = text
            else:
                blocks[key] = text
        elif tag == "capability" and rest.startswith("./"):
            if not _CAPABILITY.fullmatch(rest):
                raise _line_error(host, number, "a capability is not a path of at most 4096 plain characters")
            view["nvidia_capabilities"].append(rest[2:])
        elif tag == "nvme" and rest:
            if not well_formed(rest, _NAME, 255):
                raise _line_error(host, number, "an NVMe controller is not a name of at most 255 plain characters")
            view["nvme_controllers"].append(rest)
        elif tag == "mount":
            if len(rest) > _MAX_MOUNT or has_control(rest):
                raise _line_error(host, number, "a mount is longer than %d characters or holds a control character"
                                  % _MAX_MOUNT)
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
