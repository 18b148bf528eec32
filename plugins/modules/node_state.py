#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_state
short_description: Write what the gang scheduler bound to this node into a local fact file
version_added: 0.1.0
description:
  - Writes the node's share of a placement record (its gangplank labels, the instances bound to it and the global rank list) to a local fact file,
    so that later plays read it as C(ansible_local.gangplank) after fact gathering.
  - The file holds JSON with the keys C(revision), C(labels), C(instances) and C(ranks), exactly as given, with sorted keys, an indent of 2
    and a trailing newline, so the same input always gives the same bytes. Its mode is C(0644).
  - The file is only written when its parsed labels, instances or ranks differ from the desired ones, so an unchanged node keeps the file and
    its mtime, also when the record's revision moved on (a scale that changes another host writes nothing here); its C(revision) is then the one
    that last changed the node's share.
    Writes are atomic (a temporary file in the same directory, renamed over the old one); the parent directory is created when missing.
  - The file is a cache derived from the cluster's placement record. An existing file that is not valid JSON is replaced, with a warning.
options:
  path:
    description:
      - The fact file. Ansible's setup module reads C(*.fact) files from C(/etc/ansible/facts.d); the file name without C(.fact) is the key
        under C(ansible_local).
    type: path
    default: /etc/ansible/facts.d/gangplank.fact
  revision:
    description:
      - The revision of the placement record this content belongs to. Returned as C(previous_revision) by the next run.
      - Required also with O(state=absent), where it is not written.
    type: int
    required: true
  labels:
    description:
      - 'The node''s gangplank-owned labels, for example C({"gangplank.io/service.infer": "true"}).'
    type: dict
    default: {}
  instances:
    description:
      - The instances bound to this node, a mapping of instance name to a mapping.
      - Each instance usually has C(service), C(ordinal), C(gpus) (a list of mappings with C(index), C(uuid), C(model) and C(memory)),
        C(nvme) (a mapping with C(name), C(size) and C(mount), or null), C(sidecars) (a list) and C(rank) (an integer).
      - The content is written as given; only the value of each instance being a mapping is checked.
    type: dict
    default: {}
  ranks:
    description:
      - The global rank list, a list of lists of service names.
    type: list
    elements: raw
    default: []
  state:
    description:
      - With C(present) the file is written when its content differs.
      - With C(absent) the file is removed when it exists (for teardown).
    type: str
    choices: [present, absent]
    default: present
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  platform:
    platforms: posix
author:
  - Gangplank maintainers (@gangplank)
notes:
  - The diff shows the file's text before and after. A missing file is shown as empty text.
  - A file whose content is equal but whose mode is not C(0644) has its mode set, which counts as a change.
seealso:
  - module: ansible.builtin.setup
    description: Reads C(*.fact) files from C(fact_path) into C(ansible_local).
"""

EXAMPLES = r"""
- name: Record what the scheduler bound to this node
  gangplank.platform.node_state:
    revision: "{{ gangplank_placement.revision }}"
    labels: "{{ gangplank_placement.nodes[inventory_hostname].labels }}"
    instances: "{{ gangplank_placement.nodes[inventory_hostname].instances }}"
    ranks: "{{ gangplank_placement.ranks }}"

- name: Read it back as a local fact
  ansible.builtin.setup:
    filter: ansible_local

- name: Show the instances bound to this node
  ansible.builtin.debug:
    var: ansible_local['gangplank']['instances']

- name: Remove the node state on teardown
  gangplank.platform.node_state:
    revision: "{{ gangplank_placement.revision }}"
    state: absent
"""

RETURN = r"""
state:
  description:
    - The content now in the file, or that would be in check mode. Null with O(state=absent).
  returned: always
  type: dict
  sample:
    revision: 3
    labels:
      gangplank.io/service.infer: "true"
    instances:
      infer-0:
        service: infer
        ordinal: 0
        gpus:
          - index: 0
            uuid: GPU-5f6d1c2e-0000-0000-0000-000000000000
            model: NVIDIA H100 80GB HBM3
            memory: 85899345920
        nvme: null
        sidecars: []
        rank: 0
    ranks:
      - [infer]
previous_revision:
  description:
    - The C(revision) the file had before this run. Null when the file was missing, was not valid JSON or had no revision.
  returned: always
  type: int
  sample: 2
