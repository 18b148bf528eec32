# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""HTTP scheduler extenders: a site's own filter and score services, in kube-scheduler's wire format.

A profile lists ``extenders`` with the field names of KubeSchedulerConfiguration's ``extenders``
(k8s.io/kube-scheduler/config/v1 ``Extender``): ``urlPrefix``, ``filterVerb``, ``prioritizeVerb``,
``weight``, ``nodeCacheCapable``, ``httpTimeout``, ``ignorable``, ``managedResources``, ``enableHTTPS``,
``tlsConfig``; plus ``bearerToken`` / ``bearerTokenFile`` (gangplank's, for extenders that are not on the
controller). This file reads that configuration, builds the Pod and Node objects a kube extender reads,
posts kube's ``ExtenderArgs`` (k8s.io/kube-scheduler/extender/v1) with the standard library only, and
reads ``ExtenderFilterResult`` and ``HostPriorityList`` answers strictly: anything else is an
``ExtenderError`` naming the extender (plugins/extender.py decides what an error does).

Bounds: at most MAX_EXTENDERS extenders; each call has its own deadline (``httpTimeout``, at most
MAX_HTTP_TIMEOUT, enforced on the whole exchange, not per socket read), answers of at most
MAX_RESPONSE_BYTES, and an extender spends at most MAX_PLAN_SECONDS in one plan; plugins/extender.py
makes at most one call per service and verb per plan. So one plan waits at most
MAX_EXTENDERS x MAX_PLAN_SECONDS for extenders, whatever the number of services. The calls of one round share
keep-alive connections (call_round): at most MAX_CONCURRENT in flight, MAX_OPENING of them on new connections.
Answers met again in a round are decoded once, at most MAX_KEPT_ANSWER_BYTES of them kept (_decode).

The bearer token never appears in a message, a result or a repr: errors quote at most a scrubbed
snippet of an answer.
"""

from __future__ import annotations

import binascii
import collections
import errno
import http.client
import io
import json
import os
import re
import selectors
import shutil
import socket
import ssl
import tempfile
import time
import urllib.parse

from ansible_collections.gangplank.platform.plugins.module_utils.messages import show
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.problem import join_path

MAX_EXTENDERS = 8
DEFAULT_HTTP_TIMEOUT = 5.0          # seconds: kube's DefaultExtenderTimeout
MAX_HTTP_TIMEOUT = 60.0
MAX_PLAN_SECONDS = 120.0            # one extender's total time in one plan
MAX_RESPONSE_BYTES = 32 * 1024 * 1024
MAX_WEIGHT = 1000
MAX_EXTENDER_PRIORITY = 10          # kube's MaxExtenderPriority: answers' scores are 0..10
MAX_TOKEN = 16384                   # characters of a bearer token
MAX_TLS_DATA = 1024 * 1024          # characters of base64 in certData, keyData or caData (a CA bundle is ~200 KiB)
MAX_REASON = 200                    # characters of one failure reason kept for the "0/N nodes" line
MAX_WARNINGS = 20                   # per extender
MAX_KEPT_ANSWER_BYTES = 4 * 1024 * 1024  # answers of one round kept decoded, to read one met again without decoding it
MAX_CONCURRENT = 8                  # calls of one extender in flight at once, on keep-alive connections
MAX_OPENING = 4                     # of them on connections not answered yet (a Python http.server listens with a backlog of 5)
NAMESPACE = "gangplank"

# Extended resources and annotations of the Pod and Node objects (docs/problem-format.md, "Extenders").
GPU_RESOURCE = "nvidia.com/gpu"                 # whole GPUs, as NVIDIA's device plugin names them
GPU_MEMORY_RESOURCE = "gangplank.io/gpu-memory"  # GPU shares: bytes of GPU memory in all
NVME_RESOURCE = "gangplank.io/nvme"             # bytes of NVMe space
ANNOTATION = "gangplank.io/"

_KEYS = ("urlPrefix", "filterVerb", "prioritizeVerb", "weight", "nodeCacheCapable", "httpTimeout", "ignorable",
         "managedResources", "enableHTTPS", "tlsConfig", "bearerToken", "bearerTokenFile", "bindVerb", "preemptVerb")
_TLS_KEYS = ("insecure", "serverName", "certFile", "keyFile", "caFile", "certData", "keyData", "caData")
_VERB = re.compile(r"^[A-Za-z0-9._~-][A-Za-z0-9._~/-]{0,199}$")
# Go's time.ParseDuration: an optional sign, then numbers with a unit each (digits before or after the point, or
# both), or "0" alone. µ is U+00B5 (micro sign) or U+03BC (Greek mu), as Go accepts both.
_DURATION = re.compile(r"^[+-]?(?:0|(?:(?:\d+\.?\d*|\.\d+)(?:ns|us|\u00b5s|\u03bcs|ms|s|m|h))+)$")
_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "\u00b5s": 1e-6, "\u03bcs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_TOKEN = re.compile(r"^[\x21-\x7e]+$")
_VAULTED = ("EncryptedString", "AnsibleVaultEncryptedUnicode")
_RESOURCE_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_./]{0,251}[A-Za-z0-9])?$")


class ExtenderError(Exception):
    """An extender could not be used: the message names it and says what went wrong (never the token)."""


class ExtenderConfig:
    """One parsed entry of a profile's ``extenders``. ``name`` is what errors and the result call it."""

    def __init__(self, index, url_prefix, filter_verb, prioritize_verb, weight, node_cache_capable, timeout,
                 ignorable, managed_resources, context, server_name, token, notes=()):
        self.index = index
        self.url_prefix = url_prefix
        self.filter_verb = filter_verb
        self.prioritize_verb = prioritize_verb
        self.weight = weight
        self.node_cache_capable = node_cache_capable
        self.timeout = timeout
        self.ignorable = ignorable
        self.managed_resources = managed_resources
        self.context = context              # ssl.SSLContext for https, else None
        self.server_name = server_name
        self._token = token
        self.notes = notes                  # warnings every plan repeats (a bindVerb that is not called)
        self._heads = {}                    # verb -> request head, with the Content-Length left open
        self.name = "extender %s" % url_prefix

    def __repr__(self):
        # No token here: a repr may end up in a traceback or a log.
        return "ExtenderConfig(%r, filter=%r, prioritize=%r)" % (self.url_prefix, self.filter_verb, self.prioritize_verb)

    def scrub(self, text):
        """``text`` with the bearer token blotted out (an answer may echo the request's headers)."""
        if self._token and self._token in text:
            text = text.replace(self._token, "********")
        return text

    def post(self, verb, body):
        """POST ``body`` (bytes, JSON) to ``urlPrefix/verb``; the decoded JSON answer. Raises ExtenderError. One call
        on a connection of its own (a round of calls shares keep-alive connections: call_round)."""
        answer, = call_round(self, [(verb, body)], lambda job: job, lambda job, answer: answer, 1)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def request_head(self, verb, length):
        """The request line and headers of a POST of ``length`` bytes to ``urlPrefix/verb`` (bytes)."""
        head = self._heads.get(verb)
        if head is None:
            parts = urllib.parse.urlsplit(self.url_prefix.rstrip("/") + "/" + verb)
            host = parts.hostname if ":" not in parts.hostname else "[%s]" % parts.hostname
            if parts.port is not None:
                host = "%s:%d" % (host, parts.port)
            lines = ["POST %s HTTP/1.1" % (parts.path or "/"), "Host: " + host, "Content-Type: application/json",
                     "Accept: application/json", "Accept-Encoding: identity", "User-Agent: gangplank-scheduler"]
            if self._token:
                lines.append("Authorization: Bearer " + self._token)
            head = self._heads[verb] = ("\r\n".join(lines) + "\r\nContent-Length: ").encode("ascii")
        return head + b"%d\r\n\r\n" % length

    def address(self):
        """(host, port) of the extender."""
        parts = urllib.parse.urlsplit(self.url_prefix)
        return parts.hostname, parts.port or (443 if self.context is not None else 80)

    def snippet(self, data):
        """At most 80 characters of an answer, printable, token scrubbed."""
        text = self.scrub(data[:400].decode("utf-8", "replace"))
        return show(re.sub(r"[^\x20-\x7e]", "?", text))


