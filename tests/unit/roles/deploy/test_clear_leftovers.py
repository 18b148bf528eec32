# -*- coding: utf-8 -*-
"""What a killed run left, cleared by roles/deploy/files/clear_leftovers.sh with the engine, iptables and the OCI runtime
replaced by stand-ins that log their arguments, and a real process standing in for a container's monitor."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
SCRIPT = os.path.join(ROOT, "roles", "deploy", "files", "clear_leftovers.sh")
CONTAINER_ID = "ab12" * 16


def stand_ins(tmp_path):
    """A bin directory with podman, iptables and an OCI runtime that append their argv to calls.log."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.log"
    for name in ("podman", "iptables", "runc"):
        (bin_dir / name).write_text('#!/bin/sh\necho "%s $*" >> "%s"\n' % (name, log))
        os.chmod(bin_dir / name, 0o755)
    return bin_dir, log


def clear(bin_dir, *leftovers):
    return subprocess.run(["sh", SCRIPT, *leftovers], env=dict(os.environ, PATH="%s:%s" % (bin_dir, os.environ["PATH"])),
                          capture_output=True, text=True, timeout=30, check=False)


def calls(log):
    return log.read_text().splitlines() if log.exists() else []


def test_broken_forward_and_storage_only_leftovers_become_their_commands(tmp_path):
    bin_dir, log = stand_ins(tmp_path)
    done = clear(bin_dir, "h1-api-0", "broken:h1-web-0", "forward:PREROUTING -d 127.0.0.2/32 -p tcp -j DNAT", "h1-db-0")
    assert done.returncode == 0, done.stderr
    assert calls(log) == ["podman rm -f h1-web-0", "iptables -w -t nat -D PREROUTING -d 127.0.0.2/32 -p tcp -j DNAT",
                          "podman rm --storage h1-api-0 h1-db-0"]


def test_nothing_given_runs_nothing(tmp_path):
    bin_dir, log = stand_ins(tmp_path)
    assert clear(bin_dir).returncode == 0 and calls(log) == []


def test_a_monitor_is_killed_and_its_containers_runtime_state_removed(tmp_path):
    bin_dir, log = stand_ins(tmp_path)
    runtime = str(bin_dir / "runc")
    # A process whose arguments name the container's id and its runtime after -r, as conmon's do.
    monitor = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "-r", runtime, "-c", CONTAINER_ID])
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        done = clear(bin_dir, "%d:%s:h1-api-0" % (monitor.pid, CONTAINER_ID), "%d:%s:h1-web-0" % (other.pid, CONTAINER_ID))
        assert done.returncode == 0, done.stderr
        assert monitor.wait(timeout=10) == -9
        # A process whose arguments do not name the id (a pid used again) is left alone.
        assert other.poll() is None
        assert calls(log) == ["runc delete --force %s" % CONTAINER_ID]
    finally:
        for process in (monitor, other):
            process.kill()
            process.wait(timeout=10)


def test_the_script_passes_shellcheck():
    shellcheck = subprocess.run(["sh", "-c", "command -v shellcheck"], capture_output=True, text=True, check=False)
    if shellcheck.returncode != 0:
        pytest.skip("shellcheck is not installed")
    done = subprocess.run(["shellcheck", SCRIPT], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout
