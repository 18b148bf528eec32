# -*- coding: utf-8 -*-
"""GPU shares under CUDA MPS (module_utils/deploy/mps.py through deploy.desired_containers): the daemon container per share
instance, the instance as its client, the daemon's entrypoint run against the test bed's stand-in, the rollout's
repair of a daemon that stopped, the waves and removals, and the engines' arguments."""

from __future__ import annotations

import copy
import json
import os
import shutil
import stat
import subprocess
import tempfile
import time

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils.deploy import mps
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.deploy import (
    MPS_OF, SIDECAR_OF, SPEC_HASH, DeployError, decide, desired_containers, desired_on_hosts, rollout,
)
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.deploy_plan import containers_step, rollout_step
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.engine_driver import driver

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
STAND_IN = os.path.join(ROOT, "scripts", "lib", "nvidia-cuda-mps-control.stand-in")
HOST = "h1"
DATA = "/var/lib/gangplank/instances"
MIB = 1024 * 1024
GIB = 1024 * MIB
CONTROL = "/usr/bin/nvidia-cuda-mps-control"

SERVICES = {
    "infer": {"replicas": 2, "ports": [9000], "sidecars": ["log"], "image": "localhost/infer:1", "restart_policy": "on-failure",
              "env": {"CUDA_MPS_PIPE_DIRECTORY": "/elsewhere", "GANGPLANK_GPU_ENFORCED": "maybe", "X": 1},
              "resources": {"gpu": {"count": 2, "memory": "1536Mi"}}},
    "whole": {"image": "localhost/whole:1", "resources": {"gpu": {"count": 1}}},
    "log": {"sidecar": True, "image": "localhost/log:1"},
    "api": {"ports": [8080], "image": "localhost/api:1"},
}
# The grant of infer-0: 1.5 GiB and a byte on one device (rounded down to 1536 MiB), 2 GiB on the other.
GPUS = [{"index": 0, "uuid": "GPU-aaa", "memory": 1536 * MIB + 1}, {"index": 1, "uuid": "GPU-bbb", "memory": 2 * GIB}]


def binding(service, ordinal, rank, gpus=None, sidecars=None):
    return {"service": service, "ordinal": ordinal, "node": HOST, "gpus": gpus or [], "nvme": None,
            "sidecars": sidecars or [], "rank": rank}


INSTANCES = {
    "api-0": binding("api", 0, 0),
    "infer-0": binding("infer", 0, 1, gpus=GPUS, sidecars=["log"]),
    "infer-1": binding("infer", 1, 1, gpus=[{"index": 0, "uuid": "GPU-aaa", "memory": 512 * MIB}], sidecars=["log"]),
    "whole-0": binding("whole", 0, 1, gpus=[{"index": 1, "uuid": "GPU-ccc", "memory": 80 * GIB}]),
}


def containers(instances=None, services=None, **options):
    return desired_containers(HOST, copy.deepcopy(INSTANCES if instances is None else instances),
                              copy.deepcopy(SERVICES if services is None else services), DATA, **options)


def by_name(specs):
    return {spec["name"]: spec for spec in specs}


def as_deployed(planned, running=True, skip=()):
    return [{"Name": c["name"], "State": {"Running": running}, "Config": {"Labels": dict(c["labels"])}}
            for c in planned["containers"] if c["name"] not in skip]


# --- the specs ---------------------------------------------------------------------------------------------------

def test_without_a_sharing_mode_the_specs_are_unchanged():
    """A caller that does not name the host's mode (what every host got before MPS) gets exactly the old specs."""
    assert containers() == containers(gpu_sharing=None)
    assert all(MPS_OF not in c["labels"] and "mps_client" not in c for c in containers())
    # The catalog's own variable stays as it is; gangplank sets none.
    assert [c["env"].get("GANGPLANK_GPU_ENFORCED") for c in containers()] == [None, "maybe", None, "maybe", None, None]


def test_none_hosts_only_tell_a_share_that_it_is_not_enforced():
    before, after = by_name(containers()), by_name(containers(gpu_sharing="none"))
    assert set(after) == set(before)
    for name, spec in after.items():
        expected = dict(before[name])
        if name in ("h1-infer-0", "h1-infer-1"):
            expected["env"] = dict(expected["env"], GANGPLANK_GPU_ENFORCED="false")
        assert spec == expected, name
    # Not a whole GPU, not a sidecar, not a container without GPUs.
    assert "GANGPLANK_GPU_ENFORCED" not in after["h1-whole-0"]["env"]
    assert "GANGPLANK_GPU_ENFORCED" not in after["h1-infer-0-log"]["env"] and "GANGPLANK_GPU_ENFORCED" not in after["h1-api-0"]["env"]


