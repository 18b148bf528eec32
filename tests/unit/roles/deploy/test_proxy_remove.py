# -*- coding: utf-8 -*-
"""The local proxy's removal (roles/deploy/files/proxy_remove.sh), as the deploy role runs it where no service asks for
the proxy any more and at teardown: it stops the master the host's read found (plugins/module_utils/deploy/deploy_read.py
trusts a pid file only as root's, naming a process of root running HAProxy; tests/unit/plugins/module_utils/
test_deploy_read.py), never a pid it reads from a file itself; removes the address and the files; says whether it
changed anything. Real processes and files; the address is one the loopback interface does not have."""

from __future__ import annotations

import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
SCRIPT = os.path.join(ROOT, "roles", "deploy", "files", "proxy_remove.sh")
ABSENT = "169.254.255.253/32"

pytestmark = pytest.mark.skipif(os.path.exists("/etc/systemd/system/gangplank-proxy.service"),
                                reason="this machine runs the product's own proxy unit: the script would remove it")


def remove(master, *files):
    return subprocess.run(["sh", SCRIPT, ABSENT, str(master)] + [str(path) for path in files], capture_output=True,
                          text=True, timeout=30, check=False)


@pytest.fixture(name="process")
def _process():
    started = subprocess.Popen(["sleep", "60"])  # pylint: disable=consider-using-with
    yield started
    started.kill()
    started.wait()


def test_the_master_the_read_found_is_stopped_and_the_files_removed(tmp_path, process):
    config, pid_file, link = tmp_path / "proxy.cfg", tmp_path / "proxy.pid", tmp_path / "proxy.sock"
    config.write_text("global\n")
    pid_file.write_text("1\n")               # never read: the pid comes from the read
    link.symlink_to(tmp_path / "gone")        # a dangling link is removed too
    done = remove(process.pid, config, pid_file, link)
    assert (done.returncode, done.stdout) == (0, "changed\n"), done.stderr
    assert process.wait(timeout=10) != 0      # ended by the signal
    assert not any(path.exists() or path.is_symlink() for path in (config, pid_file, link))


def test_nothing_to_remove_is_unchanged_and_no_pid_means_no_signal(tmp_path, process):
    done = remove(0, tmp_path / "proxy.cfg", tmp_path / "proxy.pid")
    assert (done.returncode, done.stdout) == (0, "unchanged\n"), done.stderr
    assert process.poll() is None


@pytest.mark.parametrize("master", ["", "x", "-1", "12 13", "$(touch owned)"])
def test_a_master_pid_that_is_not_digits_is_refused(tmp_path, process, master):
    config = tmp_path / "proxy.cfg"
    config.write_text("global\n")
    done = subprocess.run(["sh", SCRIPT, ABSENT, master, str(config)], capture_output=True, text=True, timeout=30,
                          check=False, cwd=tmp_path)
    assert done.returncode == 2 and "must be digits" in done.stderr
    assert config.exists() and process.poll() is None and not (tmp_path / "owned").exists()
