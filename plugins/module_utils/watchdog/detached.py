# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A long-running process started from a module and left running after it: the GPU watchdog on a host without systemd.

AnsibleModule.run_command waits for its command to end, so a service that must outlive the task is started here: in
a session of its own (no signal of the task's terminal or process group reaches it), with no standard input, its
output appended to a log file, and only the environment it is given. Standard library only.
"""

from __future__ import annotations

import subprocess


def start_detached(argv, log_path, cwd, env):
    """Start ``argv`` detached (a new session, stdin /dev/null, stdout and stderr appended to ``log_path``) and return
    its pid; the caller records it (a pid file) and stops it by signal."""
    with open(log_path, "ab") as log:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, close_fds=True,
                                   start_new_session=True, cwd=cwd, env=env)
    return process.pid
