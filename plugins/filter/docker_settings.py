# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: docker_settings
short_description: Docker's daemon.json with what the host needs and the site's settings over it
version_added: 0.1.0
description:
  - The daemon's settings as they are (keys nobody here sets are kept - the file may be the site's own), with
    C(features.cdi) turned on where GPUs are handed to containers as CDI devices, then the site's settings merged
    over them recursively, as C(combine(recursive=true)) does.
options:
  _input:
    description: The daemon's settings now (C(daemon.json) read; empty when there is none).
    type: dict
    required: true
  cdi:
    description: Whether containers get GPUs as CDI devices on this host (an NVIDIA driver, and C(runtime_cdi)).
    type: bool
    required: true
  site:
    description: The site's settings (C(runtime_docker_settings)).
    type: dict
    required: true
author:
  - Gangplank maintainers (@gangplank)
"""

EXAMPLES = r"""
- name: Combine them with the detected settings and runtime_docker_settings
  ansible.builtin.set_fact:
    settings: "{{ current | gangplank.platform.docker_settings(true, runtime_docker_settings) }}"
"""

RETURN = r"""
_value:
  description: The settings to write.
  type: dict
  sample: {features: {cdi: true}, log-driver: journald}
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.gangplank.platform.plugins.module_utils.facts.runtime_host import (
    kind, docker_settings as _docker_settings)


def docker_settings(current, cdi, site):
    for name, value in (("the current settings", current), ("site", site)):
        if not isinstance(value, Mapping):
            raise AnsibleFilterError(f"docker_settings: {name}: expected a mapping, got {kind(value)}")
    if not isinstance(cdi, bool):
        raise AnsibleFilterError(f"docker_settings: cdi: expected a boolean, got {kind(cdi)}")
    return _docker_settings(current, cdi, site)


class FilterModule:
    def filters(self):
        return {"docker_settings": docker_settings}
