# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: redact
short_description: A message with the catalog's env values of some containers masked
version_added: 0.1.0
description:
  - Replaces every value of the catalog's C(env) in the given containers (not the C(GANGPLANK_*) and GPU variables
    gangplank sets itself) and every value of O(secret_values), each at least 4 characters long, with C(********),
    longest first, so that an engine's error message can be shown without the secrets a container was given
    (docs/secrets.md).
options:
  _input:
    description: The message.
    type: str
    required: true
  containers:
    description: Container specs from P(gangplank.platform.deploy_containers#filter) (or P(gangplank.platform.deploy_rollout#filter)).
    type: list
    elements: dict
    required: true
  secret_values:
    description: The values of the catalog's secrets, by variable name (C(cluster_secret_values)).
    type: dict
    default: {}
author:
  - Gangplank maintainers (@gangplank)
"""

EXAMPLES = r"""
- name: Show why a container could not start, without its env values
  ansible.builtin.debug:
    msg: "{{ started.msg | gangplank.platform.redact(containers) }}"
"""

RETURN = r"""
_value:
  description: The message with each such value replaced by C(********).
  type: str
"""

from ansible_collections.gangplank.platform.plugins.module_utils.deploy import redact as redact_values


def redact(text, containers, secret_values=None):
    return redact_values(str(text), containers, secret_values)


class FilterModule:
    def filters(self):
        return {"redact": redact}
