# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: runtime_state_record
short_description: What the runtime role stores on a host after a full run
version_added: 0.1.0
description:
  - The content of C(cluster_runtime_state_file) - the fingerprint of what the role read and its inputs on the first
    line, so that the next run finding the same does nothing, then C(limits <engine> <answer>), the engine's answer to
    C(cluster_limit_probe), which the deploy role reads instead of asking the engine on every run.
  - The answer is the probe's first line that is not empty, trimmed; there is no second line when the probe failed,
    was skipped or printed nothing.
options:
  _input:
    description: The fingerprint (the second line of the role's read).
    type: str
    required: true
  engine:
    description: The host's container engine, C(podman) or C(docker).
    type: str
    required: true
  limits:
    description: The registered result of the probe (C(rc), C(stdout_lines)).
    type: dict
    required: true
author:
  - Gangplank maintainers (@gangplank)
"""

EXAMPLES = r"""
- name: Store the fingerprint
  ansible.builtin.copy:
    dest: "{{ cluster_runtime_state_file }}"
    content: "{{ runtime__fingerprint | gangplank.platform.runtime_state_record(cluster_engine, runtime__limits) }}"
    mode: "0644"
"""

RETURN = r"""
_value:
  description: The file's content, each line ending in a newline.
  type: str
  sample: "5e3b...c1\nlimits podman cgroup controllers: [cpu memory pids]\n"
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gangplank.platform.plugins.module_utils.facts.runtime_host import state_record


def runtime_state_record(fingerprint, engine, limits):
    if not isinstance(fingerprint, str) or not isinstance(engine, str):
        raise AnsibleFilterError("runtime_state_record: the fingerprint and the engine must be strings")
    return state_record(fingerprint, engine, limits)


class FilterModule:
    def filters(self):
        return {"runtime_state_record": runtime_state_record}