def test_mps_hosts_give_each_share_its_daemon_just_before_it():
    specs = containers(gpu_sharing="mps", mps_control=CONTROL)
    assert [c["name"] for c in specs] == ["h1-api-0", "h1-infer-0.mps", "h1-infer-0", "h1-infer-0-log",
                                          "h1-infer-1.mps", "h1-infer-1", "h1-infer-1-log", "h1-whole-0"]
    daemon, main = by_name(specs)["h1-infer-0.mps"], by_name(specs)["h1-infer-0"]
    assert daemon["labels"] == dict(main["labels"], **{MPS_OF: "h1-infer-0"})
    assert daemon["labels"]["gangplank.io/instance"] == "infer-0" and daemon["labels"]["gangplank.io/rank"] == "1"
    assert daemon["sidecar"] is False and SIDECAR_OF not in daemon["labels"]
    assert daemon["image"] == "localhost/infer:1" and daemon["user"] == "0:0" and daemon["init"] is True
    assert daemon["network"] == "none" and daemon["ports"] == [] and daemon["probe"] is None
    assert daemon["restart_policy"] == "on-failure" and daemon["cpus"] is None and daemon["memory"] is None
    assert daemon["devices"] == main["devices"] == ["nvidia.com/gpu=GPU-aaa", "nvidia.com/gpu=GPU-bbb"]
    base = "/run/gangplank/mps/h1-infer-0"
    assert daemon["volumes"] == [base + "/pipe:/run/gangplank-mps/pipe", base + "/shm:/dev/shm",
                                 base + "/log:/run/gangplank-mps/log"]
    assert daemon["env"] == {"GANGPLANK_INSTANCE": "infer-0", "GANGPLANK_NODE": "h1",
                             "CUDA_MPS_PIPE_DIRECTORY": "/run/gangplank-mps/pipe", "CUDA_MPS_LOG_DIRECTORY": "/run/gangplank-mps/log"}
    assert daemon["mps_daemon"] == {"dir": base, "ready": base + "/log/ready"}
    # The grant in MiB, rounded down, per device; no cores asked.
    assert daemon["command"][:3] == ["sh", "-c", mps.ENTRYPOINT]
    assert daemon["command"][3:] == ["gangplank-mps", CONTROL, "/run/gangplank-mps/log/ready", "", "GPU-aaa=1536", "GPU-bbb=2048"]
    # The instance: its pipe directory and /dev/shm, the pipe directory in its env over the catalog's.
    assert main["volumes"] == [base + "/pipe:/run/gangplank-mps/pipe", base + "/shm:/dev/shm"]
    assert main["env"]["CUDA_MPS_PIPE_DIRECTORY"] == "/run/gangplank-mps/pipe" and main["env"]["GANGPLANK_GPU_ENFORCED"] == "true"
    assert "CUDA_MPS_LOG_DIRECTORY" not in main["env"] and main["env"]["X"] == "1"
    assert main["env"]["GANGPLANK_GPU_MEMORY"] == "GPU-aaa=%d,GPU-bbb=%d" % (1536 * MIB + 1, 2 * GIB)
    assert main["mps_client"] == {"daemon": "h1-infer-0.mps", "ready": base + "/log/ready", "timeout": 60}
    # Its sidecar and the whole-GPU instance are no MPS clients.
    side, whole = by_name(specs)["h1-infer-0-log"], by_name(specs)["h1-whole-0"]
    assert "mps_client" not in side and side["volumes"] == [] and "CUDA_MPS_PIPE_DIRECTORY" not in side["env"]
    assert "mps_client" not in whole and whole["volumes"] == [] and "GANGPLANK_GPU_ENFORCED" not in whole["env"]
    assert by_name(specs)["h1-infer-1.mps"]["command"][6:] == ["", "GPU-aaa=512"]


def test_the_daemons_name_cannot_be_an_instances_or_a_sidecars():
    # Service names are [a-z0-9-]: after the host's "-", no instance or sidecar container holds a ".".
    name = mps.daemon_name("h1-infer-0")
    assert name == "h1-infer-0.mps" and "." not in name.partition("-")[2].rpartition(".")[0]