class _TooLarge(Exception):
    pass


def call_round(config, jobs, prepare, finish, workers=MAX_CONCURRENT, ahead=None):
    """The calls of ``jobs``, made in the calling thread over at most ``workers`` keep-alive connections to the
    extender; the results in the order of ``jobs``.

    ``prepare(job)`` runs right before a job's call goes out: it returns (verb, body bytes), or None for no call, or
    an exception, which stands as the job's result and stops the round. ``finish(job, answer)`` gets the decoded JSON
    answer or an ExtenderError and returns the job's result; an exception returned stops the round too: no further
    call starts and the calls still in flight are dropped (their results stay None). ``ahead()``, when given, does a
    small part of the work ``prepare`` would do later (building a request body) while no answer is ready, and
    returns whether any is left.

    No worker threads and no watchdog: the calls in flight wait together on one selector (connecting, the TLS
    handshake, the first bytes of an answer); an answer that has begun to arrive is read by http.client, each read
    bounded by what is left of the call's deadline (``httpTimeout`` after the call began, connecting, a retry and
    reading the whole answer included; _Timed), so a server that answers one byte at a time is cut as surely as one
    that says nothing. Once a deadline has passed, what had arrived by then is still read; only a wait is cut.

    At most MAX_OPENING calls are in flight on connections that have not answered yet: a server that listens with a
    small backlog (Python's http.server: 5) drops the connections beyond it, and each then waits a second for TCP to
    try again. A connection that has answered and stays open takes the next job at once, so against a keep-alive
    server the calls in flight grow to ``workers``; against one that closes every connection (HTTP/1.0) they stay at
    MAX_OPENING."""
    results = {}                        # index of a job -> its result (pylint takes a list of None for the type)
    queue = collections.deque(range(len(jobs)))
    retries = collections.deque()       # calls whose kept-alive connection was closed unanswered: on a new one
    idle = []                           # connections that have answered and stay open
    kept = _Kept()                      # the answers decoded so far, to decode an answer met again once (_decode)
    flight = {}                         # socket -> its _Call (connecting, in the handshake, or waiting for the answer)
    counts = {"open": 0, "opening": 0}  # connections open; calls in flight on connections not answered yet
    selector = selectors.DefaultSelector()
    addresses = []                      # getaddrinfo's, once per round

    def fail(call, error):
        """``call`` ends with ``error`` (an exception met on its way): its connection is closed. A call that failed
        before its request was prepared (connecting) is prepared first, so it counts as made and the error names its
        verb (a job that is not sent passes the failure to the next). True when the round stops."""
        _close(selector, flight, call, counts)
        while call.request is None:
            request = prepare(jobs[call.index])
            if isinstance(request, Exception):
                return _failed(results, call, request)
            if request is not None:
                call.verb, call.request = request[0], b""
            elif not queue:
                return False
            else:
                call.index = queue.popleft()
        return _failed(results, call, finish(jobs[call.index], _error(config, call, error)))

    def opened(call):
        """A new connection for ``call``, or False when it must wait for MAX_OPENING."""
        if counts["opening"] >= MAX_OPENING:
            return False
        if not addresses:
            addresses.extend(socket.getaddrinfo(*config.address(), 0, socket.SOCK_STREAM))
        counts["open"] += 1
        counts["opening"] += 1
        call.owns = call.fresh = True
        call.addresses = list(addresses)
        _connect(selector, flight, call)
        return True

    def begin(call):
        """``call``'s new connection is ready: its request goes out, prepared now when the call has none yet (a job
        that is not sent gives the connection to the next one). True when the round stops."""
        while call.request is None:
            request = prepare(jobs[call.index])
            if isinstance(request, Exception):
                _close(selector, flight, call, counts)
                return _failed(results, call, request)
            if request is not None:
                call.verb, call.request = request[0], config.request_head(request[0], len(request[1])) + request[1]
                break
            if not queue:
                _close(selector, flight, call, counts)
                return False
            call.index = queue.popleft()
        _send(selector, flight, call)
        return False

    def again(call):
        """``call``'s kept-alive connection was closed before any answer (the server's idle timeout): the server never
        read the request, so it goes once more on a new connection, within the same deadline."""
        _close(selector, flight, call, counts)
        call.retried, call.reused, call.sent = True, False, 0
        retries.append(call)

    try:
        stopped = False
        while not stopped:
            # Start what may start: retries first (their deadline runs), then new jobs on an idle connection or a new one.
            while retries and not stopped:
                call = retries[0]
                try:
                    if not opened(call):
                        break
                except (OSError, ValueError) as error:
                    stopped = fail(call, error)
                retries.popleft()
            while queue and not stopped and (idle or (counts["open"] < workers and counts["opening"] < MAX_OPENING)):
                index = queue.popleft()
                call = _Call(index, None, None, time.monotonic() + config.timeout)
                try:
                    if idle:
                        request = prepare(jobs[index])
                        if request is None:
                            continue
                        if isinstance(request, Exception):
                            results[index], stopped = request, True
                            break
                        call.verb = request[0]
                        call.request = config.request_head(request[0], len(request[1])) + request[1]
                        call.sock, call.reused, call.owns = idle.pop(), True, True
                        _send(selector, flight, call)
                    else:
                        # Connecting first: the request is prepared while the connection is being made (begin).
                        opened(call)
                except _Unanswered:
                    again(call)
                except (OSError, ValueError) as error:
                    stopped = fail(call, error)
            if stopped or not (flight or retries):
                break
            ready = selector.select(0) if ahead is not None else None
            if not ready:
                if ahead is not None and ahead():
                    continue        # then look again: an answer may have come meanwhile
                ahead = None
                now = time.monotonic()
                wake = min([call.deadline for call in flight.values()] + [call.deadline for call in retries])
                ready = selector.select(max(wake - now, 0.0))
            for key, _events in ready:
                call = key.data
                if stopped or flight.get(key.fileobj) is not call:
                    continue
                try:
                    answer = _advance(config, selector, flight, call, counts, idle, kept)
                    if answer is _CONNECTED:
                        stopped, answer = begin(call), _PENDING
                except _Unanswered as unanswered:
                    if call.reused and not call.retried:
                        again(call)
                    else:
                        stopped = fail(call, unanswered.error)
                    continue
                except (OSError, http.client.HTTPException, ValueError, _TooLarge, ExtenderError) as error:
                    stopped = fail(call, error)
                    continue
                if answer is not _PENDING:
                    stopped = _failed(results, call, finish(jobs[call.index], answer))
            # Calls whose deadline passed with nothing ready: timed out.
            now = time.monotonic()
            for call in [call for call in flight.values() if call.deadline <= now] + \
                    [call for call in retries if call.deadline <= now]:
                if stopped:
                    break
                if call in retries:
                    retries.remove(call)
                stopped = fail(call, socket.timeout())
    finally:
        for call in list(flight.values()):
            _close(selector, flight, call, counts)
        for sock in idle:
            sock.close()
        selector.close()
    return [results.get(index) for index in range(len(jobs))]