"""

import json
import os
import stat

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gangplank.platform.plugins.module_utils.messages import printable, show
from ansible_collections.gangplank.platform.plugins.module_utils.state_files import atomic_write, read_json, remove_file

FILE_MODE = 0o644


def render(content):
    """The file's text: sorted keys, indent 2, a trailing newline."""
    return json.dumps(content, sort_keys=True, indent=2) + "\n"


def read_text(path):
    """The file's text for the diff, or an empty string when it is missing."""
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def file_mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def read_current(module, path):
    """The file's parsed content (None when missing or corrupt) and whether it was corrupt."""
    try:
        current = read_json(path)
    except ValueError as error:
        module.warn("%s; it is replaced (it is derived from the placement record)" % error)
        return None, True
    except OSError as error:
        module.fail_json(msg="cannot read %s: %s" % (path, error))
    if current is not None and not isinstance(current, dict):
        module.warn("%s does not hold a JSON object; it is replaced (it is derived from the placement record)" % path)
        return None, True
    return current, False


def previous_revision_of(current):
    if current is None:
        return None
    revision = current.get("revision")
    if isinstance(revision, bool) or not isinstance(revision, int):
        return None
    return revision


def diff_of(path, before, after):
    return {"before": before, "after": after, "before_header": path, "after_header": path}


def validate(module):
    params = module.params
    if params["revision"] < 0:
        module.fail_json(msg="revision: got %d; expected an integer of 0 or more" % params["revision"])
    for name in sorted(params["instances"]):
        if not isinstance(params["instances"][name], dict):
            # One line: the name (from the plan) as at most 80 characters of JSON if it is not plain, the value briefly.
            module.fail_json(msg="instances.%s: got %s; expected a mapping" % (printable(name), show(params["instances"][name])))


def ensure_absent(module, path):
    exists = os.path.lexists(path)
    result = {"changed": exists, "state": None, "previous_revision": None}
    if not exists:
        module.exit_json(**result)
    if os.path.isdir(path):
        module.fail_json(msg="%s is a directory, not a fact file" % path)
    current = read_current(module, path)[0]
    result["previous_revision"] = previous_revision_of(current)
    if module._diff:
        result["diff"] = diff_of(path, read_text(path), "")
    if not module.check_mode:
        try:
            remove_file(path)
        except OSError as error:
            module.fail_json(msg="cannot remove %s: %s" % (path, error))
    module.exit_json(**result)


def ensure_present(module, path):
    params = module.params
    desired = {key: params[key] for key in ("revision", "labels", "instances", "ranks")}
    try:
        text = render(desired)
    except (TypeError, ValueError) as error:
        module.fail_json(msg="cannot write the node state as JSON: %s" % error)
    # What a reader will parse back (keys become strings, tuples lists), compared with what is there.
    desired = json.loads(text)
    if os.path.isdir(path):
        module.fail_json(msg="%s is a directory, not a fact file" % path)
    current, corrupt = read_current(module, path)
    result = {"changed": False, "state": desired, "previous_revision": previous_revision_of(current)}

    # Only the node's share counts: a newer revision of the record that leaves it as it is writes nothing, so a plan
    # that changes one host (a scale) changes that host alone. The file's revision is then the one that last changed it.
    same_share = current is not None and all(current.get(key) == desired[key] for key in ("labels", "instances", "ranks"))
    if same_share and not corrupt and isinstance(previous_revision_of(current), int) and set(current) == set(desired):
        result["state"] = current
        if file_mode(path) != FILE_MODE:
            result["changed"] = True
            if not module.check_mode:
                try:
                    os.chmod(path, FILE_MODE)
                except OSError as error:
                    module.fail_json(msg="cannot set the mode of %s: %s" % (path, error))
        module.exit_json(**result)

    result["changed"] = True
    if module._diff:
        result["diff"] = diff_of(path, read_text(path), text)
    if not module.check_mode:
        try:
            atomic_write(path, text.encode("utf-8"), FILE_MODE)
        except OSError as error:
            module.fail_json(msg="cannot write %s: %s" % (path, error))
    module.exit_json(**result)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", default="/etc/ansible/facts.d/gangplank.fact"),
            revision=dict(type="int", required=True),
            labels=dict(type="dict", default={}),
            instances=dict(type="dict", default={}),
            ranks=dict(type="list", elements="raw", default=[]),
            state=dict(type="str", choices=["present", "absent"], default="present"),
        ),
        supports_check_mode=True,
    )
    validate(module)
    path = module.params["path"]
    if module.params["state"] == "absent":
        ensure_absent(module, path)
    ensure_present(module, path)


if __name__ == "__main__":
    main()
