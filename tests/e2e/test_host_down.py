# -*- coding: utf-8 -*-
"""A host that goes down mid-life, on the fresh-host bed (scripts/lib/freshbed.sh; real SSH, become):
its container is stopped, so Ansible finds it unreachable. A scale of another service is carried out on
the live hosts and succeeds naming the down host; the down host's instances keep their place and wait
(a stateful instance is never started a second time elsewhere); the host comes back (its container is
started again, its instances stopped as after a power loss) and the next site.yml starts them again.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time

import pytest

from ansible_collections.gangplank.platform.tests.e2e.bed import ROOT, failures
from ansible_collections.gangplank.platform.tests.e2e.fresh import ENV, FreshBed

HOSTS = {"fresh1": ("fdn-1", "127.0.0.151"), "fresh2": ("fdn-2", "127.0.0.152"), "fresh3": ("fdn-3", "127.0.0.153")}
NAMES = tuple(name for name, _address in HOSTS.values())
DOWN = "fdn-2"              # a Podman host that is not the control host (fdn-1 keeps the record and the lock)
STATE = "/var/lib/gangplank"
STATEFUL = ("db", "queue")


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    bed = FreshBed(tmp_path_factory.mktemp("down"), HOSTS)
    bed.down()
    bed.up()
    yield bed
    bed.down()


def outer_podman(*args):
    subprocess.run(["podman", *args], env=ENV, check=True, timeout=120, capture_output=True)


def forget_connections():
    """Ansible's persistent SSH connections to the bed (ControlPersist): the next run connects afresh."""
    folder = os.path.join(ROOT, ".build", "fresh", "cp")
    for name in os.listdir(folder) if os.path.isdir(folder) else []:
        try:
            os.unlink(os.path.join(folder, name))
        except OSError:
            pass


def wait_for_ssh(address, seconds=120):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((address, 22), timeout=2) as connection:
                if connection.recv(4).startswith(b"SSH"):
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise AssertionError("%s does not answer on port 22" % address)


def running_instances(bed, hosts):
    """instance -> the hosts where one of its containers runs (sidecars not counted), read from each host's engine."""
    found = {}
    for host in hosts:
        engine = bed.engines[host]
        out = bed.sh(host, "command -v %s >/dev/null || exit 0; ids=$(%s ps -q --filter label=gangplank.io/managed=true); "
                           '[ -z "$ids" ] || %s inspect $ids' % (engine, engine, engine))
        for item in json.loads(out or "[]"):
            labels = item["Config"]["Labels"]
            if item["State"]["Running"] and not labels.get("gangplank.io/sidecar-of"):
                found.setdefault(labels["gangplank.io/instance"], []).append(host)
    return found


def messages(report, task_name):
    return [result.get("msg") for play in report["plays"] for task in play["tasks"]
            if task["task"]["name"].endswith(task_name) for result in task["hosts"].values() if "msg" in result]


def test_a_host_down_keeps_its_place_the_rest_scales_and_it_comes_back(bed):
    returncode, report = bed.playbook("site.yml")
    assert returncode == 0, failures(report)
    record = json.loads(bed.sh(NAMES[0], "cat %s/placement.json" % STATE))
    on_down = sorted(name for name, placement in record["placement"].items() if placement["node"] == DOWN)
    workers = sum(1 for placement in record["placement"].values() if placement["service"] == "worker")
    assert on_down and DOWN in record["nodes"]

    outer_podman("stop", "-t", "0", "gangplank-fresh-" + DOWN)
    forget_connections()
    live = [host for host in NAMES if host != DOWN]
    returncode, report = bed.playbook("scale.yml", "-e", "service=worker", "-e", "replicas=%d" % (workers + 1))
    # Carried out on the live hosts: the job succeeds and names the host that is down and what waits for it.
    assert returncode == 0, failures(report)
    down_lines = messages(report, "Name the hosts that are down and what waits for them")
    assert down_lines and "down: %s" % DOWN in down_lines[0][0], down_lines
    after = json.loads(bed.sh(NAMES[0], "cat %s/placement.json" % STATE))
    for name in on_down:        # its instances keep their place, with what they reserve
        assert after["placement"][name] == record["placement"][name], name
    new = sorted(set(after["placement"]) - set(record["placement"]))
    assert new == ["worker-%d" % workers] and after["placement"][new[0]]["node"] in live
    running = running_instances(bed, live)
    assert new[0] in running
    # A stateful instance runs at most once, and never on a live host when its place is the down one.
    for name, placement in after["placement"].items():
        if placement["service"] in STATEFUL:
            assert len(running.get(name, [])) <= 1 and (placement["node"] != DOWN or name not in running), (name, running)

    outer_podman("start", "gangplank-fresh-" + DOWN)
    # A reboot empties /run (a tmpfs on a real host, not in the bed's container): the engines' runtime state goes.
    bed.sh(DOWN, "rm -rf /run/libpod /run/containers /run/runc /run/crun /run/docker /run/docker.sock /run/docker.pid")
    wait_for_ssh(bed.addresses[DOWN])
    forget_connections()
    returncode, report = bed.playbook("site.yml")
    assert returncode == 0, failures(report)
    running = running_instances(bed, NAMES)
    final = json.loads(bed.sh(NAMES[0], "cat %s/placement.json" % STATE))
    assert sorted(running) == sorted(final["placement"]), running
    assert all(len(hosts) == 1 for hosts in running.values()), running
    assert all(running[name] == [DOWN] for name in on_down)
    returncode, report = bed.playbook("teardown.yml", "-e", "teardown_remove_data=true")
    assert returncode == 0, failures(report)
