#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_watchdog
short_description: Run gangplank's GPU watchdog on a GPU host, with the grants of the host's instances
version_added: 0.1.0
description:
  - Installs the GPU watchdog program (O(program), the text of the deploy role's C(files/gpu_watchdog.py)) and its
    config in O(directory), and keeps one watchdog process running on the host (docs/gpu-sharing.md).
  - The config holds, per bound instance with GPUs (O(instances), the node's bindings), its container
    C(<host>-<instance>), its grant per GPU in bytes, its SM share where asked, and whether the host enforces the share
    (O(sharing)=C(mps), for GPUs the instance shares; a whole GPU is the instance's). The watchdog polls NVML (or, with
    O(simulated), a JSON file of processes a test writes, named as simulated), maps each process to an instance by
    the container id in its cgroup, and acts on an instance over its grant for O(grace) seconds per O(policy).
  - With systemd running (C(/run/systemd/system)), the watchdog is the unit O(service) (C(Restart=always)); without,
    a detached process whose pid the file C(watchdog.pid) holds, started with a clean environment. O(manager) forces
    one.
  - Idempotent. A running watchdog with the same program and config is left alone. A changed config is written and
    the watchdog reloads it (SIGHUP); a changed program (or unit) restarts it; one that is not running is started.
  - Returns the watchdog's state (its last poll) and, as warnings, the events the watchdog recorded since the last
    run that reported them (an instance warned or stopped, a process bypassing the shares) and what is wrong now.
  - With O(exclusive_process), sets the compute mode EXCLUSIVE_PROCESS (C(nvidia-smi -i <uuid> -c EXCLUSIVE_PROCESS),
    bounded by a timeout) on the GPUs that hold shares, when their mode is another; a GPU holding more than one share
    instance is left as it is, with a warning (each share has its own MPS server, and EXCLUSIVE_PROCESS admits one
    process per GPU). Never on simulated GPUs. It never sets a mode back.
  - O(state=stopped) stops the watchdog (and disables its unit); O(state=absent) also removes O(directory) and the
    unit file.
options:
  state:
    description: Whether the watchdog runs (C(started)), is stopped (C(stopped)), or is stopped and its files removed (C(absent)).
    type: str
    choices: [started, stopped, absent]
    default: started
  directory:
    description: The watchdog's directory on the host (program, config, state, pid and log files).
    type: path
    required: true
  program:
    description: O(state=started), required there. The watchdog program's text.
    type: str
  host:
    description: O(state=started), required there. The inventory name of the host (the C(gangplank.io/node) label of its containers).
    type: str
  instances:
    description: The node's bound instances (its fact file's C(instances)); those with C(gpus) are watched.
    type: dict
    default: {}
  gpus:
    description: The host's C(gangplank_gpus) facts, for each device's memory (a grant below it is a share); may be empty.
    type: list
    elements: dict
    default: []
  sharing:
    description: The host's GPU sharing mode; C(mps) enforces shares, C(none) leaves them advisory.
    type: str
    choices: [mps, none]
    default: none
  engine:
    description: The host's container engine, which the watchdog asks which container is which instance, and which stops one.
    type: str
    choices: [podman, docker]
    default: podman
  policy:
    description: What the watchdog does with an instance over its grant for O(grace) seconds. C(warn) records an event; C(stop) also stops its container.
    type: str
    choices: [warn, stop]
    default: warn
  grace:
    description: Seconds an instance may stay over its grant before the O(policy) acts.
    type: float
    default: 30
  interval:
    description: Seconds between two polls.
    type: float
    default: 5
  simulated:
    description: The host's GPUs are simulated; the watchdog reads C(simulated-processes.json) in O(directory) instead of NVML.
    type: bool
    default: false
  manager:
    description: How the watchdog runs; C(auto) takes systemd where it runs.
    type: str
    choices: [auto, systemd, process]
    default: auto
  service:
    description: The systemd unit's name (without C(.service)).
    type: str
    default: gangplank-gpu-watchdog
  unit_dir:
    description: Where the unit file is written.
    type: path
    default: /etc/systemd/system
  python:
    description: The Python that runs the watchdog; empty for the one that runs this module (it has nvidia-ml-py where the facts role installed it).
    type: str
    default: ''
  exclusive_process:
    description: Set EXCLUSIVE_PROCESS compute mode on the GPUs that hold shares (see the description). Not on simulated GPUs.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Says what would be written, started, reloaded, restarted or set, and changes nothing.
  diff_mode:
    support: none
    description: No diff; the result says which files and processes change.
  platform:
    support: full
    platforms: posix
    description: Linux hosts (it reads /proc).
author:
  - Gangplank maintainers (@gangplank)
"""

EXAMPLES = r"""
- name: Run the GPU watchdog with this host's grants
  gangplank.platform.gpu_watchdog:
    directory: /var/lib/gangplank/gpu-watchdog
    program: "{{ lookup('ansible.builtin.file', 'gpu_watchdog.py') }}"
    host: "{{ inventory_hostname }}"
    instances: "{{ node_bindings.instances }}"
    gpus: "{{ gangplank_gpus | default([]) }}"
    sharing: mps
    policy: stop

- name: Stop it and remove its files
  gangplank.platform.gpu_watchdog:
    directory: /var/lib/gangplank/gpu-watchdog
    state: absent
"""

RETURN = r"""
manager:
  description: How the watchdog runs (C(systemd) or C(process)); null when nothing runs.
  returned: always
  type: str
pid:
  description: The watchdog's pid (process manager, or the unit's main pid); null when none runs or in check mode before a start.
  returned: always
  type: int
