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
    A missing file reads as revision 0 with empty C(placement), C(node_labels), C(replicas), C(ranks), C(nodes) and
    C(down_since).
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
        before its stateless instances are replaced counts from there).
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

import contextlib
import copy
import datetime
import json
import os
import re
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gangplank.platform.plugins.module_utils.messages import printable, show
from ansible_collections.gangplank.platform.plugins.module_utils.state_files import (
    atomic_write,
    create_exclusive,
    ensure_directory,
    locked_directory,
    read_json,
    remove_file,
)
from ansible_collections.gangplank.platform.plugins.module_utils.validation import has_control

PLACEMENT_FILE = "placement.json"
_COUNT = re.compile(r"[0-9]{1,18}")
LOCK_FILE = "lock.json"
FILE_MODE = 0o600
CONTENT_KEYS = ("placement", "node_labels", "replicas", "ranks", "nodes", "down_since")
CONTENT_TYPES = {"placement": dict, "node_labels": dict, "replicas": dict, "ranks": list, "nodes": dict, "down_since": dict}
# Keys a record written by an older version may lack (read as empty).
NEWER_KEYS = ("nodes", "down_since")
ENTRY_KEYS = ("revision",) + CONTENT_KEYS + ("written_at", "job_id", "owner")
READ_ONLY_KEYS = ("revision", "written_at", "job_id", "owner", "history")


class StateError(Exception):
    """A failure to report with fail_json; ``details`` are returned next to the message."""

    def __init__(self, message, **details):
        super().__init__(message)
        self.details = details


class LockHeld(StateError):
    """The lock is held by another job and may not be broken (yet)."""


MAX_EPOCH = 253402300799        # 9999-12-31T23:59:59Z
MAX_LOCK_WAIT = 86400
MAX_REVISION = 2 ** 53


def _now():
    """The current time in seconds since the epoch (a function, so tests can move the clock)."""
    return time.time()


def _sleep(seconds):
    """Wait between two looks at a held lock (a function, so tests can move the clock instead)."""
    time.sleep(seconds)


def iso_utc(epoch):
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def to_json(value):
    return json.dumps(value, sort_keys=True, indent=2) + "\n"


def empty_record():
    record = {"revision": 0, "written_at": None, "job_id": None, "owner": None, "history": []}
    for key in CONTENT_KEYS:
        record[key] = CONTENT_TYPES[key]()
    return record


def _corrupt(problem):
    return StateError(
        "cannot use the placement record: %s. The file is left as it is and will not be overwritten. The previous revisions are inside it, "
        "under 'history' (newest first): repair the file by hand, for example by making the newest good entry of 'history' its top level, "
        "then re-run." % problem)


def _record_problem(content):
    revision = content.get("revision")
    if isinstance(revision, bool) or not isinstance(revision, int) or revision < 0:
        return "'revision' is %s, not a whole number of 0 or more" % json.dumps(revision)
    for key in CONTENT_KEYS:
        if key in NEWER_KEYS and key not in content:
            continue
        if not isinstance(content.get(key), CONTENT_TYPES[key]):
            return "'%s' is %s, not a JSON %s" % (key, json.dumps(content.get(key))[:80], "object" if CONTENT_TYPES[key] is dict else "array")
    history = content.get("history", [])
    if not isinstance(history, list) or not all(isinstance(entry, dict) for entry in history):
        return "'history' is not a list of JSON objects"
    return None


def load_record(directory):
    """The record in ``directory`` (an empty revision 0 when there is none); StateError when it is corrupt."""
    path = os.path.join(directory, PLACEMENT_FILE)
    try:
        content = read_json(path)
    except ValueError as error:
        raise _corrupt(str(error)) from None
    if content is None:
        return empty_record()
    problem = _record_problem(content)
    if problem:
        raise _corrupt("%s is corrupt: %s" % (path, problem))
    record = empty_record()
    record.update(content)
    return record


def load_lock(directory):
    """The lock in ``directory``, or None. An unreadable lock file is a lock of an unknown holder, aged by its mtime."""
    path = os.path.join(directory, LOCK_FILE)
    try:
        content = read_json(path)
        problem = None
    except ValueError as error:
        content, problem = {}, str(error)
    if content is None:
        return None
    lock = dict(content)
    if problem:
        lock["owner"] = "an unknown holder (%s)" % problem
    started = lock.get("started_epoch")
    if not _valid_epoch(started):
        try:
            started = int(os.stat(path).st_mtime)
        except FileNotFoundError:
            started = int(_now())
        # A clock far off (or a file touched into year 10000) ages the lock from now: it can still be broken later.
        started = started if _valid_epoch(started) else int(_now())
        lock["started_epoch"] = started
    lock.setdefault("owner", None)
    lock.setdefault("job_id", None)
    lock.setdefault("started_at", iso_utc(started))
    return lock


