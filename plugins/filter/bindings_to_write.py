# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: bindings_to_write
short_description: The hosts whose fact file does not hold what a plan gives them
version_added: 0.1.0
description:
  - >-
    Takes a P(gangplank.platform.gang_schedule#module) result and, per host, the node's fact file as read at the start
    of the run (M(gangplank.platform.facts_cache) with O(gangplank.platform.facts_cache#module:bindings_path)), and
    returns the hosts whose file must be written: those whose file was not read, is not one M(gangplank.platform.node_state)
    wrote, or holds other labels, instances or ranks than the plan, and every host whose instances the plan changes
    (C(hosts_changed): a run that waited for the lock may have read a file another run has since rewritten).
  - Decided on the controller, so that a run that changes nothing writes, and starts a task on, no host.
options:
  _input:
    description: The P(gangplank.platform.gang_schedule#module) result (C(hosts), C(ranks), C(hosts_changed)).
    type: dict
    required: true
  hosts:
    description: The hosts to decide for (the play's hosts).
    type: list
    elements: str
    required: true
  read:
    description: >-
      Per host, its fact file as read (a mapping), or null or an empty mapping when it was not read or could not be
      (Jinja2's C(map(attribute=..., default=none)) is no default: give C(default={})).
    type: dict
    required: true
author:
  - Gangplank maintainers (@gangplank)
"""

EXAMPLES = r"""
- name: Work out which hosts need their fact file written
  ansible.builtin.set_fact:
    to_write: >-
      {{ plan | gangplank.platform.bindings_to_write(hosts=ansible_play_hosts, read=dict(ansible_play_hosts
         | zip(ansible_play_hosts | map('extract', hostvars) | map(attribute='ansible_facts', default={})
               | map(attribute='gangplank_node_bindings', default={})))) }}
  run_once: true
"""

RETURN = r"""
_value:
  description: The hosts whose fact file must be written, in the order of O(hosts).
  type: list
  elements: str
"""

import json

from ansible.errors import AnsibleFilterError

SHARE_KEYS = ("labels", "instances", "ranks")
FILE_KEYS = {"revision", "labels", "instances", "ranks"}


def _as_read(value):
    """What a reader of the JSON file gets back (keys become strings, tuples lists)."""
    return json.loads(json.dumps(value, sort_keys=True))


def _holds(read, share):
    if not isinstance(read, dict) or set(read) != FILE_KEYS:
        return False
    revision = read.get("revision")
    if isinstance(revision, bool) or not isinstance(revision, int):
        return False
    return all(read[key] == share[key] for key in SHARE_KEYS)


def bindings_to_write(plan, hosts, read):
    if not isinstance(plan, dict) or not isinstance(plan.get("hosts"), dict):
        raise AnsibleFilterError("bindings_to_write: expected a gang_schedule result with hosts, got %s" % type(plan).__name__)
    if not isinstance(read, dict):
        raise AnsibleFilterError("bindings_to_write: read: expected a mapping of host to fact file, got %s" % type(read).__name__)
    changed = set(plan.get("hosts_changed") or [])
    ranks = plan.get("ranks") or []
    stale = []
    for host in hosts:
        entry = plan["hosts"].get(host)
        if entry is None:
            raise AnsibleFilterError("bindings_to_write: the plan has no host %s" % host)
        share = _as_read({"labels": entry.get("labels") or {}, "instances": entry.get("instances") or {}, "ranks": ranks})
        if host in changed or not _holds(read.get(host), share):
            stale.append(host)
    return stale


class FilterModule:
    def filters(self):
        return {"bindings_to_write": bindings_to_write}
