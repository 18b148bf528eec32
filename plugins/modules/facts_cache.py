#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: facts_cache
short_description: Keep a host's hardware facts on the host, and reuse them while its hardware is unchanged
version_added: 0.1.0
description:
  - With O(state=write), stores the facts the gang scheduler reads (C(processor_vcpus), C(memtotal_mb), C(architecture),
    C(system), C(gangplank_gpus), C(gangplank_gpu_driver), C(gangplank_nvme), C(gangplank_gpu_links),
    C(gangplank_data_filesystem)) with a fingerprint
    of the host's hardware in a JSON file (mode C(0600)).
    The file is only written when its content changes.
  - With O(state=read), computes the fingerprint again and, when it equals the stored one, returns the stored facts as
    C(ansible_facts), so a play can skip gathering them (playbooks/scale.yml).
  - 'The fingerprint is cheap to compute: the CPU count, MemTotal, the machine and system, the NVIDIA driver version, each
    GPU''s C(/proc/driver/nvidia/gpus/*/information) and the entries MIG instances add under
    C(/proc/driver/nvidia/capabilities), the NVMe controllers and namespaces with their sizes and mounts, and O(inputs).'
  - 'With O(state=read), the action plugin reads the host with one shell, as M(ansible.builtin.raw) runs a command (no
    Python on the host: every run reads every host), and computes the same fingerprint on the controller from what the
    shell printed; where the shell does not finish, the module runs, with the same result.'
  - It does not see state that only NVML reports (a GPU's Xid error, a MIG mode change before the GPU is reset); a full
    gathering (site.yml) reads those.
options:
  path:
    description: The cache file.
    type: path
    required: true
  state:
    description: C(read) returns the stored facts when they are still valid; C(write) stores O(facts).
    type: str
    choices: [read, write]
    default: read
  inputs:
    description: What else the facts depend on (the facts role's simulated devices and NVMe labels); part of the fingerprint.
    type: raw
    default: {}
  facts:
    description: For O(state=write), the host's facts (C(ansible_facts)); only the keys the scheduler reads are stored.
    type: dict
    default: {}
  bindings_path:
    description:
      - For O(state=read), also read the node's fact file (written by M(gangplank.platform.node_state)) and return it as
        C(ansible_facts.gangplank_node_bindings), so the controller can tell which hosts need it written
        (P(gangplank.platform.bindings_to_write#filter)) without a second task per host.
      - The file is returned as it is; null when it is missing, larger than 4 MiB, not a regular file or not a JSON object.
    type: path
  check_roles:
    description:
      - Before it reads the host, check the inputs of these roles of this collection against their argument specs, as
        M(gangplank.platform.role_inputs) does (on the controller, on the values this task sees). A bad input fails the
        task with C(argument_errors), and the host is not read.
      - The facts role passes C(cluster_check_roles) here, so that site.yml and scale.yml check the options their roles
        read on every host in the task that is anyway their first on each host.
      - Action plugin only; the module ignores it.
    type: list
    elements: str
    default: []
  check_reject:
    description: A regular expression; the options of O(check_roles) whose names it matches are not checked here.
    type: str
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
author:
  - Gangplank maintainers (@gangplank)
"""

EXAMPLES = r"""
- name: Reuse the facts of the last full gathering when the hardware is unchanged
  gangplank.platform.facts_cache:
    path: /var/lib/gangplank/hardware-facts.json
    inputs: {simulated_gpus: [], simulated_nvme: [], nvme_labels: {}}
  register: cache

- name: Store the facts after a full gathering
  gangplank.platform.facts_cache:
    path: /var/lib/gangplank/hardware-facts.json
    state: write
    inputs: {simulated_gpus: [], simulated_nvme: [], nvme_labels: {}}
    facts: "{{ ansible_facts }}"
"""

RETURN = r"""
valid:
  description: With O(state=read), whether the stored facts were returned (the fingerprint is unchanged).
  returned: always
  type: bool
reason:
  description: Why the stored facts were or were not used.
  returned: always
  type: str
  sample: the hardware or the facts role's inputs changed since the cache was written
ansible_facts:
  description:
    - With O(state=read) and a valid cache, the stored facts.
    - With O(bindings_path), also C(gangplank_node_bindings), the node's fact file (null when it could not be read).
  returned: when valid, or with O(bindings_path)
  type: dict
fingerprint:
  description: The host's fingerprint now (sha256, hex).
  returned: always
  type: str
"""

import json

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gangplank.platform.plugins.module_utils.facts.facts_cache import (
    ARGUMENT_SPEC, cache_content, fingerprint, read_cache, read_state)
from ansible_collections.gangplank.platform.plugins.module_utils.state_files import atomic_write

FILE_MODE = 0o600


def main():
    module = AnsibleModule(
        argument_spec=ARGUMENT_SPEC,
        supports_check_mode=True,
    )
    path, state = module.params["path"], module.params["state"]
    if state == "read":
        module.exit_json(**read_state(path, module.params["inputs"], module.params["bindings_path"]))
    print_ = fingerprint(module.params["inputs"])
    current = read_cache(path)
    content = cache_content(module.params["facts"], print_)
    try:
        text = json.dumps(content, sort_keys=True, indent=2) + "\n"
    except (TypeError, ValueError) as error:
        module.fail_json(msg="cannot store the facts as JSON: %s" % error)
    if current == json.loads(text):
        module.exit_json(changed=False, valid=True, reason="the cache is up to date", fingerprint=print_)
    if not module.check_mode:
        try:
            atomic_write(path, text.encode("utf-8"), FILE_MODE)
        except OSError as error:
            module.fail_json(msg="cannot write %s: %s" % (path, error))
    module.exit_json(changed=True, valid=True, reason="the cache was written", fingerprint=print_)


if __name__ == "__main__":
    main()
