# -*- coding: utf-8 -*-
"""The GPU watchdog program (roles/deploy/files/gpu_watchdog.py): its decisions on fake NVML process lists and fake
/proc contents, its config and state, and its loop with a fake clock, engine and simulated source."""

from __future__ import annotations

import importlib.util
import json
import os

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils.watchdog.gpu_watchdog_state import parse_state

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
PROGRAM = os.path.join(ROOT, "roles", "deploy", "files", "gpu_watchdog.py")
_spec = importlib.util.spec_from_file_location("gangplank_gpu_watchdog_program", PROGRAM)
wd = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(wd)

GIB = 1 << 30
ID_A, ID_B, ID_SIDE, ID_X = ("a" * 64), ("b" * 64), ("c" * 64), ("d" * 64)
GPU = "GPU-11111111-2222-3333-4444-555555555555"
GPU2 = "GPU-sim-node1-1"


def config(policy="warn", grace=30, **extra):
    data = {"version": 1, "node": "node1", "engine": "podman", "policy": policy, "grace": grace, "interval": 5,
            "source": "simulated", "simulated_file": "/tmp/none.json", "state_file": "/tmp/state.json",
            "instances": {"infer-0": {"container": "node1-infer-0", "enforced": True, "grants": {GPU: 20 * GIB},
                                      "cores": {GPU: 25}},
                          "infer-1": {"container": "node1-infer-1", "enforced": False, "grants": {GPU: 8 * GIB}}}}
    data.update(extra)
    return wd.parse_config(data)


def cgroup_v1(path):
    return "".join("%d:%s:%s\n" % (number, name, path) for number, name in ((9, "name=systemd"), (4, "memory"), (1, "cpu"))) + \
        "0::%s\n" % path


INSTANCE_OF = {ID_A: "infer-0", ID_B: "infer-1", ID_SIDE: "infer-0"}
ID_MPS, ID_MPS_B = ("f" * 64), ("9" * 64)
DAEMONS = {ID_MPS: ("infer-0", "node1-infer-0"), ID_MPS_B: ("infer-1", "node1-infer-1")}


# --- cgroups ---

@pytest.mark.parametrize("text", [
    cgroup_v1("/libpod_parent/libpod-%s" % ID_A),                              # podman, cgroupfs (this bed)
    "0::/machine.slice/libpod-%s.scope/container\n" % ID_A,                      # podman, systemd, cgroup v2
    "0::/system.slice/docker-%s.scope\n" % ID_A,                                 # docker, systemd
    "12:memory:/docker/%s\n0::/docker/%s\n" % (ID_A, ID_A),                      # docker, cgroupfs
    "0::/libpod_parent/libpod-%s/libpod_parent/libpod-%s\n" % (ID_A, ID_X),      # nested engines: the outermost
    "0::/machine.slice/libpod-%s.scope/container/docker/%s\n" % (ID_A, ID_X),  # an engine inside the container
    "0::/docker/%s/system.slice/docker-%s.scope\n" % (ID_A, ID_X),
])
def test_the_container_id_is_read_from_every_engines_cgroup_layout(text):
    assert wd.container_id(text) == (ID_A, "")
    assert wd.container_id(text, lambda controllers, path: 0) == (ID_A, "")


@pytest.mark.parametrize("path", [
    # A user's own systemd slice: any user can make these under its user@.service.
    "/user.slice/user-1000.slice/user@1000.service/app.slice/libpod-%s.scope" % ID_A,
    "/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-%s.scope/container" % ID_A,
    "/user.slice/user-1000.slice/user@1000.service/docker/%s" % ID_A,
    # Another container's subtree (a container that is not an instance, or that delegates cgroups to its processes).
    "/somewhere/libpod_parent/libpod-%s" % ID_A,
    "/system.slice/something.service/machine.slice/libpod-%s.scope" % ID_A,
    "/machine.slice/machine-1.scope/docker/%s" % ID_A,
    "/libpod_parent/libpod-conmon-%s/libpod-%s" % (ID_X, ID_A),
    "/docker-%s.scope" % ID_A,
    "/machine.slice/libpod-%s" % ID_A,                 # the systemd layout without its .scope
    "/libpod_parent/libpod-%s.scope" % ID_A,
    "/system.slice/libpod-%s.scope" % ID_A,
])
def test_only_a_cgroup_the_engine_makes_names_a_container(path):
    for text in ("0::%s\n" % path, cgroup_v1(path)):
        assert wd.container_id(text) == (None, "not in a container")


