# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: deploy_waves
short_description: Which ranks a rollout has to step through, and the waves of its rolling restarts
version_added: 0.1.0
description:
  - Takes every host's P(gangplank.platform.deploy_rollout#filter) result at once.
  - C(active_ranks) are the ranks where some host creates, recreates or starts a container, or removes a stale one
    that holds a port; the other ranks only have containers that are kept.
  - Within a rank, the instances that restart (their container or a sidecar is recreated) go in waves of at most the
    service's C(max_unavailable) (see docs/catalog.md; default 1 for a stateful service, C(25%) rounded up for a stateless
    one, of its instances on every host), stateless ones in ascending ordinal order, stateful ones in descending order.
    New and stopped instances start in the first wave.
options:
  _input:
    description: The P(gangplank.platform.deploy_rollout#filter) result of every host of the play.
    type: list
    elements: dict
    required: true
  services:
    description: The catalog (C(gangplank_services)).
    type: dict
    required: true
author:
  - Gangplank maintainers (@gangplank)
"""

EXAMPLES = r"""
- name: Order the rollout on every host at once
  ansible.builtin.set_fact:
    waves: "{{ ansible_play_hosts | map('extract', hostvars, 'rollout') | list | gangplank.platform.deploy_waves(services=gangplank_services) }}"
  run_once: true
"""

RETURN = r"""
_value:
  description: >-
    C(active_ranks) (sorted rank numbers), C(waves) (per active rank, as a string, how many waves it takes, at least 1)
    and C(wave_of) (container name to wave, for the containers after the first wave; every other container is in wave 0).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gangplank.platform.plugins.module_utils.deploy import DeployError, waves


def deploy_waves(rollouts, services):
    try:
        return waves(rollouts, services)
    except DeployError as error:
        raise AnsibleFilterError(str(error)) from None


class FilterModule:
    def filters(self):
        return {"deploy_waves": deploy_waves}
