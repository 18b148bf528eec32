# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: deploy_hosts_containers
short_description: The containers of every host at once, from each host's instances and settings
version_added: 0.1.0
description:
  - What P(gangplank.platform.deploy_containers#filter) does for one host, for every host of the play in one task on the
    controller. The deploy role calls it once (C(run_once)) instead of a task per host, since a task costs a worker per host
    (docs/deploy.md).
  - Fails, naming the host, where P(gangplank.platform.deploy_containers#filter) would.
options:
  _input:
    description:
      - Each host's inventory name mapped to its C(instances) and C(data_dir), and optionally C(publish_address),
        C(probe_address), C(gpu_mode), C(engine), C(limits) and C(secret_dir), as P(gangplank.platform.deploy_containers#filter)
        takes them.
    type: dict
    required: true
  services:
    description: The app catalog (C(gangplank_services)).
    type: dict
    required: true
author:
  - Gangplank maintainers (@gangplank)
"""

EXAMPLES = r"""
- name: Work out every host's containers
  ansible.builtin.set_fact:
    desired: >-
      {{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, 'container_settings')))
         | gangplank.platform.deploy_hosts_containers(services=gangplank_services) }}
  run_once: true
"""

RETURN = r"""
_value:
  description: Each host's inventory name mapped to its containers, as P(gangplank.platform.deploy_containers#filter) returns them.
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gangplank.platform.plugins.module_utils.deploy import DeployError, desired_on_hosts


def deploy_hosts_containers(settings, services):
    try:
        return desired_on_hosts(dict(settings) if isinstance(settings, dict) else settings, services)
    except DeployError as error:
        raise AnsibleFilterError(str(error)) from None


class FilterModule:
    def filters(self):
        return {"deploy_hosts_containers": deploy_hosts_containers}
