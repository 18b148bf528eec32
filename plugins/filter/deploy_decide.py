# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: deploy_decide
short_description: The rollout of every host at once, its waves, and the line each host shows
version_added: 0.1.0
description:
  - What P(gangplank.platform.deploy_rollout#filter) does for one host, for every host of the play in one task on the
    controller, followed by P(gangplank.platform.deploy_waves#filter) over all of them. The deploy role calls it once
    (C(run_once)) instead of a task per host, since a task costs a worker per host (docs/deploy.md).
  - Fails, naming the host, where P(gangplank.platform.deploy_rollout#filter) would (a wanted name taken by a container
    that gangplank does not manage, a secret without its hash).
options:
  _input:
    description: The play's hosts, in order.
    type: list
    elements: str
    required: true
  containers:
    description: Each host's containers from P(gangplank.platform.deploy_containers#filter), in the order of the hosts.
    type: list
    elements: list
    required: true
  rendered:
    description: Each host's rendered config files (host path to text), in the order of the hosts.
    type: list
    elements: dict
    required: true
  existing:
    description: Each host's existing containers, as P(gangplank.platform.deploy_rollout#filter) reads them, in the order of the hosts.
    type: list
    elements: list
    required: true
  services:
    description: The catalog (C(gangplank_services)).
    type: dict
    required: true
  secret_hashes:
    description: Each secret's variable mapped to its keyed hash (C(hashes) from gangplank.platform.secret_values).
    type: dict
    default: {}
  hash_key:
    description: The site's secret hash key (C(cluster_secret_hash_key)).
    type: str
  notes:
    description: What each host's line ends with (the deploy role names an engine that cannot enforce limits), in the order of the hosts.
    type: list
    elements: str
  check_mode:
    description: Whether the lines say C(would start).
    type: bool
    default: false
author:
  - Gangplank maintainers (@gangplank)
"""

EXAMPLES = r"""
- name: Decide what to start, restart and stop on every host
  ansible.builtin.set_fact:
    decision: >-
      {{ ansible_play_hosts | gangplank.platform.deploy_decide(
           containers=ansible_play_hosts | map('extract', hostvars, 'containers') | list,
           rendered=ansible_play_hosts | map('extract', hostvars, 'rendered') | list,
           existing=ansible_play_hosts | map('extract', hostvars, 'existing_containers') | list,
           services=gangplank_services, check_mode=ansible_check_mode) }}
  run_once: true
"""

RETURN = r"""
_value:
  description: >-
    C(rollouts) (host to its P(gangplank.platform.deploy_rollout#filter) result), C(waves) (the
    P(gangplank.platform.deploy_waves#filter) result over all of them), C(lines) (host to its line:
    C(start N [...], restart N [...], stop N [...], keep N), with C(would) before it in check mode), C(idle) (the
    hosts with no container in a rank that changes and nothing to remove) and C(kept) (host to its containers with a
    probe in the ranks that do not change, for the hosts that have some).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gangplank.platform.plugins.module_utils.deploy import DeployError, decide


def deploy_decide(hosts, containers, rendered, existing, services, secret_hashes=None, hash_key=None, notes=None,
                  check_mode=False):
    try:
        return decide(list(hosts), list(containers), list(rendered), list(existing), services,
                      secret_hashes=secret_hashes, hash_key=hash_key, notes=None if notes is None else list(notes),
                      check_mode=bool(check_mode))
    except DeployError as error:
        raise AnsibleFilterError(str(error)) from None


class FilterModule:
    def filters(self):
        return {"deploy_decide": deploy_decide}
