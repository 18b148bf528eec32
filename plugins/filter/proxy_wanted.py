# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: proxy_wanted
short_description: Whether some service of the catalog asks for the local proxy
version_added: 0.1.0
description:
  - >-
    Takes the catalog (C(gangplank_services)) and returns true when some service has a C(proxy) entry
    (docs/connecting-services.md): the hosts then get HAProxy. The entries themselves are checked by the catalog's
    parser, not here.
options:
  _input:
    description: The catalog; null for none.
    type: dict
    required: true
author:
  - Gangplank maintainers (@gangplank)
"""

EXAMPLES = r"""
- name: Install HAProxy where the catalog asks for the local proxy
  ansible.builtin.package:
    name: haproxy
  when: gangplank_services | gangplank.platform.proxy_wanted
"""

RETURN = r"""
_value:
  description: Whether some service asks for the local proxy.
  type: bool
"""

from collections.abc import Mapping


def proxy_wanted(services):
    if not isinstance(services, Mapping):
        return False
    return any(isinstance(entry, Mapping) and entry.get("proxy") is not None for entry in services.values())


class FilterModule:
    def filters(self):
        return {"proxy_wanted": proxy_wanted}
