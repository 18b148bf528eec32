# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVMe facts: one entry per namespace (block device), from sysfs, the mount table and statvfs.

The schema is documented in the collection's ``docs/facts.md`` (``gangplank_nvme``).
Standard library only; importable on Python 3.9+ (managed hosts).

Where the values come from (Linux sysfs ABI):

- ``<root>/sys/block/nvmeXnY``: the visible namespaces. Partitions (``nvme0n1p1``) and the hidden
  per-path devices of native multipath (``nvmeXcYnZ``) are skipped.
- ``<root>/sys/block/<ns>/size``: the size in 512-byte sectors, whatever the logical block size.
- ``<root>/sys/block/<ns>/queue/logical_block_size``: in bytes.
- ``<root>/sys/block/<ns>/device``: a link to the controller (``.../nvme/nvme0``), or, for a
  multipath namespace, to its subsystem (``.../nvme-subsys0``), which links its controllers.
  Without the link the controller is taken from the name (``nvme1n2`` -> ``nvme1``).
- ``<root>/sys/class/nvme/<controller>/{model,serial,firmware_rev,transport}``: space-padded, stripped.
- ``<root>/proc/self/mounts`` (else ``<root>/proc/mounts``): a namespace is mounted when
  ``/dev/<ns>`` or one of its partitions ``/dev/<ns>pN`` is; the first such mount, by mount point.
- free space: ``statvfs(os.path.join(root, mount.lstrip("/")))``: ``f_bavail * f_frsize``.
  With ``root="/"`` that is the mount point itself; a test with a fake root creates the directory.

Nothing here raises for missing or unreadable sysfs files: a value that cannot be read is None,
and a host without NVMe has no entries. Only bad operator input (labels, simulated devices)
raises ValueError, with the path of the mistake.
"""

from __future__ import annotations

import os
import posixpath
import re

from ansible_collections.gangplank.platform.plugins.module_utils.messages import show
from ansible_collections.gangplank.platform.plugins.module_utils.quantity import (
    BLANKS, SIZE_EXPECTED, parse_size,
)
from ansible_collections.gangplank.platform.plugins.module_utils.validation import has_control, well_formed

LABELS_PATH = "labels"
SIMULATED_PATH = "gangplank_simulated_nvme"
SIMULATED_MODEL = "Simulated NVMe"
SECTOR_SIZE = 512  # /sys/block/*/size counts 512-byte sectors, always

# Whole names (fullmatch, validation.well_formed): "$" would also match before a final newline. ASCII digits only.
_NAMESPACE = re.compile(r"nvme([0-9]{1,9})n([0-9]{1,9})")
_CONTROLLER = re.compile(r"nvme([0-9]{1,9})")
_SUBSYSTEM = re.compile(r"nvme-subsys[0-9]{1,9}")
_MAX_NAME = 32
# A label names a device to requests and becomes the node label gangplank.io/nvme.<label>: one line, no blanks at its
# ends, no control character.
_LABEL = re.compile(r"\S(?:.*\S)?")
_MAX_LABEL = 253
_LABEL_EXPECTED = ("a label of at most %d characters without control characters (line breaks, tabs, NUL, bidi overrides) "
                   "or blanks at its ends" % _MAX_LABEL)
_OCTAL = re.compile(r"\\([0-7]{3})")
_SIMULATED_KEYS = ("name", "size", "mount", "fstype", "free", "model", "serial", "labels")


def _natural_key(name):
    """Sort key for names: numbers compared as numbers (nvme2n1 before nvme10n1)."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _read(path):
    """The stripped text of a sysfs file, or None when it cannot be read."""
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return None


def _read_int(path):
    text = _read(path)
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return None


def _unescape(field):
    """Undo the octal escapes of /proc/self/mounts (\\040 space, \\011 tab, \\012 newline, \\134 backslash)."""
    return _OCTAL.sub(lambda match: chr(int(match.group(1), 8)), field)


def read_mounts(root="/"):
    """The mount table as a list of (source, mount point, fstype), unescaped; [] when unreadable."""
    for relative in ("proc/self/mounts", "proc/mounts"):
        try:
            with open(os.path.join(root, relative), "r", encoding="utf-8", errors="replace") as handle:
                lines = handle.read().splitlines()
        except OSError:
            continue
        mounts = []
        for line in lines:
            fields = line.split()
            if len(fields) >= 3:
                mounts.append((_unescape(fields[0]), _unescape(fields[1]), _unescape(fields[2])))
        return mounts
    return []


