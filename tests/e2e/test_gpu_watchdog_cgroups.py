# -*- coding: utf-8 -*-
"""The GPU watchdog against this machine's real cgroups, a real Podman container and real processes of an unprivileged
user (uid 65534): a process in a cgroup named like the container's, but made where a user can make one (its own systemd
slice, delegated to it) or owned by the user (the engine's layout, delegated), is neither charged to the container's
instance nor able to have it stopped, with the policy stop and no grace; a process of that user named as an MPS server is
reported as a bypass. A root process put into the container's own cgroup is charged to it (the same run, the same
watchdog: the test can fail).

The watchdog is the deploy role's program, run as a process (``--once``) with a simulated NVML source that lists those
pids; the pids, the cgroups, the engine's labels and the stop are real. Needs root and a cgroup v2 hierarchy (pure or
hybrid). Run under the e2e lock: flock .build/bed.lock pytest tests/e2e/test_gpu_watchdog_cgroups.py
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROGRAM = os.path.join(ROOT, "roles", "deploy", "files", "gpu_watchdog.py")
IMAGE = "localhost/gangplank-cgroup-test:1"
NODE, INSTANCE = "cg-n1", "infer-0"
CONTAINER = "%s-%s" % (NODE, INSTANCE)
GPU = "GPU-sim-cg-n1-0"
GIB = 1 << 30
NOBODY = 65534
# Podman on a machine like this one (TESTBED.md): runc, cgroupfs, no ulimits.
CONTAINERS_CONF = '[containers]\ndefault_ulimits = []\n[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\n'


def unified_mount():
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            left, _sep, right = line.partition(" - ")
            if right.split(" ")[0] == "cgroup2" and left.split(" ")[3] == "/":
                return left.split(" ")[4]
    return None


def podman(environment, *argv, check=True):
    done = subprocess.run(["podman", *argv], capture_output=True, text=True, env=environment, timeout=120, check=False)
    if check and done.returncode != 0:
        pytest.fail("podman %s: %s" % (" ".join(argv[:2]), done.stderr.strip()[-500:]))
    return done


@pytest.fixture(scope="module")
def machine(tmp_path_factory):
    if os.geteuid() != 0 or shutil.which("podman") is None or not os.path.exists("/bin/busybox"):
        pytest.fail("needs root, podman and /bin/busybox (source scripts/lib/testbed.sh first; scripts/test.sh does)")
    unified = unified_mount()
    if unified is None:
        pytest.fail("no cgroup v2 hierarchy is mounted here")
    base = tmp_path_factory.mktemp("cgroups")
    (base / "containers.conf").write_text(CONTAINERS_CONF)
    environment = dict(os.environ, CONTAINERS_CONF=str(base / "containers.conf"))
    with tarfile.open(base / "rootfs.tar", "w") as archive:
        archive.add("/bin/busybox", arcname="bin/busybox")
    podman(environment, "import", "-q", str(base / "rootfs.tar"), IMAGE)
    podman(environment, "rm", "-f", "-t", "0", CONTAINER, check=False)
    podman(environment, "run", "-d", "--name", CONTAINER, "--label", "gangplank.io/node=" + NODE,
           "--label", "gangplank.io/instance=" + INSTANCE, IMAGE, "/bin/busybox", "sleep", "600")
    victim = podman(environment, "inspect", "-f", "{{.Id}}", CONTAINER).stdout.strip()
    made, processes = [], []
    yield {"base": base, "env": environment, "unified": unified, "victim": victim, "made": made, "processes": processes}
    for process in processes:
        process.kill()
        process.wait()
    time.sleep(0.2)
    for path in reversed(made):
        try:
            os.rmdir(path)
        except OSError:
            pass
    podman(environment, "rm", "-f", "-t", "0", CONTAINER, check=False)
    podman(environment, "rmi", "-f", IMAGE, check=False)


def make_cgroup(machine, relative, owner_from=None):
    """The cgroup ``relative`` in the v2 hierarchy, made by root; from ``owner_from`` down, delegated to uid 65534 as
    systemd delegates a user's slice (the directories and their cgroup.procs are the user's)."""
    path = machine["unified"]
    parts = relative.strip("/").split("/")
    first = parts.index(owner_from) if owner_from is not None else len(parts)
    for position, part in enumerate(parts):
        path = os.path.join(path, part)
        if not os.path.isdir(path):
            os.mkdir(path)
            machine["made"].append(path)
        if position >= first:
            for entry in (path, os.path.join(path, "cgroup.procs")):
                os.chown(entry, NOBODY, NOBODY)
    return path


def as_nobody(machine, delegated, inner, program=("sleep", "600")):
    """A process of uid 65534 that root puts into its delegated cgroup (as systemd does for a user's service) and that
    then moves itself into ``inner``, a cgroup below, by itself; returns it once it is there."""
    script = 'read go; echo $$ > "$1/cgroup.procs" || exit 9; echo moved; shift; exec "$@"'
    process = subprocess.Popen(["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups", "sh", "-c",
                                script, "sh", inner] + list(program),
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    machine["processes"].append(process)
    with open(os.path.join(delegated, "cgroup.procs"), "w") as handle:
        handle.write(str(process.pid))
    process.stdin.write("go\n")
    process.stdin.flush()
    assert process.stdout.readline().strip() == "moved", "the user's process could not move itself into %s" % inner
    return process


def run_watchdog(machine, policy, processes):
    directory = machine["base"]
    config = {"version": 1, "node": NODE, "engine": "podman", "policy": policy, "grace": 0, "interval": 1,
              "source": "simulated", "simulated_file": str(directory / "simulated.json"),
              "state_file": str(directory / "state.json"),
              "instances": {INSTANCE: {"container": CONTAINER, "enforced": True, "grants": {GPU: GIB}}}}
    (directory / "config.json").write_text(json.dumps(config))
    (directory / "simulated.json").write_text(json.dumps(
        {"processes": [{"gpu": GPU, "pid": pid, "used_memory": 50 * GIB} for pid in processes]}))
    done = subprocess.run([sys.executable, PROGRAM, str(directory / "config.json"), "--once"], capture_output=True,
                          text=True, env=machine["env"], timeout=120, check=False)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    return json.loads((directory / "state.json").read_text())


def running(machine):
    return podman(machine["env"], "inspect", "-f", "{{.State.Running}}", CONTAINER).stdout.strip() == "true"


def proc_cgroup(pid):
    with open("/proc/%d/cgroup" % pid) as handle:
        return handle.read()


def test_a_users_process_in_a_cgroup_named_like_the_container_is_neither_charged_nor_able_to_stop_it(machine):
    victim = machine["victim"]
    # Its own systemd slice, delegated to it: a user can name a cgroup there after any container (ids are in /proc).
    slice_top = "user.slice/user-%d.slice/user@%d.service" % (NOBODY, NOBODY)
    delegated = make_cgroup(machine, slice_top, owner_from="user@%d.service" % NOBODY)
    inner = make_cgroup(machine, slice_top + "/app.slice/libpod-%s.scope" % victim, owner_from="user@%d.service" % NOBODY)
    in_slice = as_nobody(machine, delegated, inner)
    # The engine's own layout, but made for (delegated to) the user: the directory is not root's.
    layout = make_cgroup(machine, "docker/%s" % victim, owner_from=victim)
    outside = make_cgroup(machine, "docker/%s/sub" % victim, owner_from=victim)
    in_layout = as_nobody(machine, layout, outside)
    # A process of the user named as an MPS server, in its own slice.
    tools = tempfile.mkdtemp(prefix="gangplank-cgroup-test-")
    os.chmod(tools, 0o755)
    shutil.copy(shutil.which("sleep"), os.path.join(tools, "nvidia-cuda-mps-server"))
    server = as_nobody(machine, delegated, inner, (os.path.join(tools, "nvidia-cuda-mps-server"), "600"))
    for process, place in ((in_slice, "/%s/app.slice/libpod-%s.scope" % (slice_top, victim)), (in_layout, "/docker/%s/sub" % victim)):
        assert place in proc_cgroup(process.pid)

    state = run_watchdog(machine, "stop", [in_slice.pid, in_layout.pid, server.pid])
    assert state["instances"][INSTANCE]["used"] == {} and state["instances"][INSTANCE]["action"] is None, state
    assert running(machine)
    reasons = {entry["pid"]: entry["reason"] for entry in state["bypasses"]}
    assert set(reasons) == {in_slice.pid, in_layout.pid, server.pid}, state["bypasses"]
    assert reasons[in_slice.pid] == "not in a container"
    assert reasons[in_layout.pid] == "in a cgroup named like container %s's that uid %d owns, not the engine" % (victim[:12], NOBODY)
    assert reasons[server.pid].startswith("named nvidia-cuda-mps-server, not started by its instance's MPS daemon")
    assert state["servers"] == [] and [event["kind"] for event in state["events"]] == ["bypass"] * 3
    shutil.rmtree(tools, ignore_errors=True)


def test_a_root_process_in_the_containers_own_cgroup_is_charged_to_it(machine):
    """The control: the same watchdog charges a process the engine's cgroup holds."""
    victim = machine["victim"]
    process = subprocess.Popen(["sleep", "600"])
    machine["processes"].append(process)
    own = os.path.join(machine["unified"], "libpod_parent", "libpod-%s" % victim)
    assert os.path.isdir(own), "the container's cgroup is not where Podman's cgroupfs manager makes it: %s" % own
    with open(os.path.join(own, "cgroup.procs"), "w") as handle:
        handle.write(str(process.pid))
    # On a hybrid machine, the cgroup v1 hierarchies too, where the kernel lets root move it (a line the container's
    # cgroup does not name is left aside by the watchdog).
    for name in sorted(os.listdir("/sys/fs/cgroup")):
        hierarchy = os.path.join("/sys/fs/cgroup", name, "libpod_parent", "libpod-" + victim)
        if os.path.join("/sys/fs/cgroup", name) != machine["unified"] and os.path.isdir(hierarchy):
            try:
                with open(os.path.join(hierarchy, "cgroup.procs"), "w") as handle:
                    handle.write(str(process.pid))
            except OSError:
                pass
    assert "/libpod_parent/libpod-%s" % victim in proc_cgroup(process.pid)
    state = run_watchdog(machine, "warn", [process.pid])
    assert state["instances"][INSTANCE]["used"] == {GPU: 50 * GIB} and state["instances"][INSTANCE]["action"] == "warned", state
    assert state["bypasses"] == [] and running(machine)