actions:
  description: What was done (or would be in check mode), for example C(wrote config), C(reloaded), C(started).
  returned: always
  type: list
  elements: str
watchdog:
  description: The watchdog's state as its last poll wrote it (docs/gpu-sharing.md); null before its first poll.
  returned: with O(state=started)
  type: dict
lines:
  description: The events since the last report and what is wrong now, one line each (also returned as warnings).
  returned: with O(state=started)
  type: list
  elements: str
exclusive_process:
  description: The GPUs whose compute mode was set (or would be) to EXCLUSIVE_PROCESS.
  returned: always
  type: list
  elements: str
"""

import hashlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
import unicodedata

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gangplank.platform.plugins.module_utils.watchdog.gpu_watchdog_state import (
    MAX_STATE_BYTES, StateError, condition_lines, event_lines, parse_state, share_gpus, watchdog_config,
)
from ansible_collections.gangplank.platform.plugins.module_utils.watchdog.detached import start_detached
from ansible_collections.gangplank.platform.plugins.module_utils.state_files import atomic_write

PROGRAM = "gpu_watchdog.py"
CONFIG = "config.json"
STATE = "state.json"
PIDFILE = "watchdog.pid"
LOG = "watchdog.log"
REPORTED = "reported.json"
COMMAND_TIMEOUT = 30
STOP_WAIT = 10
# Seconds a process may seem to start after its pid file was written: /proc/stat's boot time is in whole seconds.
START_SLACK = 2
# What the detached watchdog keeps of the run's environment: nothing of the run itself (its variables may name secrets).
KEPT_ENV = ("CONTAINERS_CONF", "CONTAINER_HOST", "DOCKER_HOST")
SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
UNIT = """[Unit]
Description=gangplank GPU watchdog (docs/gpu-sharing.md)
After=local-fs.target

[Service]
ExecStart={command}
ExecReload=/bin/kill -HUP $MAINPID
Restart=always
RestartSec=5
Environment=PATH={path}

[Install]
WantedBy=multi-user.target
"""


def sha256(data):
    return hashlib.sha256(data if isinstance(data, bytes) else data.encode("utf-8")).hexdigest()


def read_bytes(path, limit=8 << 20):
    try:
        with open(path, "rb") as handle:
            return handle.read(limit)
    except OSError:
        return None


def run(argv, timeout=COMMAND_TIMEOUT):
    """(rc, stdout, stderr) of a bounded command; rc None when it cannot run or runs too long."""
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError) as error:
        return None, "", str(error)
    return done.returncode, done.stdout.decode("utf-8", "replace")[:65536], done.stderr.decode("utf-8", "replace")[:2000]


def first_line(text):
    """One line of a command's output for a message: at most 300 characters, or why there is none."""
    lines = (text or "").strip().splitlines()
    return lines[0][:300] if lines else "no output (failed or timed out)"