def find_mount(name, mounts):
    """The (mount point, fstype) of /dev/<name> or of a partition /dev/<name>pN, first by mount point; or None."""
    whole = "/dev/" + name
    partition = re.compile(r"%sp[0-9]+" % re.escape(whole))
    found = sorted((mount, fstype) for source, mount, fstype in mounts
                   if source == whole or partition.fullmatch(source))
    return found[0] if found else None


def free_bytes(root, mount, statvfs=os.statvfs):
    """Bytes free for unprivileged users on the file system mounted at mount (under root), or None."""
    try:
        result = statvfs(os.path.join(root, mount.lstrip("/")))
        return int(result.f_bavail) * int(result.f_frsize)
    except (OSError, AttributeError, TypeError, ValueError):
        return None


class NvmeCollector:
    """Reads the NVMe namespaces of a host (or of a fake tree under root) from sysfs."""

    def __init__(self, root="/", statvfs=os.statvfs):
        self.root = root
        self.statvfs = statvfs
        self.block = os.path.join(root, "sys", "block")
        self.classdir = os.path.join(root, "sys", "class", "nvme")

    def namespace_names(self):
        """Visible namespaces in /sys/block, sorted; [] without /sys/class/nvme or /sys/block."""
        if not os.path.isdir(self.classdir):
            return []
        try:
            entries = os.listdir(self.block)
        except OSError:
            return []
        return sorted((entry for entry in entries if well_formed(entry, _NAMESPACE, _MAX_NAME)), key=_natural_key)

    def controller_of(self, name):
        """(controller name, directories to read its attributes from, first wins) for a namespace."""
        link = os.path.join(self.block, name, "device")
        if os.path.exists(link):
            target = os.path.realpath(link)
            base = os.path.basename(target)
            if well_formed(base, _CONTROLLER, _MAX_NAME):
                return base, [os.path.join(self.classdir, base), target]
            if well_formed(base, _SUBSYSTEM, _MAX_NAME):
                controller = self._subsystem_controller(target)
                dirs = [target] if controller is None else [os.path.join(self.classdir, controller), target]
                return controller, dirs
        controller = "nvme" + _NAMESPACE.fullmatch(name).group(1)
        return controller, [os.path.join(self.classdir, controller)]

    def _subsystem_controller(self, subsystem):
        """The first controller (lowest number) a multipath subsystem links to, or None."""
        try:
            entries = os.listdir(subsystem)
        except OSError:
            return None
        controllers = sorted((entry for entry in entries if well_formed(entry, _CONTROLLER, _MAX_NAME)), key=_natural_key)
        return controllers[0] if controllers else None

    @staticmethod
    def _attribute(dirs, attribute):
        for directory in dirs:
            value = _read(os.path.join(directory, attribute))
            if value:
                return value
        return None

    def namespace(self, name, mounts):
        controller, dirs = self.controller_of(name)
        sectors = _read_int(os.path.join(self.block, name, "size"))
        mounted = find_mount(name, mounts)
        mount, fstype = mounted if mounted else (None, None)
        return {
            "name": name,
            "controller": controller,
            "model": self._attribute(dirs, "model"),
            "serial": self._attribute(dirs, "serial"),
            "firmware": self._attribute(dirs, "firmware_rev"),
            "transport": self._attribute(dirs[:1], "transport"),
            "size": None if sectors is None else sectors * SECTOR_SIZE,
            "logical_block_size": _read_int(os.path.join(self.block, name, "queue", "logical_block_size")),
            "mount": mount,
            "fstype": fstype,
            "free": None if mount is None else free_bytes(self.root, mount, self.statvfs),
            "labels": [],
            "source": "sysfs",
        }

    def collect(self):
        names = self.namespace_names()
        if not names:
            return []
        mounts = read_mounts(self.root)
        return [self.namespace(name, mounts) for name in names]


def _label_list(value, path, errors):
    """Check a list of non-empty strings, appending (path, message) for each mistake."""
    if not isinstance(value, list):
        errors.append((path, "got %s; expected a list of labels (non-empty strings)" % show(value)))
        return []
    for index, label in enumerate(value):
        if not isinstance(label, str) or not label.strip():
            errors.append(("%s[%d]" % (path, index), "got %s; expected a non-empty string" % show(label)))
        elif not well_formed(label, _LABEL, _MAX_LABEL):
            errors.append(("%s[%d]" % (path, index), "got %s; expected %s" % (show(label), _LABEL_EXPECTED)))
    return [label for label in value if well_formed(label, _LABEL, _MAX_LABEL)]


