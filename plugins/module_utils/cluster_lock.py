# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster state's lock protocol and the placement record it guards, on the host that keeps them.

Two files in one directory (the cluster_state module's ``path``): ``lock.json`` names the run that holds the lock,
``placement.json`` holds the record and its history. The protocol:

- take (``take_lock``): created with O_CREAT|O_EXCL (state_files.create_exclusive), so of several runs that try at
  once exactly one gets it; a lock of the same job is taken again without change; another job's lock is waited for
  up to ``lock_wait`` seconds (looked at every 1 to 5 s), and broken only when ``break_lock`` is set and it is older
  than ``lock_timeout``;
- write (``write_record``): only under the lock of the writing job, a new revision replacing the file atomically
  (state_files.atomic_write), older ones kept in its history;
- release (``release_lock``): only the holder's job removes the lock;
- every step reads, checks and changes the files under a ``flock`` on the directory (``_guard``,
  state_files.locked_directory), so runs on one host take turns.

StateError carries a message a person can act on; the cluster_state module reports it with fail_json.
Standard library only (runs on managed hosts).
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import json
import os
import re
import time

from ansible_collections.gangplank.platform.plugins.module_utils.messages import printable, show
from ansible_collections.gangplank.platform.plugins.module_utils.state_files import (
    atomic_write,
    create_exclusive,
    ensure_directory,
    locked_directory,
    read_json,
    remove_file,
)

PLACEMENT_FILE = "placement.json"
_COUNT = re.compile(r"[0-9]{1,18}")
LOCK_FILE = "lock.json"
FILE_MODE = 0o600
CONTENT_KEYS = ("placement", "node_labels", "replicas", "ranks", "nodes", "down_since", "retained")
CONTENT_TYPES = {"placement": dict, "node_labels": dict, "replicas": dict, "ranks": list, "nodes": dict, "down_since": dict,
                 "retained": dict}
# Keys a record written by an older version may lack (read as empty). retained: the volumes of stateful instances no
# longer placed (module_utils/planning/retained.py).
NEWER_KEYS = ("nodes", "down_since", "retained")
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
    # "unreadable" is this function's own note (describe() shows it as it is), never the file's.
    lock.pop("unreadable", None)
    if problem:
        lock["owner"] = "an unknown holder (%s)" % problem
        lock["unreadable"] = problem
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
    """The holder of ``lock`` in one bounded line: the file's owner, job id and start are shown with printable()."""
    age = max(0, int(now - lock["started_epoch"]))
    if lock.get("unreadable"):
        owner = lock["owner"]
    else:
        owner = printable(lock["owner"]) if lock["owner"] else "an unknown owner"
    job = printable(lock["job_id"]) if lock["job_id"] else "unknown"
    return "%s (job %s) since %s (%ds ago)" % (owner, job, printable(lock["started_at"]), age)


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
                % (result["waited"], directory, ", ".join(printable(job) for job in holders)))
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
                             % (directory, printable(job_id)), lock=None)
        if holder is not None and holder["job_id"] != job_id:
            raise StateError("cannot write the cluster state at %s for job %s: it is locked by %s"
                             % (directory, printable(job_id), describe(holder, now)), lock=holder)
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
                                      % (directory, describe(holder, now), printable(job_id)))
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