def control_character(text):
    """The first control character of ``text`` (a line break, a tab, an escape, U+2028, a lone surrogate ...), or ''."""
    return next((char for char in text if unicodedata.category(char) in ("Cc", "Cs", "Zl", "Zp")), "")


def unit_word(word, executable=False):
    """``word`` as one word of a unit file's command line (systemd.syntax(7)): in double quotes, with backslash and
    double quote escaped, ``%`` doubled (no specifier is expanded) and, in an argument, ``$`` doubled (no variable is
    expanded; systemd expands none in the executable, and refuses quotes and backslashes there: _systemd checks). Words
    hold no control character (main refuses them)."""
    if not executable:
        word = word.replace("$", "$$")
    return '"%s"' % word.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")


def systemd_runs():
    return os.path.isdir("/run/systemd/system") and shutil.which("systemctl") is not None


def boot_id():
    """This boot's id (the kernel's random boot_id): a process's start time means something within one boot only."""
    raw = read_bytes("/proc/sys/kernel/random/boot_id", 64)
    return raw.decode("ascii", "replace").strip() if raw else ""


def process_facts(pid):
    """(real and effective uid, start time in clock ticks after boot, zombie) of a running process; None when gone."""
    stat_raw = read_bytes("/proc/%d/stat" % pid, 4096)
    status = read_bytes("/proc/%d/status" % pid, 65536)
    if not stat_raw or not status:
        return None
    fields = stat_raw.rpartition(b")")[2].split()
    uids = [line.split()[1:3] for line in status.split(b"\n") if line.startswith(b"Uid:")]
    if len(fields) < 20 or not fields[19].isdigit() or len(uids) != 1 or not all(uid.isdigit() for uid in uids[0]):
        return None
    return {"uids": tuple(int(uid) for uid in uids[0]), "start_ticks": int(fields[19]), "zombie": fields[0] == b"Z"}


def process_of(directory):
    """The pid of the running watchdog of ``directory`` and the program hash it was started with: (pid, sha) from the
    pid file, (None, None) when none runs.

    The pid file is only believed of a process of this module's user (root on a host) that runs the program with its
    config (the arguments after the interpreter, whole) and that is the very process the file recorded: the same boot
    and the same start time (the file records both); for a file written before it recorded them, a process started
    after the file was written is not the one it names (the pid came back after a reboot or the watchdog's end)."""
    path = os.path.join(directory, PIDFILE)
    try:
        info = os.lstat(path)
    except OSError:
        return None, None
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
        return None, None
    raw = read_bytes(path, 4096)
    try:
        recorded = json.loads(raw.decode("utf-8")) if raw else None
    except (UnicodeDecodeError, ValueError, RecursionError):
        recorded = None
    if not isinstance(recorded, dict):
        return None, None
    pid = recorded.get("pid")
    if isinstance(pid, bool) or not isinstance(pid, int) or not 0 < pid < (1 << 22):
        return None, None
    facts = process_facts(pid)
    if facts is None or facts["zombie"] or facts["uids"] != (os.geteuid(), os.geteuid()):
        return None, None
    cmdline = read_bytes("/proc/%d/cmdline" % pid, 65536) or b""
    wanted = [os.path.join(directory, PROGRAM).encode(), os.path.join(directory, CONFIG).encode()]
    if cmdline.split(b"\0")[1:] != wanted + [b""]:
        return None, None
    if "start_ticks" in recorded or "boot_id" in recorded:
        if recorded.get("boot_id") != boot_id() or recorded.get("start_ticks") != facts["start_ticks"]:
            return None, None
    elif started_at(facts["start_ticks"]) > info.st_mtime + START_SLACK:
        return None, None
    return pid, recorded.get("program_sha256")


