# -*- coding: utf-8 -*-
"""The GPU watchdog end to end on a copy of the local test bed (real Podman, real processes, no mocks): after a deploy
with GPU shares, a watchdog process runs on each host with (simulated) GPUs; a process of a share instance's container
over its grant, written to the simulated NVML source the watchdog reads (named as simulated), is warned after the grace
period, and a process outside every container is reported as a bypass; status shows both, the next run warns of them
and changes nothing; with the policy stop, the instance's container is stopped; teardown stops the watchdog and
removes its files.

The hosts are renamed (wd-n1, ...) and publish on 127.0.0.101-103, so other beds on the machine are left alone.
Run under the e2e lock: flock /tmp/gangplank-e2e.lock pytest tests/e2e/test_gpu_watchdog.py
"""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from ansible_collections.gangplank.platform.tests.e2e.bed import Bed, containers, failures, summaries, task_results

HOSTS = {"node1": ("wd-n1", "127.0.0.101"), "node2": ("wd-n2", "127.0.0.102"), "node3": ("wd-n3", "127.0.0.103")}
NAMES = tuple(name for name, _address in HOSTS.values())
GIB = 1 << 30
# A short grace period and poll interval, in every run of this module (the defaults are 30 s and 5 s).
FAST = ("-e", "gangplank_gpu_watchdog_grace=2", "-e", "gangplank_gpu_watchdog_interval=0.5")
WATCHDOG_TASK = "Run the GPU watchdog with this host's grants, and show what it saw since the last run"


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    bed = Bed.make(tmp_path_factory.mktemp("gpu-watchdog"), HOSTS)
    bed.torn_down = False
    yield bed
    if not bed.torn_down:                   # test_teardown_stops_the_watchdog_and_removes_its_files did not get to it
        bed.playbook("teardown.yml", "-e", "teardown_remove_data=true", "-e", "gangplank_break_lock=true")


def watchdog_dir(bed, host):
    return bed.state(host) / "gpu-watchdog"


def running_watchdog(bed, host):
    """The pid of the host's watchdog when it runs (its pid file, checked against /proc), else None."""
    try:
        pid = json.loads((watchdog_dir(bed, host) / "watchdog.pid").read_text())["pid"]
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            argv = handle.read().split(b"\0")
    except (OSError, ValueError, KeyError):
        return None
    return pid if str(watchdog_dir(bed, host) / "gpu_watchdog.py").encode() in argv else None


def state(bed, host):
    return json.loads((watchdog_dir(bed, host) / "state.json").read_text())


def wait_for(bed, host, predicate, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            current = state(bed, host)
            if predicate(current):
                return current
        except (OSError, ValueError):
            pass
        time.sleep(0.2)
    raise AssertionError("%s: the watchdog's state did not get there in %ds: %s" % (host, seconds, state(bed, host)))


def share(bed):
    """(host, instance, GPU uuid, grant) of a GPU share of the deployment."""
    record = json.loads((bed.state() / "placement.json").read_text())
    name, placement = sorted((name, entry) for name, entry in record["placement"].items() if entry["service"] == "infer")[0]
    gpu = placement["gpus"][0]
    return placement["node"], name, gpu["uuid"], gpu["memory"]


def container_pid(name):
    return int(subprocess.run(["podman", "inspect", "--format", "{{.State.Pid}}", name], capture_output=True, text=True,
                              check=True).stdout.strip())


def simulate(bed, host, *processes):
    """Write the host's simulated GPU processes: (uuid, pid, bytes) each."""
    path = watchdog_dir(bed, host) / "simulated-processes.json"
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps({"processes": [{"gpu": gpu, "pid": pid, "used_memory": used}
                                                   for gpu, pid, used in processes]}))
    os.replace(temporary, path)


def watchdog_warnings(report):
    return {host: result.get("warnings") or [] for hosts in task_results(report, WATCHDOG_TASK)
            for host, result in hosts.items()}


def gpu_lines(report):
    found = list(task_results(report, "Show the GPU shares (memory used against granted, SM share, enforced or advisory) "
                                      "and the GPU watchdog's findings"))
    return next(iter(found[0].values()))["msg"] if found else []


def test_a_deploy_with_gpu_shares_runs_a_watchdog_on_each_gpu_host(bed):
    started = time.monotonic()
    returncode, report = bed.playbook("site.yml", *FAST)
    assert returncode == 0, failures(report)
    bed.timings = {"first site.yml": time.monotonic() - started}
    gpu_hosts = [name for old, (name, _address) in HOSTS.items() if old in ("node1", "node2")]
    for host in gpu_hosts:
        assert running_watchdog(bed, host), host
        current = wait_for(bed, host, lambda document: document["instances"] is not None)
        assert current["source"] == "simulated (%s)" % (watchdog_dir(bed, host) / "simulated-processes.json")
        assert current["policy"] == "warn" and current["grace"] == 2
    assert running_watchdog(bed, HOSTS["node3"][0]) is None and not watchdog_dir(bed, HOSTS["node3"][0]).exists()