_PENDING = object()     # an answer not complete yet
_CONNECTED = object()   # a new connection ready for its request


class _Call:
    """One call of a round: its request (head and body), its deadline, its connection and where it stands."""

    __slots__ = ("index", "verb", "request", "deadline", "sock", "step", "sent", "reused", "fresh", "owns", "retried",
                 "addresses")

    def __init__(self, index, verb, request, deadline):
        self.index = index
        self.verb = verb
        self.request = request
        self.deadline = deadline
        self.sock = None
        self.step = None            # "connect", "handshake", "send" or "answer"
        self.sent = 0               # bytes of the request sent
        self.reused = False         # on a connection that answered an earlier call
        self.fresh = False          # counted in "opening": on a connection that has not answered yet
        self.owns = False           # holds one of the round's connections (counted in "open")
        self.retried = False
        self.addresses = ()         # getaddrinfo's entries not tried yet


def _failed(results, call, result):
    """Store ``call``'s result; True when it is an exception (the round stops)."""
    results[call.index] = result
    return isinstance(result, Exception)


def _error(config, call, error):
    """The ExtenderError for ``error`` (an exception met by ``call``)."""
    if isinstance(error, ExtenderError):
        return error
    if isinstance(error, _TooLarge):
        return ExtenderError("%s: the answer to %s is larger than %d bytes" % (config.name, call.verb, MAX_RESPONSE_BYTES))
    if isinstance(error, socket.timeout):
        return ExtenderError("%s: %s timed out after %g s (httpTimeout)" % (config.name, call.verb, config.timeout))
    return ExtenderError("%s: %s failed: %s" % (config.name, call.verb, config.scrub(_describe(error))))


def _watch(selector, flight, call, events, step):
    """Wait for ``events`` on ``call``'s socket, then take ``step``."""
    call.step = step
    if flight.get(call.sock) is call:
        selector.modify(call.sock, events, call)
    else:
        selector.register(call.sock, events, call)
        flight[call.sock] = call


def _unwatch(selector, flight, call):
    if call.sock is not None and flight.get(call.sock) is call:
        selector.unregister(call.sock)
        del flight[call.sock]


def _close(selector, flight, call, counts):
    """Close ``call``'s connection, if it holds one, and give back its place in the round's counts."""
    _unwatch(selector, flight, call)
    if call.fresh:
        counts["opening"] -= 1
        call.fresh = False
    if call.owns:
        counts["open"] -= 1
        call.owns = False
    if call.sock is not None:
        call.sock.close()
        call.sock = None


def _connect(selector, flight, call):
    """Begin connecting ``call`` to the next address of the name that does not fail at once (the socket does not
    block: _advance goes on when it is writable). Raises the last error when none is left."""
    while True:
        family, kind, proto, _name, address = call.addresses.pop(0)
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            # The request goes out in one write; an answer is read at once (Go's and Node's servers do the same).
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            status = sock.connect_ex(address)
            if status not in (0, errno.EINPROGRESS, errno.EAGAIN):
                raise OSError(status, os.strerror(status))
        except OSError:
            sock.close()
            if call.addresses:
                continue
            raise
        except BaseException:
            sock.close()
            raise
        call.sock = sock
        _watch(selector, flight, call, selectors.EVENT_WRITE, "connect")
        return


