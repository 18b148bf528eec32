# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The extenders' HTTP transport (module_utils/extender/transport.py) against hostile servers on loopback.

Each server is a raw TCP socket on 127.0.0.1 port 0 in a thread: it reads one request, then writes what a buggy or
compromised extender could (endless ``100 Continue`` lines, endless 1-byte chunks, headers without end, a status
line of 100 KB, a body over the bound, one byte at a time, a reset mid-answer, nothing at all). Every call must end
within ``httpTimeout`` and some slack with an error that names the extender, never a traceback and never the
bearer token, not even in part. The first tests go through plan() (the scheduler's own path); the others call the
transport directly, and a hypothesis fuzz draws status lines, headers, chunk sizes and bodies at random."""

from __future__ import annotations

import contextlib
import copy
import re
import socket
import struct
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.gangplank.platform.plugins.module_utils.extender import transport
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.extender import ExtenderError
from ansible_collections.gangplank.platform.plugins.module_utils.extender.transport import parse_profile
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.scheduler import plan

TOKEN = "Tq7vK2xR9mWp4LzN8sJd3HfB6gYc1QaE5uXo0ViZr-Mn.w"      # 46 characters, all of them distinctive
TIMEOUT = 0.5                                                   # httpTimeout of every call here
SLACK = 1.5                                                     # seconds a call may take beyond it (a busy machine)
PROBLEM = {"nodes": {"n0": {"cpu": 4, "memory": "16Gi"}, "n1": {"cpu": 4, "memory": "16Gi"}},
           "services": {"web": {"replicas": 1, "resources": {"cpu": 1}}}}


def read_request(conn, data):
    """(head, the bytes after the body) of the next request on ``conn``, ``data`` already read of it; None at the end
    of the stream."""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _sep, data = data.partition(b"\r\n\r\n")
    # A request without a body (a stray probe of another test that found this port) has no Content-Length.
    found = re.search(rb"Content-Length: (\d+)", head)
    length = int(found.group(1)) if found else 0
    while len(data) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    return head, data[length:]


class Hostile:
    """A raw TCP server in a thread: for each connection it reads one request (headers and Content-Length body),
    then calls ``answer(conn, server)``, which writes what it likes; ``closing`` is set when the test ends."""

    def __init__(self, answer):
        self.answer = answer
        self.closing = threading.Event()
        self.requests = []
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = "http://127.0.0.1:%d/ext" % self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while not self.closing.is_set():
            try:
                conn, _address = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn):
        with conn:
            conn.settimeout(10)
            try:
                request = read_request(conn, b"")
                if request is not None:
                    self.requests.append(request[0])
                    self.answer(conn, self)
            except OSError:
                pass

    def close(self):
        self.closing.set()
        # close() alone leaves the port listening while the thread waits in accept(); shutdown() ends both.
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


@pytest.fixture
def hostile():
    started = []

    def start(answer):
        server = Hostile(answer)
        started.append(server)
        return server
    yield start
    for server in started:
        server.close()


def config_for(url, timeout=TIMEOUT, token=TOKEN):
    entry = {"urlPrefix": url, "filterVerb": "filter", "nodeCacheCapable": True, "httpTimeout": "%gs" % timeout}
    if token:
        entry["bearerToken"] = token
    return next(cls.config for cls in parse_profile({"extenders": [entry]}).plugins
                if getattr(cls, "config", None) is not None)


def assert_clean(message, url):
    """An error that names the extender, is one line, and holds no part of the token (5 characters in a row)."""
    for start in range(len(TOKEN) - 4):
        assert TOKEN[start:start + 5] not in message, (TOKEN[start:start + 5], message)
    assert message.startswith("extender %s: " % url), message
    assert "\n" not in message and "\r" not in message and "\x1b" not in message, message


def drip(data, every):
    """An answer: ``data`` (bytes, or a callable giving the next bytes) written piece after piece every ``every`` s,
    until the client gives up or the test ends."""
    def answer(conn, server):
        while not server.closing.is_set():
            conn.sendall(data() if callable(data) else data)
            if every:
                time.sleep(every)
    return answer


def reset_after(data):
    """An answer: ``data``, then a TCP reset (SO_LINGER 0)."""
    def answer(conn, _server):
        conn.sendall(data)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    return answer


def silent(_conn, server):
    server.closing.wait(10)


OK_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
CHUNKED = OK_HEAD + b"Transfer-Encoding: chunked\r\n\r\n"

# (what the server does, what the error says)
SLOW = {
    "never answers": (silent, "timed out after 0.5 s (httpTimeout)"),
    "endless 100 Continue, slowly": (drip(b"HTTP/1.1 100 Continue\r\n\r\n", 0.01), "timed out after 0.5 s"),
    "endless 1-byte chunks": (lambda conn, server: (conn.sendall(CHUNKED), drip(b"1\r\n \r\n", 0.005)(conn, server)),
                              "timed out after 0.5 s"),
    "headers that never end, slowly": (lambda conn, server: (conn.sendall(OK_HEAD), drip(b"X-A: b\r\n", 0.05)(conn, server)),
                                       "timed out after 0.5 s"),
    "a slow drip": (lambda conn, server: (conn.sendall(OK_HEAD + b"Content-Length: 1000\r\n\r\n"),
                                          drip(b" ", 0.05)(conn, server)), "timed out after 0.5 s"),
}
FAST = {
    "endless 100 Continue, at once": (drip(b"HTTP/1.1 100 Continue\r\n\r\n", 0),
                                      "the status lines and headers of the answer to filter are larger than"),
    "headers that never end, at once": (lambda conn, server: (conn.sendall(OK_HEAD), drip(b"X-A: b\r\n", 0)(conn, server)),
                                        "filter failed: got more than 100 headers"),
    "a status line of 100 KB": (drip(b"HTTP/1.1 200 " + b"a" * 100000, 0),
                                "the status lines and headers of the answer to filter are larger than 65536 bytes"),
    "endless 1-byte chunks, at once": (lambda conn, server: (conn.sendall(CHUNKED),
                                                             drip(b"1\r\n \r\n" * 20000, 0)(conn, server)),
                                       "timed out after 0.5 s"),
    "a reset mid-answer": (reset_after(OK_HEAD + b"Content-Length: 100\r\n\r\n{\"NodeNames\": ["),
                           "filter failed: "),
}


@pytest.mark.parametrize("case", sorted(SLOW) + sorted(FAST))
def test_a_hostile_answer_ends_within_http_timeout_through_plan(hostile, case):
    """Through plan(): each hostile server costs at most httpTimeout (and some slack) and fails the plan with an
    ExtenderError naming the extender; ignorable, the plan is made without it."""
    answer, message = SLOW.get(case) or FAST[case]
    server = hostile(answer)
    entry = {"urlPrefix": server.url, "filterVerb": "filter", "nodeCacheCapable": True, "httpTimeout": "500ms",
             "bearerToken": TOKEN}
    started = time.monotonic()
    with pytest.raises(ExtenderError) as raised:
        plan(copy.deepcopy(PROBLEM), profile=parse_profile({"extenders": [entry]}))
    assert time.monotonic() - started < TIMEOUT + SLACK, case
    assert message in str(raised.value), str(raised.value)
    assert_clean(str(raised.value), server.url)
    started = time.monotonic()
    result = plan(copy.deepcopy(PROBLEM), profile=parse_profile({"extenders": [dict(entry, ignorable=True)]}))
    assert time.monotonic() - started < TIMEOUT + SLACK, case
    assert result["feasible"] and result["extenders"][0]["skipped"]


def test_a_slow_resolver_costs_at_most_http_timeout(hostile, monkeypatch):
    """Name resolution is inside the call's deadline: a resolver that takes 5 s costs a 0.5 s call 0.5 s."""
    server = hostile(silent)
    port = int(server.url.rsplit(":", 1)[1].split("/")[0])
    real = socket.getaddrinfo

    def slow(host, *args, **kwargs):
        if host == "extender.test":
            time.sleep(5)
        return real(host, *args, **kwargs)
    monkeypatch.setattr(socket, "getaddrinfo", slow)
    url = "http://extender.test:%d/ext" % port
    started = time.monotonic()
    with pytest.raises(ExtenderError, match=re.escape("extender %s: filter timed out after 0.5 s" % url)):
        plan(copy.deepcopy(PROBLEM), profile=parse_profile({"extenders": [
            {"urlPrefix": url, "filterVerb": "filter", "nodeCacheCapable": True, "httpTimeout": "500ms"}]}))
    assert time.monotonic() - started < TIMEOUT + SLACK


def test_a_token_in_a_bad_status_line_is_never_shown(hostile):
    """A status line that is not HTTP and echoes the token around the 200th character (where an error's text used
    to be cut before the token was blotted out): the error shows none of the token."""
    for before in (190, 199, 180, 150, 210):
        server = hostile(reset_after(b"y" * before + TOKEN.encode() + b"\r\n\r\n"))
        with pytest.raises(ExtenderError) as raised:
            plan(copy.deepcopy(PROBLEM), profile=parse_profile({"extenders": [
                {"urlPrefix": server.url, "filterVerb": "filter", "nodeCacheCapable": True, "bearerToken": TOKEN}]}))
        assert "filter failed: " in str(raised.value)
        assert_clean(str(raised.value), server.url)


def test_control_characters_of_a_bad_status_line_are_not_printed(hostile):
    """A terminal escape and a line break in what the server sent stay out of the error (one printable line)."""
    server = hostile(reset_after(b"\x1b[2J\x1b]0;owned\x07HTTP\x0b/1.1 \xe2\x80\xae200 OK\r\n\r\n"))
    with pytest.raises(ExtenderError) as raised:
        plan(copy.deepcopy(PROBLEM), profile=parse_profile({"extenders": [
            {"urlPrefix": server.url, "filterVerb": "filter", "nodeCacheCapable": True}]}))
    message = str(raised.value)
    assert "filter failed: " in message and message.isprintable() and "\u202e" not in message, message
    assert_clean(message, server.url)


@pytest.mark.parametrize("before", [0, 20, 40, 60, 70, 75, 78, 79, 80, 390, 395, 399, 400])
def test_a_token_in_an_error_answer_is_never_shown_even_in_part(hostile, before):
    """An HTTP 500 answer that echoes the token with the quote's cut anywhere across it."""
    body = b"x" * before + TOKEN.encode() + b" and more"
    server = hostile(lambda conn, _server: conn.sendall(
        b"HTTP/1.1 500 Oops\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body))
    with pytest.raises(ExtenderError) as raised:
        plan(copy.deepcopy(PROBLEM), profile=parse_profile({"extenders": [
            {"urlPrefix": server.url, "filterVerb": "filter", "nodeCacheCapable": True, "bearerToken": TOKEN}]}))
    assert "filter answered HTTP 500: " in str(raised.value)
    assert_clean(str(raised.value), server.url)


# --- the transport itself -------------------------------------------------------------------------

def call(config, body=b'{"Pod": {}}'):
    """transport.post's answer, or its TransportError, and the seconds it took."""
    started = time.monotonic()
    try:
        answer = transport.post(config, "filter", body)
    except transport.TransportError as error:
        answer = error
    return answer, time.monotonic() - started


@pytest.mark.parametrize("case", sorted(SLOW) + sorted(FAST))
def test_the_transport_ends_every_hostile_call_in_time(hostile, case):
    answer, message = SLOW.get(case) or FAST[case]
    server = hostile(answer)
    error, seconds = call(config_for(server.url))
    assert isinstance(error, transport.TransportError), error
    assert seconds < TIMEOUT + SLACK and message in str(error), (seconds, str(error))
    assert_clean(str(error), server.url)


def test_the_bytes_on_the_wire_are_bounded(hostile, monkeypatch):
    """1-byte chunks at full speed: the body stays small for long, the framing does not; the wire bound (head,
    body and framing together) cuts the answer long before its deadline."""
    monkeypatch.setattr(transport, "MAX_RESPONSE_BYTES", 100000)
    monkeypatch.setattr(transport, "MAX_FRAMING_BYTES", 1000)
    server = hostile(lambda conn, srv: (conn.sendall(CHUNKED), drip(b"1\r\n \r\n" * 1000, 0)(conn, srv)))
    error, seconds = call(config_for(server.url, timeout=30))
    assert "is larger than %d bytes on the wire" % transport.max_wire_bytes() in str(error), str(error)
    assert seconds < 10
    monkeypatch.setattr(transport, "MAX_RESPONSE_BYTES", 1000)
    body = b"[" + b"1," * 1000 + b"1]"
    server = hostile(lambda conn, _srv: conn.sendall(OK_HEAD + b"Connection: close\r\n\r\n" + body))
    error, _seconds = call(config_for(server.url))
    assert str(error) == "extender %s: the answer to filter is larger than 1000 bytes" % server.url


def test_a_good_answer_in_chunks_and_after_100_continue_is_read(hostile):
    body = b'{"NodeNames": ["n0"]}'
    chunks = b"".join(b"%x\r\n%s\r\n" % (1, body[index:index + 1]) for index in range(len(body))) + b"0\r\n\r\n"
    server = hostile(lambda conn, _srv: conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n" * 3 + CHUNKED + chunks))
    answer, _seconds = call(config_for(server.url))
    assert answer == body
    assert b"Authorization: Bearer " + TOKEN.encode() in server.requests[0]


def test_a_fake_transport_can_be_handed_to_the_planner():
    """parse_profile(transport=...) hands the Extender plugin its transport: no socket is opened, and the answers it
    gives are read as an extender's."""
    seen = []

    class Fake:
        def call_round(self, config, jobs, prepare, finish, ahead=None):
            results = []
            for job in jobs:
                request = prepare(job)
                if request is None:
                    results.append(None)
                    continue
                seen.append(request[0])
                results.append(finish(job, b'{"NodeNames": ["n1"], "FailedNodes": {"n0": "in maintenance"}}'))
            return results
    parsed = parse_profile({"extenders": [{"urlPrefix": "http://extender.invalid:1/x", "filterVerb": "filter",
                                           "nodeCacheCapable": True}]}, transport=Fake())
    result = plan(copy.deepcopy(PROBLEM), profile=parsed)
    assert seen == ["filter"] and result["placements"]["web-0"]["node"] == "n1"


# --- fuzz: hostile answers drawn at random, served from a real socket --------------------------------

class Scripted:
    """One server for the whole fuzz: each connection gets ``script`` (bytes, with a reset or a close at the end)."""

    def __init__(self):
        self.script = (b"", False)
        self.server = Hostile(self._answer)

    def _answer(self, conn, _server):
        data, reset = self.script
        conn.sendall(data)
        if reset:
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


_TEXT = st.one_of(st.binary(max_size=40), st.sampled_from([TOKEN.encode(), b"\r\n", b"\n", b"\x1b]0;x\x07", b"\xff\xfe",
                                                           b"\xed\xa0\x80", b"\xe2\x80\xae", b"%s%d"]))
_STATUS = st.one_of(
    st.builds(lambda version, code, reason: b"%s %s %s\r\n" % (version, code, reason),
              st.sampled_from([b"HTTP/1.1", b"HTTP/1.0", b"HTTP/2", b"HTTP/1.1x", b"ICY", b""]),
              st.one_of(st.sampled_from([b"200", b"100", b"204", b"301", b"500", b"999", b"-1", b"20"]),
                        st.integers(0, 10 ** 6).map(lambda number: str(number).encode())),
              _TEXT),
    _TEXT)
_HEADER = st.one_of(
    st.sampled_from([b"Transfer-Encoding: chunked", b"Content-Length: 5", b"Content-Length: -1",
                     b"Content-Length: 99999999999999999999", b"Content-Length: 0", b"Connection: close",
                     b"Connection: keep-alive", b"Content-Length: 3, 4", b"Transfer-Encoding: gzip, chunked",
                     b"X-Token: " + TOKEN.encode(), b" folded", b":", b"\x00: \x00"]),
    st.builds(lambda name, value: name + b": " + value, st.binary(min_size=1, max_size=12), _TEXT))
_CHUNK = st.one_of(
    st.builds(lambda data: b"%x\r\n%s\r\n" % (len(data), data), _TEXT),
    st.builds(lambda size, data: size + b"\r\n" + data + b"\r\n",
              st.sampled_from([b"ffffffffffffffff", b"-1", b"zz", b"1;ext=1", b"0", b"", b"8" * 70000]), _TEXT))
_ANSWER = st.builds(
    lambda continues, status, headers, chunks, body, tail: (
        b"HTTP/1.1 100 Continue\r\n\r\n" * continues + status + b"".join(header + b"\r\n" for header in headers)
        + b"\r\n" + (b"".join(chunks) if chunks is not None else b"") + body + tail),
    st.integers(0, 3), _STATUS, st.lists(_HEADER, max_size=6), st.one_of(st.none(), st.lists(_CHUNK, max_size=5)),
    st.one_of(st.just(b""), _TEXT, st.just(b'{"NodeNames": ["n0"]}'), st.just(b"[" * 200)),
    st.sampled_from([b"", b"0\r\n\r\n", b"\r\n"]))


@pytest.fixture(scope="module")
def scripted():
    server = Scripted()
    yield server
    server.server.close()


@settings(max_examples=1000, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large])
@given(answer=_ANSWER, reset=st.booleans())
def test_fuzz_hostile_answers_from_a_real_socket(scripted, answer, reset):
    """Whatever a server sends (then closes or resets): bytes of a 2xx answer, or a TransportError naming the
    extender, in one line without the token; never another exception, never beyond the deadline."""
    scripted.script = (answer, reset)
    config = config_for(scripted.server.url, timeout=2.0)
    result, seconds = call(config)
    assert seconds < 2.0 + SLACK
    if isinstance(result, bytes):
        assert len(result) <= transport.MAX_RESPONSE_BYTES
    else:
        assert isinstance(result, transport.TransportError), repr(result)
        assert_clean(str(result), scripted.server.url)


class _Scrubbing:
    """The part of ExtenderConfig that quote() and describe() use: scrub()."""

    def __init__(self, token):
        self.token = token

    def scrub(self, text):
        return text.replace(self.token, "********")


def test_the_scrub_window_covers_the_longest_token_a_profile_takes():
    from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.extender import MAX_TOKEN
    assert transport._TOKEN_BOUND >= MAX_TOKEN


@pytest.mark.parametrize("length", [46, 4096, 16384])
def test_a_token_straddling_the_scrub_window_is_never_shown_even_in_part(length):
    """A long answer whose token crosses MAX_SCRUBBED: it is blotted out whole before anything is cut."""
    token = ("Tq7vK2xR9m" * (length // 10 + 1))[:length]
    config = _Scrubbing(token)
    for start in (transport.MAX_SCRUBBED - length // 2, transport.MAX_SCRUBBED - 1, 0):
        data = ("x" * start + token + "y" * 100).encode()
        shown = transport.quote(config, data) + transport.describe(config, OSError(data.decode()))
        assert token[:4] not in shown.replace("********", "")


# --- the connections kept between rounds ---------------------------------------------------------------------------

class KeepAlive(Hostile):
    """A keep-alive server: answers every request of a connection with a small JSON body, counting the connections
    it accepted. ``after`` (bytes or None) is written after each answer, unasked; ``close`` closes the connection
    after each answer."""

    def __init__(self, after=None, close=False, chunked=False):
        self.chunked = chunked
        self.connections = 0
        self.after = after
        self.close_each = close
        super().__init__(None)

    def _one(self, conn):
        self.connections += 1
        with conn:
            conn.settimeout(10)
            data = b""
            try:
                while not self.closing.is_set():
                    request = read_request(conn, data)
                    if request is None:
                        return
                    head, data = request
                    self.requests.append(head)
                    body = b'{"NodeNames": ["n0"]}'
                    # Chunked, the answer is read by http.client; with a Content-Length, by the transport itself.
                    answer = CHUNKED + b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body) if self.chunked else \
                        OK_HEAD + b"Content-Length: %d\r\n\r\n" % len(body) + body
                    conn.sendall(answer + (self.after or b""))
                    if self.close_each:
                        return
            except OSError:
                pass


@pytest.fixture
def keep_alive():
    started = []

    def start(**options):
        server = KeepAlive(**options)
        started.append(server)
        return server
    yield start
    for server in started:
        server.close()


def _answers(config, count):
    return [transport.post(config, "filter", b"{}") for _call in range(count)]


@pytest.mark.parametrize("chunked", [False, True])
def test_a_connection_is_kept_for_the_next_round_of_the_same_extender(keep_alive, chunked):
    server = keep_alive(chunked=chunked)
    assert _answers(config_for(server.url, timeout=2), 3) == [b'{"NodeNames": ["n0"]}'] * 3
    assert len(server.requests) == 3 and server.connections == 1


@pytest.mark.parametrize("options", [{"close": True}, {"after": b"HTTP/1.1 200 OK\r\n\r\nforged"},
                                     {"close": True, "chunked": True},
                                     {"after": b"HTTP/1.1 200 OK\r\n\r\nforged", "chunked": True}],
                         ids=["closed by the server", "bytes sent unasked", "closed, chunked",
                              "bytes sent unasked, chunked"])
def test_a_connection_the_server_closed_or_wrote_on_is_not_reused(keep_alive, options):
    server = keep_alive(**options)
    assert _answers(config_for(server.url, timeout=2), 3) == [b'{"NodeNames": ["n0"]}'] * 3
    assert server.connections == 3


def test_a_connection_idle_too_long_or_of_another_tls_setting_is_not_reused(keep_alive, monkeypatch):
    server = keep_alive()
    config = config_for(server.url, timeout=2)
    monkeypatch.setattr(transport, "IDLE_SECONDS", 0.05)
    _answers(config, 1)
    time.sleep(0.2)
    _answers(config, 1)
    assert server.connections == 2
    other = copy.copy(config)
    other.server_name = "elsewhere.example"
    _answers(other, 1)
    assert server.connections == 3


# --- the plainest answers, read without http.client: they must mean to it what they mean here -----------------------

class _Bytes:
    """What http.client.HTTPResponse reads a head from (sock.makefile)."""

    def __init__(self, data):
        self.data = data

    def makefile(self, _mode):
        import io
        return io.BufferedReader(io.BytesIO(self.data))


_HEADER_NAMES = [b"Content-Length", b"content-length", b"Transfer-Encoding", b"Connection", b"Keep-Alive",
                 b"Proxy-Connection", b"Content-Type", b"X-A", b"Content-Length ", b"Con\x0bnection"]
_HEADER_VALUES = [b"12", b" 12 ", b"012", b"12, 12", b"-1", b"1e3", b"\xb2", b"chunked", b"close", b"keep-alive",
                  b"Close", b"", b"a\x0cb", b"a\x85b", b"\x1cx", b"12\t"]


@settings(max_examples=600, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.sampled_from([b"HTTP/1.1", b"HTTP/1.0", b"HTTP/1.2", b"HTTP/2"]),
       st.sampled_from([b"200", b"204", b"299", b"100", b"500", b"20"]),
       st.sampled_from([b" OK", b"", b" ", b" O\rK"]),
       st.lists(st.tuples(st.sampled_from(_HEADER_NAMES), st.sampled_from(_HEADER_VALUES)), max_size=5),
       st.sampled_from([b"\r\n", b"\n"]))
def test_a_head_read_here_means_the_same_to_http_client(version, status, reason, headers, ending):
    import http.client
    head = version + b" " + status + reason + b"\r\n" + b"".join(name + b":" + value + ending for name, value in headers)
    head += b"\r\n"
    plain = transport._plain_head(head, len(head))
    if plain is None:
        return                          # http.client reads it, whatever it is
    response = http.client.HTTPResponse(_Bytes(head + b"x" * 64), method="POST")
    response.begin()
    assert 200 <= response.status < 300 and response.status != 204
    assert response.chunked is False
    assert (response.length, response.will_close) == plain, (head, plain)


def test_every_pair_of_the_headers_that_matter_reads_the_same_here_and_in_http_client():
    import http.client
    import itertools
    names = [b"Content-Length", b"content-length", b"Transfer-Encoding", b"Connection", b"Keep-Alive",
             b"Proxy-Connection", b"Content-Type"]
    values = [b"12", b" 12 ", b"012", b"12, 12", b"chunked", b"close", b"keep-alive", b"Close", b""]
    read_here = 0
    for version in (b"HTTP/1.1", b"HTTP/1.0"):
        for headers in itertools.product(itertools.product(names, values), repeat=2):
            head = version + b" 200 OK\r\n" + b"".join(name + b": " + value + b"\r\n" for name, value in headers) + b"\r\n"
            plain = transport._plain_head(head, len(head))
            if plain is None:
                continue
            read_here += 1
            response = http.client.HTTPResponse(_Bytes(head + b"x" * 64), method="POST")
            response.begin()
            assert not response.chunked and (response.length, response.will_close) == plain, head
    assert read_here > 500


# --- one rule for the number of header lines, whichever path reads the head ----------------------------------------

def many_headers(lines, apart):
    """An answer: a 2xx head of ``lines`` header lines (Content-Length among them) and its body, written at once (the
    first read holds the whole head: read here) or ``apart``: the status line, a pause, the rest (http.client reads
    it)."""
    body = b'{"NodeNames": ["n0"]}'
    head = b"".join(b"X-Filler-%d: x\r\n" % number for number in range(lines - 1))
    rest = head + b"Content-Length: %d\r\n\r\n" % len(body) + body

    def answer(conn, _server):
        if apart:
            conn.sendall(b"HTTP/1.1 200 OK\r\n")
            time.sleep(0.2)
            conn.sendall(rest)
        else:
            conn.sendall(b"HTTP/1.1 200 OK\r\n" + rest)
    return answer


@pytest.mark.parametrize("apart", [False, True], ids=["read here", "read by http.client"])
@pytest.mark.parametrize("lines", [99, 100, 101])
def test_the_same_number_of_header_lines_is_an_answer_or_an_error_on_both_paths(hostile, lines, apart):
    server = hostile(many_headers(lines, apart))
    answer, _seconds = call(config_for(server.url, timeout=3))
    if lines <= 99:
        assert answer == b'{"NodeNames": ["n0"]}', answer
    else:
        assert isinstance(answer, transport.TransportError), answer
        assert "filter failed: got more than 100 headers" in str(answer), str(answer)
        assert_clean(str(answer), server.url)