def test_a_cgroup_of_the_engines_layout_not_owned_by_root_names_no_container():
    owners = {"/docker/%s" % ID_A: 65534, "/libpod_parent/libpod-%s" % ID_B: 0}
    asked = []

    def owner(controllers, path):
        asked.append((controllers, path))
        return owners.get(path)

    assert wd.container_id("0::/docker/%s/sub\n" % ID_A, owner) == (
        None, "in a cgroup named like container aaaaaaaaaaaa's that uid 65534 owns, not the engine")
    assert asked == [("", "/docker/%s" % ID_A)]
    assert wd.container_id("4:memory:/libpod_parent/libpod-%s\n0::/\n" % ID_B, owner) == (ID_B, "")
    # A hierarchy that cannot be looked at does not count; when none can, the process is in no container.
    assert wd.container_id("4:memory:/libpod_parent/libpod-%s\n" % ID_X, owner) == (None, "not in a container")
    assert wd.container_id("4:memory:/libpod_parent/libpod-%s\n0::/libpod_parent/libpod-%s\n" % (ID_X, ID_B), owner) == (ID_B, "")


def test_cgroup_owner_reads_the_mounts_and_each_directory_on_the_way(tmp_path):
    mountinfo = ("35 31 0:32 / %s/memory rw,relatime - cgroup cgroup rw,memory\n"
                 "40 31 0:37 / %s/sys\\040temd rw,relatime - cgroup cgroup rw,xattr,name=systemd\n"
                 "41 31 0:38 / %s/unified rw,relatime - cgroup2 cgroup2 rw\n"
                 "42 31 0:39 /sub %s/elsewhere rw,relatime - cgroup cgroup rw,cpu\n" % ((tmp_path,) * 4))
    mounts = wd.cgroup_mounts(mountinfo)
    assert mounts == {frozenset({"memory"}): "%s/memory" % tmp_path, frozenset({"xattr", "name=systemd"}): "%s/sys temd" % tmp_path,
                      "": "%s/unified" % tmp_path}
    for hierarchy in ("memory", "sys temd", "unified"):
        (tmp_path / hierarchy / "docker" / ID_A).mkdir(parents=True)
    os.chown(tmp_path / "unified" / "docker", 65534, 65534)
    path = "/docker/%s" % ID_A
    if os.geteuid() == 0:
        assert wd.cgroup_owner("memory", path, mounts) == 0
        assert wd.cgroup_owner("name=systemd", path, mounts) == 0
        assert wd.cgroup_owner("", path, mounts) == 65534
    assert wd.cgroup_owner("cpu", path, mounts) is None                     # mounted below its root only
    assert wd.cgroup_owner("memory", "/docker/%s" % ID_B, mounts) is None    # gone
    assert wd.cgroup_owner("memory", "/docker/../docker/%s" % ID_A, mounts) is None
    (tmp_path / "memory" / "link").symlink_to(tmp_path / "memory" / "docker")
    assert wd.cgroup_owner("memory", "/link/%s" % ID_A, mounts) is None


@pytest.mark.parametrize("text, reason", [
    ("0::/\n", "not in a container"),
    ("0::/user.slice/user-0.slice/session-1.scope\n", "not in a container"),
    ("0::/libpod_parent/conmon\n0::/machine.slice/libpod-conmon-%s.scope\n" % ID_A, "not in a container"),
    ("0::/somewhere/%s\n" % ID_A, "not in a container"),                       # a bare id under an unknown parent
    ("0::/libpod_parent/libpod-%sX\n" % ID_A, "not in a container"),          # not the whole component
    ("0::/docker/%s\n" % ID_A.upper(), "not in a container"),
    ("4:memory:/docker/%s\n0::/docker/%s\n" % (ID_A, ID_B), "cgroup lines name different containers"),
    ("garbage without colons\n", "cgroup line not in the form hierarchy:controllers:/path"),
    ("0::relative/path\n", "cgroup line not in the form hierarchy:controllers:/path"),
    ("0::/docker/%s\n" % ID_A * 5000, "cgroup file larger than expected"),
    ("0::/\n" * 100, "cgroup file larger than expected"),
    (None, "no cgroup"),
])
def test_unknown_and_hostile_cgroup_formats_map_to_no_container(text, reason):
    assert wd.container_id(text) == (None, reason)


