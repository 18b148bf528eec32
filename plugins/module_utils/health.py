# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Health probes polled until they pass, many at once: HTTP, TCP and command probes.

Used by the health_wait module and its action plugin, which runs ``wait_result`` as a plain script on the host.
Standard library and messages.py only; importable on Python 3.9+ (managed hosts).
Every probe runs in its own thread, so waiting on many instances takes as long as the slowest one.

- ``normalize_probes(probes)``: checked probe mappings with defaults filled in, or ProbeConfigError
  naming the probe index and key (``probes[1].argv: expected a list of strings``).
- ``check_once(probe)``: one attempt, ``(passed, output)``.
- ``wait_for(probe)``: attempts until the probe passes or its retries are used up.
- ``wait_all(probes)``: ``wait_for`` on every probe concurrently; results by probe name.
- ``failure_line(probe, result)``: one line describing an unhealthy probe.
- ``wait_result(probes, check_mode)``: what the health_wait module returns (also run as a plain script on the host:
  plugins/action/health_wait.py).
"""

from __future__ import annotations

import http.client
import math
import os
import shlex
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

from ansible_collections.gangplank.platform.plugins.module_utils.messages import show

TYPES = ("http", "tcp", "command")
OUTPUT_LIMIT = 500
MAX_SECONDS = 86400         # timeouts, intervals, start periods (and the catalog's stop_timeout)
MAX_RETRIES = 100000
DEFAULTS = {"host": "127.0.0.1", "timeout": 2.0, "interval": 1.0, "retries": 60, "start_period": 0.0}


class ProbeConfigError(ValueError):
    """A probe definition is invalid; the message names the probe index and key."""


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _is_seconds(value):
    # NaN would never count a failure (a wait without end) and infinity would kill the probe's thread in sleep().
    return _is_number(value) and (isinstance(value, int) or math.isfinite(value)) and 0 <= value <= MAX_SECONDS


def normalize_probes(probes):
    """Check probe definitions; return new mappings with defaults applied."""
    if not isinstance(probes, list):
        raise ProbeConfigError("probes: expected a list of mappings")
    normalized = []
    seen = set()
    for index, probe in enumerate(probes):
        where = "probes[%d]" % index
        if not isinstance(probe, dict):
            raise ProbeConfigError("%s: expected a mapping" % where)
        result = dict(probe)
        for key, default in DEFAULTS.items():
            if result.get(key) is None:
                result[key] = default
        name = result.get("name")
        if not isinstance(name, str) or not name:
            raise ProbeConfigError("%s.name: expected a non-empty string" % where)
        if name in seen:
            raise ProbeConfigError("%s.name: duplicate probe name %s" % (where, show(name)))
        seen.add(name)
        kind = result.get("type")
        if kind not in TYPES:
            raise ProbeConfigError("%s.type: got %s; expected one of %s" % (where, show(kind), ", ".join(TYPES)))
        _check_timing(where, result)
        if kind == "http":
            _check_http(where, result)
        elif kind == "tcp":
            _check_tcp(where, result)
        else:
            _check_command(where, result)
        normalized.append(result)
    return normalized


def _check_timing(where, probe):
    if not _is_seconds(probe["timeout"]) or probe["timeout"] <= 0:
        raise ProbeConfigError("%s.timeout: got %s; expected a number of seconds above 0, at most %d"
                               % (where, show(probe["timeout"]), MAX_SECONDS))
    for key in ("interval", "start_period"):
        if not _is_seconds(probe[key]):
            raise ProbeConfigError("%s.%s: got %s; expected a number of seconds of 0 or more, at most %d"
                                   % (where, key, show(probe[key]), MAX_SECONDS))
    if not _is_int(probe["retries"]) or not 1 <= probe["retries"] <= MAX_RETRIES:
        raise ProbeConfigError("%s.retries: got %s; expected an integer of 1 or more, at most %d"
                               % (where, show(probe["retries"]), MAX_RETRIES))


def _check_http(where, probe):
    url = probe.get("url")
    if url is None or url == "":
        raise ProbeConfigError("%s.url: required with type http" % where)
    if not isinstance(url, str) or not url.lower().startswith(("http://", "https://")):
        raise ProbeConfigError("%s.url: got %s; expected an http:// or https:// URL" % (where, show(url)))
    expect = probe.get("expect_status")
    if expect is not None:
        if not isinstance(expect, list) or not expect or not all(_is_int(code) and 100 <= code <= 599 for code in expect):
            raise ProbeConfigError("%s.expect_status: got %s; expected a non-empty list of HTTP status codes" % (where, show(expect)))


def _check_tcp(where, probe):
    port = probe.get("port")
    if port is None:
        raise ProbeConfigError("%s.port: required with type tcp" % where)
    if not _is_int(port) or not 1 <= port <= 65535:
        raise ProbeConfigError("%s.port: got %s; expected an integer from 1 to 65535" % (where, show(port)))
    if not isinstance(probe["host"], str) or not probe["host"]:
        raise ProbeConfigError("%s.host: expected a host name or address" % where)


def _check_command(where, probe):
    argv = probe.get("argv")
    if argv is None:
        raise ProbeConfigError("%s.argv: required with type command" % where)
    if isinstance(argv, str):
        raise ProbeConfigError("%s.argv: expected a list of strings, got the string %s (it is run without a shell, give one item per argument)"
                               % (where, show(argv)))
    if not isinstance(argv, list) or not argv or not all(isinstance(arg, str) and "\x00" not in arg for arg in argv) or not argv[0]:
        raise ProbeConfigError("%s.argv: expected a list of strings, got %s" % (where, show(argv)))


def target_of(probe):
    """What a probe checks, for messages."""
    if probe["type"] == "http":
        return probe["url"]
    if probe["type"] == "tcp":
        return "%s:%d" % (probe["host"], probe["port"])
    return " ".join(shlex.quote(arg) for arg in probe["argv"])


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Report a redirect's own status instead of following it."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


def _opener():
    # No proxies: a health probe checks the service on this host, not what a proxy makes of it.
    return urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())


def _status_ok(probe, status):
    expect = probe.get("expect_status")
    if expect:
        return status in expect
    return 200 <= status < 400


def _decode(data):
    return data.decode("utf-8", errors="replace")


def check_http(probe):
    try:
        response = _opener().open(urllib.request.Request(probe["url"], method="GET"), timeout=probe["timeout"])
        try:
            status = response.status
            body = response.read(OUTPUT_LIMIT)
        finally:
            response.close()
    except urllib.error.HTTPError as error:
        status = error.code
        try:
            body = error.read(OUTPUT_LIMIT) or b""
        except (OSError, http.client.HTTPException):
            body = b""
        finally:
            error.close()
    except urllib.error.URLError as error:
        return False, "connection error: %s" % (error.reason,)
    except (OSError, http.client.HTTPException, ValueError) as error:
        return False, "connection error: %s" % (error or type(error).__name__,)
    return _status_ok(probe, status), "HTTP %d: %s" % (status, _decode(body))


def check_tcp(probe):
    target = "%s:%d" % (probe["host"], probe["port"])
    try:
        connection = socket.create_connection((probe["host"], probe["port"]), timeout=probe["timeout"])
    except OSError as error:
        return False, "connection to %s failed: %s" % (target, error or type(error).__name__)
    connection.close()
    return True, "connected to %s" % target


def check_command(probe):
    try:
        process = subprocess.Popen(probe["argv"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    except OSError as error:
        return False, "cannot run %s: %s" % (probe["argv"][0], error)
    try:
        output = process.communicate(timeout=probe["timeout"])[0]
    except subprocess.TimeoutExpired:
        # Kill the whole session, so that children holding the pipe open do not keep us waiting.
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except OSError:
            process.kill()
        output = process.communicate()[0]
        tail = _decode(output or b"")[-OUTPUT_LIMIT:]
        return False, "timed out after %gs: %s" % (probe["timeout"], tail)
    tail = _decode(output or b"")[-OUTPUT_LIMIT:]
    return process.returncode == 0, "rc=%d: %s" % (process.returncode, tail)


CHECKS = {"http": check_http, "tcp": check_tcp, "command": check_command}


def check_once(probe):
    """One attempt: (passed, output)."""
    return CHECKS[probe["type"]](probe)


def wait_for(probe, clock=time.monotonic, sleep=time.sleep):
    """Attempt until the probe passes or ``retries`` failures (outside ``start_period``) are used up."""
    start = clock()
    attempts = 0
    failures = 0
    while True:
        attempts += 1
        try:
            passed, output = check_once(probe)
        except Exception as error:  # a probe must not take its thread down silently
            passed, output = False, "probe error: %s: %s" % (type(error).__name__, error)
        if passed:
            break
        if clock() - start >= probe["start_period"]:
            failures += 1
        if failures >= probe["retries"]:
            break
        sleep(probe["interval"])
    return {"healthy": passed, "attempts": attempts, "seconds": round(clock() - start, 3), "last_output": output}


def wait_all(probes):
    """Wait for every probe concurrently, one thread each; results by probe name."""
    results = {}

    def worker(probe):
        try:
            results[probe["name"]] = wait_for(probe)
        except Exception as error:  # noqa: BLE001 (every probe gets a result, whatever went wrong)
            results[probe["name"]] = {"healthy": False, "attempts": 0, "seconds": 0.0,
                                      "last_output": "probe error: %s: %s" % (type(error).__name__, error)}

    threads = [threading.Thread(target=worker, args=(probe,), name="health-%s" % probe["name"], daemon=True) for probe in probes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def failure_line(probe, result):
    """``<name>: <type> <target> failed <attempts> times over <s>s; last: <last_output>`` on one line."""
    last = " ".join(str(result["last_output"]).split())
    return "%s: %s %s failed %d times over %.2fs; last: %s" % (
        probe["name"], probe["type"], target_of(probe), result["attempts"], result["seconds"], last)


# The health_wait module's options: the module and its action plugin (plugins/action/health_wait.py) validate the same.
PROBE_SPEC = {
    "name": {"type": "str", "required": True},
    "type": {"type": "str", "required": True},
    "url": {"type": "str"},
    "expect_status": {"type": "list", "elements": "int"},
    "host": {"type": "str", "default": "127.0.0.1"},
    "port": {"type": "int"},
    "argv": {"type": "raw"},
    "timeout": {"type": "float", "default": 2.0},
    "interval": {"type": "float", "default": 1.0},
    "retries": {"type": "int", "default": 60},
    "start_period": {"type": "float", "default": 0.0},
}
ARGUMENT_SPEC = {"probes": {"type": "list", "elements": "dict", "required": True, "options": PROBE_SPEC}}


def wait_result(probes, check_mode=False):
    """What health_wait returns for the (argument-checked) ``probes``: ``failed`` with the failure lines as ``msg``
    when one stays unhealthy, or a probe is not valid."""
    try:
        probes = normalize_probes(probes)
    except ProbeConfigError as error:
        return {"failed": True, "changed": False, "msg": str(error)}
    if check_mode:
        results = {probe["name"]: {"healthy": None, "attempts": 0, "seconds": 0.0, "last_output": ""} for probe in probes}
        return {"changed": False, "healthy": None, "seconds": 0.0, "probes": results, "msg": "check mode: not probed"}
    start = time.monotonic()
    results = wait_all(probes)
    seconds = round(time.monotonic() - start, 3)
    lines = [failure_line(probe, results[probe["name"]]) for probe in probes if not results[probe["name"]]["healthy"]]
    if lines:
        return {"failed": True, "msg": "\n".join(lines), "changed": False, "healthy": False, "seconds": seconds,
                "probes": results}
    return {"changed": False, "healthy": True, "seconds": seconds, "probes": results}