def _advance(config, selector, flight, call, counts, idle, kept):
    """The next step of ``call`` once its socket is ready: the decoded answer (_decode, with ``kept``), or _PENDING
    while it is not complete. Raises what the step met (_Unanswered: closed before any byte of an answer)."""
    sock = call.sock
    if call.step == "connect":
        status = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if status:
            error = OSError(status, os.strerror(status))
            if not call.addresses:
                raise error
            # The next address of the name: the refused socket goes first (its successor may take the same descriptor).
            _unwatch(selector, flight, call)
            sock.close()
            call.sock = None
            _connect(selector, flight, call)
            return _PENDING
        if config.context is None:
            return _CONNECTED
        _unwatch(selector, flight, call)
        call.sock = config.context.wrap_socket(sock, server_hostname=config.server_name or config.address()[0],
                                               do_handshake_on_connect=False)
        call.step = "handshake"
    if call.step == "send":
        _send(selector, flight, call)
        return _PENDING
    if call.step == "handshake":
        try:
            call.sock.do_handshake()
        except ssl.SSLWantReadError:
            _watch(selector, flight, call, selectors.EVENT_READ, "handshake")
            return _PENDING
        except ssl.SSLWantWriteError:
            _watch(selector, flight, call, selectors.EVENT_WRITE, "handshake")
            return _PENDING
        return _CONNECTED
    # The answer has begun to arrive (or the connection was closed): what is there is read without waiting; TLS may
    # have brought a record without data (a session ticket), then the call waits on.
    first = bytearray(65536)
    try:
        sock.settimeout(0.0)
        size = sock.recv_into(first)
    except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
        return _PENDING
    except (BrokenPipeError, ConnectionResetError) as error:
        raise _Unanswered(error)
    if not size:
        raise _Unanswered(http.client.RemoteDisconnected("Remote end closed connection without response"))
    _unwatch(selector, flight, call)
    response = http.client.HTTPResponse(_Timed(sock, call.deadline, first[:size]), method="POST")
    response.begin()
    data = _read(response)
    if call.fresh:
        counts["opening"] -= 1
        call.fresh = False
    if response.will_close:
        # HTTP/1.0 or Connection: close: the next call opens a new connection.
        sock.close()
        counts["open"] -= 1
    else:
        idle.append(sock)           # with its place in "open"
    call.sock, call.owns = None, False
    if not 200 <= response.status < 300:
        raise ExtenderError("%s: %s answered HTTP %d: %s" % (config.name, call.verb, response.status,
                                                             config.snippet(data)))
    try:
        return _decode(data, kept)
    except (ValueError, RecursionError):
        raise ExtenderError("%s: the answer to %s is not JSON: %s" % (config.name, call.verb, config.snippet(data)))


def _decode(data, kept):
    """The JSON of the answer ``data``. An answer byte for byte the same as one already decoded in this round is that
    one's value, not decoded again: an extender whose verdict does not depend on the Pod (a maintenance list) answers
    the services of one candidate list alike, and in the nodes mode each filter answer is a NodeList of up to every
    node. The readers (read_filter_result, read_priorities) never change what they read, so a value can be shared.
    ``kept`` (_Kept) finds an answer by its length first (no hash of a large body), and holds at most
    MAX_KEPT_ANSWER_BYTES of answers per round (so an answer is compared with at most that many bytes)."""
    same = kept.by_length.get(len(data))
    if same is not None:
        for earlier, value in same:
            if earlier == data:
                return value
    value = json.loads(data.decode("utf-8"))
    if len(data) <= kept.room:
        kept.room -= len(data)
        kept.by_length.setdefault(len(data), []).append((data, value))
    return value


class _Kept:
    """The answers of a round already decoded (_decode)."""

    __slots__ = ("by_length", "room")

    def __init__(self):
        self.by_length = {}             # length in bytes -> [(answer bytes, its decoded JSON)]
        self.room = MAX_KEPT_ANSWER_BYTES


def _send(selector, flight, call):
    """Send what is left of ``call``'s request without waiting, then wait for the answer. The request is one buffer
    (headers and body apart would wait on the server's delayed acknowledgement); what the socket does not take now
    goes when it is writable again, so a large body that the server reads slowly holds up no other call."""
    sock = call.sock
    sock.settimeout(0.0)
    view = memoryview(call.request)
    try:
        while call.sent < len(view):
            call.sent += sock.send(view[call.sent:])
    except (BlockingIOError, ssl.SSLWantWriteError):
        _watch(selector, flight, call, selectors.EVENT_WRITE, "send")
        return
    except ssl.SSLWantReadError:
        _watch(selector, flight, call, selectors.EVENT_READ, "send")
        return
    except (BrokenPipeError, ConnectionResetError) as error:
        raise _Unanswered(error)
    _quick_ack(sock)
    _watch(selector, flight, call, selectors.EVENT_READ, "answer")


class _Timed(io.RawIOBase):
    """What http.client reads an answer from: the bytes already received, then the socket, each read waiting at most
    what is left of the call's deadline; once that has passed, only what has arrived is read (socket.timeout when
    nothing has)."""

    def __init__(self, sock, deadline, first):
        super().__init__()
        self.sock = sock
        self.deadline = deadline
        self.first = first

    def makefile(self, _mode):
        # http.client.HTTPResponse reads sock.makefile("rb").
        return io.BufferedReader(self)

    def readable(self):
        return True

    def readinto(self, buffer):
        if self.first:
            size = min(len(buffer), len(self.first))
            buffer[:size] = self.first[:size]
            del self.first[:size]
            return size
        self.sock.settimeout(max(self.deadline - time.monotonic(), 0.0))
        try:
            return self.sock.recv_into(buffer)
        except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            raise socket.timeout("timed out")


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


class _Unanswered(Exception):
    """The connection was closed before any byte of an answer came back."""

    def __init__(self, error):
        super().__init__(str(error))
        self.error = error


def _read(response):
    length = response.getheader("Content-Length")
    if length is not None and length.strip().isdigit() and int(length) > MAX_RESPONSE_BYTES:
        raise _TooLarge()
    chunks, size = [], 0
    while True:
        chunk = response.read1(65536)
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
            raise _TooLarge()
        chunks.append(chunk)


def _describe(error):
    if isinstance(error, ssl.SSLError):
        return "TLS: %s" % (error.reason or error)
    if isinstance(error, ConnectionRefusedError):
        return "connection refused"
    text = getattr(error, "strerror", None) or str(error) or type(error).__name__
    return text[:200]


# --- configuration ---------------------------------------------------------------------