# --- processes from outside ---

def test_hostile_process_entries_are_bounded_and_checked():
    entries = [{"gpu": GPU, "pid": 10, "used_memory": 2 ** 64 - 1},                  # NVML's "not available"
               {"gpu": GPU, "pid": 11, "used_memory": -5}, {"gpu": GPU, "pid": 12, "used_memory": None},
               {"gpu": GPU, "pid": 13, "used_memory": True}, {"gpu": GPU, "pid": 14, "used_memory": GIB},
               {"gpu": GPU, "pid": 0, "used_memory": 1}, {"gpu": GPU, "pid": 2 ** 40, "used_memory": 1},
               {"gpu": GPU, "pid": "15", "used_memory": 1}, {"gpu": "bad uuid\n", "pid": 16, "used_memory": 1},
               "not an object"]
    found, notes = wd.checked_processes(entries)
    assert found == [(GPU, 10, None), (GPU, 11, None), (GPU, 12, None), (GPU, 13, None), (GPU, 14, GIB)]
    assert len(notes) == 3 and all("left out" in note for note in notes)
    many, notes = wd.checked_processes([{"gpu": GPU, "pid": pid, "used_memory": 1} for pid in range(1, 5000)])
    assert len(many) == wd.MAX_PROCESSES and notes == ["more than 4096 processes on %s: the rest were left out" % GPU]


def test_the_simulated_source_reads_its_file_and_names_itself_as_simulated(tmp_path):
    path = tmp_path / "simulated.json"
    source = wd.SimulatedSource(str(path))
    assert source.processes() == ([], []) and source.name.startswith("simulated (")
    path.write_text(json.dumps({"processes": [{"gpu": GPU, "pid": 42, "used_memory": GIB}]}))
    assert source.processes() == ([(GPU, 42, GIB)], [])
    for text, expected in (("[]", "is not a JSON object"), ("{", "is not JSON"), ('{"processes": 3}', "expected a list"),
                           ("x" * (wd.MAX_SIMULATED_BYTES + 1), "is larger than")):
        path.write_text(text)
        with pytest.raises(wd.WatchdogError, match=expected) as raised:
            source.processes()
        assert str(path) in str(raised.value)


class FakeNvml:
    def __init__(self, processes, fail=None):
        self.processes, self.fail, self.inits = processes, fail, 0

    def nvmlInit(self):
        self.inits += 1

    def nvmlDeviceGetCount(self):
        if self.fail:
            raise self.fail
        return len(self.processes)

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetUUID(self, handle):
        return list(self.processes)[handle].encode()     # old pynvml returns bytes

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return [type("P", (), {"pid": pid, "usedGpuMemory": used}) for pid, used in self.processes[list(self.processes)[handle]]]


def test_the_nvml_source_lists_every_devices_compute_processes_and_survives_nvml_errors():
    nvml = FakeNvml({GPU: [(5, GIB), (6, None)], GPU2: [(7, 2 * GIB)]})
    source = wd.NvmlSource(nvml)
    assert source.processes() == ([(GPU, 5, GIB), (GPU, 6, None), (GPU2, 7, 2 * GIB)], []) and source.name == "nvml"
    nvml.fail = RuntimeError("Unknown Error")
    with pytest.raises(wd.WatchdogError, match="NVML: Unknown Error"):
        source.processes()
    nvml.fail = None
    assert source.processes()[0] and nvml.inits == 2          # initialised again after a failure


# --- decisions ---

