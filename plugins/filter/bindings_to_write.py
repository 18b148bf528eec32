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
      Give this or O(hostvars).
    type: dict
  hostvars:
    description: >-
      Ansible's C(hostvars): each host's fact file is then read from its C(ansible_facts.gangplank_node_bindings) (as
      M(gangplank.platform.facts_cache) sets it), and taken as not read where that is not set. Give this or O(read).
    type: dict
author:
  - Gangplank maintainers (@gangplank)
"""

EXAMPLES = r"""
- name: Work out which hosts need their fact file written
  ansible.builtin.set_fact:
    to_write: >-
      {{ plan | gangplank.platform.bindings_to_write(hosts=ansible_play_hosts, hostvars=hostvars) }}
  run_once: true

- name: The same, from fact files read some other way
  ansible.builtin.set_fact:
    to_write: "{{ plan | gangplank.platform.bindings_to_write(hosts=['n1'], read={'n1': n1_fact_file}) }}"
"""

RETURN = r"""
_value:
  description: The hosts whose fact file must be written, in the order of O(hosts).
  type: list
  elements: str
"""

import json
from collections.abc import Mapping

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


def _read_from_hostvars(hostvars, hosts):
    """Each host's fact file as the facts role read it (ansible_facts.gangplank_node_bindings), {} where not set."""
    read = {}
    for host in hosts:
        facts = hostvars[host].get("ansible_facts") if host in hostvars else None
        read[host] = facts.get("gangplank_node_bindings") if isinstance(facts, Mapping) else None
    return read


# read=None is a read that is not a mapping (an error), not a read left out.
_NOT_GIVEN = object()


def bindings_to_write(plan, hosts, read=_NOT_GIVEN, hostvars=None):
    if not isinstance(plan, dict) or not isinstance(plan.get("hosts"), dict):
        raise AnsibleFilterError("bindings_to_write: expected a gang_schedule result with hosts, got %s" % type(plan).__name__)
    if (read is _NOT_GIVEN) == (hostvars is None):
        raise AnsibleFilterError("bindings_to_write: give either read or hostvars")
    if hostvars is not None:
        if not isinstance(hostvars, Mapping):
            raise AnsibleFilterError("bindings_to_write: hostvars: expected Ansible's hostvars, got %s"
                                     % type(hostvars).__name__)
        read = _read_from_hostvars(hostvars, hosts)
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
