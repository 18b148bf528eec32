# -*- coding: utf-8 -*-
"""A copy of the local test bed (inventories/local) for end-to-end tests, and what they read back.

Each test module gets its own hosts (renamed, on their own loopback addresses) and state
directory, so the demo deployment and other modules on the same machine are left alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
LOCAL = os.path.join(ROOT, "inventories", "local")
BUNDLE = os.path.join(ROOT, ".build", "testbed", "images", "gangplank-demo.tar")


class Bed:
    """``hosts`` maps each test-bed host (node1, ...) to the (name, address) it gets here."""

    @classmethod
    def make(cls, base, hosts):
        if shutil.which("podman") is None or not os.path.exists(BUNDLE):
            pytest.fail("the test bed is not set up: source scripts/lib/testbed.sh first (scripts/test.sh does)")
        return cls(base, hosts)

    def __init__(self, base, hosts):
        self.base = base
        self.hosts = hosts
        self.names = tuple(name for name, _address in hosts.values())
        self.addresses = dict(hosts.values())
        shutil.copytree(os.path.join(LOCAL, "group_vars"), str(base / "group_vars"))
        shutil.copytree(os.path.join(LOCAL, "templates"), str(base / "templates"))
        with open(os.path.join(LOCAL, "hosts.yml")) as handle:
            inventory = yaml.safe_load(handle)
        renamed = {}
        for old, spec in inventory["all"]["hosts"].items():
            name, address = hosts[old]
            renamed[name] = dict(spec, gangplank_publish_address=address)
        inventory["all"]["hosts"] = renamed
        inventory["all"]["children"]["gangplank_control"]["hosts"] = {hosts["node1"][0]: {}}
        self.inventory = base / "hosts.yml"
        self.inventory.write_text(yaml.safe_dump(inventory))
        # MPS directories must be root's all the way (docs/deploy.md): not under the test's /tmp, but under /run.
        self.mps_base = pathlib.Path("/run/gangplank-e2e") / uuid.uuid4().hex[:12]
        (base / "group_vars" / "all" / "zz_e2e.yml").write_text(yaml.safe_dump({
            "gangplank_testbed_dir": str(base / "testbed"),
            "gangplank_mps_dir": str(self.mps_base) + "/{{ inventory_hostname }}/mps",
            "gangplank_image_bundles": [{"path": BUNDLE, "images": ["localhost/gangplank-demo:1"]}],
        }))

    def state(self, host=None):
        return self.base / "testbed" / (host or self.names[0])

    def mps_dir(self, host):
        """The host's MPS directory (gangplank_mps_dir)."""
        return self.mps_base / host / "mps"

    # Added to each run's environment (a canary's vault password file: tests/e2e/canary.py); a dict in transcripts
    # keeps what each run printed, by playbook and count, for the canary's search.
    environment = {}
    transcripts = None

    def playbook(self, name, *extra, timeout=600):
        return run_playbook(self.inventory, os.path.join(ROOT, "playbooks", name), *extra, timeout=timeout,
                            environment=self.environment, transcripts=self.transcripts)

    def popen(self, name, *extra):
        return start_playbook(self.inventory, name, *extra, environment=self.environment)

    def containers(self):
        return containers(self.names)


def run_playbook(inventory, playbook, *extra, timeout=600, environment=None, transcripts=None):
    """ansible-playbook with the JSON callback: (exit code, report); its output also in ``transcripts`` when given."""
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_NOCOLOR="1", ANSIBLE_SHOW_CUSTOM_STATS="1",
               **(environment or {}))
    completed = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", str(inventory), playbook, *extra],
                               cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    if transcripts is not None:
        transcripts["%s %d" % (os.path.basename(playbook), len(transcripts))] = completed.stdout + completed.stderr
    try:
        report = json.loads(completed.stdout)
    except ValueError:
        pytest.fail("no JSON report:\n%s\n%s" % (completed.stdout[-3000:], completed.stderr[-3000:]))
    return completed.returncode, report


def vaulted(base, name, value):
    """``name: !vault |...``: the value encrypted with the password file ``base``/vault-password, as a delivery
    engineer writes it into group_vars."""
    completed = subprocess.run([os.path.join(BIN, "ansible-vault"), "encrypt_string", "--vault-password-file",
                                str(base / "vault-password"), "--stdin-name", name],
                               input=value, capture_output=True, text=True, check=True)
    return completed.stdout


def vault(bed):
    """The arguments that give a playbook run the bed's vault password file."""
    return ("--vault-password-file", str(bed.base / "vault-password"))


RUN_MARK = "GANGPLANK_E2E_RUN"     # in the environment of a background run and of everything it starts
# Processes that outlive a run by design and cannot act for it: a container's monitor, rootless podman's pause process.
_NOT_THE_RUNS = ("conmon", "catatonit")