def test_classify_sums_each_instances_memory_and_names_bypasses_and_servers():
    processes = [(GPU, 100, 4 * GIB), (GPU, 101, GIB), (GPU, 102, 3 * GIB), (GPU, 103, 12 * GIB), (GPU, 104, 66 << 20),
                 (GPU, 105, GIB), (GPU, 106, None), (GPU, 107, 5), (GPU, 108, 1)]
    cgroups = {100: cgroup_v1("/libpod_parent/libpod-%s" % ID_A), 101: "0::/libpod_parent/libpod-%s\n" % ID_SIDE,
               102: "0::/libpod_parent/libpod-%s\n" % ID_B, 103: "0::/user.slice\n",
               104: "0::/libpod_parent/libpod-%s\n" % ID_A, 105: "0::/libpod_parent/libpod-%s\n" % ID_X,
               106: "0::/libpod_parent/libpod-%s\n" % ID_A, 107: None, 108: "0::/docker/%s\n" % ID_A}
    cgroups[104] = cgroups[90] = "0::/libpod_parent/libpod-%s\n" % ID_MPS
    exes = {104: "nvidia-cuda-mps-server", 90: "nvidia-cuda-mps-control"}
    instance_of = dict(INSTANCE_OF, **{"e" * 64: "web-0"})
    cgroups[108] = "0::/docker/%s\n" % ("e" * 64)
    seen = wd.classify(processes, cgroups, exes, instance_of, config(), DAEMONS, {104: 90})
    assert seen["used"] == {"infer-0": {GPU: 5 * GIB}, "infer-1": {GPU: 3 * GIB}}     # pid 106's unknown size counts 0
    assert seen["pids"] == {"infer-0": [100, 101, 106], "infer-1": [102]}
    assert seen["servers"] == [{"pid": 104, "gpu": GPU, "used": 66 << 20, "instance": "infer-0"}]
    assert [(entry["pid"], entry["reason"]) for entry in seen["bypasses"]] == [
        (103, "not in a container"), (105, "in container dddddddddddd, which is no gangplank instance of this node"),
        (108, "in instance web-0, which holds no GPU grant here")]
    assert seen["unknown_ids"] == [ID_X]


def test_within_the_grant_nothing_happens():
    tracking, actions = wd.decide({}, {"infer-0": {GPU: 20 * GIB}}, config(), now=1000)
    assert actions == [] and tracking["infer-0"] == {"over_since": None, "action": None, "action_at": None,
                                                     "last_action": None, "last_action_at": None}


def test_over_for_less_than_the_grace_period_is_tracked_but_not_acted_on():
    tracking, actions = wd.decide({}, {"infer-0": {GPU: 20 * GIB + 1}}, config(), now=1000)
    assert actions == [] and tracking["infer-0"]["over_since"] == 1000
    tracking, actions = wd.decide(tracking, {"infer-0": {GPU: 21 * GIB}}, config(), now=1029.9)
    assert actions == [] and tracking["infer-0"]["over_since"] == 1000
    # Back within the grant: the episode ends, and the next one starts its own grace period.
    tracking, actions = wd.decide(tracking, {"infer-0": {GPU: GIB}}, config(), now=1031)
    assert actions == [] and tracking["infer-0"]["over_since"] is None
    tracking, actions = wd.decide(tracking, {"infer-0": {GPU: 21 * GIB}}, config(), now=1040)
    assert actions == [] and tracking["infer-0"]["over_since"] == 1040


@pytest.mark.parametrize("policy, action, recorded", [("warn", "warn", "warned"), ("stop", "stop", "stopped")])
def test_over_past_the_grace_period_acts_once_per_episode(policy, action, recorded):
    tracking, _actions = wd.decide({}, {"infer-1": {GPU: 9 * GIB}}, config(policy), now=1000)
    tracking, actions = wd.decide(tracking, {"infer-1": {GPU: 9 * GIB}}, config(policy), now=1030)
    assert [(entry["instance"], entry["action"], entry["over"]) for entry in actions] == [("infer-1", action, [GPU])]
    assert tracking["infer-1"]["action"] == recorded and tracking["infer-1"]["action_at"] == 1030
    tracking, actions = wd.decide(tracking, {"infer-1": {GPU: 9 * GIB}}, config(policy), now=1060)
    assert actions == [] and tracking["infer-1"]["action"] == recorded
    # Its process gone (a stopped container has none): the episode ends, the last action stays known.
    tracking, actions = wd.decide(tracking, {}, config(policy), now=1070)
    assert actions == [] and tracking["infer-1"]["action"] is None
    assert (tracking["infer-1"]["last_action"], tracking["infer-1"]["last_action_at"]) == (recorded, 1030)


def test_memory_on_a_gpu_without_a_grant_is_over_and_a_zero_grace_acts_at_once():
    _tracking, actions = wd.decide({}, {"infer-0": {GPU2: 1}}, config(grace=0), now=5)
    assert [entry["over"] for entry in actions] == [[GPU2]]


