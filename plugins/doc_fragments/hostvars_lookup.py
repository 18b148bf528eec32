# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The options of the filters that look one variable up in several hosts' variables (host_values, hosts_where)."""

from __future__ import annotations


class ModuleDocFragment:  # pylint: disable=too-few-public-methods
    DOCUMENTATION = r"""
options:
  _input:
    description: The hosts.
    type: list
    elements: str
    required: true
  hostvars:
    description: C(hostvars).
    type: dict
    required: true
  path:
    description: The variable's name, or a dotted path into it (C(facts__cache.valid)).
    type: str
    required: true
"""
