# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: deploy_stale_secrets
short_description: The secrets on each host that no container uses any more
version_added: 0.1.0
description:
  - For every host of the play in one task on the controller (the deploy role calls it once, C(run_once)), the
    secrets gangplank made on the host that no container uses any more, from the host's read
    (gangplank.platform.deploy_read's RV(secrets), names only, never values) and its containers.
  - With Podman, the engine's secrets C(<container>.<secret>); with Docker, the private files
    C(<container>/<secret>) below the host's secret directory. A secret of a container that stays is stale once the
    catalog no longer gives that container the secret; a secret of a container the engine still has but that is not
    placed here is left to the removal of that container; a secret of no container at all is stale.
options:
  _input:
    description: The play's hosts, in order.
    type: list
    elements: str
    required: true
  reads:
    description: Each host's gangplank.platform.deploy_read result, in the order of the hosts.
    type: list
    elements: dict
    required: true
  desired:
    description: Each host's containers (P(gangplank.platform.deploy_hosts_containers#filter)), by host.
    type: dict
    required: true
  engines:
    description:
      - Each host's container engine, in the order of the hosts. Without it, each read's C(settings.engine) (the read
        was given O(desired)'s settings).
    type: list
    elements: str
author:
  - Gangplank maintainers (@gangplank)
"""

EXAMPLES = r"""
- name: Find the secrets no container uses any more
  ansible.builtin.set_fact:
    stale_secrets: >-
      {{ ansible_play_hosts | gangplank.platform.deploy_stale_secrets(
           reads=ansible_play_hosts | map('extract', hostvars, 'read') | list, desired=desired) }}
  run_once: true
"""

RETURN = r"""
_value:
  description: Host to the names of its stale secrets (Podman's secret names, or Docker's files below the host's
    secret directory), for the hosts that have some.
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gangplank.platform.plugins.module_utils.deploy_read import stale_secrets


def deploy_stale_secrets(hosts, reads, desired, engines=None):
    hosts, reads = list(hosts), list(reads)
    engines = list(engines) if engines is not None else [
        ((read.get("settings") or {}).get("engine") if isinstance(read, dict) else None) for read in reads]
    if not len(hosts) == len(reads) == len(engines) or not isinstance(desired, dict):
        raise AnsibleFilterError("deploy_stale_secrets: %d hosts, but %d reads and %d engines"
                                 % (len(hosts), len(reads), len(engines)))
    stale = {}
    for host, read, engine in zip(hosts, reads, engines):
        if not isinstance(read, dict) or not read.get("engine_found"):
            continue
        names = stale_secrets(read, desired.get(host) or [], engine)
        if names:
            stale[host] = names
    return stale


class FilterModule:
    def filters(self):
        return {"deploy_stale_secrets": deploy_stale_secrets}