def test_a_previous_over_since_from_the_future_is_not_trusted():
    tracking, actions = wd.decide({"infer-0": {"over_since": 10 ** 10}}, {"infer-0": {GPU: 30 * GIB}}, config(), now=100)
    assert tracking["infer-0"]["over_since"] == 100 and actions == []


# --- config ---

@pytest.mark.parametrize("change, message", [
    ({"version": 2}, "version: expected 1"),
    ({"policy": "kill"}, "policy: expected one of warn, stop"),
    ({"grace": -1}, "grace: expected a number from 0 to 86400"),
    ({"grace": True}, "grace: expected a number"),
    ({"node": "../x"}, "node: expected a name of plain characters"),
    ({"state_file": "relative"}, "state_file: expected an absolute path"),
    ({"surprise": 1}, "unknown key surprise"),
    ({"instances": {"i": {"container": "c", "enforced": True, "grants": {GPU: 2 ** 60}}}}, "grants.%s" % GPU),
    ({"instances": {"i": {"container": "c", "enforced": True, "grants": {}}}}, "grants: expected an object of 1 to 64"),
    ({"instances": {"i": {"container": "c\n", "enforced": True, "grants": {GPU: 1}}}}, "container: expected a name"),
    ({"instances": {"i": {"container": "c", "enforced": "yes", "grants": {GPU: 1}}}}, "enforced: expected true or false"),
    ({"instances": {"i": {"container": "c", "enforced": True, "grants": {GPU: 1}, "cores": {GPU: 101}}}}, "cores"),
    ({"source": "simulated", "simulated_file": ""}, "simulated_file: required"),
])
def test_a_config_that_is_not_one_is_an_error_naming_the_file_and_key(change, message):
    data = {"version": 1, "node": "n", "engine": "podman", "policy": "warn", "grace": 30, "interval": 5,
            "source": "nvml", "state_file": "/s.json", "instances": {}}
    data.update(change)
    with pytest.raises(wd.WatchdogError, match="^/etc/w.json: .*" + message.replace("(", r"\(").replace(".", r"\.")):
        wd.parse_config(data, "/etc/w.json")


def test_a_config_file_that_is_not_json_names_the_file(tmp_path):
    path = tmp_path / "config.json"
    path.write_text("{not json")
    with pytest.raises(wd.WatchdogError, match="the watchdog config %s is not JSON" % path):
        wd.load_config(str(path))
    assert wd.main([str(path), "--once"]) == 1


def test_the_engines_answer_is_read_whole_line_by_line():
    text = "\n".join([ID_A + " node1 infer-0", ID_B + " node2 infer-1", ID_X + " node1 ", "short node1 infer-2",
                      ID_SIDE + " node1 infer-0 extra field", ID_SIDE.upper() + " node1 infer-0", "e" * 64 + " node1 infer-3"])
    assert wd.parse_engine_containers(text, "node1") == ({ID_A: "infer-0", "e" * 64: "infer-3"}, {})
    text = "\n".join([ID_A + " node1 infer-0 ", ID_MPS + " node1 infer-0 node1-infer-0", ID_X + " node1 infer-0 bad\tname",
                      ID_B + " node1 infer-1 node1-infer-1 extra"])
    assert wd.parse_engine_containers(text, "node1") == ({ID_A: "infer-0"}, {ID_MPS: ("infer-0", "node1-infer-0")})


# --- the loop ---

class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def make_watchdog(tmp_path, policy="warn", grace=30, engine=None):
    state = tmp_path / "state.json"
    simulated = tmp_path / "simulated.json"
    data = {"version": 1, "node": "node1", "engine": "podman", "policy": policy, "grace": grace, "interval": 1,
            "source": "simulated", "simulated_file": str(simulated), "state_file": str(state),
            "instances": {"infer-0": {"container": "node1-infer-0", "enforced": True, "grants": {GPU: 20 * GIB}}}}
    (tmp_path / "config.json").write_text(json.dumps(data))
    clock, stopped, lookups = Clock(), [], []

    def lookup(engine_name, node):
        lookups.append((engine_name, node))
        return engine if engine is not None else ({ID_A: "infer-0"}, {})

    cgroups = {200: "0::/libpod_parent/libpod-%s\n" % ID_A, 201: "0::/user.slice\n"}
    watchdog = wd.Watchdog(str(tmp_path / "config.json"), engine_lookup=lookup,
                           stopper=lambda engine_name, name: stopped.append(name) or "",
                           proc=lambda pid, name: cgroups.get(pid), exe=lambda pid: "python3", clock=clock,
                           owner=lambda controllers, path: 0)
    return watchdog, simulated, clock, stopped, lookups


