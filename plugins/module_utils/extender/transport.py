# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The HTTP transport of scheduler extenders: POSTs a request body to ``urlPrefix/verb`` and brings back the
bytes of the answer, or a TransportError that names the extender and the verb.

The scheduler core (scheduler/extender.py: configuration, the kube objects, the answer readers) does no I/O and
imports no ``ssl``, ``socket`` or ``tempfile``: whoever builds a profile hands a transport in (kube's framework: the
transport is passed to the plugin, not chosen by it), this module's ``HTTPTransport`` for real HTTP (``parse_profile``
and ``load_profile`` here do that), or another object with the same methods (a test's fake). The transport reads the
files of an extender's configuration as the profile is parsed (``file_is_regular``, ``read_token_file``: the
bearerTokenFile, opened without blocking and checked before a byte is read) and makes its TLS context
(``tls_context``: the CA bundle, the client certificate and key, PEM given as data written to a private folder that is
removed once read); the core records what it raises (scheduler/extender.py's ExtenderFileError, whose message names
no file content) under the field's path.

Standard library only: http.client parses the answers (status line, headers, ``100 Continue``, chunked encoding,
keep-alive); sockets and TLS are made here, so that ONE deadline, ``httpTimeout`` after the call began, bounds the
whole exchange: the name's resolution (once per round, in a thread the call stops waiting for), connecting, the TLS
handshake, sending and reading the answer to its last byte. Each socket operation waits at most what is left of the
deadline, and once it has passed no further byte is read: a server that never answers, drips its answer a byte at
a time, sends 1-byte chunks or ``100 Continue`` lines without end is cut at the deadline. The bytes read on the wire
are bounded too: at most MAX_HEAD_BYTES of status lines and headers (``100 Continue`` ones included), at most
MAX_RESPONSE_BYTES of body, and at most MAX_WIRE_BYTES in all (chunk framing included).

A round of calls (``call_round``) runs on at most MAX_CONCURRENT worker threads, each with its own kept-alive
connection; at most MAX_OPENING calls are in flight on connections that have not answered yet (a Python
http.server listens with a backlog of 5). Each request goes out in one write (headers and body together, Nagle
off: TCP_NODELAY), and the answer's first segment is acknowledged at once (TCP_QUICKACK). The connections a round
leaves open are kept for the next round of the same extender (_Pool: at most MAX_CONCURRENT, IDLE_SECONDS each),
and the calling thread sends the first call of each worker that starts on one before the workers start (the
extender works while the bodies are made). An answer of the plainest kind (a 2xx status, a Content-Length, nothing
else http.client could read two ways) is read here, its head checked whole (_plain_head); any other by http.client.