def started_at(start_ticks):
    """A start time in clock ticks after boot as seconds since the epoch (boot time from /proc/stat, whole seconds)."""
    raw = read_bytes("/proc/stat", 1 << 20) or b""
    boot = [line.split()[1] for line in raw.split(b"\n") if line.startswith(b"btime ") and len(line.split()) == 2]
    if len(boot) != 1 or not boot[0].isdigit():
        return float("inf")
    return int(boot[0]) + start_ticks / float(os.sysconf("SC_CLK_TCK"))


def stop_process(pid):
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + STOP_WAIT
    while time.monotonic() < deadline:
        stat = read_bytes("/proc/%d/stat" % pid, 4096)
        if stat is None or b") Z " in stat:
            return
        time.sleep(0.1)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def start_process(python, directory, program_sha):
    env = {"PATH": SAFE_PATH, "LANG": "C.UTF-8"}
    env.update({key: os.environ[key] for key in KEPT_ENV if key in os.environ})
    pid = start_detached([python, os.path.join(directory, PROGRAM), os.path.join(directory, CONFIG)],
                         os.path.join(directory, LOG), directory, env)
    # Which process this is, beyond its pid (which comes back after it ends): the boot and its start time.
    facts = process_facts(pid) or {"start_ticks": None}
    atomic_write(os.path.join(directory, PIDFILE), json.dumps(
        {"pid": pid, "program_sha256": program_sha, "boot_id": boot_id(), "start_ticks": facts["start_ticks"]}) + "\n", 0o644)
    return pid