def write_processes(path, *entries):
    path.write_text(json.dumps({"processes": [{"gpu": gpu, "pid": pid, "used_memory": used} for gpu, pid, used in entries]}))


@pytest.mark.parametrize("policy", ["warn", "stop"])
def test_the_loop_acts_after_the_grace_period_and_writes_a_state_status_reads(tmp_path, policy):
    watchdog, simulated, clock, stopped, lookups = make_watchdog(tmp_path, policy=policy)
    document = watchdog.poll()
    assert document["source"].startswith("simulated (") and document["instances"]["infer-0"]["used"] == {}
    write_processes(simulated, (GPU, 200, 24 * GIB), (GPU, 201, GIB))
    document = watchdog.poll()
    assert lookups == [("podman", "node1")]                 # the engine is asked once, for the unknown container
    assert document["instances"]["infer-0"]["over_since"] == 1000 and document["instances"]["infer-0"]["action"] is None
    assert [entry["pid"] for entry in document["bypasses"]] == [201]
    clock.now = 1031
    document = watchdog.poll()
    state = parse_state((tmp_path / "state.json").read_text(), "state.json")
    assert state["instances"]["infer-0"]["used"] == {GPU: 24 * GIB}
    kinds = [(event["kind"], event["instance"]) for event in state["events"]]
    assert kinds == [("bypass", None), (policy, "infer-0")]
    assert ("container node1-infer-0 stopped" in state["events"][-1]["text"]) == (policy == "stop")
    assert stopped == (["node1-infer-0"] if policy == "stop" else [])
    assert state["instances"]["infer-0"]["action"] == ("stopped" if policy == "stop" else "warned")
    clock.now = 1060
    assert len(watchdog.poll()["events"]) == 2               # no second action, no second bypass event


def test_a_restarted_watchdog_keeps_the_events_and_a_reload_takes_a_new_config(tmp_path):
    watchdog, simulated, clock, _stopped, _lookups = make_watchdog(tmp_path, grace=0)
    write_processes(simulated, (GPU, 200, 24 * GIB))
    assert watchdog.poll()["seq"] == 1
    again, _simulated, _clock, _stopped, _lookups = make_watchdog(tmp_path, grace=0)
    assert again.seq == 1 and len(again.events) == 1
    (tmp_path / "config.json").write_text("[]")
    again.reload()
    document = again.poll()
    assert "is not a JSON object" in document["error"] and document["instances"]    # the last good config stays


def test_nvml_errors_are_in_the_state_not_a_traceback(tmp_path):
    watchdog, _simulated, _clock, _stopped, _lookups = make_watchdog(tmp_path)
    watchdog.source = wd.NvmlSource(FakeNvml({}, fail=RuntimeError("Driver Not Loaded")))
    assert watchdog.poll()["error"] == "NVML: Driver Not Loaded"


# --- MPS servers ---

