# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: endpoints
short_description: Where each service's instances answer, from a plan
version_added: 0.1.0
description:
  - >-
    Takes a P(gangplank.platform.gang_schedule#module) result and returns, per service of the catalog, its endpoints:
    one entry per instance the plan binds to a live host, in instance order, with C(instance), C(node), C(address) (the
    host's C(gangplank_publish_address), else its inventory name) and C(ports) (host port by name: a dynamic port by its
    name, a static one by its number as text).
  - The schedule role publishes it as C(schedule_endpoints) for config templates and the deploy role.
options:
  _input:
    description: The P(gangplank.platform.gang_schedule#module) result (C(hosts)).
    type: dict
    required: true
  services:
    description: The catalog (C(gangplank_services)).
    type: dict
    required: true
  hostvars:
    description: Ansible's C(hostvars), for each host's C(gangplank_publish_address).
    type: dict
    required: true
author:
  - Gangplank maintainers (@gangplank)
"""

EXAMPLES = r"""
- name: Publish the endpoints of every service
  ansible.builtin.set_fact:
    site_endpoints: "{{ plan | gangplank.platform.endpoints(services=gangplank_services, hostvars=hostvars) }}"
  run_once: true
"""

RETURN = r"""
_value:
  description: Service -> list of C({instance, node, address, ports}).
  type: dict
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError


def endpoints(plan, services, hostvars):
    if not isinstance(plan, Mapping) or not isinstance(plan.get("hosts"), Mapping):
        raise AnsibleFilterError("endpoints: expected a gang_schedule result with hosts, got %s" % type(plan).__name__)
    if not isinstance(services, Mapping) or not isinstance(hostvars, Mapping):
        raise AnsibleFilterError("endpoints: services and hostvars must be mappings")
    from ansible_collections.gangplank.platform.plugins.module_utils.deploy.endpoints import EndpointError, endpoints as plan_endpoints
    addresses = {}
    for host in plan["hosts"]:
        variables = hostvars[host] if host in hostvars else {}
        addresses[host] = variables.get("gangplank_publish_address") if isinstance(variables, Mapping) else None
    try:
        return plan_endpoints(dict(plan["hosts"]), dict(services), addresses)
    except EndpointError as error:
        raise AnsibleFilterError("endpoints: %s" % error) from None


class FilterModule:
    def filters(self):
        return {"endpoints": endpoints}
