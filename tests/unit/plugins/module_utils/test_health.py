# -*- coding: utf-8 -*-
"""health probes against real sockets on 127.0.0.1: HTTP servers, late TCP listeners, closed ports, commands."""

from __future__ import annotations

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils import health


class FlakyHandler(BaseHTTPRequestHandler):
    """503 until the server's ``healthy_after`` requests or ``ready_at`` time, then 200."""

    def do_GET(self):
        server = self.server
        with server.lock:
            server.requests += 1
            count = server.requests
        ready = count > server.fail_first and time.monotonic() >= server.ready_at
        status, body = (200, b"ok") if ready else (503, b"starting " + b"x" * 1000)
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args):  # pylint: disable=redefined-builtin
        pass


@pytest.fixture
def http_server():
    servers = []

    def start(fail_first=0, ready_after=0.0):
        server = ThreadingHTTPServer(("127.0.0.1", 0), FlakyHandler)
        server.daemon_threads = True
        server.lock = threading.Lock()
        server.requests = 0
        server.fail_first = fail_first
        server.ready_at = time.monotonic() + ready_after
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(server)
        return server, "http://127.0.0.1:%d/health" % server.server_address[1]

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def late_listener():
    sockets = []

    def start(delay):
        port = free_port()

        def bind_later():
            time.sleep(delay)
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", port))
            sock.listen(8)
            sockets.append(sock)

        threading.Thread(target=bind_later, daemon=True).start()
        return port

    yield start
    for sock in sockets:
        sock.close()


def probe(**fields):
    fields.setdefault("name", "p")
    fields.setdefault("interval", 0.05)
    fields.setdefault("retries", 5)
    fields.setdefault("timeout", 1.0)
    return health.normalize_probes([fields])[0]


def test_http_503_then_200(http_server):
    server, url = http_server(fail_first=3)
    result = health.wait_for(probe(type="http", url=url))
    assert result["healthy"] is True
    assert result["attempts"] == 4
    assert result["last_output"] == "HTTP 200: ok"
    assert server.requests == 4


def test_http_gives_up_with_status_and_500_bytes_of_body(http_server):
    dummy, url = http_server(fail_first=100)
    result = health.wait_for(probe(type="http", url=url, retries=2))
    assert result["healthy"] is False
    assert result["attempts"] == 2
    assert result["last_output"].startswith("HTTP 503: starting xxx")
    assert len(result["last_output"]) == len("HTTP 503: ") + 500


def test_http_expect_status_list(http_server):
    dummy, url = http_server(fail_first=100)
    result = health.wait_for(probe(type="http", url=url, expect_status=[503], retries=1))
    assert result["healthy"] is True


def test_http_nothing_listening():
    port = free_port()
    result = health.wait_for(probe(type="http", url="http://127.0.0.1:%d/" % port, retries=2))
    assert result["healthy"] is False
    assert result["attempts"] == 2
    assert result["last_output"].startswith("connection error: ")
    assert "refused" in result["last_output"].lower()


def test_tcp_listener_bound_late_passes_after_retries(late_listener):
    port = late_listener(0.5)
    result = health.wait_for(probe(type="tcp", port=port, interval=0.1, retries=20))
    assert result["healthy"] is True
    assert result["attempts"] > 1
    assert 0.4 <= result["seconds"] < 1.5
    assert result["last_output"] == "connected to 127.0.0.1:%d" % port


def test_tcp_nothing_listening_fails_with_connection_error():
    port = free_port()
    result = health.wait_for(probe(type="tcp", port=port, retries=3))
    assert result["healthy"] is False
    assert result["attempts"] == 3
    assert result["last_output"].startswith("connection to 127.0.0.1:%d failed: " % port)
    assert "refused" in result["last_output"].lower()


def test_command_passes():
    result = health.wait_for(probe(type="command", argv=["sh", "-c", "exit 0"]))
    assert result == {"healthy": True, "attempts": 1, "seconds": result["seconds"], "last_output": "rc=0: "}


def test_command_fails_with_rc_and_output_tail():
    result = health.wait_for(probe(type="command", argv=["false"], retries=2))
    assert result["healthy"] is False
    assert result["attempts"] == 2
    assert result["last_output"] == "rc=1: "
    result = health.wait_for(probe(type="command", argv=["sh", "-c", "echo out; printf 'y%.0s' $(seq 600) >&2; exit 3"], retries=1))
    assert result["last_output"] == "rc=3: " + "y" * 500


def test_command_timeout_kills_it():
    start = time.monotonic()
    result = health.wait_for(probe(type="command", argv=["sh", "-c", "echo begun; sleep 5"], timeout=0.2, retries=1))
    assert time.monotonic() - start < 2
    assert result["healthy"] is False
    assert result["last_output"] == "timed out after 0.2s: begun\n"


