# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Adopting the per-service NVMe directory of a site that ran before volumes.

Before volumes, an instance placed with an NVMe request got ``<mount>/gangplank/<service>`` at ``nvme_path``: one
directory per service and device, shared by every instance of the service there. With an NVMe volume each instance
has its own, ``<mount>/gangplank/<service>/<instance>/<volume>``. On the first deploy with volumes:

- where one instance of the service is on the device, it adopts the old directory: a rename into its volume's place
  (nothing copied, nothing deleted);
- where several are, the run stops before any change and says which instances shared it and how to split it.

``adoptions(containers)`` (controller): per host, each old directory and the instances that would use it, from the
host's containers (deploy.desired_containers). ``inspect(entries)`` and ``adopt(entries)`` (host, standard library
only): what each old directory is, and the renames.

A directory is the old layout when it holds anything but instance directories of its service (``<service>-<ordinal>``,
``<service>@<node>``); an empty one, or one that holds only those, needs nothing.
"""

from __future__ import annotations

import os
import posixpath
import re

_ORDINAL = re.compile(r"[0-9]{1,9}")
_MAX_ENTRIES = 4096


def adoptions(containers):
    """The old directories of one host's containers: [{legacy, service, instances, targets}] by legacy path, where
    ``targets`` maps each instance to the directory its first NVMe volume has now. Only services with NVMe volumes."""
    found = {}
    for container in containers:
        for entry in container.get("data_dirs") or []:
            if entry["where"] != "nvme":
                continue
            # <mount>/gangplank/<service>/<instance>/<volume>
            instance_dir = posixpath.dirname(entry["path"])
            legacy = posixpath.dirname(instance_dir)
            item = found.setdefault(legacy, {"legacy": legacy, "service": container["service"], "instances": [],
                                             "targets": {}})
            if container["instance"] not in item["targets"]:
                item["instances"].append(container["instance"])
                item["targets"][container["instance"]] = entry["path"]
    return [found[key] for key in sorted(found)]


def _instance_dir(name, service):
    if name.startswith(service + "@"):
        return True
    prefix, dash, ordinal = name.rpartition("-")
    return bool(dash) and prefix == service and bool(_ORDINAL.fullmatch(ordinal))


def is_old_layout(path, service):
    """Whether ``path`` is a per-service NVMe directory of the old layout (holds anything but instance directories)."""
    if os.path.islink(path) or not os.path.isdir(path):
        return False
    with os.scandir(path) as entries:
        for position, entry in enumerate(entries):
            if position >= _MAX_ENTRIES or not (_instance_dir(entry.name, service)
                                                and entry.is_dir(follow_symlinks=False)):
                return True
    return False


def inspect(entries):
    """(to adopt: [{legacy, instance, target}], shared: [{legacy, service, instances}]) of this host's entries."""
    adopt, shared = [], []
    for entry in entries:
        if not is_old_layout(entry["legacy"], entry["service"]):
            continue
        if len(entry["instances"]) == 1:
            instance = entry["instances"][0]
            adopt.append({"legacy": entry["legacy"], "instance": instance, "target": entry["targets"][instance]})
        else:
            shared.append({"legacy": entry["legacy"], "service": entry["service"], "instances": list(entry["instances"])})
    return adopt, shared


def shared_message(shared):
    """Why the run stops: the directories several instances shared, and how to split them."""
    lines = []
    for item in shared:
        lines.append("%s was shared by %s (the NVMe directory of service %s before volumes); each now has its own "
                     "NVMe volume. Split it by hand: stop the instances, move each one's files into %s, leave nothing "
                     "else in %s, then run again" % (
                         item["legacy"], ", ".join(item["instances"]), item["service"],
                         " and ".join("%s/%s/<volume>" % (item["legacy"], instance) for instance in item["instances"]),
                         item["legacy"]))
    return "; ".join(lines)


def adopt(moves):
    """Rename each old directory into its instance's volume: ``legacy`` -> a sibling name, then into ``target``
    (which lies inside ``legacy``). Nothing is copied or deleted."""
    for move in moves:
        legacy, target = move["legacy"], move["target"]
        parked = posixpath.join(posixpath.dirname(legacy), ".%s.adopted-by-%s" % (posixpath.basename(legacy),
                                                                                  move["instance"]))
        os.rename(legacy, parked)
        os.makedirs(posixpath.dirname(target), mode=0o755)
        os.rename(parked, target)
