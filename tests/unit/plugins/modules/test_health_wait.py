# -*- coding: utf-8 -*-
"""The health_wait module's main(), run with module arguments the way ansible-core 2.19 passes them, against real sockets."""

from __future__ import annotations

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.gangplank.platform.tests.unit.plugins.modules.module_harness import ExitJson, FailJson, capture_module_exits

from ansible_collections.gangplank.platform.plugins.modules import health_wait


@pytest.fixture(autouse=True)
def capture_exit(monkeypatch):
    return capture_module_exits(monkeypatch, warnings=[])


def run(args, check=False):
    args = dict(args, _ansible_check_mode=check)
    with patch_module_args(args):
        try:
            health_wait.main()
        except ExitJson as done:
            return done.args[0]
        except FailJson as failed:
            return failed.args[0]
    raise AssertionError("main() returned without exit_json or fail_json")


class OkHandler(BaseHTTPRequestHandler):
    def do_GET(self):
        self.server.requests += 1
        status = 503 if self.server.requests <= 2 else 200
        self.send_response(status)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"hi")

    def log_message(self, format, *args):  # pylint: disable=redefined-builtin
        pass


@pytest.fixture
def url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), OkHandler)
    server.daemon_threads = True
    server.requests = 0
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield "http://127.0.0.1:%d/" % server.server_address[1]
    server.shutdown()
    server.server_close()


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_all_healthy(url):
    result = run({"probes": [
        {"name": "web", "type": "http", "url": url, "interval": 0.05, "retries": 5},
        {"name": "cmd", "type": "command", "argv": ["sh", "-c", "exit 0"]},
    ]})
    assert "failed" not in result
    assert result["changed"] is False
    assert result["healthy"] is True
    web = result["probes"]["web"]
    # Two 503s come first; a loaded machine may lose one more attempt to the probe's timeout, never fewer.
    assert web == {"healthy": True, "attempts": web["attempts"], "seconds": web["seconds"], "last_output": "HTTP 200: hi"}
    assert 3 <= web["attempts"] <= 5
    assert result["probes"]["cmd"]["healthy"] is True
    assert result["seconds"] >= result["probes"]["web"]["seconds"]


def test_unhealthy_probes_fail_with_one_line_each(url):
    port = free_port()
    result = run({"probes": [
        {"name": "web", "type": "http", "url": url, "interval": 0.05, "retries": 5},
        {"name": "db", "type": "tcp", "port": port, "interval": 0.05, "retries": 3},
        {"name": "check", "type": "command", "argv": ["false"], "interval": 0.05, "retries": 2},
    ]})
    assert result["failed"] is True
    assert result["changed"] is False
    assert result["healthy"] is False
    assert result["probes"]["web"]["healthy"] is True
    lines = result["msg"].split("\n")
    assert len(lines) == 2
    db = result["probes"]["db"]
    assert db["healthy"] is False and db["attempts"] == 3
    assert lines[0] == "db: tcp 127.0.0.1:%d failed 3 times over %.2fs; last: %s" % (port, db["seconds"], db["last_output"])
    assert "refused" in lines[0].lower()
    assert lines[1] == "check: command false failed 2 times over %.2fs; last: rc=1:" % result["probes"]["check"]["seconds"]


def test_probes_run_concurrently():
    argv = ["sh", "-c", "sleep 0.9"]
    start = time.monotonic()
    result = run({"probes": [{"name": "c%d" % index, "type": "command", "argv": argv, "retries": 1} for index in range(3)]})
    assert result["healthy"] is True
    assert time.monotonic() - start < 2.5


def test_check_mode_does_not_probe():
    port = free_port()
    result = run({"probes": [{"name": "db", "type": "tcp", "port": port}]}, check=True)
    assert "failed" not in result
    assert result["healthy"] is None
    assert result["changed"] is False
    assert result["msg"] == "check mode: not probed"
    assert result["probes"] == {"db": {"healthy": None, "attempts": 0, "seconds": 0.0, "last_output": ""}}


@pytest.mark.parametrize("probes, message", [
    ([{"name": "a", "type": "tcp", "port": 1}, {"name": "b", "type": "command", "argv": "sh -c 'exit 0'"}],
     "probes[1].argv: expected a list of strings"),
    ([{"name": "a", "type": "smtp"}], "probes[0].type: got \"smtp\"; expected one of http, tcp, command"),
    ([{"name": "a", "type": "http"}], "probes[0].url: required with type http"),
    ([{"name": "a", "type": "tcp"}], "probes[0].port: required with type tcp"),
    ([{"name": "a", "type": "command"}], "probes[0].argv: required with type command"),
])
def test_validation_errors(probes, message):
    result = run({"probes": probes}, check=True)
    assert result["failed"] is True
    assert result["msg"].startswith(message)
