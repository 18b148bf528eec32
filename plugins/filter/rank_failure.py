# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: rank_failure
short_description: The message that stops a rollout on a host
version_added: 0.1.0
description:
  - Says which rank stopped on the host, where (the wave of a rolling restart) and why (here, or on another host), then
    each unhealthy container with its probe, the probe's last output and the container's last log lines; without
    probes to report, the failed task's message, never its result (it may hold secrets).
  - Without a C(rank) in O(about), the report of the kept containers of the unchanged ranks (nothing was started).
options:
  _input:
    description: The result of M(gangplank.platform.health_wait) of the wave that ran (its C(probes)); C({}) when none ran.
    type: dict
    required: true
  about:
    description:
      - What the report reads, by key.
      - C(host) (C(inventory_hostname)); C(rank), the rank that stopped (null for the kept containers of the unchanged
        ranks); C(ranks), the services of each rank, by rank; C(waves), each rank (a string) mapped to its number of
        waves; C(in_wave), the wave that ran, from 0; C(containers), each container mapped to its C(instance) and
        C(probe); C(logs), the results of the log reads of the unhealthy containers (each with C(item.key),
        C(stdout_lines) and C(stderr_lines)); C(log_lines), how many log lines were read; C(failed), the failed task's
        result (C(ansible_failed_result)), null when nothing failed on this host.
    type: dict
    required: true
author:
  - Gangplank maintainers (@gangplank)
"""

EXAMPLES = r"""
- name: Stop the rollout
  ansible.builtin.fail:
    msg: "{{ health | default({}) | gangplank.platform.rank_failure(report) }}"
  vars:
    report:
      host: "{{ inventory_hostname }}"
      rank: "{{ rank }}"
      ranks: "{{ ranks }}"
      waves: "{{ plan.waves }}"
      in_wave: "{{ in_wave }}"
      containers: "{{ rank_plan.containers }}"
      logs: "{{ logs.results | default([]) }}"
      log_lines: 20
      failed: "{{ ansible_failed_result | default(none) }}"
"""

RETURN = r"""
_value:
  description: The report, its lines joined by line breaks.
  type: str
  sample: "Rank 1 (api) failed on node1; later ranks were not started.\nFix the cause and run again: ..."
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.gangplank.platform.plugins.plugin_utils.filter_errors import filter_errors


@filter_errors(TypeError, ValueError, AttributeError, IndexError, name="rank_failure")
def rank_failure(health, about):
    if not isinstance(about, Mapping):
        raise AnsibleFilterError("rank_failure: expected a mapping of what the report reads, got %s" % type(about).__name__)
    about = dict(about)
    for name in ("waves", "containers", "failed"):
        if about.get(name) is not None and not isinstance(about[name], Mapping):
            raise AnsibleFilterError("rank_failure: %s: expected a mapping, got %s" % (name, type(about[name]).__name__))
    if health is not None and not isinstance(health, Mapping):
        raise AnsibleFilterError("rank_failure: expected health_wait's result, got %s" % type(health).__name__)
    from ansible_collections.gangplank.platform.plugins.module_utils.deploy.rank_failure import rank_failure as report
    rank = about.get("rank")
    rank = None if rank is None else int(rank)
    services = [] if rank is None else list((about.get("ranks") or [])[rank])
    return report(str(about.get("host")), rank, services, dict(about.get("waves") or {}), int(about.get("in_wave") or 0),
                  dict(about.get("containers") or {}), dict(health or {}), list(about.get("logs") or []),
                  about.get("log_lines", 20), dict(about["failed"]) if about.get("failed") is not None else None)


class FilterModule:
    def filters(self):
        return {"rank_failure": rank_failure}
