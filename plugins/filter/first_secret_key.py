# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: first_secret_key
short_description: The first key found in slurp results, or a new one
version_added: 0.1.0
description:
  - Goes through the results of a looped C(ansible.builtin.slurp) in order and returns the first file's content,
    decoded and trimmed, that is not empty; results without content (a host where the file is missing or that did
    not answer) are passed over. Where none has a key, returns I(new_key).
  - Errors name the host (the loop's item) only, never a file's content.
options:
  _input:
    description: The slurp task's C(results).
    type: list
    elements: dict
    required: true
  new_key:
    description: The key to return where no result has one (made by the caller, e.g. with the password lookup).
    type: str
    required: true
author:
  - Gangplank maintainers (@gangplank)
"""

EXAMPLES = r"""
- name: Keep the first control host's key, or make one
  vars:
    new_key: "{{ lookup('ansible.builtin.password', '/dev/null', chars=['ascii_letters', 'digits'], length=64) }}"
  ansible.builtin.set_fact:
    hash_key: "{{ slurped.results | gangplank.platform.first_secret_key(new_key) }}"
  no_log: true
"""

RETURN = r"""
_value:
  description: The key.
  type: str
"""

import base64
import binascii
from collections.abc import Mapping

from ansible.errors import AnsibleFilterError


def first_secret_key(results, new_key):
    if isinstance(results, (str, Mapping)) or not isinstance(new_key, str):
        raise AnsibleFilterError("first_secret_key: expected the slurp task's results and a new key")
    for index, result in enumerate(results):
        if not isinstance(result, Mapping) or result.get("content") is None:
            continue
        where = result.get("item", f"results[{index}]")
        try:
            key = base64.b64decode(result["content"]).decode("utf-8").strip()
        except (binascii.Error, UnicodeDecodeError, TypeError, ValueError):
            # The content is a secret: the error names where it was read, never what.
            raise AnsibleFilterError(
                f"first_secret_key: the key read on {where} is not base64-encoded UTF-8 text") from None
        if key:
            return key
    return new_key


class FilterModule:
    def filters(self):
        return {"first_secret_key": first_secret_key}