def parse_extenders(reader, value, path, base=None):
    """The ExtenderConfig list of a profile's ``extenders`` (``path``), mistakes recorded on ``reader``."""
    configs = []
    seen = set()
    for index, item in enumerate(reader.sequence(value, path, MAX_EXTENDERS)):
        where = join_path(path, index)
        spec = reader.mapping(item, where, _KEYS, required=("urlPrefix",), optional_none=False)
        if not spec:
            continue
        config = _parse_one(reader, spec, where, index, base)
        if config is None:
            continue
        if config.url_prefix in seen:
            reader.bad(join_path(where, "urlPrefix"), config.url_prefix, "a urlPrefix no other extender has")
            continue
        seen.add(config.url_prefix)
        configs.append(config)
    return configs


def _parse_one(reader, spec, where, index, base):  # noqa: C901 (one check per field)
    errors = len(reader.errors)
    notes = []
    for key in ("bindVerb", "preemptVerb"):
        verb = spec.get(key)
        if verb is None or verb == "":
            continue
        if not isinstance(verb, str) or not _VERB.match(verb) or ".." in verb.split("/"):
            reader.bad(join_path(where, key), verb, "a path segment such as bind (it is not called)")
        else:
            # Accepted as kube accepts it, so a kube configuration works unchanged, but never called.
            notes.append("extender %s: %s %s is not called: %s" % (
                spec.get("urlPrefix"), key, verb, "gangplank binds every instance itself" if key == "bindVerb"
                else "gangplank plans the gang at once, without kube's preemption"))
    url = reader.string(spec.get("urlPrefix"), join_path(where, "urlPrefix"), "an http:// or https:// URL")
    https = False
    if url is not None:
        url = url.rstrip("/") or url
        # ASCII: the request line and Host header carry it as it is (a host in punycode, a path percent-encoded).
        parts = urllib.parse.urlsplit(url) if len(url) <= 2048 and url.isascii() and url.isprintable() and \
            " " not in url else None
        try:
            port = parts.port if parts is not None else None
        except ValueError:
            parts = None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            reader.bad(join_path(where, "urlPrefix"), url, "an http:// or https:// URL with a host")
            url = None
        elif parts.username is not None or parts.password is not None:
            reader.error(join_path(where, "urlPrefix"), "has credentials in it (not shown); expected a URL without "
                                                        "user:password@, and the token in bearerToken")
            url = None
        elif parts.query or parts.fragment:
            reader.bad(join_path(where, "urlPrefix"), url, "a URL without ?query or #fragment (the verb is appended)")
            url = None
        else:
            https = parts.scheme == "https"
            del port
    verbs = {}
    for key in ("filterVerb", "prioritizeVerb"):
        verb = spec.get(key)
        if verb is None or verb == "":
            verbs[key] = None
        elif not isinstance(verb, str) or not _VERB.match(verb) or ".." in verb.split("/"):
            reader.bad(join_path(where, key), verb, "a path segment such as filter or prioritize (letters, digits, "
                                                    "- . _ ~ /)")
        else:
            verbs[key] = verb
    if "filterVerb" in verbs and "prioritizeVerb" in verbs and not verbs["filterVerb"] and not verbs["prioritizeVerb"]:
        reader.error(where, "has neither filterVerb nor prioritizeVerb; expected at least one of them")
    weight = 1
    if spec.get("weight") is not None:
        # kube asks a positive weight only of an extender with a prioritizeVerb (its validation.go)
        weight = reader.integer(spec["weight"], join_path(where, "weight"),
                                minimum=1 if verbs.get("prioritizeVerb") else 0, maximum=MAX_WEIGHT)
    timeout = DEFAULT_HTTP_TIMEOUT
    if spec.get("httpTimeout") is not None:
        timeout = _duration(reader, spec["httpTimeout"], join_path(where, "httpTimeout"))
    flags = {key: reader.boolean(spec.get(key), join_path(where, key))
             for key in ("nodeCacheCapable", "ignorable", "enableHTTPS")}
    if flags["enableHTTPS"] and url is not None and not https:
        reader.bad(join_path(where, "urlPrefix"), url, "an https:// URL (enableHTTPS is true)")
    managed = []
    for position, entry in enumerate(reader.sequence(spec.get("managedResources"), join_path(where, "managedResources"))):
        at = join_path(join_path(where, "managedResources"), position)
        resource = reader.mapping(entry, at, ("name", "ignoredByScheduler"), required=("name",), optional_none=False)
        name = resource.get("name")
        if "name" in resource and (not isinstance(name, str) or not _RESOURCE_NAME.match(name)):
            reader.bad(join_path(at, "name"), name, "a resource name such as nvidia.com/gpu")
        elif "name" in resource:
            managed.append(name)
        reader.boolean(resource.get("ignoredByScheduler"), join_path(at, "ignoredByScheduler"))
    context, server_name = None, None
    tls = spec.get("tlsConfig")
    if tls is not None and url is not None and not https:
        reader.error(join_path(where, "tlsConfig"), "is set for an http:// urlPrefix; expected an https:// URL")
    elif https:
        context, server_name = _tls(reader, tls, join_path(where, "tlsConfig"), base)
    token = _token(reader, spec, where, base)
    if token and url is not None and not https and not _loopback(urllib.parse.urlsplit(url).hostname):
        reader.error(join_path(where, "urlPrefix"), "is http:// on another host with a bearer token; expected https:// "
                                                    "(the token would cross the network in clear text)")
    if len(reader.errors) > errors:
        return None
    return ExtenderConfig(index, url, verbs["filterVerb"], verbs["prioritizeVerb"], weight,
                          flags["nodeCacheCapable"], timeout, flags["ignorable"], tuple(managed), context,
                          server_name, token, tuple(notes))


def _duration(reader, value, path):
    """Seconds from kube's metav1.Duration text, as Go's time.ParseDuration reads it (``5s``, ``500ms``, ``1m30s``,
    ``.5s``, ``+2s``; units ns, us, µs, μs, ms, s, m, h; ``0`` alone), or from a number of seconds (gangplank's; kube
    takes text only). Zero means kube's default, DEFAULT_HTTP_TIMEOUT (NewHTTPExtender does the same); otherwise it
    must be above 0 and at most MAX_HTTP_TIMEOUT (kube has no upper bound; a negative one fails every call there)."""
    expected = "a duration above 0 and at most %gs, such as 5s or 500ms (Go's time.ParseDuration; 0 for the default " \
               "5s), or a number of seconds" % MAX_HTTP_TIMEOUT
    seconds = None
    if isinstance(value, bool):
        seconds = None
    elif isinstance(value, (int, float)):
        seconds = float(value) if abs(value) < 1e9 else None
    elif isinstance(value, str) and len(value) <= 64:
        match = _DURATION.match(value)
        if match and value.lstrip("+-") == "0":
            seconds = 0.0
        elif match:
            seconds = sum(float(amount) * _UNITS[unit]
                          for amount, unit in _DURATION_PART.findall(value))
            seconds = -seconds if value.startswith("-") else seconds
    if seconds == 0:
        return DEFAULT_HTTP_TIMEOUT
    if seconds is None or not 0 < seconds <= MAX_HTTP_TIMEOUT:
        reader.bad(path, value, expected)
        return None
    return seconds