def _raise(errors):
    if errors:
        raise ValueError("\n".join("%s: %s" % (path, message) for path, message in errors))


def validate_labels(labels):
    """The labels option checked: {namespace name: [label, ...]}; raises ValueError naming each mistake."""
    if labels is None:
        return {}
    if not isinstance(labels, dict):
        raise ValueError("%s: got %s; expected a mapping of namespace name to a list of labels" % (LABELS_PATH, show(labels)))
    errors = []
    checked = {}
    for name in sorted(labels, key=lambda key: _natural_key(str(key))):
        if not well_formed(name, _NAMESPACE, _MAX_NAME):
            errors.append((LABELS_PATH, "got key %s; expected a namespace name such as nvme0n1" % show(name)))
            continue
        checked[name] = _label_list(labels[name], "%s.%s" % (LABELS_PATH, name), errors)
    _raise(errors)
    return checked


def apply_labels(devices, labels):
    """Add the checked labels to the devices, after any a device has; an unknown device raises ValueError."""
    have = [device["name"] for device in devices]
    unknown = [name for name in labels if name not in have]
    if unknown:
        raise ValueError("%s names %s, which this host does not have (it has %s)" % (
            LABELS_PATH, ", ".join(sorted(unknown, key=_natural_key)),
            ", ".join(have) if have else "no NVMe namespaces"))
    for device in devices:
        for label in labels.get(device["name"], []):
            if label not in device["labels"]:
                device["labels"].append(label)
    return devices


def simulated_devices(entries):
    """The simulated namespaces, checked; raises ValueError with one line per mistake."""
    if not isinstance(entries, list):
        raise ValueError("%s: got %s; expected a list of devices" % (SIMULATED_PATH, show(entries)))
    errors = []
    devices = []
    seen = {}
    for index, entry in enumerate(entries):
        path = "%s[%d]" % (SIMULATED_PATH, index)
        if not isinstance(entry, dict):
            errors.append((path, "got %s; expected a mapping with name and size" % show(entry)))
            continue
        device = _simulated_device(entry, path, errors)
        if device is None:
            continue
        if device["name"] in seen:
            errors.append((path + ".name", "got %s; expected a name not used before (%s has it)" % (
                show(device["name"]), seen[device["name"]])))
            continue
        seen[device["name"]] = path
        devices.append(device)
    _raise(errors)
    return sorted(devices, key=lambda device: _natural_key(device["name"]))


def _optional_string(entry, key, path, errors, default=None):
    value = entry.get(key)
    if value is None:
        return default
    if not isinstance(value, str) or not value.strip():
        errors.append(("%s.%s" % (path, key), "got %s; expected a non-empty string" % show(value)))
        return default
    if has_control(value.strip(BLANKS)):
        # Shown in the facts table on one line: ASCII blanks around it are dropped, a control character is refused.
        errors.append(("%s.%s" % (path, key), "got %s; expected one line of text without control characters" % show(value)))
        return default
    return value.strip(BLANKS)


def _size(entry, key, path, errors):
    try:
        return parse_size(entry[key])
    except ValueError:
        errors.append(("%s.%s" % (path, key), "got %s; expected %s" % (show(entry[key]), SIZE_EXPECTED)))
        return None