def test_command_missing_program():
    result = health.wait_for(probe(type="command", argv=["/nonexistent/probe"], retries=1))
    assert result["healthy"] is False
    assert result["last_output"].startswith("cannot run /nonexistent/probe: ")


def test_start_period_failures_do_not_count():
    result = health.wait_for(probe(type="command", argv=["false"], retries=2, interval=0.05, start_period=0.3))
    assert result["healthy"] is False
    assert result["attempts"] > 3
    assert result["seconds"] >= 0.3


def test_wait_all_is_concurrent(http_server, late_listener):
    dummy, url_a = http_server(ready_after=1.0)
    dummy, url_b = http_server(ready_after=1.0)
    port = late_listener(1.0)
    probes = health.normalize_probes([
        {"name": "a", "type": "http", "url": url_a, "interval": 0.1, "retries": 30},
        {"name": "b", "type": "http", "url": url_b, "interval": 0.1, "retries": 30},
        {"name": "c", "type": "tcp", "port": port, "interval": 0.1, "retries": 30},
    ])
    start = time.monotonic()
    results = health.wait_all(probes)
    total = time.monotonic() - start
    assert sorted(results) == ["a", "b", "c"]
    assert all(result["healthy"] for result in results.values())
    assert all(result["seconds"] >= 0.9 for result in results.values())
    assert total < 2.5


def test_failure_line():
    probes = health.normalize_probes([
        {"name": "web", "type": "http", "url": "http://127.0.0.1:1/"},
        {"name": "db", "type": "tcp", "port": 5432},
        {"name": "cmd", "type": "command", "argv": ["sh", "-c", "exit 1"]},
    ])
    result = {"healthy": False, "attempts": 3, "seconds": 0.5, "last_output": "HTTP 503: line one\nline  two"}
    assert health.failure_line(probes[0], result) == "web: http http://127.0.0.1:1/ failed 3 times over 0.50s; last: HTTP 503: line one line two"
    assert health.failure_line(probes[1], result).startswith("db: tcp 127.0.0.1:5432 failed 3 times over 0.50s; last: ")
    assert health.failure_line(probes[2], result).startswith("cmd: command sh -c 'exit 1' failed 3 times")


def test_defaults():
    normalized = health.normalize_probes([{"name": "db", "type": "tcp", "port": 1}])[0]
    assert normalized == {"name": "db", "type": "tcp", "port": 1, "host": "127.0.0.1", "timeout": 2.0, "interval": 1.0,
                          "retries": 60, "start_period": 0.0}


@pytest.mark.parametrize("probes, message", [
    ([{"name": "a", "type": "udp"}], "probes[0].type: got \"udp\"; expected one of http, tcp, command"),
    ([{"name": "a", "type": "tcp", "port": 1}, {"name": "b", "type": "http"}], "probes[1].url: required with type http"),
    ([{"name": "a", "type": "http", "url": "ftp://x/"}], "probes[0].url: got \"ftp://x/\"; expected an http:// or https:// URL"),
    ([{"name": "a", "type": "http", "url": "http://x/", "expect_status": [200, 42]}], "probes[0].expect_status: "),
    ([{"name": "a", "type": "tcp"}], "probes[0].port: required with type tcp"),
    ([{"name": "a", "type": "tcp", "port": 70000}], "probes[0].port: got 70000; expected an integer from 1 to 65535"),
    ([{"name": "a", "type": "command"}], "probes[0].argv: required with type command"),
    ([{"name": "a", "type": "tcp", "port": 1}, {"name": "b", "type": "command", "argv": "sh -c 'exit 0'"}],
     "probes[1].argv: expected a list of strings"),
    ([{"name": "a", "type": "command", "argv": ["sleep", 1]}], "probes[0].argv: expected a list of strings"),
    ([{"name": "a", "type": "command", "argv": []}], "probes[0].argv: expected a list of strings"),
    ([{"name": "a", "type": "tcp", "port": 1}, {"name": "a", "type": "tcp", "port": 2}], "probes[1].name: duplicate probe name \"a\""),
    ([{"type": "tcp", "port": 1}], "probes[0].name: expected a non-empty string"),
    ([{"name": "a", "type": "tcp", "port": 1, "retries": 0}], "probes[0].retries: got 0; expected an integer of 1 or more"),
    ([{"name": "a", "type": "tcp", "port": 1, "timeout": 0}], "probes[0].timeout: got 0; expected a number of seconds above 0"),
    ([{"name": "a", "type": "tcp", "port": 1, "interval": -1}], "probes[0].interval: got -1; expected a number of seconds of 0 or more"),
    (["a"], "probes[0]: expected a mapping"),
])
def test_validation(probes, message):
    with pytest.raises(health.ProbeConfigError) as error:
        health.normalize_probes(probes)
    assert str(error.value).startswith(message)