def _file(base, name):
    return name if os.path.isabs(name) or base is None else os.path.join(base, name)


def _tls(reader, value, path, base):
    """(ssl context, serverName) from tlsConfig (None: the system's CA certificates). As in kube's TLSClientConfig,
    certData, keyData and caData (base64 of PEM bytes, Go's []byte in JSON) take precedence over the files."""
    spec = reader.mapping(value, path, _TLS_KEYS)
    pems, files = {}, {}                # "cert", "key", "ca" -> PEM text (from ...Data), a path (from ...File)
    for kind in ("cert", "key", "ca"):
        pem = _pem_data(reader, spec.get(kind + "Data"), join_path(path, kind + "Data"), kind + "File")
        if pem is not None:
            pems[kind] = pem
        elif spec.get(kind + "File") is not None and spec.get(kind + "Data") in (None, ""):
            where = join_path(path, kind + "File")
            name = reader.string(spec[kind + "File"], where, "the path of a PEM file")
            if name is not None and not os.path.isfile(_file(base, name)):
                reader.bad(where, name, "an existing PEM file")
            elif name is not None:
                files[kind] = _file(base, name)
    given = {kind: spec.get(kind + "File") is not None or spec.get(kind + "Data") not in (None, "") for kind in ("cert", "key")}
    if given["cert"] != given["key"]:
        reader.error(path, "has only one of the client certificate (certFile or certData) and its key (keyFile or "
                           "keyData); expected both")
    server_name = None
    if spec.get("serverName") is not None:
        server_name = reader.string(spec["serverName"], join_path(path, "serverName"), "a host name")
    insecure = reader.boolean(spec.get("insecure"), join_path(path, "insecure"))
    try:
        context = ssl.create_default_context(cafile=files.get("ca"), cadata=pems.get("ca"))
        if all(kind in files or kind in pems for kind in ("cert", "key")):
            _load_client_certificate(context, files, pems)
    except (ssl.SSLError, OSError, ValueError) as error:
        reader.error(path, "cannot be used: %s; expected PEM (caFile or caData, certFile or certData with keyFile or "
                           "keyData)" % _describe(error))
        return None, None
    if insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context, server_name


def _secret_text(reader, value, path, expected):
    """The text of a secret value, or None with a mistake recorded that never shows the value. A vaulted value that no
    template has decrypted yet (ansible-core's EncryptedString; the older AnsibleVaultEncryptedUnicode is a str)
    decrypts through str(); anything else that is not a string is refused."""
    if isinstance(value, str):
        return value
    if type(value).__name__ not in _VAULTED:
        reader.error(path, "is a %s (not shown); expected %s" % (type(value).__name__, expected))
        return None
    try:
        return str(value)
    except Exception:  # noqa: BLE001 (whatever the vault raises, the message must not carry the value)
        reader.error(path, "could not be decrypted (not shown); expected %s, e.g. from a vaulted variable with its "
                           "vault password given" % expected)
        return None


def _pem_data(reader, value, path, file_key):
    """The PEM text of certData, keyData or caData (base64 of PEM bytes, as kube's JSON carries Go's []byte), or
    None (unset, or a mistake recorded). Never shown: keyData is a private key."""
    if value is None or value == "":
        return None
    value = _secret_text(reader, value, path, "base64 of PEM bytes")
    if value is None:
        return None
    if len(value) > MAX_TLS_DATA:
        reader.error(path, "is %d characters long (not shown); expected base64 of PEM bytes, at most %d characters"
                     % (len(value), MAX_TLS_DATA))
        return None
    if "-----BEGIN" in value:
        reader.error(path, "is PEM text (not shown); expected it base64-encoded, as kube's configuration carries "
                           "certData, keyData and caData (or the PEM in a file: %s)" % file_key)
        return None
    try:
        pem = binascii.a2b_base64("".join(value.split()).encode("ascii"), strict_mode=True).decode("ascii")
    except (ValueError, UnicodeError):
        reader.error(path, "is not base64 of PEM text (not shown); expected base64 of PEM bytes (base64 -w0 < file.pem)")
        return None
    if "-----BEGIN " not in pem or "-----END " not in pem:
        reader.error(path, "decodes to something that is not PEM (not shown); expected base64 of PEM bytes, which "
                           "begin with -----BEGIN")
        return None
    return pem


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
        context.load_cert_chain(paths["cert"], paths["key"])
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def _token(reader, spec, where, base):
    """The bearer token (bearerToken, or the first line of bearerTokenFile), or None. Never shown."""
    if spec.get("bearerToken") is not None and spec.get("bearerTokenFile") is not None:
        reader.error(where, "has bearerToken and bearerTokenFile; expected one of them")
        return None
    token = spec.get("bearerToken")
    path = join_path(where, "bearerToken")
    if spec.get("bearerTokenFile") is not None:
        path = join_path(where, "bearerTokenFile")
        name = reader.string(spec["bearerTokenFile"], path, "the path of a file holding the token")
        if name is None:
            return None
        try:
            with open(_file(base, name), "rb") as stream:
                raw = stream.read(MAX_TOKEN + 2)
            token = raw.decode("ascii").strip()
        except (OSError, UnicodeDecodeError, ValueError) as error:
            # ValueError: a path with a NUL character, which no file has.
            reader.bad(path, name, "a readable file holding an ASCII token (%s)" % _describe(error))
            return None
    if token is None:
        return None
    token = _secret_text(reader, token, path, "a string")
    if token is None:
        return None
    if not token or len(token) > MAX_TOKEN or not _TOKEN.match(token):
        reader.error(path, "is not a usable token (not shown); expected 1 to %d printable ASCII characters without "
                           "spaces" % MAX_TOKEN)
        return None
    return token


def _loopback(host):
    return host in ("localhost", "::1") or (host or "").startswith("127.")


# --- kube objects --------------------------------------------------------------------------

