# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: proxy_config
short_description: The local proxy's HAProxy configuration, generated from the plan's endpoints
version_added: 0.1.0
description:
  - >-
    Takes the endpoints of every service (P(gangplank.platform.deploy_plan#module)'s C(endpoints)) and returns the
    configuration of the local proxy (docs/connecting-services.md): one frontend per proxied port of a service, listening
    on the proxy address, balancing over the service's instances on every host with HAProxy's own health checks (the
    service's HTTP probe where it is made on that port, else a TCP connect).
  - The same text on every host, and the same bytes for the same input. A value that would change the configuration's
    meaning (a line break, a space, C(#)) is refused naming its path.
options:
  _input:
    description: Service -> its endpoints (C(instance), C(node), C(address), C(ports)).
    type: dict
    required: true
  services:
    description: P(gangplank.platform.deploy_plan#module)'s C(proxy_services) (each proxied service's C(proxy), C(health), C(stop_timeout)).
    type: dict
    required: true
  settings:
    description: >-
      The proxy's settings: C(address) (where the frontends listen), C(check_interval) (seconds), C(fall), C(rise),
      C(connect_timeout), C(idle_timeout), C(drain_timeout) (seconds), C(port_range) (the host port range, which no frontend
      may use) and C(socket) (the admin socket).
    type: dict
    default: {}
author:
  - Gangplank maintainers (@gangplank)
"""

EXAMPLES = r"""
- name: Generate the local proxy's configuration
  ansible.builtin.set_fact:
    proxy_text: >-
      {{ plan.endpoints | gangplank.platform.proxy_config(plan.proxy_services, {'address': '169.254.30.1'}) }}
  run_once: true
"""

RETURN = r"""
_value:
  description: The HAProxy configuration file's text.
  type: str
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.gangplank.platform.plugins.module_utils.proxy import ProxyError, proxy_config as generate


def proxy_config(endpoints, services, settings=None):
    if not isinstance(endpoints, Mapping) or not isinstance(services, Mapping):
        raise AnsibleFilterError("proxy_config: the endpoints and services must be mappings")
    if settings is not None and not isinstance(settings, Mapping):
        raise AnsibleFilterError("proxy_config: settings must be a mapping")
    try:
        return generate(dict(endpoints), dict(services), dict(settings or {}))
    except ProxyError as error:
        raise AnsibleFilterError("proxy_config: %s" % error) from None


class FilterModule:
    def filters(self):
        return {"proxy_config": proxy_config}