def test_cores_from_the_bindings_gpu_entries_else_the_request():
    gpus = [dict(GPUS[0], cores=30), dict(GPUS[1], cores=30)]
    specs = by_name(containers(instances={"infer-0": binding("infer", 0, 1, gpus=gpus)}, gpu_sharing="mps", mps_control=CONTROL))
    assert specs["h1-infer-0.mps"]["command"][6:] == ["30", "GPU-aaa=1536", "GPU-bbb=2048"]
    entries, cores = mps.limits("infer-0", binding("infer", 0, 1, gpus=GPUS), {"memory": "1Gi", "cores": 40})
    assert entries == [("GPU-aaa", 1536), ("GPU-bbb", 2048)] and cores == 40
    assert mps.limits("infer-0", binding("infer", 0, 1, gpus=gpus), {"memory": "1Gi", "cores": 40})[1] == 30


@pytest.mark.parametrize("gpus, message", [
    ([dict(GPUS[0], cores=30), dict(GPUS[1], cores=40)], "instances.infer-0.gpus: cores differ between devices"),
    ([dict(GPUS[0], cores=0)], "instances.infer-0.gpus[0].cores: expected a percentage"),
    ([dict(GPUS[0], cores=True)], "instances.infer-0.gpus[0].cores: expected a percentage"),
    ([dict(GPUS[0], memory=MIB - 1)], "instances.infer-0.gpus[0].memory: expected the bytes granted, at least 1 MiB"),
    ([dict(GPUS[0], uuid="GPU-a\nquit")], "instances.infer-0.gpus[0].uuid: expected a GPU UUID"),
    ([dict(GPUS[0], uuid="GPU-a quit")], "instances.infer-0.gpus[0].uuid: expected a GPU UUID"),
])
def test_a_grant_mps_cannot_take_is_refused_naming_its_path(gpus, message):
    with pytest.raises(DeployError) as caught:
        containers(instances={"infer-0": binding("infer", 0, 1, gpus=gpus)}, gpu_sharing="mps", mps_control=CONTROL)
    assert str(caught.value).startswith(message) and "quit" not in str(caught.value)


def test_a_grant_of_no_bytes_is_refused():
    with pytest.raises(mps.MpsError) as caught:
        mps.limits("infer-0", {"gpus": [dict(GPUS[0], memory="1Gi")]}, {"memory": "1Gi"})
    assert str(caught.value).startswith("instances.infer-0.gpus[0].memory: expected the bytes granted")


@pytest.mark.parametrize("options, message", [
    ({"gpu_sharing": "yes"}, 'gpu_sharing: got "yes"; expected one of mps, none'),
    ({"gpu_sharing": "mps", "mps_control": "bin/mps"}, "mps_control: expected the absolute, normalised path"),
    ({"gpu_sharing": "mps", "mps_control": "/usr/bin/../x"}, "mps_control: expected the absolute, normalised path"),
    ({"gpu_sharing": "mps", "mps_control": "/x:/etc/passwd"}, "mps_control: expected the absolute, normalised path"),
    ({"gpu_sharing": "mps", "mps_dir": "/"}, "mps_dir: expected an absolute, normalised directory other than /"),
    ({"gpu_sharing": "mps", "mps_dir": "/run/x,ro"}, "mps_dir: expected an absolute, normalised directory"),
    ({"gpu_sharing": "mps", "mps_image": "--privileged"}, "mps_image: expected an image reference"),
    ({"gpu_sharing": "mps", "mps_ready_timeout": 0}, "mps_ready_timeout: expected seconds, an integer from 1 to 3600"),
    ({"gpu_sharing": "mps", "gpu_mode": "simulated"}, "mps_control: simulated GPUs under MPS need the path"),
])
def test_bad_mps_settings_are_refused(options, message):
    with pytest.raises(DeployError) as caught:
        containers(**options)
    assert str(caught.value).startswith(message)


