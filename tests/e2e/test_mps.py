# -*- coding: utf-8 -*-
"""GPU shares under MPS end to end on a copy of the local test bed, real Podman, no GPU: one host enforces shares
(sharing mode mps, its MPS control binary the bed's stand-in, scripts/lib/nvidia-cuda-mps-control.stand-in), one
does not. Two shares of different grants on the enforcing host each get their own daemon container with their own
limits, set before the instance starts; the share on the other host gets none. A daemon killed between runs is
repaired by the next run (the daemon started again, its instance restarted with it), nothing is duplicated, and a
run after that changes nothing. Teardown removes the daemons and their directories.

A small catalog of its own keeps the runs short. The hosts are renamed (mps-n1, ...) and publish on 127.0.0.91-93.
"""

from __future__ import annotations

import subprocess
import time

import pytest
import yaml

from ansible_collections.gangplank.platform.tests.e2e.bed import Bed, containers as containers_of, failures, summaries

HOSTS = {"node1": ("mps-n1", "127.0.0.91"), "node2": ("mps-n2", "127.0.0.92"), "node3": ("mps-n3", "127.0.0.93")}
NAMES = tuple(name for name, _address in HOSTS.values())
ENFORCING, ADVISORY = "mps-n1", "mps-n2"
GIB = 1024 ** 3
READY = "touch /tmp/ready && exec sleep 2147483647"


def share(memory, **extra):
    return dict({"resources": {"cpu": "20m", "memory": "16Mi", "gpu": {"count": 1, "memory": memory}},
                 "image": "localhost/gangplank-demo:1", "command": ["sh", "-c", READY], "init": True,
                 "health": {"command": ["test", "-f", "/tmp/ready"], "timeout": 10, "interval": 0.2, "retries": 50}}, **extra)


# Only the A100s of node1 (80Gi each) hold 30Gi or 40Gi; 20Gi fits node2's L4 (24Gi), where anti-affinity sends it.
CATALOG = {"big": share("40Gi"), "mid": share("30Gi"), "small": share("20Gi", anti_affinity=["big", "mid"])}
GRANTS = {"big-0": 40 * 1024, "mid-0": 30 * 1024}


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    bed = Bed.make(tmp_path_factory.mktemp("mps"), HOSTS)
    inventory = yaml.safe_load(bed.inventory.read_text())
    # The enforcing host: the stand-in as its MPS control binary (gangplank_mps_stand_in is the bed's path of it,
    # inventories/local/group_vars/all/testbed.yml); its facts find it, so its sharing mode is mps. The others have none.
    inventory["all"]["hosts"][ENFORCING]["gangplank_mps_control"] = "{{ gangplank_mps_stand_in }}"
    bed.inventory.write_text(yaml.safe_dump(inventory))
    (bed.base / "group_vars" / "all" / "zz_catalog.yml").write_text(yaml.safe_dump({"gangplank_services": CATALOG}))
    yield bed
    if containers():                        # test_teardown_removes_the_daemons_and_their_directories did not pass
        bed.playbook("teardown.yml", "-e", "gangplank_break_lock=true")


def containers():
    return containers_of(NAMES)


def podman(*argv):
    return subprocess.run(["podman", *argv], capture_output=True, text=True, check=False)


def mps_dir(bed, instance):
    return bed.mps_dir(ENFORCING) / ("%s-%s" % (ENFORCING, instance))


def control_log(bed, instance):
    return [line.partition("stand-in: ")[2] for line in (mps_dir(bed, instance) / "log" / "control.log").read_text().splitlines()]


def placements(bed):
    record = yaml.safe_load((bed.state() / "placement.json").read_text())
    return dict(record["placement"])


