# -*- coding: utf-8 -*-
"""The local proxy's pid file, as the deploy role's removal trusts it (roles/deploy/files/proxy_remove.sh --pid-of):
only a regular file of root's, no symbolic link, naming a process of root whose program is HAProxy. A file another user
made, a link, or a pid of some other program is never signalled. Real processes; run as root, as the role runs."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
SCRIPT = os.path.join(ROOT, "roles", "deploy", "files", "proxy_remove.sh")

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the role's shell runs as root: a file of root's is needed")


def pid_of(path):
    done = subprocess.run(["sh", SCRIPT, "--pid-of", str(path)], capture_output=True, text=True,
                          timeout=30, check=False)
    return done.stdout.strip() if done.returncode == 0 else None


@pytest.fixture(name="proxy")
def _proxy(tmp_path):
    """A process of root whose program is named haproxy (a copy of sleep), and another program's process."""
    program = tmp_path / "haproxy"
    shutil.copy(shutil.which("sleep"), program)
    proxy = subprocess.Popen([str(program), "60"])  # pylint: disable=consider-using-with
    other = subprocess.Popen(["sleep", "60"])  # pylint: disable=consider-using-with
    yield proxy.pid, other.pid
    for process in (proxy, other):
        process.kill()
        process.wait()


def test_a_pid_file_of_roots_naming_the_proxy_is_trusted(tmp_path, proxy):
    pid_file = tmp_path / "proxy.pid"
    pid_file.write_text("%d\n" % proxy[0])
    assert pid_of(pid_file) == str(proxy[0])


def test_another_program_a_link_a_file_of_another_user_or_garbage_is_not_trusted(tmp_path, proxy):
    pid_file = tmp_path / "proxy.pid"
    pid_file.write_text("%d\n" % proxy[1])
    assert pid_of(pid_file) is None                 # a process of root, but not HAProxy (what a user points it at)
    real = tmp_path / "real.pid"
    real.write_text("%d\n" % proxy[0])
    pid_file.unlink()
    pid_file.symlink_to(real)
    assert pid_of(pid_file) is None                 # a link, even to a good file
    pid_file.unlink()
    pid_file.write_text("%d\n" % proxy[0])
    os.chown(pid_file, 65534, 65534)
    assert pid_of(pid_file) is None                 # a file another user made
    for text in ("", "x\n", "%d 1\n" % proxy[0], "-1\n", "$(touch %s/owned)\n" % tmp_path):
        pid_file.unlink()
        pid_file.write_text(text)
        assert pid_of(pid_file) is None, text
    assert not (tmp_path / "owned").exists()
    assert pid_of(tmp_path / "missing.pid") is None