def _cpu(millicores):
    return "%d" % (millicores // 1000) if millicores % 1000 == 0 else "%dm" % millicores


def _requests(service):
    """(requests, extended limits) of one container, as kube ResourceLists."""
    resources = service.resources
    requests = {"cpu": _cpu(resources.cpu), "memory": str(resources.memory)}
    extended = {}
    gpu = resources.gpu
    if gpu is not None:
        if gpu.memory is None:
            extended[GPU_RESOURCE] = str(gpu.count)
        else:
            extended[GPU_MEMORY_RESOURCE] = str(gpu.count * gpu.memory)
    if resources.nvme is not None:
        extended[NVME_RESOURCE] = str(resources.nvme.size)
    requests.update(extended)
    return requests, extended


def _container(service):
    requests, limits = _requests(service)
    container = {"name": service.name, "image": service.image or "", "resources": {"requests": requests}}
    if limits:
        container["resources"]["limits"] = dict(limits)     # extended resources: limits equal requests, as kube asks
    if service.ports:
        container["ports"] = [{"containerPort": port, "hostPort": port, "protocol": "TCP"} for port in service.ports]
    return container


def pod_object(problem, service):
    """The Pod an extender reads for ``service``: one container per member (the service, then its sidecars) with its
    requests, the node selector and tolerations, the priority, and gangplank's annotations (the GPU request's count,
    memory per device and models; the NVMe label)."""
    annotations = {ANNOTATION + "replicas": str(service.replicas)}
    gpu = service.resources.gpu
    if gpu is not None:
        annotations[ANNOTATION + "gpu-count"] = str(gpu.count)
        annotations[ANNOTATION + "gpu-memory-per-device"] = "" if gpu.memory is None else str(gpu.memory)
        annotations[ANNOTATION + "gpu-models"] = ",".join(gpu.models)
    if service.resources.nvme is not None:
        annotations[ANNOTATION + "nvme-label"] = service.resources.nvme.label
    for flag in ("stateful", "preemptible", "every_node"):
        if getattr(service, flag):
            annotations[ANNOTATION + flag.replace("_", "-")] = "true"
    spec = {"containers": [_container(member) for member in
                           [service] + [problem.services[name] for name in service.sidecars]],
            "schedulerName": "gangplank", "priority": service.priority}
    if service.node_selector:
        spec["nodeSelector"] = dict(service.node_selector)
    if service.tolerations:
        spec["tolerations"] = [_toleration(toleration) for toleration in service.tolerations]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": service.name, "namespace": NAMESPACE,
                         "labels": {"app.kubernetes.io/name": service.name, ANNOTATION + "service": service.name},
                         "annotations": annotations},
            "spec": spec, "status": {"phase": "Pending"}}


def _toleration(toleration):
    item = {"key": toleration.key, "operator": "Exists" if toleration.value is None else "Equal"}
    if toleration.value is not None:
        item["value"] = toleration.value
    if toleration.effect is not None:
        item["effect"] = toleration.effect
    return item


def node_object(node):
    """The Node an extender reads: labels (the GFD-style labels the facts produce), taints, unschedulable, capacity
    and allocatable (CPU, memory, whole GPUs, GPU memory, NVMe space), the devices as annotations."""
    resources = {"cpu": _cpu(node.cpu), "memory": str(node.memory)}
    if node.gpus:
        resources[GPU_RESOURCE] = str(len(node.gpus))
        resources[GPU_MEMORY_RESOURCE] = str(sum(device.memory for device in node.gpus))
    if node.nvme:
        resources[NVME_RESOURCE] = str(sum(device.size for device in node.nvme))
    annotations = {}
    if node.gpus:
        annotations[ANNOTATION + "gpus"] = _annotation_json(
            [{"index": d.index, "uuid": d.uuid, "model": d.model, "memory": d.memory} for d in node.gpus])
    if node.nvme:
        annotations[ANNOTATION + "nvme"] = _annotation_json(
            [{"name": d.name, "size": d.size, "labels": list(d.labels)} for d in node.nvme])
    spec = {}
    if node.unschedulable:
        spec["unschedulable"] = True
    if node.taints:
        spec["taints"] = [dict({"key": taint.key, "effect": taint.effect},
                               **({} if taint.value is None else {"value": taint.value})) for taint in node.taints]
    metadata = {"name": node.name, "labels": dict(node.labels)}
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Node", "metadata": metadata, "spec": spec,
            "status": {"capacity": resources, "allocatable": dict(resources)}}


def resource_names(pod):
    """The resource names a Pod's containers request or limit (kube's IsInterested reads them)."""
    names = set()
    for container in pod["spec"]["containers"]:
        for part in ("requests", "limits"):
            names.update(container["resources"].get(part, {}))
    return names


# One encoder each, made once (the same output as json.dumps with these options, which makes a new JSONEncoder per
# call): a Node's JSON is built per node and plan, with up to two annotations each.
_annotation_json = json.JSONEncoder(separators=(",", ":")).encode
encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, sort_keys=True).encode


def args_body(pod_json, names, node_items, node_cache_capable):
    """kube's ExtenderArgs as bytes: ``Nodes`` (a NodeList) or, when nodeCacheCapable, ``NodeNames``; the other
    one null, as kube-scheduler sends it. ``pod_json`` (text) and ``node_items`` (UTF-8 bytes: the Node objects of
    ``names``, encoded and joined with commas) are encoded already, once per plan: the body is joined from them
    without encoding the NodeList again (a megabyte per service on 1,000 nodes)."""
    pod = pod_json.encode("utf-8")
    if node_cache_capable:
        return b"".join((b'{"Pod":', pod, b',"Nodes":null,"NodeNames":', encode(list(names)).encode("utf-8"), b"}"))
    return b"".join((b'{"Pod":', pod, b',"Nodes":{"apiVersion":"v1","kind":"NodeList","metadata":{},"items":[',
                     node_items, b']},"NodeNames":null}'))


# --- answers -------------------------------------------------------------------------------

def _fields(config, verb, value, what):
    """A JSON object's keys folded to lower case, as Go's encoding/json matches them."""
    if not isinstance(value, dict):
        raise ExtenderError("%s: the answer to %s is not %s: %s" % (config.name, verb, what, _shown(config, value)))
    return {key.lower(): item for key, item in value.items()}


