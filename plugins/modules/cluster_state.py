#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: cluster_state
short_description: Read and write the cluster's placement record, under a lock, on the host it runs on
version_added: 0.1.0
description:
  - Manages the gang scheduler's placement record and the lock that lets one run at a time change it.
  - Both are files on the host the module runs on (a control host of the cluster), in the directory O(path).
    Nothing is kept on the controller, which AWX throws away after each job.
  - C(placement.json) (mode 0600) holds the current revision and the older ones under C(history), newest first.
    A missing file reads as revision 0 with empty C(placement), C(node_labels), C(replicas), C(ranks), C(nodes),
    C(down_since) and C(retained).
  - C(lock.json) (mode 0600) names the run that holds the lock, with C(owner), C(job_id), C(started_at) and C(started_epoch).
  - Files are replaced atomically (a temporary file, fsync, rename, fsync of the directory). The lock is created with
    C(O_CREAT|O_EXCL), so of several runs that try at once exactly one gets it. Runs on the same host also take
    turns through a C(flock) on the directory while they check and change the files.
  - A corrupt C(placement.json) fails every action but O(action=unlock) and is never overwritten.
options:
  path:
    description:
      - The directory holding C(placement.json) and C(lock.json). It is created (mode 0755) when a lock is taken.
    type: path
    default: /var/lib/gangplank
  action:
    description:
      - C(read) returns the record and the lock and changes nothing.
      - C(lock) takes the lock for O(job_id). Taking a lock the same job holds is fine and changes nothing.
        A lock held by another job is waited for, up to O(lock_wait) seconds (checked every 1 to 5 seconds, so runs
        queue behind each other), and then fails the task, naming the holder, unless it is older than
        O(lock_timeout) and O(break_lock) is true; then it is replaced, and the old holder is returned as RV(broken_lock).
      - C(write) stores O(record) as a new revision. The lock must be held by O(job_id).
        A record equal to the current one changes nothing.
      - C(unlock) removes the lock if O(job_id) holds it. A lock held by another job is left in place, with a warning.
    type: str
    choices: [read, lock, write, unlock]
    required: true
  owner:
    description:
      - Who takes the lock, for people reading the lock, for example C(root@controller pid 1234).
      - One line of text; a control character (a line break, a tab, NUL, a bidi override) is refused.
      - Required for O(action=lock). With O(action=write), the owner stored in the revision is the lock's owner; this
        option is used only in check mode when the lock was not taken (because the lock task ran in check mode too).
    type: str
  job_id:
    description:
      - The id of this run, for example the AWX job id, or a uuid the playbook makes once per run.
      - One line of text; a control character (a final line break included) is refused.
      - Required for O(action=lock), O(action=write) and O(action=unlock).
    type: str
  lock_timeout:
    description:
      - Seconds after which a lock counts as stale, that is, may be broken with O(break_lock).
    type: int
    default: 3600
  lock_wait:
    description:
      - With O(action=lock), how many seconds to wait for a lock that another job holds before failing; 0 fails at once.
      - At most 86400 (a day). The wait takes no lock of its own, so the run that holds the lock is not slowed down.
      - A run that waited says so in a warning, and returns RV(waited).
    type: int
    default: 0
  break_lock:
    description:
      - With O(action=lock), replace a lock of another job when it is older than O(lock_timeout).
        A younger lock still fails the task.
      - Use it only when the run that holds the lock is dead.
    type: bool
    default: false
  record:
    description:
      - For O(action=write), the new content, a mapping with the keys C(placement) (a mapping), C(node_labels) (a mapping),
        C(replicas) (a mapping of service name to a count, the scale overrides), C(ranks) (a list) and C(nodes) (a mapping
        of host to the scheduler's node entry it was planned with, so that a host that is down keeps its place in the plan)
        and C(down_since) (a mapping of host to when it was first seen down, in seconds since the epoch; the grace period
        before its stateless instances are replaced counts from there), and C(retained) (a mapping of instance to the
        volumes a stateful instance left on its node when it was no longer placed, with its service, ordinal, node, NVMe
        device and volumes).
      - A key left out keeps its current value.
      - The keys C(revision), C(written_at), C(job_id), C(owner) and C(history) are ignored, so a record returned
        by O(action=read) can be passed back with changes. Other keys fail the task.
    type: dict
  history:
    description:
      - How many revisions C(placement.json) keeps, the current one included. Its C(history) list holds at most O(history) - 1 older ones.
    type: int
    default: 10
  min_revision:
    description:
      - With O(action=write), the lowest revision number the new revision may get (it gets the current one plus one
        when that is higher). Pass the newest revision the control hosts hold plus one, so that a control host that
        missed writes while it was down gets the same number as the others and can never later pass for the newest.
      - 0 to 2^53.
    type: int
    default: 0
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details:
      - Every action returns what it would do and writes nothing.
      - O(action=lock) still fails when another job holds the lock, so runs in check mode are refused too, and it does not create the lock.
      - O(action=write) in check mode accepts a missing lock, because a lock task in check mode does not create one.
  diff_mode:
    support: partial
    details:
      - Only O(action=write) returns a diff, of C(placement) as JSON text with sorted keys.
  platform:
    platforms: posix
author:
  - Gangplank maintainers (@gangplank)
notes:
  - Run it on one control host per cluster (for example with C(run_once)), always with the same O(path).
  - Times are UTC, in ISO 8601 (C(2025-01-31T12:00:00Z)).
  - If a run dies while it holds the lock, the next run waits O(lock_wait) seconds and then fails naming it.
    Re-run with O(break_lock=true) once the lock is older than O(lock_timeout), or remove C(lock.json) by hand after
    making sure that run is gone.
  - If C(placement.json) is corrupt, repair it by hand; the previous revisions are inside it, under C(history).
"""

EXAMPLES = r"""
- name: Take the cluster state lock
  gangplank.platform.cluster_state:
    action: lock
    owner: "{{ lookup('ansible.builtin.env', 'USER') | default('awx', true) }}@{{ inventory_hostname }}"
    job_id: "{{ gangplank_job_id }}"
    break_lock: "{{ gangplank_break_lock | default(false) | bool }}"
  register: gangplank_state
  run_once: true

- name: Store the new placement
  gangplank.platform.cluster_state:
    action: write
    job_id: "{{ gangplank_job_id }}"
    record:
      placement: "{{ gangplank_plan.placement }}"
      node_labels: "{{ gangplank_plan.node_labels }}"
      replicas: "{{ gangplank_replicas }}"
      ranks: "{{ gangplank_plan.ranks }}"
  run_once: true

- name: Release the lock
  gangplank.platform.cluster_state:
    action: unlock
    job_id: "{{ gangplank_job_id }}"
  run_once: true

- name: Show the current placement and who holds the lock
  gangplank.platform.cluster_state:
    action: read
  register: gangplank_state
  run_once: true
"""

RETURN = r"""
record:
  description:
    - The placement record. With O(action=write), the new one (the one that would be written in check mode).
    - Null with O(action=unlock) when C(placement.json) is corrupt.
  returned: always
  type: dict
  contains:
    revision:
      description: The revision number, 0 when nothing was written yet.
      type: int
    placement:
      description: Where each instance runs.
      type: dict
    node_labels:
      description: The labels planted on each node.
      type: dict
    replicas:
      description: Service name to replica count, the scale overrides.
      type: dict
    nodes:
      description: Per host, the scheduler's node entry the placement was planned with (empty in records of older versions).
      type: dict
    down_since:
      description: Per host that is down, when it was first seen down (seconds since the epoch; empty in records of older versions).
      type: dict
    retained:
      description: Per instance no longer placed, the volumes it left on its node (empty in records of older versions).
      type: dict
    ranks:
      description: The ranks of the gang.
      type: list
    written_at:
      description: When this revision was written (UTC, ISO 8601); null for revision 0.
      type: str
    job_id:
      description: The job that wrote this revision; null for revision 0.
      type: str
    owner:
      description: The lock owner of the job that wrote this revision; null for revision 0.
      type: str
    history:
      description: Older revisions with the same keys except C(history), newest first.
      type: list
      elements: dict
  sample:
    revision: 2
    placement: {train: {node1: [0, 1]}}
    node_labels: {node1: {gangplank.io/role: train}}
    replicas: {train: 2}
    ranks: [node1]
    written_at: "2025-01-31T12:00:00Z"
    job_id: "4711"
    owner: awx@control1
    history: []
lock:
  description:
    - The lock, or null when nobody holds it. After O(action=lock), the lock of this job; after O(action=unlock) by this job, null.
  returned: always
  type: dict
  sample:
    owner: awx@control1
    job_id: "4711"
    started_at: "2025-01-31T11:59:00Z"
    started_epoch: 1738324740
waited:
  description: The seconds O(action=lock) waited for another job's lock before it got it.
  returned: when O(action=lock) had to wait
  type: int
  sample: 42
broken_lock:
  description: The stale lock of another job that O(action=lock) replaced because of O(break_lock).
  returned: when a lock was broken
  type: dict
path:
  description: The state directory, O(path).
  returned: always
  type: str
  sample: /var/lib/gangplank
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gangplank.platform.plugins.module_utils.cluster_lock import (
    MAX_LOCK_WAIT,
    MAX_REVISION,
    PLACEMENT_FILE,
    StateError,
    read_state,
    release_lock,
    take_lock,
    to_json,
    write_record,
)
from ansible_collections.gangplank.platform.plugins.module_utils.messages import show
from ansible_collections.gangplank.platform.plugins.module_utils.validation import has_control


class ClusterStateModule(AnsibleModule):
    """AnsibleModule without the file stats (mode, owner, uid, state ...) it adds to any result with a C(path)."""

    def add_path_info(self, kwargs):
        return kwargs


def main():
    module = ClusterStateModule(
        argument_spec=dict(
            path=dict(type="path", default="/var/lib/gangplank"),
            action=dict(type="str", choices=["read", "lock", "write", "unlock"], required=True),
            owner=dict(type="str"),
            job_id=dict(type="str"),
            lock_timeout=dict(type="int", default=3600),
            lock_wait=dict(type="int", default=0),
            break_lock=dict(type="bool", default=False),
            record=dict(type="dict"),
            history=dict(type="int", default=10),
            min_revision=dict(type="int", default=0),
        ),
        required_if=[
            ("action", "lock", ("owner", "job_id")),
            ("action", "write", ("job_id", "record")),
            ("action", "unlock", ("job_id",)),
        ],
        supports_check_mode=True,
    )
    params = module.params
    directory = params["path"]
    action = params["action"]
    for name in ("owner", "job_id"):
        if params[name] is not None and not params[name].strip():
            module.fail_json(msg="%s must not be empty" % name, path=directory)
        if params[name] is not None and has_control(params[name]):
            # The lock is matched on job_id and both are shown in messages: "4711\n" is not job 4711.
            module.fail_json(msg="%s: got %s; expected one line without control characters (line breaks, tabs, NUL, "
                             "bidi overrides)" % (name, show(params[name])), path=directory)
    if params["lock_timeout"] < 0:
        module.fail_json(msg="lock_timeout must be 0 or more seconds, got %d" % params["lock_timeout"], path=directory)
    if not 0 <= params["lock_wait"] <= MAX_LOCK_WAIT:
        module.fail_json(msg="lock_wait must be 0 to %d seconds, got %d" % (MAX_LOCK_WAIT, params["lock_wait"]), path=directory)
    if not 0 <= params["min_revision"] <= MAX_REVISION:
        module.fail_json(msg="min_revision must be 0 to %d, got %d" % (MAX_REVISION, params["min_revision"]), path=directory)
    if params["history"] < 1:
        module.fail_json(msg="history must be 1 or more (the current revision counts), got %d" % params["history"], path=directory)

    try:
        if action == "read":
            result = read_state(directory)
        elif action == "lock":
            result = take_lock(directory, params["owner"], params["job_id"], params["lock_timeout"], params["break_lock"], module.check_mode,
                               lock_wait=params["lock_wait"])
        elif action == "write":
            result = write_record(directory, params["job_id"], params["record"], params["history"], module.check_mode, owner=params["owner"],
                                  min_revision=params["min_revision"])
            before, after, before_revision = result.pop("before"), result.pop("after"), result.pop("before_revision")
            if module._diff:
                where = os.path.join(directory, PLACEMENT_FILE)
                result["diff"] = {
                    "before": to_json(before), "after": to_json(after),
                    "before_header": "%s placement (revision %d)" % (where, before_revision),
                    "after_header": "%s placement (revision %d)" % (where, result["record"]["revision"]),
                }
        else:
            result = release_lock(directory, params["job_id"], module.check_mode)
    except StateError as error:
        module.fail_json(msg=str(error), path=directory, **error.details)
    except OSError as error:
        module.fail_json(msg="cannot %s the cluster state at %s: %s" % (action, directory, error), path=directory)

    for warning in result.pop("warnings", []):
        module.warn(warning)
    result["path"] = directory
    module.exit_json(**result)


if __name__ == "__main__":
    main()