def _simulated_device(entry, path, errors):
    """One simulated namespace, or None when it is wrong (errors appended)."""
    before = len(errors)
    for key in sorted(entry, key=str):
        if key not in _SIMULATED_KEYS:
            errors.append(("%s.%s" % (path, key), "unknown key; expected one of %s" % ", ".join(_SIMULATED_KEYS)))
    name = entry.get("name")
    if not well_formed(name, _NAMESPACE, _MAX_NAME):
        errors.append((path + ".name", "got %s; expected a namespace name such as nvme0n1" % show(name)))
    size = None
    if "size" not in entry:
        errors.append((path + ".size", "missing; expected %s" % SIZE_EXPECTED))
    else:
        size = _size(entry, "size", path, errors)
    mount = entry.get("mount")
    if mount is not None and (not isinstance(mount, str) or not mount.startswith("/")):
        errors.append((path + ".mount", "got %s; expected an absolute path or null" % show(mount)))
        mount = None
    elif mount is not None and has_control(mount):
        errors.append((path + ".mount", "got %s; expected an absolute path without control characters, or null" % show(mount)))
        mount = None
    free = None
    if entry.get("free") is not None:
        if entry.get("mount") is None:
            errors.append((path + ".free", "got %s; expected no free space without a mount" % show(entry["free"])))
        else:
            free = _size(entry, "free", path, errors)
            if free is not None and size is not None and free > size:
                errors.append((path + ".free", "got %s; expected at most the size (%s)" % (show(entry["free"]), show(entry["size"]))))
    fstype = _optional_string(entry, "fstype", path, errors)
    if fstype is not None and entry.get("mount") is None:
        errors.append((path + ".fstype", "got %s; expected no file system type without a mount" % show(entry["fstype"])))
    model = _optional_string(entry, "model", path, errors, SIMULATED_MODEL)
    serial = _optional_string(entry, "serial", path, errors)
    labels = _label_list(entry["labels"], path + ".labels", errors) if entry.get("labels") is not None else []
    if len(errors) > before:
        return None
    return {
        "name": name,
        "controller": "nvme" + _NAMESPACE.fullmatch(name).group(1),
        "model": model,
        "serial": serial,
        "firmware": None,
        "transport": None,
        "size": size,
        "logical_block_size": SECTOR_SIZE,
        "mount": mount,
        "fstype": fstype,
        "free": free,
        "labels": list(labels),
        "source": "simulated",
    }


def collect(root="/", labels=None, simulated=None, statvfs=os.statvfs):
    """The gangplank_nvme fact: a list of namespaces, sorted by name.

    simulated, when non-empty, replaces what sysfs says (test and demo hosts). labels,
    ``{namespace: [label, ...]}``, is added to the matching namespaces, real or simulated.
    Raises ValueError, naming the path of each mistake, for bad labels or simulated devices,
    and for a label on a namespace the host does not have.
    """
    checked = validate_labels(labels)
    if simulated:
        devices = simulated_devices(simulated)
    else:
        devices = NvmeCollector(root, statvfs).collect()
    return apply_labels(devices, checked)


# The data filesystem: where the catalog's disk volumes live (the deploy role's volume directory). Its size is what the
# scheduler places disk volumes against (scheduler/plugins/disk.py); free is reported for people.
_DATA_FILESYSTEM_KEYS = ("size", "free")
_MAX_PATH = 4096


def data_filesystem(data_dir, root="/", statvfs=os.statvfs, simulated=None):
    """The ``gangplank_data_filesystem`` fact: ``path`` (data_dir), ``size`` and ``free`` (bytes) of the filesystem that
    holds ``data_dir`` (or, before it is made, its nearest existing parent), and ``source`` (statvfs or simulated); or
    None when nothing of it can be read. ``simulated`` ({size, free?}) replaces statvfs on test and demo hosts.
    Raises ValueError naming the path of each mistake."""
    if not isinstance(data_dir, str) or not data_dir.startswith("/") or has_control(data_dir) or len(data_dir) > _MAX_PATH:
        raise ValueError("data_dir: got %s; expected an absolute path" % show(data_dir))
    if simulated:
        errors = []
        if not isinstance(simulated, dict):
            raise ValueError("simulated_data_filesystem: got %s; expected a mapping with size and free" % show(simulated))
        for key in sorted(simulated, key=str):
            if key not in _DATA_FILESYSTEM_KEYS:
                errors.append(("simulated_data_filesystem.%s" % key, "unknown key; expected size or free"))
        if "size" not in simulated:
            errors.append(("simulated_data_filesystem.size", "missing; expected %s" % SIZE_EXPECTED))
        size = _size(simulated, "size", "simulated_data_filesystem", errors) if "size" in simulated else None
        free = _size(simulated, "free", "simulated_data_filesystem", errors) if simulated.get("free") is not None else size
        if None not in (size, free) and free > size:
            errors.append(("simulated_data_filesystem.free", "got %s; expected at most the size" % show(simulated["free"])))
        _raise(errors)
        return {"path": data_dir, "size": size, "free": free, "source": "simulated"}
    path = posixpath.normpath(data_dir)
    while True:
        try:
            result = statvfs(os.path.join(root, path.lstrip("/")))
            return {"path": data_dir, "size": int(result.f_blocks) * int(result.f_frsize),
                    "free": int(result.f_bavail) * int(result.f_frsize), "source": "statvfs"}
        except FileNotFoundError:
            if path == "/":
                return None
            path = posixpath.dirname(path)
        except (OSError, AttributeError, TypeError, ValueError):
            return None