def test_each_share_on_the_enforcing_host_gets_its_own_daemon_and_limits(bed):
    started = time.monotonic()
    returncode, report = bed.playbook("site.yml")
    assert returncode == 0, failures(report)
    bed.first_seconds = time.monotonic() - started
    placed = placements(bed)
    assert {name: entry["node"] for name, entry in placed.items()} == {"big-0": ENFORCING, "mid-0": ENFORCING, "small-0": ADVISORY}
    found = containers()
    assert sorted(found) == sorted(["mps-n1-big-0", "mps-n1-big-0.mps", "mps-n1-mid-0", "mps-n1-mid-0.mps", "mps-n2-small-0"])
    assert all(state == "running" for state, _at, _labels in found.values()), found
    assert found["mps-n1-big-0.mps"][2]["gangplank.io/mps-of"] == "mps-n1-big-0"
    for instance, mib in GRANTS.items():
        uuid = placed[instance]["gpus"][0]["uuid"]
        log = control_log(bed, instance)
        # Its own limit, on its own device, before anything else; no thread percentage without cores.
        assert log[0].startswith("daemon started, pid ")
        assert log[1] == "set_default_device_pinned_mem_limit %s %dM" % (uuid, mib), log
        assert not any(line.startswith("set_default_active_thread_percentage") for line in log)
        ready = (mps_dir(bed, instance) / "log" / "ready").read_text()
        assert ready.splitlines()[0] == "pinned_mem_limit %s %dM %dM" % (uuid, mib, mib)
        # The instance: its pipe directory (the same directory: it sees the daemon's pid file), enforced.
        name = "%s-%s" % (ENFORCING, instance)
        shown = podman("exec", name, "sh", "-c", 'echo "$CUDA_MPS_PIPE_DIRECTORY $GANGPLANK_GPU_ENFORCED"; '
                       "cat /run/gangplank-mps/pipe/nvidia-cuda-mps-control.pid; test -d /run/gangplank-mps/log || echo no-log")
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.splitlines()[0] == "/run/gangplank-mps/pipe true" and shown.stdout.splitlines()[-1] == "no-log"
        # /dev/shm is the instance's own MPS directory, shared with its daemon only.
        assert podman("exec", name, "sh", "-c", "echo %s > /dev/shm/probe" % instance).returncode == 0
        assert (mps_dir(bed, instance) / "shm" / "probe").read_text() == instance + "\n"
        assert podman("exec", name + ".mps", "cat", "/dev/shm/probe").stdout == instance + "\n"
        inspect = podman("inspect", "--format", "{{json .HostConfig.Binds}} {{.Config.User}}", name + ".mps").stdout
        assert "/run/gangplank-mps/log" in inspect and inspect.strip().endswith("0:0")
    # The share on the advisory host: no daemon, and it knows.
    shown = podman("exec", "mps-n2-small-0", "sh", "-c", 'echo "${CUDA_MPS_PIPE_DIRECTORY:-none} $GANGPLANK_GPU_ENFORCED"')
    assert shown.stdout.strip() == "none false"


def test_a_second_run_changes_nothing(bed):
    before = containers()
    returncode, report = bed.playbook("site.yml")
    assert returncode == 0, failures(report)
    assert containers() == before
    assert all(line.startswith("start 0 [], restart 0 [], stop 0 []") for line in summaries(report).values()), summaries(report)
    assert all(report["stats"][host]["changed"] == 0 for host in NAMES), report["stats"]


def test_a_killed_daemon_is_repaired_with_its_instance(bed):
    before = containers()
    assert podman("kill", "mps-n1-big-0.mps").returncode == 0
    lines_before = len(control_log(bed, "big-0"))
    started = time.monotonic()
    returncode, report = bed.playbook("site.yml")
    assert returncode == 0, failures(report)
    bed.repair_seconds = time.monotonic() - started
    line = summaries(report)[ENFORCING]
    assert line.startswith("start 1 ['mps-n1-big-0.mps'], restart 1 ['mps-n1-big-0'], stop 0 []"), line
    after = containers()
    assert sorted(after) == sorted(before) and all(state == "running" for state, _at, _labels in after.values())
    # The daemon and its instance started again (the daemon's limits set anew, before the instance); the other share and
    # the other host untouched.
    assert after["mps-n1-big-0.mps"][1] != before["mps-n1-big-0.mps"][1] and after["mps-n1-big-0"][1] != before["mps-n1-big-0"][1]
    for name in ("mps-n1-mid-0", "mps-n1-mid-0.mps", "mps-n2-small-0"):
        assert after[name][1] == before[name][1], name
    uuid = placements(bed)["big-0"]["gpus"][0]["uuid"]
    new = control_log(bed, "big-0")[lines_before:]
    assert new[0].startswith("daemon started, pid ") and new[1] == "set_default_device_pinned_mem_limit %s 40960M" % uuid, new
    # One daemon per instance, however often it was started: one engine container, one live pid.
    listed = podman("ps", "-a", "--filter", "name=mps-n1-big-0", "--format", "{{.Names}}").stdout.split()
    assert sorted(listed) == ["mps-n1-big-0", "mps-n1-big-0.mps"]
    returncode, report = bed.playbook("site.yml")
    assert returncode == 0, failures(report)
    assert containers() == after
    assert all(line.startswith("start 0 [], restart 0 [], stop 0 []") for line in summaries(report).values())


def test_teardown_removes_the_daemons_and_their_directories(bed):
    returncode, report = bed.playbook("teardown.yml")
    assert returncode == 0, failures(report)
    assert containers() == {}
    assert not bed.mps_dir(ENFORCING).exists()
    print("mps e2e: first site.yml %.1fs, repair run %.1fs" % (getattr(bed, "first_seconds", 0), getattr(bed, "repair_seconds", 0)))