# The keys of a Node and of its metadata as kube writes them: no two fold to the same lower case, so in an object
# whose keys are all among them, ``key`` is the only spelling of itself (_field).
_NODE_KEYS = frozenset(("apiVersion", "kind", "metadata", "spec", "status"))
_METADATA_KEYS = frozenset(("name", "generateName", "namespace", "uid", "resourceVersion", "generation",
                            "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
                            "annotations", "ownerReferences", "finalizers", "managedFields", "selfLink"))


_PRIORITY_KEYS = frozenset(("Host", "Score"))


def _field(config, verb, value, key, usual, what):
    """``_fields(...).get(key)`` (``key`` lower case), without folding every key when they are all ``usual`` ones
    (the Node objects of a NodeList answer: a thousand of them per answer on a large cluster)."""
    if isinstance(value, dict) and value.keys() <= usual:
        return value.get(key)
    return _fields(config, verb, value, what).get(key)


def _shown(config, value):
    return config.scrub(show(value))


def read_filter_result(config, verb, answer, sent):
    """(names that pass, {name: reason} of those that do not) from an ExtenderFilterResult; every node sent that
    is in neither answer is filtered out too, as kube does. Raises ExtenderError on anything else."""
    fields = _fields(config, verb, answer, "an ExtenderFilterResult object")
    error = fields.get("error")
    if error not in (None, ""):
        if not isinstance(error, str):
            raise ExtenderError("%s: Error in the answer to %s is not a string: %s" % (config.name, verb, _shown(config, error)))
        raise ExtenderError("%s: %s answered with an error: %s" % (config.name, verb, _shown(config, error)))
    passed = []
    names = fields.get("nodenames")
    nodes = fields.get("nodes")
    # kube reads NodeNames only from a nodeCacheCapable extender; here also when Nodes is missing (an extender that
    # always answers with names), where kube would pass no node at all.
    if names is not None and (config.node_cache_capable or nodes is None):
        if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
            raise ExtenderError("%s: NodeNames in the answer to %s is not a list of names: %s"
                                % (config.name, verb, _shown(config, names)))
        passed = names
    elif nodes is not None:
        items = _fields(config, verb, nodes, "a NodeList in Nodes").get("items")
        if items is None:
            items = []
        if not isinstance(items, list):
            raise ExtenderError("%s: Nodes.items in the answer to %s is not a list" % (config.name, verb))
        for item in items:
            metadata = _field(config, verb, item, "metadata", _NODE_KEYS, "a Node in Nodes.items")
            name = None if metadata is None else _field(config, verb, metadata, "name", _METADATA_KEYS,
                                                        "a Node's metadata")
            if not isinstance(name, str):
                raise ExtenderError("%s: a Node in the answer to %s has no metadata.name: %s"
                                    % (config.name, verb, _shown(config, item)))
            passed.append(name)
    unknown = sorted(name for name in passed if name not in sent)
    if unknown:
        raise ExtenderError("%s: the answer to %s names node(s) it was not asked about: %s"
                            % (config.name, verb, _shown(config, unknown)))
    failed = {}
    for key in ("failedandunresolvablenodes", "failednodes"):
        entries = fields.get(key)
        if entries is None:
            continue
        label = "FailedAndUnresolvableNodes" if key.startswith("failedand") else "FailedNodes"
        if not isinstance(entries, dict) or not all(isinstance(reason, str) for reason in entries.values()):
            raise ExtenderError("%s: %s in the answer to %s is not a mapping of node name to reason: %s"
                                % (config.name, label, verb, _shown(config, entries)))
        unknown = sorted(name for name in entries if name not in sent)
        if unknown:
            raise ExtenderError("%s: %s in the answer to %s names node(s) it was not asked about: %s"
                                % (config.name, label, verb, _shown(config, unknown)))
        for name, reason in entries.items():
            # FailedAndUnresolvableNodes takes precedence, as in kube (it is read first).
            failed.setdefault(name, _reason(config, reason))
    both = sorted(set(passed) & set(failed))
    if both:
        raise ExtenderError("%s: the answer to %s both passes and fails node(s): %s"
                            % (config.name, verb, _shown(config, both)))
    return frozenset(passed), failed


def _reason(config, text):
    text = re.sub(r"\s+", " ", re.sub(r"[^\x20-\x7e\u00a0-\uffff]", "?", config.scrub(text))).strip()
    if len(text) > MAX_REASON:
        text = text[:MAX_REASON - 3] + "..."
    return text or "node(s) didn't pass %s" % config.name


def read_priorities(config, verb, answer, sent, warnings):
    """{name: score 0..10} from a HostPriorityList (null: no scores). Scores outside 0..10 are clamped, with a
    warning; anything else raises ExtenderError."""
    if answer is None:
        return {}
    if not isinstance(answer, list):
        raise ExtenderError("%s: the answer to %s is not a HostPriorityList (a list): %s"
                            % (config.name, verb, _shown(config, answer)))
    scores = {}
    for item in answer:
        # kube's own spellings (Host, Score) read as they are: folding every key costs more than the rest of the read.
        if isinstance(item, dict) and item.keys() <= _PRIORITY_KEYS:
            host, score = item.get("Host"), item.get("Score")
        else:
            fields = _fields(config, verb, item, "a HostPriority object")
            host, score = fields.get("host"), fields.get("score")
        if not isinstance(host, str) or isinstance(score, bool) or not isinstance(score, (int, float)) or \
                (isinstance(score, float) and not score.is_integer()):
            raise ExtenderError("%s: the answer to %s has an entry that is not {Host: name, Score: integer}: %s"
                                % (config.name, verb, _shown(config, item)))
        if host not in sent:
            raise ExtenderError("%s: the answer to %s scores a node it was not asked about: %s"
                                % (config.name, verb, _shown(config, host)))
        if host in scores:
            raise ExtenderError("%s: the answer to %s scores node %s twice" % (config.name, verb, _shown(config, host)))
        score = int(score)
        if not 0 <= score <= MAX_EXTENDER_PRIORITY:
            warnings.append("%s: %s scored node %s %d; scores are 0..%d (kube's MaxExtenderPriority), so it counts as %d"
                            % (config.name, verb, host, score, MAX_EXTENDER_PRIORITY,
                               min(max(score, 0), MAX_EXTENDER_PRIORITY)))
            score = min(max(score, 0), MAX_EXTENDER_PRIORITY)
        scores[host] = score
    return scores