def test_simulated_gpus_mount_the_control_binary_the_entrypoint_calls():
    specs = by_name(containers(gpu_sharing="mps", gpu_mode="simulated", mps_control=STAND_IN, mps_dir="/srv/mps",
                               mps_image="localhost/mps:2", mps_ready_timeout=5))
    daemon, main = specs["h1-infer-0.mps"], specs["h1-infer-0"]
    assert daemon["devices"] == [] and daemon["volumes"][-1] == "%s:%s:ro" % (STAND_IN, STAND_IN)
    assert daemon["command"][4] == STAND_IN and daemon["image"] == "localhost/mps:2"
    assert daemon["mps_daemon"]["dir"] == "/srv/mps/h1-infer-0" and main["mps_client"]["timeout"] == 5
    # On CDI hosts the binary comes with the GPU's CDI spec: nothing is mounted for it; the default path without facts.
    cdi = by_name(containers(gpu_sharing="mps"))["h1-infer-0.mps"]
    assert cdi["command"][4] == mps.DEFAULT_CONTROL and not any(CONTROL in volume for volume in cdi["volumes"])


def test_the_deploy_roles_settings_reach_the_specs():
    settings = {HOST: {"instances": copy.deepcopy(INSTANCES), "data_dir": DATA, "gpu_sharing": "mps", "mps_control": CONTROL,
                       "mps_dir": "/run/gangplank/mps", "mps_image": "", "mps_ready_timeout": 30}}
    specs = by_name(desired_on_hosts(settings, SERVICES)[HOST])
    assert specs["h1-infer-0"]["mps_client"]["timeout"] == 30 and "h1-infer-0.mps" in specs
    with pytest.raises(DeployError, match="^h1: mps_ready_timeout: got \"30\"; expected a int"):
        desired_on_hosts({HOST: dict(settings[HOST], mps_ready_timeout="30")}, SERVICES)


# --- the rollout -------------------------------------------------------------------------------------------------

def mps_rollout(existing=(), **options):
    specs = containers(gpu_sharing="mps", mps_control=CONTROL, **options)
    return rollout(HOST, specs, {}, list(existing))


def test_the_daemons_hash_is_the_instances_too():
    first = mps_rollout()
    again = mps_rollout(as_deployed(first))
    assert [c["action"] for c in again["containers"]] == ["keep"] * 8
    # A new daemon image recreates the daemon, its instance and the instance's sidecar; nothing else.
    changed = mps_rollout(as_deployed(first), mps_image="localhost/mps:2")
    actions = {c["name"]: c["action"] for c in changed["containers"]}
    assert actions == {"h1-api-0": "keep", "h1-infer-0.mps": "recreate", "h1-infer-0": "recreate", "h1-infer-0-log": "recreate",
                       "h1-infer-1.mps": "recreate", "h1-infer-1": "recreate", "h1-infer-1-log": "recreate", "h1-whole-0": "keep"}
    # A share on a none host, then on an mps host: its containers differ, whole GPUs keep their hash.
    none = {c["name"]: c["labels"][SPEC_HASH] for c in rollout(HOST, containers(gpu_sharing="none"), {}, [])["containers"]}
    assert none["h1-infer-0"] != {c["name"]: c["labels"][SPEC_HASH] for c in first["containers"]}["h1-infer-0"]
    assert none["h1-whole-0"] == {c["name"]: c["labels"][SPEC_HASH] for c in first["containers"]}["h1-whole-0"]


def test_a_stopped_or_missing_daemon_restarts_its_running_instance_with_its_sidecars():
    first = mps_rollout()
    existing = as_deployed(first)
    stopped = next(item for item in existing if item["Name"] == "h1-infer-0.mps")
    stopped["State"]["Running"] = False
    plan = mps_rollout(existing)
    actions = {c["name"]: c["action"] for c in plan["containers"]}
    assert actions["h1-infer-0.mps"] == "start"
    assert actions["h1-infer-0"] == "recreate" and actions["h1-infer-0-log"] == "recreate"
    assert actions["h1-infer-1.mps"] == actions["h1-infer-1"] == actions["h1-api-0"] == "keep"
    assert plan["summary"]["start"] == ["h1-infer-0.mps"] and plan["summary"]["restart"] == ["h1-infer-0", "h1-infer-0-log"]
    # Gone altogether (removed by hand): made again, the same.
    plan = mps_rollout(as_deployed(first, skip=("h1-infer-0.mps",)))
    actions = {c["name"]: c["action"] for c in plan["containers"]}
    assert actions["h1-infer-0.mps"] == "create" and actions["h1-infer-0"] == "recreate"


def test_a_stopped_instance_with_a_stopped_daemon_just_starts():
    first = mps_rollout()
    existing = as_deployed(first)
    for item in existing:
        if item["Name"] in ("h1-infer-0.mps", "h1-infer-0"):
            item["State"]["Running"] = False
    actions = {c["name"]: c["action"] for c in mps_rollout(existing)["containers"]}
    assert actions["h1-infer-0.mps"] == actions["h1-infer-0"] == "start" and actions["h1-infer-0-log"] == "keep"


