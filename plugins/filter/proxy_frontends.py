# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: proxy_frontends
short_description: Where each proxied service answers on every host
version_added: 0.1.0
description:
  - >-
    Takes P(gangplank.platform.deploy_plan#module)'s C(proxy_services) and returns, per service, per proxied port (a
    dynamic port's name, or a static port's number as text), its local address C(address:listen): the same on every
    host, for the host and its containers (docs/connecting-services.md). Config templates see it as C(gangplank_proxy).
options:
  _input:
    description: P(gangplank.platform.deploy_plan#module)'s C(proxy_services); empty or null for none.
    type: dict
    required: true
  address:
    description: The proxy address (C(gangplank_proxy_address)).
    type: str
    required: true
author:
  - Gangplank maintainers (@gangplank)
"""

EXAMPLES = r"""
- name: Where the database answers on this host
  ansible.builtin.debug:
    msg: "{{ (plan.proxy_services | gangplank.platform.proxy_frontends('169.254.30.1')).db['5432'] }}"
"""

RETURN = r"""
_value:
  description: Service -> port -> C(address:listen).
  type: dict
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.gangplank.platform.plugins.module_utils.proxy import ProxyError, proxy_frontends as frontends


def proxy_frontends(services, address):
    if services is None:
        return {}
    if not isinstance(services, Mapping):
        raise AnsibleFilterError("proxy_frontends: expected the proxied services as a mapping")
    try:
        return frontends(dict(services), address)
    except ProxyError as error:
        raise AnsibleFilterError("proxy_frontends: %s" % error) from None


class FilterModule:
    def filters(self):
        return {"proxy_frontends": proxy_frontends}
