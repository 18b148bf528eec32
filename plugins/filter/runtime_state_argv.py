# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: runtime_state_argv
short_description: The argv of the runtime role's one read of a host, which prints its fingerprint
version_added: 0.1.0
description:
  - The command the runtime role runs through C(raw) to read what its work depends on (the probes, the capabilities,
    the engine's binary, its settings file, whether dockerd runs, the packages, the CDI spec's GPUs, the bundled
    images), with the fingerprint its last full run stored and the fingerprint of what it read now and of the role's
    inputs, worked out on the host.
  - The inputs go in as JSON with sorted keys, as C(to_json(sort_keys=true)) writes them, so that the fingerprints
    stored on the hosts stay valid.
options:
  _input:
    description:
      - The runtime role's inputs (C(runtime__inputs)), with at least C(engine), C(install_packages),
        C(offline_bundle), C(packages), C(podman_conf), C(docker_conf), C(cdi) and C(image_bundles).
    type: dict
    required: true
  state_file:
    description: Where the last full run stored its fingerprint (C(cluster_runtime_state_file)).
    type: str
    required: true
  binaries:
    description: Per engine, the binary that tells it is installed (C(runtime__engine_binary)).
    type: dict
    required: true
author:
  - Gangplank maintainers (@gangplank)
"""

EXAMPLES = r"""
- name: Read what this role's work depends on
  ansible.builtin.raw: >-
    {{ runtime__inputs | gangplank.platform.runtime_state_argv(cluster_runtime_state_file, runtime__engine_binary)
       | map('quote') | join(' ') }}
  register: runtime__state
"""

RETURN = r"""
_value:
  description:
    - C(sh -c <script> sh), then the state file, the engine's binary, its settings file, the engine, C(cdi) or
      C(nocdi), the packages to look at (one word list, empty when the role installs nothing), the inputs' JSON and
      the bundled images, each once.
    - The read prints the stored fingerprint, then the new one, then what it read.
  type: list
  elements: str
"""

from ansible_collections.gangplank.platform.plugins.module_utils.facts.runtime_host import (
    STATE_SCRIPT, RuntimeHostError, state_argv)
from ansible_collections.gangplank.platform.plugins.plugin_utils.filter_errors import filter_errors


@filter_errors(RuntimeHostError, name="runtime_state_argv")
def runtime_state_argv(inputs, state_file, binaries):
    return state_argv(inputs, STATE_SCRIPT, state_file, binaries)


class FilterModule:
    def filters(self):
        return {"runtime_state_argv": runtime_state_argv}