def test_a_process_named_as_an_mps_server_is_one_only_as_the_child_of_its_instances_own_daemon():
    server, control = "nvidia-cuda-mps-server", "nvidia-cuda-mps-control"
    in_container = {cid: "0::/libpod_parent/libpod-%s\n" % cid for cid in (ID_A, ID_MPS, ID_MPS_B)}
    cgroups = {
        10: in_container[ID_MPS], 11: in_container[ID_MPS],             # the daemon and its server
        20: in_container[ID_A],                                         # the instance names a process so
        30: "0::/user.slice/user-1000.slice/session-2.scope\n", 31: "0::/user.slice/user-1000.slice/session-2.scope\n",
        40: in_container[ID_MPS],                                       # in the daemon's container, child of another
        50: in_container[ID_MPS_B], 51: in_container[ID_MPS],           # a server of the other daemon's control
        60: in_container[ID_MPS],                                       # its parent is gone
    }
    exes = {10: control, 11: server, 20: server, 30: control, 31: server, 40: server, 41: "sh", 50: control, 51: server,
            60: server}
    parents = {11: 10, 20: 10, 31: 30, 40: 41, 51: 50, 60: 61}
    cgroups[41] = in_container[ID_MPS]
    processes = [(GPU, pid, size) for pid, size in ((11, 66 << 20), (20, 50 * GIB), (31, 7 * GIB), (40, GIB), (51, GIB),
                                                    (60, GIB))]
    seen = wd.classify(processes, cgroups, exes, INSTANCE_OF, config(), DAEMONS, parents)
    assert seen["servers"] == [{"pid": 11, "gpu": GPU, "used": 66 << 20, "instance": "infer-0"}]
    # The instance's own process so named counts against its grant, as do the others in its daemon's container.
    assert seen["used"] == {"infer-0": {GPU: 53 * GIB}} and seen["pids"] == {"infer-0": [20, 40, 51, 60]}
    assert [(entry["pid"], entry["reason"]) for entry in seen["bypasses"]] == [
        (31, "named nvidia-cuda-mps-server, not started by its instance's MPS daemon; not in a container")]
    # A daemon labelled for another container than the instance's is not the instance's daemon.
    seen = wd.classify(processes[:1], cgroups, exes, INSTANCE_OF, config(), {ID_MPS: ("infer-0", "node1-infer-1")}, parents)
    assert seen["servers"] == [] and seen["used"] == {"infer-0": {GPU: 66 << 20}}


def test_the_loop_reads_a_servers_parent_from_proc(tmp_path):
    watchdog, simulated, _clock, _stopped, _lookups = make_watchdog(
        tmp_path, engine=({ID_A: "infer-0"}, {ID_MPS: ("infer-0", "node1-infer-0")}))
    texts = {(300, "cgroup"): "0::/libpod_parent/libpod-%s\n" % ID_MPS, (300, "stat"): "300 (nvidia-cuda-mps) S 299 300 1",
             (299, "cgroup"): "0::/libpod_parent/libpod-%s\n" % ID_MPS,
             (301, "cgroup"): "0::/libpod_parent/libpod-%s\n" % ID_A, (301, "stat"): "301 (a) b) S 299 301 1"}
    exes = {300: "nvidia-cuda-mps-server", 299: "nvidia-cuda-mps-control", 301: "nvidia-cuda-mps-server"}
    watchdog.proc, watchdog.exe = (lambda pid, name: texts.get((pid, name))), (lambda pid: exes.get(pid, ""))
    write_processes(simulated, (GPU, 300, 66 << 20), (GPU, 301, 30 * GIB))
    document = watchdog.poll()
    assert [entry["pid"] for entry in document["servers"]] == [300]
    assert document["instances"]["infer-0"]["used"] == {GPU: 30 * GIB}
    assert wd.parent_pid("1 (x) y) S 77 1") == 77 and wd.parent_pid("garbage") is None and wd.parent_pid(None) is None


# --- state files nested too deeply ---

@pytest.mark.parametrize("text", ['{"events": ' + "[" * 100000 + "]" * 100000 + ', "seq": 1}',
                                  '{"events": [' + '{"a": ' * 5000 + "1" + "}" * 5000 + '], "seq": 1}',
                                  '{"seq": 3, "events": [{"seq": 1, "at": 1, "kind": "warn", "instance": null, "text": '
                                  + "[" * 900 + "]" * 900 + "}]}"])
def test_a_state_file_nested_too_deeply_leaves_the_watchdog_running(tmp_path, text):
    (tmp_path / "state.json").write_text(text)
    watchdog, simulated, _clock, _stopped, _lookups = make_watchdog(tmp_path)
    assert watchdog.events == []
    write_processes(simulated, (GPU, 200, GIB))
    document = watchdog.poll()
    assert document["instances"]["infer-0"]["used"] == {GPU: GIB}
    parse_state((tmp_path / "state.json").read_text(), "state.json")


def test_a_config_nested_too_deeply_is_an_error_naming_the_file(tmp_path):
    path = tmp_path / "config.json"
    for text, expected in (('{"instances": ' + "[" * 100000 + "]" * 100000 + "}", "nested more than 32 levels deep"),
                           ("[" * 100000, "nested more than 32 levels deep"), ("{" + "\"a\":1," * 10, "is not JSON")):
        path.write_text(text)
        with pytest.raises(wd.WatchdogError, match=expected) as raised:
            wd.load_config(str(path))
        assert str(path) in str(raised.value)
    assert wd.main([str(path), "--once"]) == 1
