# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Small, crash-safe state files on a managed host: JSON records, lock files, fact files.

Used by the cluster_state module (placement record and lock under ``/var/lib/gangplank``) and
meant for any module that keeps state on the host it runs on (such as a local fact file under
``/etc/ansible/facts.d``). Standard library only; importable on Python 3.9+ (managed hosts).

- ``atomic_write(path, data, mode)``: readers see the old content or the new, never a part; the
  temporary files of earlier writes that were killed mid-way are removed.
- ``create_exclusive(path, data, mode)``: create a file only if it does not exist (a lock).
- ``read_json(path)``: a JSON object, None when the file is missing, ValueError when it is corrupt:
  a corrupt file is never read as empty state.
- ``locked_directory(path)``: an advisory ``flock`` on a directory, held for a short
  read-check-write step so that runs on the same host take turns.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import math
import os
import stat
import tempfile

DIRECTORY_MODE = 0o755


def ensure_directory(path, mode=DIRECTORY_MODE):
    """Create the directory ``path`` and any missing parents, each with ``mode`` (not reduced by the umask).

    A directory that exists is left as it is. Returns the list of directories created, top first.
    """
    path = os.path.abspath(path)
    missing = []
    while not os.path.isdir(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    created = []
    for directory in reversed(missing):
        try:
            os.mkdir(directory, mode)
        except FileExistsError:
            if not os.path.isdir(directory):
                raise
            continue
        os.chmod(directory, mode)
        created.append(directory)
    return created


def fsync_directory(path):
    """Flush a directory's entries (a new, renamed or removed file) to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as error:
        # Some file systems cannot fsync a directory; the data itself was synced already.
        if error.errno not in (errno.EINVAL, errno.EBADF, errno.ENOTSUP):
            raise
    finally:
        os.close(fd)


def _as_bytes(data):
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, (bytes, bytearray)):
        return bytes(data)
    raise TypeError("data must be bytes or str, not %s" % type(data).__name__)


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def atomic_write(path, data, mode):
    """Replace the file at ``path`` with ``data`` (bytes, or str written as UTF-8), atomically.

    The data goes to a temporary file in the same directory, created with ``mode`` and owned by the
    running user, which is flushed and fsynced, renamed over ``path`` with ``os.replace``, and then the
    directory is fsynced. A missing parent directory is created with mode 0755. On error the temporary
    file is removed and ``path`` is left as it was.
    """
    data = _as_bytes(data)
    path = os.path.abspath(path)
    directory, name = os.path.split(path)
    ensure_directory(directory)
    remove_leftovers(directory, name)
    fd, temporary = _locked_temporary(directory, name)
    try:
        try:
            _fill(fd, data, mode)
            os.replace(temporary, path)
        finally:
            os.close(fd)        # releases the lock that marks the temporary file as in use
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    fsync_directory(directory)


def _temporary_names(name):
    return "." + name + ".", ".tmp"


def _locked_temporary(directory, name):
    """A new temporary file for ``name``, open and ``flock``ed for as long as its writer lives."""
    prefix, suffix = _temporary_names(name)
    while True:
        fd, temporary = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=directory)
        fcntl.flock(fd, fcntl.LOCK_EX)
        if os.fstat(fd).st_nlink:
            return fd, temporary
        # Another writer took it for a leftover in the instant before it was locked: take a new one.
        os.close(fd)


def remove_leftovers(directory, name):
    """Remove the temporary files of writes to ``name`` whose writer died (killed mid-way): nobody holds their lock.

    Returns the paths removed.
    """
    prefix, suffix = _temporary_names(name)
    removed = []
    for entry in sorted(os.listdir(directory)):
        if not (entry.startswith(prefix) and entry.endswith(suffix)):
            continue
        leftover = os.path.join(directory, entry)
        try:
            fd = os.open(leftover, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.unlink(leftover)
            removed.append(leftover)
        except OSError:
            continue            # a live writer holds it (or it is gone already)
        finally:
            os.close(fd)
    return removed


def _fill(fd, data, mode):
    """Give the open file ``mode``, write all of ``data`` and fsync it."""
    os.fchmod(fd, mode)
    _write_all(fd, data)
    os.fsync(fd)


def _fill_and_close(fd, data, mode):
    """Give the open file ``mode``, write all of ``data``, fsync it, and close it whatever happens."""
    try:
        _fill(fd, data, mode)
    finally:
        os.close(fd)


def create_exclusive(path, data, mode):
    """Create ``path`` holding ``data`` only if it does not exist yet; True if created, False if it existed.

    ``os.open(O_CREAT | O_EXCL)`` decides who wins when several processes try at once; the winner
    writes and fsyncs the data, then fsyncs the directory. The parent directory must exist. Readers that
    must never see the file before its data is written hold ``locked_directory`` around both steps.
    """
    data = _as_bytes(data)
    path = os.path.abspath(path)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except FileExistsError:
        return False
    try:
        _fill_and_close(fd, data, mode)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    fsync_directory(os.path.dirname(path))
    return True


def remove_file(path):
    """Remove ``path`` and fsync its directory; True if removed, False if it was not there."""
    path = os.path.abspath(path)
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    fsync_directory(os.path.dirname(path))
    return True


def read_json(path, limit=None):
    """The JSON object in the file at ``path``, or None when the file does not exist.

    A file that is not UTF-8, not valid JSON or not a JSON object raises ValueError naming ``path``,
    so that a damaged state file is never mistaken for empty state; so does a path that is not a regular
    file (a FIFO would block the read forever, /dev/zero would fill the memory) and, with ``limit``, a
    file of more than ``limit`` bytes. Other read errors (permissions) raise OSError as usual.
    """
    try:
        # O_NONBLOCK: opening a FIFO for reading waits for a writer; with it, open returns and fstat says what it is.
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise ValueError("%s is not a regular file" % path)
        handle = os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)        # os.fdopen leaves it open when it fails (a directory)
        raise
    with handle:
        raw = handle.read() if limit is None else handle.read(limit + 1)
    if limit is not None and len(raw) > limit:
        raise ValueError("%s holds more than %d bytes" % (path, limit))
    return json_object(raw, path)


def json_object(raw, path):
    """The JSON object in ``raw`` (bytes read from the file at ``path``, which errors name), as read_json reads it."""
    try:
        content = json.loads(raw.decode("utf-8"), parse_constant=_not_json, parse_float=_finite_float)
    except RecursionError:
        raise ValueError("%s is not valid JSON (nested too deeply)" % path) from None
    except (UnicodeDecodeError, ValueError) as error:
        if not raw.strip():
            raise ValueError("%s is empty, not a JSON object" % path) from None
        raise ValueError("%s is not valid JSON (%s)" % (path, error)) from None
    if not isinstance(content, dict):
        raise ValueError("%s does not hold a JSON object but a JSON %s" % (path, _json_type(content)))
    return content


def _not_json(constant):
    # Python's json module reads NaN and Infinity, which JSON does not have.
    raise ValueError("%s is not a JSON number" % constant)


def _finite_float(text):
    number = float(text)
    if not math.isfinite(number):
        raise ValueError("%s is too large a number" % text)
    return number


def _json_type(value):
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return "number"


@contextlib.contextmanager
def locked_directory(path, shared=False):
    """Hold an advisory ``flock`` on the directory ``path`` (exclusive, or shared when ``shared``).

    The lock waits for other holders, is released when the block ends or the process dies, and
    only binds processes that take it too. The directory must exist.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
