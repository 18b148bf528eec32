# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: scale_report
short_description: A scaled service's instances on the live hosts, with their addresses, and a line naming them
version_added: 0.1.0
description:
  - What playbooks/scale.yml returns to the AWX job's artifacts and shows. Takes every node's instances (the
    gangplank.platform.schedule role's C(schedule_node_instances)) and returns the instances of O(service) on the
    hosts of O(hosts), by ordinal, each with C(instance), C(node), C(ordinal), C(address), C(ports) (the service's
    ports in the catalog), C(gpus) (their UUIDs) and, for a service with dynamic ports, C(host_ports) (each one's host
    port by name).
  - A node's address is its C(gangplank_publish_address) when set and not empty, else its C(ansible_host), else its
    inventory name.
options:
  _input:
    description: Node -> its instances (C(schedule_node_instances)).
    type: dict
    required: true
  service:
    description: The scaled service.
    type: str
    required: true
  hosts:
    description: The hosts that answer (usually C(ansible_play_hosts)); the instances of other hosts are left out.
    type: list
    elements: str
    required: true
  hostvars:
    description: Ansible's C(hostvars), for each node's address.
    type: dict
    required: true
  services:
    description: The catalog (C(gangplank_services)), for the service's ports.
    type: dict
    required: true
author:
  - Gangplank maintainers (@gangplank)
"""

EXAMPLES = r"""
- name: Collect the service's instances and their addresses
  ansible.builtin.set_fact:
    scale_report: "{{ schedule_node_instances | gangplank.platform.scale_report(service, ansible_play_hosts, hostvars, gangplank_services) }}"
  run_once: true

- name: Show them
  ansible.builtin.debug:
    msg: "{{ scale_report.line }}"
"""

RETURN = r"""
_value:
  description: >-
    C(instances) (see the description) and C(line), C(<service>: <n> instance(s): <instance>@<address>, ...).
  type: dict
  sample: {"instances": [{"instance": "worker-0", "node": "n1", "ordinal": 0, "address": "10.0.0.1", "ports": [8080],
                          "gpus": []}], "line": "worker: 1 instance(s): worker-0@10.0.0.1"}
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError


def _address(hostvars, node):
    values = hostvars[node] if node in hostvars else {}
    if values.get("gangplank_publish_address"):
        return values["gangplank_publish_address"]
    return values["ansible_host"] if "ansible_host" in values else node


def scale_report(node_instances, service, hosts, hostvars, services):
    for name, value in (("_input", node_instances), ("hostvars", hostvars), ("services", services)):
        if not isinstance(value, Mapping):
            raise AnsibleFilterError("scale_report: %s: expected a mapping, got %s" % (name, type(value).__name__))
    from ansible_collections.gangplank.platform.plugins.module_utils.deploy.status import service_instances
    spec = services.get(service)
    ports = spec.get("ports", []) if isinstance(spec, Mapping) else []
    nodes = {binding.get("node") for instances in node_instances.values() for binding in (instances or {}).values()}
    addresses = {node: _address(hostvars, node) for node in nodes if isinstance(node, str)}
    return service_instances(node_instances, service, hosts, addresses, ports)


class FilterModule:
    def filters(self):
        return {"scale_report": scale_report}
