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

import hashlib
import json
import os
import platform

from ansible_collections.gangplank.platform.plugins.module_utils.state_files import read_json

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
    file when ``bindings_path`` is given. Also run as a plain script on the host (plugins/action/facts_cache.py)."""
    print_ = fingerprint(inputs)
    facts, reason = cached_facts(read_cache(path), print_)
    result = {"changed": False, "valid": facts is not None, "reason": reason, "fingerprint": print_}
    if facts is not None:
        result["ansible_facts"] = facts
    if bindings_path:
        result.setdefault("ansible_facts", {})["gangplank_node_bindings"] = read_cache(bindings_path)
    return result
