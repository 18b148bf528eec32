#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nvme_adopt
short_description: Adopt the per-service NVMe directory of a site that ran before volumes
version_added: 0.1.0
description:
  - Before volumes, an instance placed with an NVMe request got C(<mount>/gangplank/<service>), one directory per
    service and device. With an NVMe volume, each instance has its own, C(<mount>/gangplank/<service>/<instance>/<volume>).
  - With O(action=check), says which old directories one instance adopts (RV(adopt)) and which several instances
    shared (RV(shared), and RV(msg) saying how to split them). Changes nothing.
  - With O(action=adopt), renames each old directory of RV(adopt) into its instance's volume (nothing copied, nothing
    deleted). In check mode it only says what it would rename.
  - A directory is of the old layout when it holds anything but instance directories of its service; an empty one
    needs nothing.
options:
  action:
    description: C(check) or C(adopt).
    type: str
    choices: [check, adopt]
    default: check
  entries:
    description:
      - The old directories of this host and the instances that use the device now, as the deploy plan lists them
        (C(legacy), C(service), C(instances), C(targets)).
    type: list
    elements: dict
    default: []
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
- name: Find the old NVMe directories
  gangplank.platform.nvme_adopt:
    action: check
    entries: [{legacy: /mnt/nvme0n1/gangplank/db, service: db, instances: [db-0],
               targets: {db-0: /mnt/nvme0n1/gangplank/db/db-0/data}}]
  register: adoption
"""

RETURN = r"""
adopt:
  description: The old directories one instance adopts, each with C(legacy), C(instance) and C(target).
  returned: always
  type: list
  elements: dict
shared:
  description: The old directories several instances used, each with C(legacy), C(service) and C(instances).
  returned: always
  type: list
  elements: dict
msg:
  description: How to split the shared directories; empty when there are none.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gangplank.platform.plugins.module_utils.deploy.nvme_adoption import adopt, inspect, shared_message


def _entries(module):
    entries = []
    for position, entry in enumerate(module.params["entries"]):
        legacy, service = entry.get("legacy"), entry.get("service")
        instances, targets = entry.get("instances"), entry.get("targets")
        if not (isinstance(legacy, str) and legacy.startswith("/") and isinstance(service, str)
                and isinstance(instances, list) and instances and isinstance(targets, dict)
                and all(isinstance(targets.get(name), str) and targets[name].startswith(legacy + "/") for name in instances)):
            module.fail_json(msg="entries[%d]: expected legacy, service, instances and targets inside legacy, as the "
                                 "deploy plan lists them" % position)
        entries.append(entry)
    return entries


def main():
    module = AnsibleModule(
        argument_spec=dict(
            action=dict(type="str", choices=["check", "adopt"], default="check"),
            entries=dict(type="list", elements="dict", default=[]),
        ),
        supports_check_mode=True,
    )
    moves, shared = inspect(_entries(module))
    message = shared_message(shared)
    if module.params["action"] == "check":
        module.exit_json(changed=False, adopt=moves, shared=shared, msg=message)
    if shared:
        module.fail_json(msg=message, adopt=moves, shared=shared)
    if moves and not module.check_mode:
        try:
            adopt(moves)
        except OSError as error:
            module.fail_json(msg="cannot adopt the old NVMe directory: %s" % error, adopt=moves, shared=shared)
    module.exit_json(changed=bool(moves), adopt=moves, shared=shared, msg="")


if __name__ == "__main__":
    main()