def start_playbook(inventory, name, *extra, environment=None):
    """playbooks/<name> in the background, in a process group of its own (a test may kill it mid-run: kill_run).
    ``process.mark`` is the value of RUN_MARK in the environment of the run and of every process it starts."""
    mark = uuid.uuid4().hex
    process = subprocess.Popen([os.path.join(BIN, "ansible-playbook"), "-i", str(inventory), os.path.join(ROOT, "playbooks", name), *extra],
                               cwd=ROOT, env=dict(os.environ, ANSIBLE_NOCOLOR="1", **{RUN_MARK: mark}, **(environment or {})),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    process.mark = mark
    return process


def _processes():
    """pid -> (parent pid, session id, command name) of every process now; a process gone meanwhile is left out."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry, "rb") as handle:
                stat = handle.read().decode("utf-8", "replace")
        except OSError:
            continue
        # comm is in parentheses and may hold spaces or parentheses: the fields after the last ")" are fixed.
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] != "Z":                        # a zombie can no longer act
            found[int(entry)] = (int(fields[1]), int(fields[3]), name)
    return found


def _marked(pid, mark):
    try:
        with open("/proc/%d/environ" % pid, "rb") as handle:
            return ("%s=%s" % (RUN_MARK, mark)).encode() in handle.read().split(b"\0")
    except OSError:
        return False


def run_members(process, mark):
    """The processes of a run: the playbook, its descendants, and every process with its RUN_MARK (those whose
    parent already exited: an ssh ControlPersist master daemonises, so its parent is not the run's)."""
    table = _processes()
    members = {process.pid} if process.pid in table else set()
    children = {}
    for pid, (parent, _session, _name) in table.items():
        children.setdefault(parent, []).append(pid)
    stack = list(members)
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in members:
                members.add(child)
                stack.append(child)
    members |= {pid for pid, (_parent, _session, name) in table.items()
                if name not in _NOT_THE_RUNS and _marked(pid, mark)}
    return {pid: table[pid] for pid in members if pid in table}


def kill_run(process):
    """Kill a background run and everything it started, as stopping an AWX job's execution environment does.

    os.killpg(process.pid) is not enough: ansible-core's workers call os.setsid() (WorkerProcess._detach, to leave
    the terminal), so each worker, and the module processes it starts, are in a session and process group of their
    own. A killpg of the playbook's group killed only the main process; a worker survived, orphaned, still able to
    finish its task. So the run is frozen (SIGSTOP: a stopped process forks nothing) until no new member appears,
    then killed. Returns the members that were outside the playbook's process group (what killpg missed)."""
    frozen, escaped = {}, {}
    while True:
        members = run_members(process, process.mark)
        new = {pid: info for pid, info in members.items() if pid not in frozen}
        if not new:
            break
        for pid, info in new.items():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
            frozen[pid] = info
            if pid != process.pid and info[1] != process.pid:
                escaped[pid] = info
    for pid in frozen:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    process.wait()
    return escaped


def survivors(process, seconds=10):
    """The processes of a killed run still alive after ``seconds`` (killed processes take a moment to go)."""
    deadline = time.monotonic() + seconds
    while True:
        left = run_members(process, process.mark)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def containers(names):
    """The containers of these hosts as podman sees them: name -> (state, started_at, labels)."""
    out = subprocess.run(["podman", "ps", "-a", "--filter", "label=gangplank.io/managed=true", "--format", "json"],
                         capture_output=True, text=True, check=True).stdout
    found = {}
    for item in json.loads(out or "[]"):
        labels = item.get("Labels") or {}
        if labels.get("gangplank.io/node") in names:
            found[item["Names"][0]] = (item["State"], item["StartedAt"], labels)
    return found


def task_results(report, name):
    for play in report["plays"]:
        for task in play["tasks"]:
            if task["task"]["name"].split(" : ", 1)[-1] == name:
                yield task["hosts"]


def summaries(report):
    """Per host: the deploy role's 'start ..., restart ..., stop ...' line (one task shows every host's)."""
    lines = {}
    for hosts in task_results(report, "Show what changes on each host"):
        for result in hosts.values():
            lines.update(result["msg"])
    return lines


def failures(report):
    messages = []
    for play in report["plays"]:
        for task in play["tasks"]:
            for result in task["hosts"].values():
                if result.get("failed"):
                    # A loop's failure is in its items.
                    items = [item for item in result.get("results") or [] if isinstance(item, dict) and item.get("failed")]
                    messages += [_failure_text(result)] + [_failure_text(item) for item in items]
    return messages


def _failure_text(result):
    """A failed result's message, with the end of a command's stderr where there is one."""
    text = result.get("msg", "")
    if result.get("stderr"):
        text += "\nstderr: " + result["stderr"][-1500:]
    return text


def get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.status, response.read().decode()


class Poller(threading.Thread):
    """Calls ``poll()`` every ``interval`` seconds, beside a playbook, until ``stop()`` (or the end of a ``with``).

    An exception in ``poll()`` ends the thread, and ``stop()`` raises it by name: a poller that died quietly would
    leave too few observations, and a test reading them would miss what it watches for.
    """

    def __init__(self, what, interval):
        super().__init__(daemon=True)
        self.what = what
        self.interval = interval
        self.stopping = threading.Event()
        self.error = None

    def poll(self):
        raise NotImplementedError

    def run(self):
        try:
            while not self.stopping.is_set():
                self.poll()
                time.sleep(self.interval)
        except Exception as error:  # pylint: disable=broad-exception-caught
            self.error = error

    def stop(self):
        self.stopping.set()
        self.join()
        if self.error is not None:
            raise AssertionError("the %s stopped: %r" % (self.what, self.error))

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