class Watchdog:
    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.directory = module.params["directory"]
        self.check = module.check_mode
        self.actions = []
        self.changed = False

    def act(self, text):
        self.actions.append(("would " if self.check else "") + text)
        self.changed = True

    def manager(self):
        wanted = self.params["manager"]
        if wanted == "auto":
            return "systemd" if systemd_runs() else "process"
        return wanted

    def path(self, name):
        return os.path.join(self.directory, name)

    def write(self, name, data, mode=0o644):
        """Whether the file ``name`` changes; written unless in check mode."""
        if read_bytes(self.path(name)) == data.encode("utf-8"):
            return False
        self.act("write " + name)
        if not self.check:
            atomic_write(self.path(name), data, mode)
        return True

    def systemctl(self, *args):
        rc, out, err = run(["systemctl"] + list(args))
        return rc, out.strip(), err.strip()

    def systemctl_ok(self, *args):
        rc, _out, err = self.systemctl(*args)
        if rc != 0:
            self.module.fail_json(msg="systemctl %s: %s" % (" ".join(args), first_line(err)), actions=self.actions)

    def unit_path(self):
        return os.path.join(self.params["unit_dir"], self.params["service"] + ".service")

    # --- started ---

    def started(self):
        params = self.params
        for key in ("program", "host"):
            if not params[key]:
                self.module.fail_json(msg="%s is required with state=started" % key)
        try:
            config = watchdog_config(params["host"], params["instances"], params["gpus"], sharing=params["sharing"],
                                     engine=params["engine"], policy=params["policy"], grace=params["grace"],
                                     interval=params["interval"], simulated=params["simulated"], directory=self.directory)
        except ValueError as error:
            self.module.fail_json(msg=str(error))
        program = params["program"].rstrip("\n") + "\n"
        program_sha = sha256(program)
        python = params["python"] or sys.executable
        if not self.check and not os.path.isdir(self.directory):
            os.makedirs(self.directory, 0o755)
        elif not os.path.isdir(self.directory):
            self.act("create " + self.directory)
        program_changed = self.write(PROGRAM, program, 0o755)
        config_changed = self.write(CONFIG, json.dumps(config, sort_keys=True, indent=1) + "\n")
        manager = self.manager()
        pid = self._systemd(python, program_changed, config_changed) if manager == "systemd" else \
            self._process(python, program_sha, config_changed)
        exclusive = self.exclusive(params["instances"], params["gpus"]) if params["exclusive_process"] and not params["simulated"] else []
        state, lines = self.report()
        return dict(changed=self.changed, manager=manager, pid=pid, actions=self.actions, watchdog=state, lines=lines,
                    exclusive_process=exclusive)

    def _process(self, python, program_sha, config_changed):
        pid, running_sha = process_of(self.directory)
        if pid is not None and running_sha != program_sha:
            self.act("restart (the program changed)")
            if not self.check:
                stop_process(pid)
            pid = None
        elif pid is not None and config_changed:
            self.act("reload the config")
            if not self.check:
                os.kill(pid, signal.SIGHUP)
            return pid
        if pid is None:
            if not any(action.endswith("restart (the program changed)") for action in self.actions):
                self.act("start")
            if not self.check:
                pid = start_process(python, self.directory, program_sha)
        return pid

    def _systemd(self, python, program_changed, config_changed):
        if any(char in python for char in "\"'\\"):
            self.module.fail_json(msg="python: got a path with a quote or a backslash, which systemd refuses in the "
                                      "command of a unit; expected a path without them")
        command = " ".join([unit_word(python, executable=True), unit_word(self.path(PROGRAM)), unit_word(self.path(CONFIG))])
        unit = UNIT.format(command=command, path=SAFE_PATH)
        name = self.params["service"] + ".service"
        unit_changed = read_bytes(self.unit_path()) != unit.encode("utf-8")
        if unit_changed:
            self.act("write " + self.unit_path())
            if not self.check:
                atomic_write(self.unit_path(), unit, 0o644)
                self.systemctl_ok("daemon-reload")
        if self.systemctl("is-enabled", name)[1] != "enabled":
            self.act("enable " + name)
            if not self.check:
                self.systemctl_ok("enable", name)
        active = self.systemctl("is-active", name)[1] == "active"
        if not active:
            self.act("start " + name)
            if not self.check:
                self.systemctl_ok("start", name)
        elif unit_changed or program_changed:
            self.act("restart " + name)
            if not self.check:
                self.systemctl_ok("restart", name)
        elif config_changed:
            self.act("reload " + name)
            if not self.check:
                self.systemctl_ok("reload", name)
        _rc, out, _err = self.systemctl("show", "--property=MainPID", "--value", name)
        return int(out) if out.isdigit() and int(out) > 0 else None

    def exclusive(self, instances, gpus):
        totals = {gpu.get("uuid"): gpu.get("memory_total") for gpu in gpus if isinstance(gpu, dict)}
        done = []
        for uuid, count in sorted(share_gpus(instances, totals).items()):
            if count > 1:
                self.module.warn("%s holds %d share instances, each with its own MPS server: EXCLUSIVE_PROCESS would admit "
                                 "only one of them; its compute mode is left as it is" % (uuid, count))
                continue
            rc, out, err = run(["nvidia-smi", "-i", uuid, "--query-gpu=compute_mode", "--format=csv,noheader"])
            if rc != 0:
                self.module.fail_json(msg="nvidia-smi cannot read the compute mode of %s: %s" % (uuid, first_line(err or out)))
            if out.strip().lower() in ("exclusive_process", "exclusive process"):
                continue
            self.act("set EXCLUSIVE_PROCESS on " + uuid)
            done.append(uuid)
            if not self.check:
                rc, out, err = run(["nvidia-smi", "-i", uuid, "-c", "EXCLUSIVE_PROCESS"])
                if rc != 0:
                    self.module.fail_json(msg="nvidia-smi cannot set EXCLUSIVE_PROCESS on %s: %s" % (uuid, first_line(err or out)))
        return done

    def report(self):
        """The state and the lines to warn about: new events (recorded as reported, outside check mode) and conditions."""
        # One byte more than a state file may hold, so that a larger one is seen as larger without reading it whole.
        raw = read_bytes(self.path(STATE), MAX_STATE_BYTES + 1)
        if raw is None:
            return None, []
        try:
            state = parse_state(raw, self.path(STATE))
        except StateError as error:
            self.module.warn(str(error))
            return None, [str(error)]
        reported = read_bytes(self.path(REPORTED), 4096)
        try:
            after = json.loads(reported.decode("utf-8")).get("seq", 0) if reported else 0
        except (UnicodeDecodeError, ValueError, AttributeError):
            after = 0
        if isinstance(after, bool) or not isinstance(after, int) or after > state["seq"]:
            # The state was lost since (a new watchdog numbers from its own start): every event is new.
            after = 0
        host = self.params["host"]
        lines = event_lines(host, state, after) + condition_lines(host, state, time.time())
        for line in lines:
            self.module.warn(line)
        if state["seq"] != after and not self.check:
            # What was shown: bookkeeping of the report, not a change of the host.
            atomic_write(self.path(REPORTED), json.dumps({"seq": state["seq"]}) + "\n", 0o644)
        return state, lines

    # --- stopped, absent ---

    def stopped(self, remove):
        manager = None
        if os.path.exists(self.unit_path()) and systemd_runs():
            manager = "systemd"
            name = self.params["service"] + ".service"
            if self.systemctl("is-active", name)[1] == "active":
                self.act("stop " + name)
                if not self.check:
                    self.systemctl_ok("stop", name)
            if self.systemctl("is-enabled", name)[1] == "enabled":
                self.act("disable " + name)
                if not self.check:
                    self.systemctl_ok("disable", name)
        pid, _sha = process_of(self.directory)
        if pid is not None:
            manager = manager or "process"
            self.act("stop pid %d" % pid)
            if not self.check:
                stop_process(pid)
        if remove:
            if os.path.exists(self.unit_path()):
                self.act("remove " + self.unit_path())
                if not self.check:
                    os.unlink(self.unit_path())
                    if systemd_runs():
                        self.systemctl("daemon-reload")
            if os.path.lexists(self.directory):
                self.act("remove " + self.directory)
                if not self.check:
                    shutil.rmtree(self.directory)
        elif not self.check and os.path.exists(self.path(PIDFILE)):
            os.unlink(self.path(PIDFILE))
        return dict(changed=self.changed, manager=manager, pid=None, actions=self.actions, exclusive_process=[])


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", default="started", choices=["started", "stopped", "absent"]),
            directory=dict(type="path", required=True),
            program=dict(type="str"),
            host=dict(type="str"),
            instances=dict(type="dict", default={}),
            gpus=dict(type="list", elements="dict", default=[]),
            sharing=dict(type="str", default="none", choices=["mps", "none"]),
            engine=dict(type="str", default="podman", choices=["podman", "docker"]),
            policy=dict(type="str", default="warn", choices=["warn", "stop"]),
            grace=dict(type="float", default=30),
            interval=dict(type="float", default=5),
            simulated=dict(type="bool", default=False),
            manager=dict(type="str", default="auto", choices=["auto", "systemd", "process"]),
            service=dict(type="str", default="gangplank-gpu-watchdog"),
            unit_dir=dict(type="path", default="/etc/systemd/system"),
            python=dict(type="str", default=""),
            exclusive_process=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    params = module.params
    for name in ("directory", "python", "service", "unit_dir"):
        found = control_character(params[name])
        if found:
            # The values go into a unit file and a command line, where a line break would start a line of its own.
            module.fail_json(msg="%s: holds the control character %s; expected a value without line breaks or other "
                                 "control characters" % (name, ascii(found)))
    if not os.path.isabs(params["directory"]) or params["directory"].rstrip("/") in ("", "/"):
        module.fail_json(msg="directory: got %r; expected an absolute path below /" % params["directory"])
    if not 0 <= params["grace"] <= 86400 or not 0.1 <= params["interval"] <= 3600:
        module.fail_json(msg="grace must be from 0 to 86400 seconds and interval from 0.1 to 3600")
    watchdog = Watchdog(module)
    if params["state"] == "started":
        result = watchdog.started()
    else:
        result = watchdog.stopped(params["state"] == "absent")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
