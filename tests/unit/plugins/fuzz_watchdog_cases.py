# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hostile inputs for the GPU watchdog (its cgroup, process and state inputs) and for the MPS directories, as entry
points of the fuzz harness (fuzz_cases.ENTRY_POINTS; the same outcomes: ok, rejected, violation: ...).

- ``watchdog_cgroup``: /proc/<pid>/cgroup texts made of the engines' own cgroups and of forged ones (a user's systemd
  slice, another container's subtree, the engine's layout owned by another user), hierarchies of cgroup v1 and v2,
  then mutated (line breaks, control characters, case, repetition). A violation: an id named by no cgroup of the
  engine's layout that is root's, or one that is not the outermost.
- ``watchdog_processes``: a poll's processes from an instance, its MPS daemon and a local user (forged cgroups,
  processes named as MPS servers with and without the daemon as their parent), classified and decided, the state
  written and read back. A violation: a forged process charged to the instance or counted as a server, a genuine
  server not listed as one, a state that does not read back.
- ``watchdog_state``: the state file, mutated or hostile (deep nesting, huge, not UTF-8), read by parse_state, by
  status (the share table and the watchdog's lines) and by a watchdog that starts on it and polls. A violation: a
  line that is not one printable line, a watchdog that does not write a state that reads back.
- ``mps_dirs``: a real path of directories under /run (root's), each on the way a directory, missing, writable by
  others, another user's, a link, a file or a FIFO; the host command that makes the MPS directories is run on it. A
  violation: it succeeds through something another user could change, refuses a path of root's, or changes anything
  a link points to. It needs root (it makes directories of another user's, as the test suite runs: as root).
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import shutil
import stat
import subprocess
import tempfile

from ansible_collections.gangplank.platform.plugins.module_utils.deploy import mps
from ansible_collections.gangplank.platform.plugins.module_utils.watchdog.gpu_watchdog_state import StateError, parse_state
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.status import gpu_status, status_report

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
_SPEC = importlib.util.spec_from_file_location("gangplank_gpu_watchdog_fuzzed", os.path.join(
    ROOT, "roles", "deploy", "files", "gpu_watchdog.py"))
wd = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(wd)

GIB = 1 << 30
VICTIM, OTHER, DAEMON, NESTED = "a" * 64, "b" * 64, "d" * 64, "e" * 64
GPU = "GPU-11111111-2222-3333-4444-555555555555"
HIERARCHIES = (("0", ""), ("4", "memory"), ("9", "name=systemd"), ("2", "cpu,cpuacct"), ("7", "pids"))
CONTROLS = ("\n", "\r", "\x00", "\x1b[2J", "\u2028", "\ud800", "\t", "\x85", " ")


def _engine_cgroup(choose, cid):
    return choose(("/libpod_parent/libpod-%s" % cid, "/machine.slice/libpod-%s.scope" % cid, "/docker/%s" % cid,
                   "/system.slice/docker-%s.scope" % cid))


def _forged(choose, cid):
    """A cgroup path that names ``cid`` where its engine does not make it."""
    layout = _engine_cgroup(choose, cid)
    return choose((
        "/user.slice/user-1000.slice/user@1000.service/app.slice" + layout,
        "/user.slice/user-65534.slice/user@65534.service" + layout,
        "/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-%s.scope/container" % cid,
        "/system.slice/something.service" + layout,
        "/somewhere" + layout,
        "/machine.slice/libpod-%s" % cid, "/libpod_parent/libpod-%s.scope" % cid, "/docker-%s.scope" % cid,
        "/libpod_parent/libpod-conmon-%s" % cid, "/docker/%s" % cid.upper(), "/docker/%sX" % cid,
        "/docker/%s" % cid[:63], "/libpod_parent/libpod-%s.scope" % cid, "/./docker/%s" % cid, "//docker/%s" % cid,
    ))


def cgroup_case(choose):
    """(text, owners, allowed): the lines of a cgroup file, who owns each engine cgroup (path -> uid, None where it
    cannot be looked at, as a path not listed: a mutation may have made one), and the ids a correct reading may name.
    A forged path is refused by its place: its owner is never asked."""
    lines, owners, named = [], {}, {}
    for _line in range(choose((1, 1, 2, 3, 5))):
        number, controllers = choose(HIERARCHIES)
        kind = choose(("engine", "engine", "nested", "forged", "forged", "root", "foreign_owner"))
        cid = choose((VICTIM, VICTIM, OTHER))
        if kind in ("engine", "foreign_owner", "nested"):
            layout = _engine_cgroup(choose, cid)
            path = layout + choose(("", "", "/container", "/sub/x"))
            if kind == "nested":
                path = layout + _engine_cgroup(choose, NESTED) + choose(("", "/container"))
            uid = 0 if kind != "foreign_owner" else choose((1000, 65534))
            uid = choose((uid, uid, uid, None)) if kind != "foreign_owner" else uid
            owners.setdefault(layout, uid)
            named[layout] = cid
        elif kind == "forged":
            path = _forged(choose, cid)
        else:
            path = "/"
        lines.append("%s:%s:%s" % (number, controllers, path))
    allowed = {cid for layout, cid in named.items() if owners[layout] == 0}
    text = "\n".join(lines) + choose(("\n", "", "\n\n"))
    mutation = choose(("none", "none", "control", "repeat", "cut", "colon", "huge"))
    if mutation == "control":
        at = choose(range(len(text) + 1))
        text = text[:at] + choose(CONTROLS) + text[at:]
    elif mutation == "repeat":
        text = text * choose((2, 65, 300))
    elif mutation == "cut":
        text = text[:choose(range(len(text) + 1))]
    elif mutation == "colon":
        text = text.replace(":", choose(("", "::", ";")), 1)
    elif mutation == "huge":
        text = text + "0::/" + "x" * choose((100, 20000))
    return {"text": text, "owners": owners, "allowed": allowed}


def run_cgroup(case):
    """container_id with the owners of the case: an id only of a cgroup of the engine's layout that is root's."""
    text, owners = case["text"], case["owners"]
    cid, reason = wd.container_id(text, lambda controllers, path: owners.get(path))
    if not isinstance(reason, str) or len(reason) > 300 or not reason.isprintable():
        return "violation: reason not one bounded line: %r" % reason[:100]
    if cid is not None and cid not in case["allowed"]:
        return "violation: %s named from %r" % (cid[:12], text[:300])
    # Without owners (layout only), the same text names nothing more.
    plain, _reason = wd.container_id(text)
    if plain is not None and plain not in (VICTIM, OTHER) or (cid is not None and plain not in (cid, None)):
        return "violation: the layout alone named %r" % plain
    return "ok" if cid else "rejected"


# --- a poll's processes --------------------------------------------------------------------------------------------

CONFIG = {"version": 1, "node": "node1", "engine": "podman", "policy": "stop", "grace": 0, "interval": 1,
          "source": "simulated", "simulated_file": "/nonexistent/simulated.json", "state_file": "/nonexistent/state.json",
          "instances": {"infer-0": {"container": "node1-infer-0", "enforced": True, "grants": {GPU: GIB}}}}
INSTANCE_OF = {VICTIM: "infer-0"}
DAEMONS = {DAEMON: ("infer-0", "node1-infer-0")}
# Who a process is: (cgroup path, executable, parent kind); "charged" processes count against infer-0, "server" ones
# are listed apart, the others must do neither.
PROCESS_KINDS = {
    "instance": ("/libpod_parent/libpod-%s" % VICTIM, "python3", None, "charged"),
    "instance_server_name": ("/libpod_parent/libpod-%s" % VICTIM, wd.SERVER_EXE, "control_instance", "charged"),
    "daemon_other": ("/libpod_parent/libpod-%s" % DAEMON, "sh", None, "charged"),
    "daemon_server_wrong_parent": ("/libpod_parent/libpod-%s" % DAEMON, wd.SERVER_EXE, "shell_daemon", "charged"),
    "daemon_server_gone_parent": ("/libpod_parent/libpod-%s" % DAEMON, wd.SERVER_EXE, "gone", "charged"),
    "server": ("/libpod_parent/libpod-%s" % DAEMON, wd.SERVER_EXE, "control_daemon", "server"),
    "user_slice": ("/user.slice/user-1000.slice/user@1000.service/app.slice/libpod-%s.scope" % VICTIM, "python3", None, "free"),
    "user_slice_server": ("/user.slice/user-1000.slice/user@1000.service/app.slice/libpod-%s.scope" % DAEMON,
                          wd.SERVER_EXE, "control_user", "free"),
    "host_server": ("/user.slice/user-1000.slice/session-1.scope", wd.SERVER_EXE, "control_user", "free"),
    "nested_in_other": ("/libpod_parent/libpod-%s/libpod_parent/libpod-%s" % (OTHER, VICTIM), "python3", None, "free"),
    "foreign_owner": ("/docker/%s" % VICTIM, "python3", None, "free"),
    "foreign_owner_server": ("/docker/%s" % DAEMON, wd.SERVER_EXE, "control_foreign", "free"),
}
PARENTS = {"control_instance": ("/libpod_parent/libpod-%s" % VICTIM, wd.CONTROL_EXE),
           "shell_daemon": ("/libpod_parent/libpod-%s" % DAEMON, "sh"),
           "control_daemon": ("/libpod_parent/libpod-%s" % DAEMON, wd.CONTROL_EXE),
           "control_user": ("/user.slice/user-1000.slice/session-1.scope", wd.CONTROL_EXE),
           "control_foreign": ("/docker/%s" % DAEMON, wd.CONTROL_EXE)}
FOREIGN = {("", "/docker/%s" % VICTIM), ("", "/docker/%s" % DAEMON)}


def processes_case(choose):
    kinds = [choose(sorted(PROCESS_KINDS)) for _process in range(choose((1, 2, 4, 8, 30)))]
    sizes = [choose((0, 1, 66 << 20, GIB, 50 * GIB, None, wd.MAX_BYTES)) for _kind in kinds]
    return {"kinds": kinds, "sizes": sizes, "uuids": [choose((GPU, GPU, "GPU-other")) for _kind in kinds],
            "previous": choose(({}, {"infer-0": {"over_since": 1e30, "action": "stopped"}},
                                {"infer-0": {"over_since": -5, "action": None, "last_action": "x\n"}}))}


def run_processes(case):
    config = wd.parse_config(CONFIG)
    processes, cgroups, exes, parents, expect = [], {}, {}, {}, {}
    for index, kind in enumerate(case["kinds"]):
        pid, parent = 1000 + 2 * index, 1001 + 2 * index
        path, exe, parent_kind, expected = PROCESS_KINDS[kind]
        processes.append((case["uuids"][index], pid, case["sizes"][index]))
        cgroups[pid], exes[pid], expect[pid] = "0::%s\n4:memory:%s\n" % (path, path), exe, expected
        if parent_kind and parent_kind != "gone":
            parent_path, parent_exe = PARENTS[parent_kind]
            cgroups[parent], exes[parent] = "0::%s\n" % parent_path, parent_exe
        if parent_kind:
            parents[pid] = parent

    def owner(controllers, path):
        return 65534 if (controllers, path) in FOREIGN else 0

    seen = wd.classify(processes, cgroups, exes, INSTANCE_OF, config, DAEMONS, parents, owner)
    charged = set(seen["pids"].get("infer-0", []))
    servers = {entry["pid"] for entry in seen["servers"]}
    for pid, expected in expect.items():
        if (pid in charged) != (expected == "charged") or (pid in servers) != (expected == "server"):
            kind = case["kinds"][(pid - 1000) // 2]
            return "violation: %s process: charged %s, server %s" % (kind, pid in charged, pid in servers)
    tracking, actions = wd.decide(case["previous"], seen["used"], config, 1000.0)
    document = wd.state_document(config, "simulated (fuzz)", tracking, seen, 1.0, 1000.0, [], 0)
    try:
        parse_state(json.dumps(document), "state.json")
    except StateError as error:
        return "violation: the state written does not read back: %s" % error
    return "ok" if actions or charged else "rejected"


# --- the state file ------------------------------------------------------------------------------------------------

STATE = {"version": 1, "pid": 5, "started": 1.0, "last_poll": 1000.0, "source": "nvml", "policy": "warn", "grace": 30,
         "interval": 5, "error": "", "notes": ["n"], "seq": 2, "config_sha256": "",
         "bypasses": [{"pid": 7, "gpu": GPU, "used": GIB, "reason": "not in a container"}],
         "servers": [{"pid": 8, "gpu": GPU, "used": 66 << 20, "instance": "infer-0"}],
         "events": [{"seq": 1, "at": 10.0, "kind": "warn", "instance": "infer-0", "text": "infer-0 uses ..."},
                    {"seq": 2, "at": 11.0, "kind": "bypass", "instance": None, "text": "pid 7 ..."}],
         "instances": {"infer-0": {"container": "node1-infer-0", "enforced": True, "grants": {GPU: GIB}, "cores": {},
                                   "used": {GPU: 2 * GIB}, "pids": [9], "over_since": 900.0, "action": "warned",
                                   "action_at": 930.0, "last_action": "warned", "last_action_at": 930.0}}}
BINDINGS = {"infer-0": {"service": "infer", "gpus": [{"index": 0, "uuid": GPU, "memory": GIB}]}}
HOSTILE_NAMES = ("infer-0\nforged", "x\x1b[2J", "\u202egpu", "n" * 3000, "GPU-\r\n", "\ud800", "")


def state_case(choose):
    from ansible_collections.gangplank.platform.tests.unit.plugins import fuzz_cases  # the harness's hostile values
    kind = choose(("mutated", "mutated", "mutated", "text", "names"))
    bindings = BINDINGS
    if kind == "names":
        name, uuid = choose(HOSTILE_NAMES), choose(HOSTILE_NAMES)
        bindings = {name: {"service": "infer", "gpus": [{"index": 0, "uuid": uuid, "memory": GIB}]}}
    if kind == "text":
        text = choose((b"", b"\xff\xfe", b"NaN", b"[" * 100000, b"[" * 50000 + b"]" * 50000,
                       b'{"version": 1, "events": ' + b"[" * 3000 + b"]" * 3000 + b"}",
                       b'{"version": 1, "seq": ' + b"9" * 5000 + b"}", b'{"version": 1, "events": [{"a": ' * 400 + b"1",
                       b'{"a": "' + b"x" * (wd.MAX_STATE_BYTES + 1) + b'"}', b'{"version": 1, "notes": ["\\u0000\\n"]}'))
    else:
        state = fuzz_cases.mutate(STATE, choose, mutations=choose((1, 2)), pool=fuzz_cases.JSON_HOSTILE)
        try:
            text = json.dumps(state).encode("utf-8")
        except (TypeError, ValueError, RecursionError, UnicodeEncodeError):
            text = b'{"version": NaN}'
    return {"text": text, "bindings": bindings}


def _one_line(line, limit=4000):
    return isinstance(line, str) and line.isprintable() and len(line) <= limit


def run_state(case):
    text = case["text"]
    outcome = "ok"
    try:
        parse_state(text, "/s/state.json")
    except StateError as error:
        if not _one_line(str(error)):
            return "violation: error not one bounded line: %r" % str(error)[:200]
        outcome = "rejected"
    status = {"rows": [], "bound": {}, "gpus": []}
    status.update(gpu_status("n1", case["bindings"], {"content": base64.b64encode(text).decode()}, "/s/state.json", "mps",
                             now=1001.0))
    lines = status_report(["n1"], {"n1": status}, {})["gpu_lines"]
    if not all(_one_line(line) for line in lines):
        return "violation: a GPU line that is not one printable line: %r" % [line for line in lines if not _one_line(line)][0][:200]
    with tempfile.TemporaryDirectory() as directory:
        state_path = os.path.join(directory, "state.json")
        with open(state_path, "wb") as handle:
            handle.write(text)
        config = dict(CONFIG, simulated_file=os.path.join(directory, "simulated.json"), state_file=state_path)
        with open(os.path.join(directory, "config.json"), "w") as handle:
            json.dump(config, handle)
        watchdog = wd.Watchdog(os.path.join(directory, "config.json"), engine_lookup=lambda engine, node: ({}, {}),
                               proc=lambda pid, name: None, exe=lambda pid: "", clock=lambda: 1000.0,
                               owner=lambda controllers, path: 0)
        watchdog.poll()
        with open(state_path, "rb") as handle:
            written = handle.read()
    try:
        parse_state(written, "state.json")
    except StateError as error:
        return "violation: the watchdog's next state does not read back: %s" % error
    return outcome


# --- the MPS directories on a real file system ---------------------------------------------------------------------

# What each directory on the way is: a safe one is a directory of root's that nobody else can write.
SAFE_KINDS = ("dir", "dir", "dir", "missing")
UNSAFE_KINDS = ("dir777", "dir1777", "dir775", "other_owner", "link_dir", "link_dangling", "file", "fifo", "link_file")


def mps_dirs_case(choose):
    depth = choose((1, 2, 3))
    kinds = [choose(SAFE_KINDS + SAFE_KINDS + UNSAFE_KINDS) for _level in range(depth + 1)]
    return {"kinds": kinds, "inside": choose(("none", "none", "link_pipe", "file_log", "other_shm", "ready_link")),
            "setting": choose(("", "/tmp/mps", "/dev/shm/x", "/run/../etc", "/run/x\n", "/run/x,ro", "-x", "/run/ok/mps"))}


def _make(path, kind, target):
    if kind == "missing":
        return
    if kind.startswith("dir"):
        os.mkdir(path)
        os.chmod(path, {"dir": 0o755, "dir777": 0o777, "dir1777": 0o1777, "dir775": 0o775}[kind])
    elif kind == "other_owner":
        os.mkdir(path, 0o755)
        os.chown(path, 65534, 65534)
    elif kind == "link_dir":
        os.symlink(target, path)
    elif kind == "link_dangling":
        os.symlink(os.path.join(target, "nowhere"), path)
    elif kind == "link_file":
        os.symlink(os.path.join(target, "file"), path)
    elif kind == "file":
        with open(path, "w") as handle:
            handle.write("x")
    elif kind == "fifo":
        os.mkfifo(path)


def _snapshot(directory):
    return sorted((name, stat.S_IMODE(os.lstat(os.path.join(directory, name)).st_mode)) for name in os.listdir(directory)) + [
        ("", stat.S_IMODE(os.lstat(directory).st_mode))]


def run_mps_dirs(case):
    try:
        mps.check_settings("", case["setting"], "", 60)
    except mps.MpsError as error:
        if not _one_line(str(error)):
            return "violation: error not one bounded line: %r" % str(error)[:200]
    base = tempfile.mkdtemp(prefix="gangplank-fuzz-mps-", dir="/run")
    try:
        target = os.path.join(base, "target")
        os.mkdir(target, 0o755)
        with open(os.path.join(target, "file"), "w") as handle:
            handle.write("root's file\n")
        before = _snapshot(target)
        path, safe, missing = os.path.join(base, "root"), True, False
        os.mkdir(path, 0o755)
        kinds = case["kinds"]
        for level, kind in enumerate(kinds):
            path = os.path.join(path, "c%d" % level)
            if missing:
                kind = "missing"
            _make(path, kind, target)
            # Nothing is made below a link, a file or a FIFO (the command must stop there).
            missing = missing or kind == "missing" or not (kind.startswith("dir") or kind == "other_owner")
            last = level == len(kinds) - 1
            # The instance's own directory may be open (root's): it is made private. Everything else must be safe.
            if kind not in SAFE_KINDS and not (last and kind in ("dir777", "dir1777", "dir775")):
                safe = False
        inside = case["inside"]
        if safe and not missing and inside != "none":
            name = {"link_pipe": "pipe", "file_log": "log", "other_shm": "shm", "ready_link": "log"}[inside]
            if inside == "link_pipe":
                os.symlink(target, os.path.join(path, name))
                safe = False
            elif inside == "file_log":
                with open(os.path.join(path, name), "w") as handle:
                    handle.write("x")
                safe = False
            elif inside == "other_shm":
                os.mkdir(os.path.join(path, name), 0o755)
                os.chown(os.path.join(path, name), 65534, 65534)
                safe = False
            else:
                os.mkdir(os.path.join(path, "log"), 0o1777)
                os.symlink(os.path.join(target, "file"), os.path.join(path, "log", "ready"))
        spec = {"mps_daemon": {"dir": path, "ready": path + "/log/ready"}}
        done = subprocess.run(["sh", "-c", mps.prepare_command(spec)], capture_output=True, text=True, timeout=30,
                              check=False)
        if _snapshot(target) != before or not os.path.exists(os.path.join(target, "file")):
            return "violation: %s changed what a link points to" % kinds
        if done.returncode == 0 and not safe:
            return "violation: made the MPS directory through %s (inside: %s)" % (kinds, inside)
        if done.returncode != 0 and safe:
            return "violation: refused a path of root's %s (inside: %s): %s" % (kinds, inside, done.stdout.strip()[:200])
        if done.returncode != 0 and not _one_line(done.stdout.strip() or "x", 10000):
            return "violation: the refusal is not one line: %r" % done.stdout[:200]
        if done.returncode == 0:
            modes = [stat.S_IMODE(os.lstat(os.path.join(path, name)).st_mode) for name in ("pipe", "shm", "log")]
            if stat.S_IMODE(os.lstat(path).st_mode) != 0o700 or modes != [0o1777] * 3:
                return "violation: modes %o %s" % (stat.S_IMODE(os.lstat(path).st_mode), modes)
            return "ok"
        return "rejected"
    finally:
        shutil.rmtree(base, ignore_errors=True)


ENTRY_POINTS = {
    "watchdog_cgroup": (cgroup_case, run_cgroup),
    "watchdog_processes": (processes_case, run_processes),
    "watchdog_state": (state_case, run_state),
    "mps_dirs": (mps_dirs_case, run_mps_dirs),
}