def test_stale_daemons_go_after_their_instances():
    first = mps_rollout()
    plan = rollout(HOST, [], {}, as_deployed(first))
    assert plan["stale"] == ["h1-infer-1-log", "h1-infer-0-log", "h1-api-0", "h1-infer-1", "h1-infer-0", "h1-whole-0",
                             "h1-infer-1.mps", "h1-infer-0.mps"]
    # mps to none: the instances are recreated without MPS, the daemons are stale.
    plan = rollout(HOST, containers(gpu_sharing="none"), {}, as_deployed(first))
    assert plan["stale"] == ["h1-infer-1.mps", "h1-infer-0.mps"]
    assert {c["name"]: c["action"] for c in plan["containers"]}["h1-infer-0"] == "recreate"


def test_waves_keep_a_daemon_with_its_instance_and_do_not_count_it_as_a_replica():
    services = copy.deepcopy(SERVICES)
    services["infer"]["max_unavailable"] = 1
    specs = containers(services=services, gpu_sharing="mps", mps_control=CONTROL)
    first = rollout(HOST, specs, {}, [])
    changed = containers(services=services, gpu_sharing="mps", mps_control=CONTROL, mps_image="localhost/mps:2")
    decision = decide([HOST], [changed], [{}], [as_deployed(first)], services)
    wave_of = decision["waves"]["wave_of"]
    assert decision["waves"]["waves"] == {"1": 2}
    assert wave_of == {"h1-infer-1.mps": 1, "h1-infer-1": 1, "h1-infer-1-log": 1}


def test_the_wave_removes_an_instance_before_its_daemon_is_recreated_and_stale_dirs_go_with_stale_daemons():
    settings = {"instances": copy.deepcopy(INSTANCES), "data_dir": DATA, "engine": "podman", "gpu_sharing": "mps",
                "mps_control": CONTROL, "mps_dir": "/run/gangplank/mps"}
    reads = {HOST: {"settings": settings, "engine_found": True, "containers": []}}
    step = containers_step([HOST], reads, SERVICES)
    first = rollout_step([HOST], reads, {}, step)
    (wave,) = first["hosts"][HOST]["ranks"]["1"]["waves"]
    assert [c["name"] for c in wave["start"]][:3] == ["h1-infer-0.mps", "h1-infer-0", "h1-infer-0-log"]
    assert wave["remove_sidecars"] == []
    deployed = [{"Name": c["name"], "State": {"Running": True}, "Config": {"Labels": c["labels"]}}
                for rank in first["hosts"][HOST]["ranks"].values() for c in rank["waves"][0]["start"]]
    reads[HOST] = {"settings": dict(settings, mps_image="localhost/mps:2"), "engine_found": True, "containers": deployed}
    step = containers_step([HOST], reads, SERVICES)
    waves = rollout_step([HOST], reads, {}, step)["hosts"][HOST]["ranks"]["1"]["waves"]
    assert [wave["remove_sidecars"] for wave in waves] == [["h1-infer-0-log", "h1-infer-0"], ["h1-infer-1-log", "h1-infer-1"]]
    assert [c["name"] for c in waves[1]["start"]] == ["h1-infer-1.mps", "h1-infer-1", "h1-infer-1-log"]
    # The placement drops infer-1: its daemon is stale, and so is its directory.
    instances = {name: entry for name, entry in INSTANCES.items() if name != "infer-1"}
    reads[HOST] = {"settings": dict(settings, instances=instances), "engine_found": True, "containers": deployed}
    step = containers_step([HOST], reads, SERVICES)
    host = rollout_step([HOST], reads, {}, step)["hosts"][HOST]
    assert host["stale"] == ["h1-infer-1-log", "h1-infer-1", "h1-infer-1.mps"]
    assert host["stale_mps_dirs"] == ["/run/gangplank/mps/h1-infer-1"]


def test_a_stale_dir_is_only_a_daemons_own():
    assert mps.stale_dir("h1-a-0.mps", {MPS_OF: "h1-a-0"}, "/run/m") == "/run/m/h1-a-0"
    assert mps.stale_dir("h1-a-0.mps", {MPS_OF: "h1-b-0"}, "/run/m") is None
    assert mps.stale_dir("h1-a-0", {MPS_OF: "h1-a-0"}, "/run/m") is None
    assert mps.stale_dir("...mps", {MPS_OF: ".."}, "/run/m") is None


