#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nvme_facts
short_description: Gather facts about the host's NVMe namespaces
version_added: 0.1.0
description:
  - Returns C(ansible_facts.gangplank_nvme), one entry per NVMe namespace (block device), sorted by name.
  - Reads sysfs (C(/sys/block/nvme*), C(/sys/class/nvme)), the mount table (C(/proc/self/mounts)) and statvfs of mounted file systems.
  - Partitions and the hidden per-path devices of native NVMe multipath are not namespaces of their own and are not listed.
  - A host without NVMe returns an empty list; unreadable sysfs values are null. Nothing on the host is changed.
  - The fact schema is documented in the collection's C(docs/facts.md).
options:
  labels:
    description:
      - 'Operator-given labels per namespace, a mapping of namespace name to a list of non-empty strings, for example C({nvme0n1: [cache]}).'
      - They are added to the C(labels) of the matching namespace, real or simulated.
      - A namespace the host does not have fails the task, naming it and the namespaces the host has.
    type: dict
    default: {}
  simulated:
    description:
      - Simulated namespaces for test and demo hosts. When not empty they replace what sysfs says, each marked C(source=simulated).
      - Each item has C(name) (such as C(nvme0n1)) and C(size) (bytes, or a size such as C(3576Gi)), and optionally C(mount), C(fstype),
        C(free) (a size, only with C(mount)), C(model) (default C(Simulated NVMe)), C(serial) and C(labels).
      - The controller is taken from the name, the logical block size is 512, firmware and transport are null.
      - Mistakes fail the task with their path, for example C(gangplank_simulated_nvme[0].size).
      - Usually set from the host variable C(gangplank_simulated_nvme).
    type: list
    elements: dict
    default: []
  data_dir:
    description:
      - The directory where the catalog's disk volumes live (the deploy role's volume directory). When given, the module
        also returns C(ansible_facts.gangplank_data_filesystem), the size and free space of the file system that holds it
        (of its nearest existing parent before it is made); the scheduler places disk volumes against that size.
    type: str
    version_added: 0.1.0
  simulated_data_filesystem:
    description:
      - A simulated data file system for test and demo hosts, with C(size) and optionally C(free) (sizes such as C(20Gi));
        it replaces statvfs for C(gangplank_data_filesystem).
    type: dict
    default: {}
    version_added: 0.1.0
  sysfs_root:
    description:
      - The directory under which C(sys/) and C(proc/) are read, and under which mount points are passed to statvfs.
      - For tests with a fake tree. Leave it at C(/) on real hosts.
    type: path
    default: /
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.facts
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  facts:
    support: full
  platform:
    platforms: posix
author:
  - Gangplank maintainers (@gangplank)
notes:
  - Sizes are in bytes. C(size) is read from C(/sys/block/<name>/size), which counts 512-byte sectors whatever the logical block size.
  - C(free) is the space available to unprivileged users (C(f_bavail) times C(f_frsize)) on the mounted file system.
  - A namespace counts as mounted when the namespace or one of its partitions is; the first mount by mount point is reported.
"""

EXAMPLES = r"""
- name: Gather NVMe facts
  gangplank.platform.nvme_facts:

- name: Show the namespaces
  ansible.builtin.debug:
    var: ansible_facts['gangplank_nvme']

- name: Gather NVMe facts with operator labels
  gangplank.platform.nvme_facts:
    labels: "{{ gangplank_nvme_labels | default({}) }}"

- name: Gather NVMe facts on a test host with simulated devices
  gangplank.platform.nvme_facts:
    simulated: "{{ gangplank_simulated_nvme | default([]) }}"
    labels: "{{ gangplank_nvme_labels | default({}) }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts to add to ansible_facts.
  returned: always
  type: complex
  contains:
    gangplank_nvme:
      description:
        - One entry per NVMe namespace, sorted by name. Empty when the host has no NVMe.
        - Each entry has C(name), C(controller), C(model), C(serial), C(firmware), C(transport), C(size) (bytes),
          C(logical_block_size) (bytes), C(mount), C(fstype), C(free) (bytes), C(labels) and C(source) (C(sysfs) or C(simulated)).
        - C(mount), C(fstype) and C(free) are null when the namespace is not mounted.
      returned: always
      type: list
      elements: dict
      sample:
        - name: nvme0n1
          controller: nvme0
          model: SAMSUNG MZQL23T8HCLS-00A07
          serial: S64HNE0R123456
          firmware: GDC5602Q
          transport: pcie
          size: 3840755982336
          logical_block_size: 512
          mount: /mnt/nvme0n1
          fstype: xfs
          free: 3500000000000
          labels: [cache]
          source: sysfs
    gangplank_data_filesystem:
      description:
        - With O(data_dir) only. C(path) (O(data_dir)), C(size) and C(free) (bytes) of the file system that holds it, and
          C(source) (C(statvfs) or C(simulated)); null when it cannot be read.
      returned: when data_dir is given
      type: dict
      sample: {path: /var/lib/gangplank/volumes, size: 500107862016, free: 402653184000, source: statvfs}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gangplank.platform.plugins.module_utils.facts.nvme_facts import collect, data_filesystem


def main():
    module = AnsibleModule(
        argument_spec=dict(
            labels=dict(type="dict", default={}),
            simulated=dict(type="list", elements="dict", default=[]),
            sysfs_root=dict(type="path", default="/"),
            data_dir=dict(type="str"),
            simulated_data_filesystem=dict(type="dict", default={}),
        ),
        supports_check_mode=True,
    )
    try:
        namespaces = collect(root=module.params["sysfs_root"], labels=module.params["labels"],
                             simulated=module.params["simulated"])
        facts = {"gangplank_nvme": namespaces}
        if module.params["data_dir"] is not None:
            facts["gangplank_data_filesystem"] = data_filesystem(
                module.params["data_dir"], root=module.params["sysfs_root"],
                simulated=module.params["simulated_data_filesystem"])
    except ValueError as error:
        module.fail_json(msg=str(error))
    module.exit_json(changed=False, ansible_facts=facts)


if __name__ == "__main__":
    main()