def _valid_epoch(value):
    """A time in seconds since the epoch that the calendar functions accept (years 1970 to 9999)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= MAX_EPOCH


def describe(lock, now):
    age = max(0, int(now - lock["started_epoch"]))
    return "%s (job %s) since %s (%ds ago)" % (lock["owner"] or "an unknown owner", lock["job_id"] or "unknown", lock["started_at"], age)


def held_message(directory, lock, now, lock_timeout, break_lock):
    age = max(0, int(now - lock["started_epoch"]))
    message = ("the cluster state at %s is locked by %s: another run is in progress. If that run is dead, re-run with -e gangplank_break_lock=true"
               % (directory, describe(lock, now)))
    if age > lock_timeout:
        return message + " (the lock is older than lock_timeout=%ds, so it can be broken now)" % lock_timeout
    remaining = max(1, lock_timeout - age)
    if break_lock:
        return message + " (break_lock is set, but the lock is older than lock_timeout=%ds only after %ds more)" % (lock_timeout, remaining)
    return message + " (the lock is older than lock_timeout=%ds only after %ds more)" % (lock_timeout, remaining)


def _guard(directory, shared=False):
    """Take turns with other runs on this host; nothing to guard when the directory does not exist (read or check mode)."""
    if os.path.isdir(directory):
        return locked_directory(directory, shared=shared)
    return contextlib.nullcontext()


def new_lock(owner, job_id, now):
    return {"owner": owner, "job_id": job_id, "started_at": iso_utc(now), "started_epoch": int(now)}


def take_lock(directory, owner, job_id, lock_timeout, break_lock, check_mode, lock_wait=0):
    """Take the lock for ``job_id``, waiting up to ``lock_wait`` seconds while another job holds it; returns the result
    (changed, lock, record, maybe broken_lock, waited and warnings)."""
    started = _now()
    delay = 1.0
    holders = []
    while True:
        try:
            result = _take_lock_once(directory, owner, job_id, lock_timeout, break_lock, check_mode)
        except LockHeld as held:
            now = _now()
            if now - started >= lock_wait:
                if lock_wait > 0:
                    raise LockHeld("%s; waited %ds for it (lock_wait=%ds)" % (held, int(now - started), lock_wait),
                                   **held.details) from None
                raise
            holder = held.details.get("lock") or {}
            if not holders or holders[-1] != holder.get("job_id"):
                holders.append(holder.get("job_id"))
            # Look often at first (a short run is soon done), then every 5 s; never past the end of the wait.
            _sleep(max(0.0, min(delay, lock_wait - (now - started))))
            delay = min(delay * 1.5, 5.0)
            continue
        if holders:
            result["waited"] = int(_now() - started)
            result.setdefault("warnings", []).append(
                "waited %ds for the cluster lock at %s, held by job(s) %s, before taking it"
                % (result["waited"], directory, ", ".join(str(job) for job in holders)))
        return result


def _take_lock_once(directory, owner, job_id, lock_timeout, break_lock, check_mode):
    """One try at the lock; LockHeld when another job holds it."""
    lock_path = os.path.join(directory, LOCK_FILE)
    if not check_mode:
        ensure_directory(directory)
    with _guard(directory):
        now = _now()
        holder = load_lock(directory)
        if holder is not None and holder["job_id"] == job_id:
            return {"changed": False, "lock": holder, "record": load_record(directory)}
        if holder is not None and not (break_lock and now - holder["started_epoch"] > lock_timeout):
            raise LockHeld(held_message(directory, holder, now, lock_timeout, break_lock), lock=holder)
        # Read before locking: a corrupt record fails the task without leaving a lock behind.
        record = load_record(directory)
        lock = new_lock(owner, job_id, now)
        result = {"changed": True, "lock": lock, "record": record}
        if holder is None:
            if not check_mode and not create_exclusive(lock_path, to_json(lock), FILE_MODE):
                # Only a run that does not take the directory lock can get here first.
                holder = load_lock(directory) or lock
                raise LockHeld(held_message(directory, holder, now, lock_timeout, break_lock), lock=holder)
            return result
        if not check_mode:
            atomic_write(lock_path, to_json(lock), FILE_MODE)
        result["broken_lock"] = holder
        result["warnings"] = ["broke the lock of the cluster state at %s held by %s: it was older than lock_timeout=%ds and break_lock is set"
                              % (directory, describe(holder, now), lock_timeout)]
        return result


def check_content(given, current):
    """The new placement, node_labels, replicas and ranks: ``given`` over ``current``; StateError for mistakes."""
    unknown = sorted(str(key) for key in given if key not in CONTENT_KEYS and key not in READ_ONLY_KEYS)
    if unknown:
        raise StateError("record has unknown keys %s; it takes %s" % (", ".join(unknown), ", ".join(CONTENT_KEYS)))
    content = {}
    for key in CONTENT_KEYS:
        value = given.get(key, current[key])
        if value is None:
            value = CONTENT_TYPES[key]()
        if not isinstance(value, CONTENT_TYPES[key]):
            raise StateError("record.%s must be a %s, got %s" % (key, "mapping" if CONTENT_TYPES[key] is dict else "list", type(value).__name__))
        content[key] = value
    replicas = {}
    for service, count in content["replicas"].items():
        # ASCII digits (int() refuses "²"), the whole string after ASCII blanks: not "3\x00" or "3\u2028".
        if isinstance(count, str) and _COUNT.fullmatch(count.strip(" \t\r\n")):
            count = int(count.strip(" \t\r\n"))
        if isinstance(count, bool) or not isinstance(count, int) or count < 0 or count.bit_length() > 63:
            # show(): json.dumps() of an integer of more than 4,300 digits raises.
            raise StateError("record.replicas.%s must be a whole number of 0 or more, got %s" % (printable(service), show(count)))
        replicas[str(service)] = count
    content["replicas"] = replicas
    try:
        # The form it takes in the file: string keys, lists for tuples.
        # NaN and infinity are not JSON: written, they would make the record unreadable.
        return json.loads(json.dumps(content, allow_nan=False))
    except RecursionError:
        raise StateError("record cannot be stored as JSON: it is nested too deeply") from None
    except (TypeError, ValueError) as error:
        if isinstance(error, ValueError) and "int_max_str_digits" in str(error):
            # An integer of more than 4,300 digits: Python's message names its own setting, not the record's.
            raise StateError("record cannot be stored as JSON: it holds an integer of more than 4,300 digits") from None
        raise StateError("record cannot be stored as JSON: %s" % error) from None


def write_record(directory, job_id, given, history, check_mode, owner=None, min_revision=0):
    """Store ``given`` as a new revision if it differs; returns the result (changed, record, lock, before, after)."""
    path = os.path.join(directory, PLACEMENT_FILE)
    with _guard(directory):
        now = _now()
        holder = load_lock(directory)
        if holder is None and not check_mode:
            raise StateError("cannot write the cluster state at %s: it is not locked. Take the lock first with action=lock job_id=%s"
                             % (directory, job_id), lock=None)
        if holder is not None and holder["job_id"] != job_id:
            raise StateError("cannot write the cluster state at %s for job %s: it is locked by %s"
                             % (directory, job_id, describe(holder, now)), lock=holder)
        current = load_record(directory)
        content = check_content(given, current)
        result = {"lock": holder, "before": current["placement"], "before_revision": current["revision"]}
        if all(content[key] == current[key] for key in CONTENT_KEYS):
            result.update(changed=False, record=current, after=current["placement"])
            return result
        record = {"revision": max(current["revision"] + 1, min_revision), "written_at": iso_utc(now), "job_id": job_id,
                  "owner": holder["owner"] if holder is not None else owner}
        record.update(content)
        older = list(current["history"])
        if current["revision"] > 0:
            older.insert(0, {key: copy.deepcopy(current.get(key)) for key in ENTRY_KEYS})
        record["history"] = older[:history - 1]
        if not check_mode:
            atomic_write(path, to_json(record), FILE_MODE)
        result.update(changed=True, record=record, after=record["placement"])
        return result


def release_lock(directory, job_id, check_mode):
    """Remove the lock if ``job_id`` holds it; returns the result (changed, lock, record, maybe warnings)."""
    with _guard(directory):
        now = _now()
        holder = load_lock(directory)
        result = {"changed": False, "lock": None, "warnings": []}
        if holder is not None and holder["job_id"] != job_id:
            result["lock"] = holder
            result["warnings"].append("did not remove the lock of the cluster state at %s: it is held by %s, not by job %s"
                                      % (directory, describe(holder, now), job_id))
        elif holder is not None:
            result["changed"] = True
            if not check_mode:
                remove_file(os.path.join(directory, LOCK_FILE))
        try:
            result["record"] = load_record(directory)
        except StateError as error:
            result["record"] = None
            result["warnings"].append(str(error))
        return result


def read_state(directory):
    with _guard(directory, shared=True):
        return {"changed": False, "record": load_record(directory), "lock": load_lock(directory)}


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