# --- the engines -------------------------------------------------------------------------------------------------

def planned(engine):
    specs = containers(gpu_sharing="mps", mps_control=CONTROL, engine=engine)
    return by_name(rollout(HOST, specs, {}, [])["containers"])


def test_podman_requires_the_daemon_and_runs_it_as_root_without_a_network():
    specs = planned("podman")
    daemon, main = driver("podman").container_arguments(specs["h1-infer-0.mps"]), driver("podman").container_arguments(specs["h1-infer-0"])
    assert main["requires"] == ["h1-infer-0.mps"] and "user" not in main
    assert main["volume"] == specs["h1-infer-0"]["volumes"] and main["device"] == ["nvidia.com/gpu=GPU-aaa", "nvidia.com/gpu=GPU-bbb"]
    assert daemon["user"] == "0:0" and daemon["network"] == "none" and daemon["init"] is True and "requires" not in daemon
    assert daemon["command"][4] == CONTROL and daemon["volume"][1] == "/run/gangplank-mps/h1-infer-0/shm:/dev/shm".replace(
        "gangplank-mps", "gangplank/mps")
    assert "requires" not in driver("podman").container_arguments(specs["h1-whole-0"]) and "user" not in driver("podman").container_arguments(specs["h1-api-0"])


def test_docker_has_no_start_dependency_and_the_same_daemon():
    specs = planned("docker")
    daemon, main = driver("docker").container_arguments(specs["h1-infer-0.mps"], {}), driver("docker").container_arguments(specs["h1-infer-0"], {})
    assert "requires" not in main and main["env"]["CUDA_MPS_PIPE_DIRECTORY"] == "/run/gangplank-mps/pipe"
    assert main["volumes"][-1] == "/run/gangplank/mps/h1-infer-0/shm:/dev/shm"
    assert daemon["user"] == "0:0" and daemon["network_mode"] == "none" and daemon["init"] is True
    assert daemon["device_requests"] == [{"driver": "cdi", "device_ids": ["nvidia.com/gpu=GPU-aaa", "nvidia.com/gpu=GPU-bbb"]}]
    assert "user" not in driver("docker").container_arguments(specs["h1-api-0"], {})


# --- on the host: the directories, the wait, and the entrypoint against the stand-in --------------------------------

@pytest.fixture
def root_dir():
    """A directory of root's that nobody else can write on every component (the MPS directories' rule): under /run."""
    path = tempfile.mkdtemp(prefix="gangplank-mps-test-", dir="/run")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def prepare(base):
    spec = {"mps_daemon": {"dir": base, "ready": base + "/log/ready"}}
    return subprocess.run(["sh", "-c", mps.prepare_command(spec)], capture_output=True, text=True, check=False)


def test_the_prepare_command_makes_private_directories_and_clears_the_ready_file(root_dir):
    base = os.path.join(root_dir, "mps", "h1-infer-0")
    assert prepare(base).returncode == 0
    subprocess.run(["sh", "-c", "echo old > %s/log/ready" % base], check=True)
    done = prepare(base)
    assert done.returncode == 0, done.stdout
    assert stat.S_IMODE(os.stat(base).st_mode) == 0o700 and stat.S_IMODE(os.stat(os.path.join(root_dir, "mps")).st_mode) == 0o700
    for name in ("pipe", "shm", "log"):
        assert stat.S_IMODE(os.stat(os.path.join(base, name)).st_mode) == 0o1777
    assert not os.path.exists(base + "/log/ready")
    with pytest.raises(mps.MpsError):
        mps.prepare_command({"mps_daemon": {"dir": "/run/../etc", "ready": "/run/x"}})
    with pytest.raises(mps.MpsError):
        mps.prepare_command({"mps_daemon": {"dir": base, "ready": "/etc/shadow"}})