def test_an_instance_over_its_grant_is_warned_and_a_bypass_reported_in_status_and_the_next_run(bed):
    host, instance, uuid, grant = share(bed)
    container = "%s-%s" % (host, instance)
    began = time.monotonic()
    simulate(bed, host, (uuid, container_pid(container), grant + GIB), (uuid, os.getpid(), GIB))
    current = wait_for(bed, host, lambda document: document["instances"][instance]["action"] == "warned")
    bed.timings["over grant to warned (grace 2 s)"] = time.monotonic() - began
    assert current["instances"][instance]["used"] == {uuid: grant + GIB}
    assert [entry["pid"] for entry in current["bypasses"]] == [os.getpid()]
    assert containers(NAMES)[container][0] == "running"          # warn stops nothing

    returncode, report = bed.playbook("status.yml", *FAST)
    assert returncode == 0, failures(report)
    lines = gpu_lines(report)
    row = next(line for line in lines if line.split()[:2] == [host, instance])
    assert row.split()[3] == "%.1f/%.1f" % ((grant + GIB) / GIB, grant / GIB) and row.split()[-1] == "warned"
    assert "advisory" in row                                      # the bed's hosts do not enforce shares (no MPS)
    assert any(line.startswith("%s: GPU watchdog: %s over its grant" % (host, instance)) for line in lines), lines
    assert any("bypass: pid %d" % os.getpid() in line for line in lines), lines

    before = containers(NAMES)
    started = time.monotonic()
    returncode, report = bed.playbook("site.yml", *FAST)
    bed.timings["no-change site.yml"] = time.monotonic() - started
    assert returncode == 0, failures(report)
    assert all(report["stats"][name]["changed"] == 0 for name in NAMES), report["stats"]
    assert all(line.startswith("start 0 [], restart 0 [], stop 0 []") for line in summaries(report).values())
    assert containers(NAMES) == before
    warned = watchdog_warnings(report)[host]
    assert any("GPU watchdog warn: %s uses" % instance in line and "policy warn" in line for line in warned), warned
    assert any("GPU watchdog bypass: pid %d" % os.getpid() in line for line in warned), warned
    # Shown once: a run after that names only what is wrong now.
    returncode, report = bed.playbook("site.yml", *FAST)
    assert returncode == 0 and not any("GPU watchdog warn:" in line for line in watchdog_warnings(report)[host])


def test_with_the_policy_stop_the_instances_container_is_stopped_after_the_grace_period(bed):
    host, instance, uuid, grant = share(bed)
    container = "%s-%s" % (host, instance)
    simulate(bed, host)
    wait_for(bed, host, lambda document: document["instances"][instance]["over_since"] is None)
    returncode, report = bed.playbook("site.yml", *FAST, "-e", "gangplank_gpu_watchdog_policy=stop")
    assert returncode == 0, failures(report)
    assert report["stats"][host]["changed"] == 1                  # the config, reloaded by the same process
    wait_for(bed, host, lambda document: document["policy"] == "stop")
    simulate(bed, host, (uuid, container_pid(container), grant + GIB))
    began = time.monotonic()
    current = wait_for(bed, host, lambda document: document["instances"][instance]["action"] == "stopped", seconds=60)
    bed.timings["over grant to stopped (grace 2 s)"] = time.monotonic() - began
    assert containers(NAMES)[container][0] != "running"
    assert "container %s stopped" % container in current["events"][-1]["text"]
    returncode, report = bed.playbook("status.yml", *FAST, "-e", "gangplank_gpu_watchdog_policy=stop")
    assert returncode == 0, failures(report)
    assert any(line.split()[:2] == [host, instance] and "stopped" in line for line in gpu_lines(report)), gpu_lines(report)
    # The next run says so and starts the instance again.
    returncode, report = bed.playbook("site.yml", *FAST, "-e", "gangplank_gpu_watchdog_policy=stop")
    assert returncode == 0, failures(report)
    assert any("GPU watchdog stop: %s uses" % instance in line for line in watchdog_warnings(report)[host])
    assert containers(NAMES)[container][0] == "running"
    print("timings:", json.dumps({key: round(value, 1) for key, value in bed.timings.items()}))


def test_teardown_stops_the_watchdog_and_removes_its_files(bed):
    pids = {host: running_watchdog(bed, host) for host in NAMES[:2]}
    returncode, report = bed.playbook("teardown.yml", "-e", "teardown_remove_data=true")
    assert returncode == 0, failures(report)
    bed.torn_down = True
    for host, pid in pids.items():
        assert pid is not None and not alive(pid), host
        assert not watchdog_dir(bed, host).exists()


def alive(pid):
    """Whether the process runs (a zombie no longer does: this machine's PID 1 may not reap it)."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return ") Z " not in handle.read()
    except OSError:
        return False