The bearer token never appears in an error: an answer is quoted only through ``quote``, which blots the token out
of the text before cutting it, then shows it as one line (validation.one_line).
"""

from __future__ import annotations

import _thread
import collections
import contextlib
import http.client
import io
import ipaddress
import json
import os
import re
import shutil
import socket
import ssl
import stat
import tempfile
import threading
import time
import urllib.parse

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.extender import (
    EncryptedKey, ExtenderFileError, NotRegularFile,
)
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler import profiles as _profiles
from ansible_collections.gangplank.platform.plugins.module_utils.validation import one_line

MAX_CONCURRENT = 8                  # calls of one extender in flight at once, each worker on its kept-alive connection
MAX_OPENING = 4                     # of them on connections not answered yet (a Python http.server's backlog is 5)
MAX_RESPONSE_BYTES = 32 * 1024 * 1024   # bytes of one answer's body
MAX_HEAD_BYTES = 64 * 1024          # bytes of one answer's status lines and headers on the wire (100 Continue included)
MAX_FRAMING_BYTES = 1024 * 1024     # bytes of chunk framing (size lines) an answer may add on the wire
MAX_QUOTE = 80                      # characters of an answer quoted in an error
MAX_SCRUBBED = 65536                # characters of an answer the token is blotted out of before the quote is cut
# The longest token a profile takes (scheduler/extender.py MAX_TOKEN): a text is scrubbed over this much more than
# it keeps, so that a token straddling the cut is whole when it is blotted out.
_TOKEN_BOUND = 16384
_READ_SIZE = 65536
IDLE_SECONDS = 2.0                  # a kept-alive connection idle longer than this between rounds is closed, not reused


def max_wire_bytes():
    """The bytes one answer may take on the wire: status lines, headers, chunk framing and body."""
    return MAX_HEAD_BYTES + MAX_RESPONSE_BYTES + MAX_FRAMING_BYTES


class TransportError(Exception):
    """A call failed: the message names the extender and the verb, and never holds the token."""


def quote(config, data):
    """At most MAX_QUOTE characters of the answer ``data`` (bytes), for an error: the token is blotted out of the text
    first (config.scrub), then it is cut and made one printable line, and shown as a JSON string. Cutting first would
    leave the first characters of a token that straddles the cut."""
    text = bytes(data[:4 * (MAX_SCRUBBED + _TOKEN_BOUND)]).decode("utf-8", "replace")
    text = one_line(config.scrub(text[:MAX_SCRUBBED + _TOKEN_BOUND]), MAX_SCRUBBED)
    shown = json.dumps(text)
    return shown if len(shown) <= MAX_QUOTE else shown[:MAX_QUOTE - 3] + "..."


def describe(config, error):
    """What went wrong in ``error`` (an exception met on the way), the token blotted out, then cut to one line."""
    if isinstance(error, ssl.SSLError):
        text = "TLS: %s" % (error.reason or error)
    elif isinstance(error, ConnectionRefusedError):
        text = "connection refused"
    else:
        text = getattr(error, "strerror", None) or str(error) or type(error).__name__
    return one_line(config.scrub(text[:MAX_SCRUBBED + _TOKEN_BOUND]), 200)


class _TooLarge(Exception):
    def __init__(self, what):
        super().__init__(what)
        self.what = what


class _Stopped(Exception):
    """The round stopped while this call was waiting."""


def address(config):
    """(host, port) of the extender (an explicit port 0 is the configuration's business: it is refused there)."""
    parts = urllib.parse.urlsplit(config.url_prefix)
    return parts.hostname, parts.port or (443 if config.context is not None else 80)


def parse_profile(data, base=None, transport=None):
    """scheduler/profiles.py's parse_profile with ``transport`` handed in, this module's HTTPTransport when None (its
    extenders call over real HTTP(S))."""
    return _profiles.parse_profile(data, base, transport if transport is not None else HTTPTransport())


def load_profile(data, base=None, transport=None):
    """scheduler/profiles.py's load_profile with ``transport`` handed in, this module's HTTPTransport when None."""
    return _profiles.load_profile(data, base, transport if transport is not None else HTTPTransport())


class HTTPTransport:
    """Real HTTP(S) calls (module docstring), and the reading of the token and PEM files of an extender's
    configuration."""

    def file_is_regular(self, name):
        """Whether ``name`` is an existing regular file (a FIFO would wait for a writer)."""
        return file_is_regular(name)

    def read_token_file(self, name, limit):
        """At most ``limit`` bytes of the regular file ``name`` (read_regular)."""
        return read_regular(name, limit)

    def tls_context(self, files, pems, insecure):
        """The TLS context of an https:// extender (make_tls_context)."""
        return make_tls_context(files, pems, insecure)

    def call_round(self, config, jobs, prepare, finish, ahead=None, workers=MAX_CONCURRENT):
        """The calls of ``jobs`` to the extender of ``config`` (an scheduler.extender.ExtenderConfig); the results in
        the order of ``jobs``.

        ``prepare(job)`` runs right before the job's call goes out: it returns (verb, body bytes), or None for no
        call, or an exception, which stands as the job's result and stops the round. ``finish(job, answer)`` gets the
        body of a 2xx answer (bytes) or a TransportError and returns the job's result; an exception returned stops the
        round too: no further call starts, the calls in flight for earlier jobs are awaited (so the first error in
        the order of the jobs does not depend on timing) and those for later jobs are dropped (their results stay
        None). ``ahead()``, when given, does a small part of the work ``prepare`` would do later, and returns whether
        any is left. The three run one at a time (under one lock, in the round's threads or the calling one), so the
        caller's state needs no locking."""
        return _Round(config, workers).run(jobs, prepare, finish, ahead)


def file_is_regular(name):
    """Whether ``name`` is an existing regular file."""
    return os.path.isfile(name)


def read_regular(name, limit):
    """At most ``limit`` bytes of the regular file ``name``. Opened with O_NONBLOCK (a FIFO opens at once instead of
    waiting for a writer) and O_NOCTTY, then checked with fstat before any read. Raises NotRegularFile for anything
    but a regular file, ExtenderFileError (what went wrong, in a few words) when it cannot be read."""
    try:
        descriptor = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError) as error:
        # ValueError: a path with a NUL character, which no file has.
        raise ExtenderFileError(_file_trouble(error))
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise NotRegularFile()
        chunks, left = [], limit
        while left > 0:
            chunk = os.read(descriptor, left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError as error:
        raise ExtenderFileError(_file_trouble(error))
    finally:
        os.close(descriptor)


def make_tls_context(files, pems, insecure):
    """An ssl.SSLContext that checks the server against the system's CA certificates, or the CA of ``files["ca"]`` (a
    path) or ``pems["ca"]`` (PEM text), with the client certificate and key of ``files`` / ``pems`` ("cert", "key")
    when both are given; ``insecure``: no check of the server at all. Raises EncryptedKey for a pass-phrase protected
    key, ExtenderFileError (what went wrong, in a few words, never the content) for anything else."""
    try:
        context = ssl.create_default_context(cafile=files.get("ca"), cadata=pems.get("ca"))
        if all(kind in files or kind in pems for kind in ("cert", "key")):
            _load_client_certificate(context, files, pems)
    except (ssl.SSLError, OSError, ValueError) as error:
        raise ExtenderFileError(_file_trouble(error))
    if insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def _file_trouble(error):
    """What went wrong in ``error`` (reading a token, a TLS file or key), in a few words."""
    if isinstance(error, ssl.SSLError):
        return "TLS: %s" % (error.reason or error)
    text = getattr(error, "strerror", None) or str(error) or type(error).__name__
    return text[:200]


def _refuse_pass_phrase():
    raise EncryptedKey()


def _load_client_certificate(context, files, pems):
    """The client certificate and key into ``context``. ssl reads them from files only: PEM given as data is written
    to files of a private folder (0700; the files 0600) that are removed as soon as they are read."""
    folder = None
    try:
        paths = dict(files)
        if "cert" in pems or "key" in pems:
            folder = tempfile.mkdtemp(prefix="gangplank-tls-")
            for kind in ("cert", "key"):
                if kind in pems:
                    paths[kind] = os.path.join(folder, kind + ".pem")
                    descriptor = os.open(paths[kind], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                    with os.fdopen(descriptor, "w", encoding="ascii") as stream:
                        stream.write(pems[kind])
        # A password callback that refuses: OpenSSL never prompts "Enter PEM pass phrase:" on a terminal (where it
        # would wait for ever) for an encrypted key; it asks the callback, which says the key is encrypted.
        context.load_cert_chain(paths["cert"], paths["key"], password=_refuse_pass_phrase)
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def call_round(config, jobs, prepare, finish, ahead=None, workers=MAX_CONCURRENT):
    """HTTPTransport().call_round."""
    return _Round(config, workers).run(jobs, prepare, finish, ahead)


def post(config, verb, body):
    """POST ``body`` (bytes) to ``urlPrefix/verb`` on a connection of its own; the body of the 2xx answer (bytes).
    Raises TransportError."""
    answer, = call_round(config, [(verb, body)], lambda job: job, lambda job, answer: answer, workers=1)
    if isinstance(answer, Exception):
        raise answer
    return answer


class _Pool:
    """The kept-alive connections left idle by the rounds of this process, kept for the next round of the same
    extender (a plan makes one round per extender; a process may make many plans): at most MAX_CONCURRENT per
    extender, each for at most IDLE_SECONDS. A connection is taken only by a config with the same address, TLS
    context (the very object: the same verification) and server name, and only while nothing is waiting on it
    (no byte, no end of stream: a server that closed it at its idle timeout, or sent more than its answer, loses
    it here); a process made by fork() starts with none."""

    def __init__(self):
        self.lock = threading.Lock()
        self.pid = os.getpid()
        self.idle = {}                  # key -> [(socket, TLS context, when it went idle)], the latest last

    def _key(self, config):
        return address(config), id(config.context), config.server_name

    def _fresh(self, now):
        """Under lock: forget the connections of another process, close those idle too long."""
        if self.pid != os.getpid():
            self.pid, self.idle = os.getpid(), {}
        for key in [key for key, entries in self.idle.items() if entries[0][2] < now - IDLE_SECONDS]:
            entries = self.idle[key]
            keep = [entry for entry in entries if entry[2] >= now - IDLE_SECONDS]
            for entry in entries:
                if entry[2] < now - IDLE_SECONDS:
                    entry[0].close()
            if keep:
                self.idle[key] = keep
            else:
                del self.idle[key]

    def take(self, config):
        """An idle connection to the extender of ``config`` that is still open, or None."""
        now = time.monotonic()
        key = self._key(config)
        while True:
            with self.lock:
                self._fresh(now)
                entries = self.idle.get(key)
                if not entries:
                    return None
                sock, context, _since = entries.pop()
                if not entries:
                    del self.idle[key]
            if context is config.context and _still_open(sock):
                return sock
            sock.close()

    def give(self, config, sock):
        """Keep ``sock`` (a connection whose last answer was read whole) for a later round."""
        now = time.monotonic()
        with self.lock:
            self._fresh(now)
            entries = self.idle.setdefault(self._key(config), [])
            entries.append((sock, config.context, now))
            if len(entries) <= MAX_CONCURRENT:
                return
            sock = entries.pop(0)[0]
        sock.close()


def _still_open(sock):
    """Whether the idle connection ``sock`` is open with nothing to read (no byte, no end of stream)."""
    try:
        sock.settimeout(0.0)            # no wait (with a timeout, Python's socket first waits to be readable)
        if isinstance(sock, ssl.SSLSocket):
            # A TLS 1.3 session ticket may wait unread: the TLS layer takes it, and wants more.
            sock.recv(1)
        else:
            sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except (ssl.SSLWantReadError, BlockingIOError, InterruptedError):
        return True
    except (OSError, ValueError):
        return False
    return False


_POOL = _Pool()


class _Round:
    """One round of calls: its workers, the name's addresses (resolved once) and the count of calls on connections
    that have not answered yet.

    Each worker takes the next job itself: ``prepare`` and ``finish`` (and ``ahead``) run under the round's ``busy``
    lock, one at a time, so they never run at once and need no locking of their own; the calling thread waits
    until every worker has ended or the round stopped. No job goes from thread to thread: a call costs no
    hand-over but the GIL's."""

    def __init__(self, config, workers):
        self.config = config
        self.workers = max(1, min(workers, MAX_CONCURRENT))
        self.stopped = False
        self.lock = threading.Condition()       # guards opening and the resolution; told when the round stops
        self.busy = threading.Lock()            # prepare, finish and ahead run under it
        self.ended = threading.Event()          # every worker has ended, or the round stopped
        self.opening = 0
        self.resolved = None                    # threading.Event once the resolution has begun
        self.addresses = None                   # getaddrinfo's list, or the exception it raised
        self.threads = []
        self.running = 0                        # workers not ended yet (under busy)
        self.wanting = 0                        # workers waiting for busy (under lock): ahead waits for them
        self.jobs = self.prepare = self.finish = None
        self.results = []
        self.waiting = collections.deque()
        self.crash = None                       # an exception prepare or finish raised: raised again by run
        self.flying = set()                     # indexes of the jobs in flight (under busy)
        self.failed = None                      # the smallest index of a job whose result is an exception

    # --- the calling thread ------------------------------------------------------------------------

    def run(self, jobs, prepare, finish, ahead):
        self.jobs, self.prepare, self.finish = jobs, prepare, finish
        self.results = [None] * len(jobs)
        self.waiting.extend(range(len(jobs)))
        try:
            with self.busy:
                self.running = min(self.workers, len(jobs))
            if not self.running:
                return self.results
            self.threads = [_Worker(self) for _unused in range(self.running)]
            try:
                for worker in self.threads:
                    self.launch(worker)
                # While the first calls are out, a few more bodies (at most a worker's worth each) are made before any
                # worker starts: a worker started now would wait for the interpreter, and each start costs the
                # calling thread its CPU (a new thread is scheduled in its place).
                for worker in self.threads if ahead is not None else ():
                    if worker.pending is None:
                        break
                    with self.busy:
                        if not ahead():
                            ahead = None
                            break
            except BaseException:
                for worker in self.threads:
                    worker.drop()
                raise
            for worker in self.threads:
                # A low-level thread: threading.Thread.start would wait until the thread runs, worker after worker.
                _thread.start_new_thread(worker.run, ())
            while ahead is not None and not self.ended.is_set():
                if self.wanting:
                    # A worker waits for the lock (an answer to read, a call to make): it goes first.
                    self.ended.wait(0.0005)
                    continue
                with self.busy:
                    if not ahead():
                        ahead = None
            self.ended.wait()
        finally:
            with self.busy:
                self.stop()
                results = list(self.results)
        if self.crash is not None:
            raise self.crash
        return results

    def launch(self, worker):
        """Before ``worker``'s thread starts: when a kept-alive connection is idle in the pool, the worker's first call
        is prepared and sent from here, as far as the socket takes it without waiting (the worker sends the rest and
        reads the answer). The calling thread holds the interpreter while it prepares the bodies; a new worker
        would wait for it to send its first request, the extender idle meanwhile."""
        with self.busy:
            if self.stopped or self.failed is not None or not self.waiting:
                return
        sock = _POOL.take(self.config)
        if sock is None:
            return
        worker.adopt(sock)
        try:
            with self.busy:
                job = self.next_job()
        except BaseException:
            worker.drop()
            raise
        if job is None:
            return
        index, verb, request = job
        deadline = time.monotonic() + self.config.timeout
        sent = 0
        try:
            sock.settimeout(0.0)
            sent = sock.send(request)
            _quick_ack(sock)                # now: the answer's first segment may come before the worker runs
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            worker.drop()                   # the worker calls on another connection, within the same deadline
        worker.pending = (index, verb, request, deadline, sent)

    def stop(self):
        """Ends the round (under busy): no further job starts, a call in flight is cut (its socket shut down)."""
        self.stopped = True
        with self.lock:
            self.lock.notify_all()
        for worker in self.threads:
            worker.cut()
        self.ended.set()

    @contextlib.contextmanager
    def turn(self):
        """``busy``, taken by a worker: counted in ``wanting`` while it waits, so ``ahead`` lets it go first."""
        with self.lock:
            self.wanting += 1
        try:
            self.busy.acquire()
        finally:
            with self.lock:
                self.wanting -= 1
        try:
            yield
        finally:
            self.busy.release()

    # --- under busy, in a worker -------------------------------------------------------------------

    def next_job(self):
        """(index, verb, request bytes) of the next job to call, prepared now; None when none is left or the round
        stopped."""
        while self.waiting and not self.stopped and self.failed is None:
            index = self.waiting.popleft()
            request = self.prepare(self.jobs[index])
            if request is None:
                continue
            if isinstance(request, Exception):
                self._result(index, request)
                return None
            verb, body = request
            self.flying.add(index)
            return index, verb, self.config.request_head(verb, len(body)) + body
        return None

    def finished(self, index, answer):
        self.flying.discard(index)
        if not self.stopped:
            self._result(index, self.finish(self.jobs[index], answer))

    def _result(self, index, result):
        """Record a job's result. Once one is an exception no further job starts, and the round stops as soon as no
        job before the first that failed is still in flight: the error the caller raises (the first in the order of
        the jobs) does not depend on which call happened to end first."""
        self.results[index] = result
        if isinstance(result, Exception):
            self.failed = index if self.failed is None else min(self.failed, index)
        if self.failed is not None and not any(flying < self.failed for flying in self.flying):
            self.stop()

    # --- the workers ------------------------------------------------------------------------------

    def begin_opening(self, deadline):
        """Wait (until ``deadline``) for a place among the MAX_OPENING calls on connections not answered yet."""
        with self.lock:
            while self.opening >= MAX_OPENING and not self.stopped:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise socket.timeout("timed out")
                self.lock.wait(left)
            if self.stopped:
                raise _Stopped()
            self.opening += 1

    def end_opening(self):
        with self.lock:
            self.opening -= 1
            self.lock.notify()

    def resolve(self, deadline):
        """getaddrinfo's entries for the extender, resolved once per round in a thread of its own; a call waits for
        them until its deadline (a resolver that hangs costs the call its httpTimeout, not more)."""
        with self.lock:
            if self.resolved is None:
                self.resolved = threading.Event()
                if _numeric(address(self.config)[0]):
                    self._resolve(self.resolved)        # an IP address: no resolver is asked
                else:
                    _thread.start_new_thread(self._resolve, (self.resolved,))
            resolved = self.resolved
        if not resolved.wait(max(deadline - time.monotonic(), 0.0)):
            raise socket.timeout("timed out")
        if isinstance(self.addresses, BaseException):
            raise self.addresses
        return self.addresses

    def _resolve(self, resolved):
        try:
            host, port = address(self.config)
            found = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM,
                                       0, socket.AI_NUMERICHOST if _numeric(host) else 0)
            if not found:
                raise OSError("no address for %s" % host)
            self.addresses = found
        except Exception as error:  # pylint: disable=broad-except
            self.addresses = error
        resolved.set()

    def exchange(self, worker, verb, request, deadline=None, sent=0):
        """One call on ``worker``'s connection (opened first when it has none): the body of a 2xx answer. ``deadline``
        and ``sent`` (bytes of ``request`` sent already on the worker's connection) for a call the round began."""
        config = self.config
        retried = False
        while True:
            if worker.sock is None and not retried:
                worker.adopt(_POOL.take(config))
            fresh = worker.sock is None
            if fresh:
                # A new call's time starts once it may open a connection; a retry waits within its deadline.
                self.begin_opening(deadline if deadline is not None else time.monotonic() + config.timeout)
            if deadline is None:
                deadline = time.monotonic() + config.timeout
            try:
                if fresh:
                    worker.connect(self.resolve(deadline), deadline)
                try:
                    return worker.call(verb, request, deadline, sent)
                except ConnectionError:
                    # A kept-alive connection closed before any byte of the answer (the server's idle timeout): the
                    # server never read the request, so it goes once more on a new connection, within the deadline.
                    if fresh or retried or worker.received:
                        raise
                    worker.drop()
                    retried = True
                    sent = 0
            finally:
                if fresh:
                    self.end_opening()

    def error(self, verb, error):
        """The TransportError for ``error``, met by a call of ``verb``."""
        config = self.config
        if isinstance(error, TransportError):
            return error
        if isinstance(error, _TooLarge):
            if error.what == "body":
                return TransportError("%s: the answer to %s is larger than %d bytes"
                                      % (config.name, verb, MAX_RESPONSE_BYTES))
            if error.what == "head":
                return TransportError("%s: the status lines and headers of the answer to %s are larger than %d bytes"
                                      % (config.name, verb, MAX_HEAD_BYTES))
            return TransportError("%s: the answer to %s is larger than %d bytes on the wire (headers and chunk "
                                  "framing included)" % (config.name, verb, max_wire_bytes()))
        if isinstance(error, socket.timeout):
            return TransportError("%s: %s timed out after %g s (httpTimeout)" % (config.name, verb, config.timeout))
        return TransportError("%s: %s failed: %s" % (config.name, verb, describe(config, error)))


class _Worker:
    """A thread of a round with its own kept-alive connection: it takes the round's next job, calls, and hands the
    answer to the round's ``finish``, until no job is left."""

    def __init__(self, round_):
        self.round = round_
        self.sock = None
        self.guard = threading.Lock()       # the socket is shut down from the calling thread (cut)
        self.received = 0                   # bytes of the current answer read so far
        self.reusable = False               # the last answer was read whole and the connection stays open
        self.pending = None                 # (index, verb, request, deadline, bytes sent) of a call the round began

    def run(self):
        round_ = self.round
        try:
            while True:
                if self.pending is not None:
                    (index, verb, request, deadline, sent), self.pending = self.pending, None
                else:
                    with round_.turn():
                        job = round_.next_job()
                    if job is None:
                        return
                    (index, verb, request), deadline, sent = job, None, 0
                try:
                    answer = round_.exchange(self, verb, request, deadline, sent)
                except _Stopped:
                    return
                except Exception as error:  # pylint: disable=broad-except
                    self.drop()
                    answer = round_.error(verb, error)
                with round_.turn():
                    round_.finished(index, answer)
        except BaseException as error:  # pylint: disable=broad-except
            # prepare or finish raised (a bug): the calling thread raises it again.
            with round_.busy:
                if round_.crash is None:
                    round_.crash = error
                round_.stop()
        finally:
            self.release()
            with round_.busy:
                round_.running -= 1
                if not round_.running:
                    round_.ended.set()

    def cut(self):
        with self.guard:
            if self.sock is not None:
                try:
                    self.sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def adopt(self, sock):
        with self.guard:
            self.sock = sock

    def release(self):
        """The worker ends: its connection goes to the pool when its last answer was read whole."""
        with self.guard:
            sock, self.sock = self.sock, None
            if sock is not None and self.reusable and not self.round.stopped:
                _POOL.give(self.round.config, sock)
                sock = None
        if sock is not None:
            sock.close()

    def drop(self):
        self.reusable = False
        with self.guard:
            sock, self.sock = self.sock, None
        if sock is not None:
            sock.close()

    def connect(self, addresses, deadline):
        """A new connection to the first of ``addresses`` that takes it (as socket.create_connection), then the TLS
        handshake, all before ``deadline``."""
        config = self.round.config
        error = None
        for family, kind, proto, _name, where in addresses:
            sock = socket.socket(family, kind, proto)
            try:
                # The request goes out in one write; an answer is read at once (Go's and Node's servers do the same).
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.settimeout(_left(deadline))
                sock.connect(where)
            except OSError as failed:
                sock.close()
                error = failed
                if isinstance(failed, socket.timeout):
                    raise
                continue
            except BaseException:
                sock.close()
                raise
            break
        else:
            raise error if error is not None else OSError("no address to connect to")
        with self.guard:
            self.sock = sock
        if self.round.stopped:
            raise _Stopped()
        if config.context is not None:
            # One timeout bounds the whole handshake (the ssl module keeps one deadline across its reads and writes).
            sock.settimeout(_left(deadline))
            wrapped = config.context.wrap_socket(sock, server_hostname=config.server_name or address(config)[0],
                                                 do_handshake_on_connect=False)
            with self.guard:
                self.sock = wrapped
            wrapped.do_handshake()

    def call(self, verb, request, deadline, sent=0):
        """Send ``request`` and read the answer, all before ``deadline``: the body of a 2xx answer.

        The first read takes what the answer's first segments brought (at most MAX_HEAD_BYTES). When it holds a
        whole head of the plainest kind (_plain_head: a 2xx status, a Content-Length, nothing http.client could read
        another way) the body is read here, into one buffer of its announced length; any other answer (chunks,
        ``100 Continue``, an error status, a head cut by the read, anything unusual) is read by http.client,
        starting with the bytes already read."""
        config = self.round.config
        sock = self.sock
        self.received = 0
        self.reusable = False
        view = memoryview(request)
        while sent < len(view):
            sock.settimeout(_left(deadline))
            sent += sock.send(view[sent:])
        _quick_ack(sock)
        sock.settimeout(_left(deadline))
        first = sock.recv(min(_READ_SIZE, MAX_HEAD_BYTES))
        self.received = len(first)
        end = first.find(b"\r\n\r\n")
        plain = _plain_head(first, end + 4) if end >= 0 else None
        if plain is not None:
            length, will_close = plain
            if length > MAX_RESPONSE_BYTES:
                raise _TooLarge("body")
            start = end + 4
            have = len(first) - start
            if have >= length:
                data = first[start:start + length]
                will_close = will_close or have > length      # bytes beyond the answer: the connection is not reused
            else:
                body = bytearray(length)
                body[:have] = memoryview(first)[start:]
                with memoryview(body) as into:
                    while have < length:
                        sock.settimeout(_left(deadline))
                        size = sock.recv_into(into[have:])
                        if not size:
                            raise http.client.IncompleteRead(bytes(body[:have]), length - have)
                        have += size
                        self.received += size
                data = bytes(body)
            if will_close:
                self.drop()
            else:
                self.reusable = True
            return data
        wire = _Wire(self, sock, deadline, first)
        response = http.client.HTTPResponse(wire, method="POST")
        wire.limit = MAX_HEAD_BYTES
        try:
            response.begin()
        except _TooLarge:
            raise _TooLarge("head")
        wire.limit = max_wire_bytes()
        data = _read(response)
        if response.will_close or wire.reader.handed != self.received:
            # HTTP/1.0 or Connection: close, or bytes beyond the answer: the next call opens a new connection.
            self.drop()
        else:
            self.reusable = True
        if not 200 <= response.status < 300:
            raise TransportError("%s: %s answered HTTP %d: %s" % (config.name, verb, response.status, quote(config, data)))
        return data


# The head of an answer read without http.client: a 2xx status line and header lines of visible ASCII (a token,
# a colon, a value of visible characters, spaces and tabs), each ended by CRLF, then an empty line. Nothing in it can
# be read two ways: no bare CR or LF, no folded line, no byte that Python's email parser would take for a line break
# (str.splitlines: \x0b, \x0c, \x1c-\x1e, \x85).
_PLAIN_HEAD = re.compile(rb"HTTP/1\.([01]) (2[0-9][0-9])(?: [^\r\n]*)?\r\n"
                         rb"((?:[!#$%&'*+.^_`|~0-9A-Za-z-]+:[\t\x20-\x7e]*\r\n)*)\r\n")
# The most header lines http.client reads: it counts the empty line that ends them against its limit of 100.
MAX_HEADER_LINES = 99
_SPECIAL = frozenset((b"content-length", b"transfer-encoding", b"connection", b"keep-alive", b"proxy-connection"))


def _plain_head(data, end):
    """(Content-Length, whether the connection closes after the answer) from the head ``data[:end]`` when it is of the
    plainest kind (_PLAIN_HEAD, exactly one Content-Length of digits only, no Transfer-Encoding, at most
    MAX_HEADER_LINES header lines, status not 204) and means the same to http.client; None for any other head
    (http.client reads it)."""
    match = _PLAIN_HEAD.fullmatch(data, 0, end)
    if match is None or match.group(2) == b"204":
        return None
    found = {}
    lines = match.group(3).split(b"\r\n")[:-1]
    if len(lines) > MAX_HEADER_LINES:
        return None
    for line in lines:
        name, _colon, value = line.partition(b":")
        name = name.lower()
        if name in _SPECIAL:
            if name in found:
                return None
            found[name] = value.strip(b" \t")
    length = found.get(b"content-length")
    if length is None or not length.isdigit() or b"transfer-encoding" in found:
        return None
    connection = found.get(b"connection", b"").lower()
    if match.group(1) == b"1":
        will_close = b"close" in connection
    else:
        will_close = not (found.get(b"keep-alive") or b"keep-alive" in connection
                          or b"keep-alive" in found.get(b"proxy-connection", b"").lower())
    return int(length), will_close


def _numeric(host):
    """Whether ``host`` is an IP address (resolving it asks no resolver)."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _left(deadline):
    """What is left of ``deadline`` (socket.timeout once it has passed: no wait and no read after it)."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise socket.timeout("timed out")
    return left


class _Wire(io.RawIOBase):
    """What http.client reads an answer from: the socket, each read waiting at most what is left of the deadline and
    none after it, and at most ``limit`` bytes read in all (_TooLarge beyond)."""

    def __init__(self, worker, sock, deadline, first=b""):
        super().__init__()
        self.worker = worker
        self.sock = sock
        self.deadline = deadline
        self.limit = 0
        self.first = first                  # bytes read already (counted in worker.received), handed out first
        self.reader = None

    def makefile(self, _mode):
        # http.client.HTTPResponse reads sock.makefile("rb").
        self.reader = _Buffered(self, 8192)
        return self.reader

    def readable(self):
        return True

    def tell(self):
        # The bytes handed to the buffered reader: its tell() is that less what it still holds.
        return self.worker.received - len(self.first)

    def readinto(self, buffer):
        if self.first:
            size = min(len(buffer), len(self.first))
            buffer[:size] = self.first[:size]
            self.first = self.first[size:]
            return size
        room = self.limit - self.worker.received
        if room <= 0:
            raise _TooLarge("wire")
        self.sock.settimeout(_left(self.deadline))
        with memoryview(buffer) as view:
            size = self.sock.recv_into(view[:min(len(view), room)])
        self.worker.received += size
        return size


class _Buffered(io.BufferedReader):
    """The reader http.client reads an answer through. When http.client closes it (the answer read whole), it notes
    how many bytes it had handed on: fewer than were read off the socket means the server sent more than its answer,
    and the connection is not used again (those bytes would be taken for the next answer)."""

    handed = None

    def close(self):
        if not self.closed:
            try:
                self.handed = self.tell()
            except (OSError, ValueError):
                self.handed = None
        super().close()


def _read(response):
    """The body of ``response``, at most MAX_RESPONSE_BYTES (_TooLarge("body") beyond)."""
    length = response.getheader("Content-Length")
    if length is not None and length.strip().isdigit() and int(length) > MAX_RESPONSE_BYTES:
        raise _TooLarge("body")
    chunks, size = [], 0
    while True:
        chunk = response.read1(_READ_SIZE)
        if not chunk:
            data = b"".join(chunks)
            if response.length:
                # The server closed the connection before the Content-Length it announced.
                raise http.client.IncompleteRead(data, response.length)
            # read1 leaves an answer with a Content-Length open once all of it is read: closing it frees the
            # connection for the next call.
            response.close()
            return data
        size += len(chunk)
        if size > MAX_RESPONSE_BYTES:
            raise _TooLarge("body")
        chunks.append(chunk)


def _quick_ack(sock):
    """Acknowledge the answer's first segment at once (Linux's TCP_QUICKACK, which the kernel turns off again by
    itself): a server that writes its headers and its body apart, with Nagle's algorithm on (Python's http.server),
    sends the body only once the headers are acknowledged, and on a kept-alive connection the kernel delays that
    acknowledgement by up to 40 ms."""
    if hasattr(socket, "TCP_QUICKACK"):
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
        except OSError:
            pass