def test_a_link_planted_in_the_mps_directory_is_never_followed(root_dir):
    """Another user planted <mps_dir>/<container> as a link to a directory of theirs (or the host's): the command fails
    naming it, and nothing is made or changed where it points."""
    mps_dir = os.path.join(root_dir, "mps")
    os.mkdir(mps_dir, 0o755)
    target = os.path.join(root_dir, "target")
    os.mkdir(target, 0o755)
    os.symlink(target, os.path.join(mps_dir, "h1-infer-0"))
    done = prepare(os.path.join(mps_dir, "h1-infer-0"))
    assert done.returncode == 1 and done.stdout.strip() == (
        "%s/h1-infer-0 is a symbolic link; expected a directory of root's" % mps_dir)
    assert os.listdir(target) == [] and stat.S_IMODE(os.stat(target).st_mode) == 0o755
    # A link further up: the same.
    os.symlink(mps_dir, os.path.join(root_dir, "link"))
    done = prepare(os.path.join(root_dir, "link", "h1-infer-1"))
    assert done.returncode == 1 and "link is a symbolic link" in done.stdout
    assert not os.path.exists(os.path.join(mps_dir, "h1-infer-1"))
    # A link in the instance's directory, where pipe should be.
    os.makedirs(os.path.join(mps_dir, "h1-infer-2"), 0o700)
    os.symlink(target, os.path.join(mps_dir, "h1-infer-2", "pipe"))
    done = prepare(os.path.join(mps_dir, "h1-infer-2"))
    assert done.returncode == 1 and done.stdout.strip().endswith("h1-infer-2/pipe is a symbolic link; expected a directory of root's")
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o755


@pytest.mark.parametrize("change, message", [
    (lambda path: os.chown(path, 65534, 65534), "is owned by uid 65534; expected a directory of root's"),
    (lambda path: os.chmod(path, 0o777), "can be written by other users (mode 777)"),
    (lambda path: os.chmod(path, 0o1777), "can be written by other users (mode 1777)"),
    (lambda path: os.chmod(path, 0o775), "can be written by other users (mode 775)"),
])
def test_a_directory_on_the_way_that_another_user_could_change_is_refused(root_dir, change, message):
    mps_dir = os.path.join(root_dir, "shared", "mps")
    os.makedirs(mps_dir, 0o755)
    for where in (os.path.join(root_dir, "shared"), mps_dir):
        os.chmod(where, 0o755)
        os.chown(where, 0, 0)
        change(where)
        done = prepare(os.path.join(mps_dir, "h1-infer-0"))
        assert done.returncode == 1 and done.stdout.strip() == "%s %s" % (where, message) + (
            "; expected a directory only root can write" if "written" in message else "")
        assert not os.path.exists(os.path.join(mps_dir, "h1-infer-0"))
        os.chmod(where, 0o755)
        os.chown(where, 0, 0)
    # The instance's own directory, root's but left open by hand: made private again. Another user's: refused.
    own = os.path.join(mps_dir, "h1-infer-0")
    os.mkdir(own, 0o777)
    assert prepare(own).returncode == 0 and stat.S_IMODE(os.stat(own).st_mode) == 0o700
    os.chown(own, 65534, 65534)
    done = prepare(own)
    assert done.returncode == 1 and "h1-infer-0 is owned by uid 65534" in done.stdout and stat.S_IMODE(os.stat(own).st_mode) == 0o700


def test_a_directory_in_tmp_is_refused_on_the_host_and_a_known_shared_place_at_once(tmp_path):
    done = prepare(str(tmp_path / "mps" / "h1-infer-0"))
    assert done.returncode == 1 and done.stdout.strip() == "/tmp can be written by other users (mode 1777); expected a directory only root can write"
    for place in ("/tmp/mps", "/dev/shm/gangplank/mps", "/var/tmp/x", "/dev/shm"):
        with pytest.raises(mps.MpsError, match="mps_dir: %s is inside /(tmp|dev/shm|var/tmp), which every user can write" % place):
            mps.check_settings("", place, "", 60)
    mps.check_settings("", "/tmpfs/mps", "", 60)


def test_the_wait_command_reads_the_ready_file_only_as_a_regular_file(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("root's secret\n")
    os.symlink(secret, tmp_path / "ready")
    spec = {"mps_client": {"daemon": "h1-x.mps", "ready": str(tmp_path / "ready"), "timeout": 1}}
    done = subprocess.run(["sh", "-c", mps.wait_command(spec)], capture_output=True, text=True, check=False)
    assert done.returncode == 1 and done.stdout.strip() == "the ready file is not a regular file"


def test_the_wait_command_waits_for_the_ready_file_within_its_timeout(tmp_path):
    ready = str(tmp_path / "ready")
    spec = {"mps_client": {"daemon": "h1-x.mps", "ready": ready, "timeout": 1}}
    started = time.monotonic()
    done = subprocess.run(["sh", "-c", mps.wait_command(spec)], capture_output=True, text=True, check=False)
    assert done.returncode == 1 and done.stdout.strip() == "no ready file after 1s" and time.monotonic() - started < 5
    with open(ready, "w") as handle:
        handle.write("pinned_mem_limit GPU-a 1024M\n")
    done = subprocess.run(["sh", "-c", mps.wait_command(spec)], capture_output=True, text=True, check=False)
    assert done.returncode == 0 and done.stdout == "pinned_mem_limit GPU-a 1024M\n"


def busybox_sh():
    found = shutil.which("busybox")
    if found is None:
        pytest.skip("busybox is not installed (scripts/lib/testbed.sh installs it)")
    return [found, "sh"]


def run_entrypoint(tmp_path, command):
    """The daemon's command as its container runs it (busybox sh, as the demo image has), against the stand-in."""
    pipe, log = tmp_path / "pipe", tmp_path / "log"
    pipe.mkdir()
    log.mkdir()
    env = dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=str(pipe), CUDA_MPS_LOG_DIRECTORY=str(log))
    args = list(command)
    args[4], args[5] = STAND_IN, str(log / "ready")
    process = subprocess.Popen(busybox_sh() + args[1:], env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 10
    while not (log / "ready").exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return process, pipe, log


@pytest.mark.parametrize("cores", [None, 25])
def test_the_entrypoint_sets_each_devices_limit_and_the_cores_before_it_is_ready(tmp_path, cores):
    gpus = [dict(gpu, cores=cores) for gpu in GPUS] if cores else GPUS
    specs = by_name(containers(instances={"infer-0": binding("infer", 0, 1, gpus=gpus)}, gpu_sharing="mps", mps_control=CONTROL))
    process, pipe, log = run_entrypoint(tmp_path, specs["h1-infer-0.mps"]["command"])
    try:
        assert (log / "ready").read_text() == (
            "pinned_mem_limit GPU-aaa 1536M 1536M\npinned_mem_limit GPU-bbb 2048M 2048M\nactive_thread_percentage %s\n" % (cores or 100))
        commands = [line.partition("stand-in: ")[2] for line in (log / "control.log").read_text().splitlines()]
        assert commands[0].startswith("daemon started, pid ")
        expected = ["set_default_device_pinned_mem_limit GPU-aaa 1536M", "set_default_device_pinned_mem_limit GPU-bbb 2048M"]
        expected += ["set_default_active_thread_percentage 25"] if cores else []
        assert commands[1:1 + len(expected)] == expected
        assert process.poll() is None
        # The daemon dies: the entrypoint exits non-zero and takes its ready file away.
        os.kill(int((pipe / "nvidia-cuda-mps-control.pid").read_text()), 9)
        assert process.wait(timeout=10) == 1 and not (log / "ready").exists()
        assert "the control daemon is gone" in process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()


def test_the_entrypoint_stops_its_daemon_on_sigterm_and_fails_when_a_limit_is_refused(tmp_path):
    specs = by_name(containers(gpu_sharing="mps", mps_control=CONTROL))
    (tmp_path / "a").mkdir()
    process, pipe, log = run_entrypoint(tmp_path / "a", specs["h1-infer-0.mps"]["command"])
    try:
        process.terminate()
        assert process.wait(timeout=10) == 0
        assert (log / "control.log").read_text().splitlines()[-1] == "stand-in: quit" and not (pipe / "nvidia-cuda-mps-control.pid").exists()
    finally:
        if process.poll() is None:
            process.kill()
    # A limit the control daemon refuses: no ready file, the daemon quit, a non-zero exit.
    command = list(specs["h1-infer-0.mps"]["command"])
    command[-1] = "GPU-bbb=x"
    (tmp_path / "b").mkdir()
    process, pipe, log = run_entrypoint(tmp_path / "b", command)
    assert process.wait(timeout=10) == 1 and not (log / "ready").exists()
    assert "control command 'set_default_device_pinned_mem_limit GPU-bbb xM' failed" in process.stderr.read()
    assert (log / "control.log").read_text().splitlines()[-1] == "stand-in: quit"


def test_the_ready_file_names_no_secret():
    # The daemon's command holds names, paths and numbers only: nothing of the catalog's env.
    specs = by_name(containers(gpu_sharing="mps", mps_control=CONTROL))
    assert "/elsewhere" not in json.dumps(specs["h1-infer-0.mps"]) and "maybe" not in json.dumps(specs["h1-infer-0.mps"])
