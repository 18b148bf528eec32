# -*- coding: utf-8 -*-
"""A host that goes down mid-life, on the fresh-host bed (scripts/lib/freshbed.sh; real SSH, become):
its container is stopped, so Ansible finds it unreachable. A scale of another service is carried out on
the live hosts and succeeds naming the down host; the down host's instances keep their place and wait
(a stateful instance is never started a second time elsewhere). Once the host has been down for the grace
period (a few seconds, set in the inventory), the next scale starts its stateless instances on the live hosts;
the operator's move of one of its stateful instances is refused without confirmation and done with it. The
host comes back (its container is started again, its instances stopped as after a power loss); the site.yml
that deploys it loses the host again in the middle of its ranks; once it is back, the next site.yml repairs
everything: the surplus copies and the moved instance's old copy on it are removed, the rest runs once.
"""

from __future__ import annotations

import json
import time

import pytest

from ansible_collections.gangplank.platform.tests.e2e.bed import failures
from ansible_collections.gangplank.platform.tests.e2e.fresh import FreshBed, forget_connections, outer_podman

HOSTS = {"fresh1": ("fdn-1", "127.0.0.151"), "fresh2": ("fdn-2", "127.0.0.152")}
# fresh3 (zone west, no GPU: most CPU-only work goes there) with Podman instead of Docker: Docker starts
# containers of restart policy always when the host boots, before gangplank can remove a moved instance's old copy
# (docs/deploy.md says so); this test checks what gangplank itself guarantees.
EXTRA = {"fdn-3": ("127.0.0.153", {"gangplank_labels": {"zone": "west"}})}
NAMES = ("fdn-1", "fdn-2", "fdn-3")
DOWN = "fdn-3"              # a Podman host that is not the control host (fdn-1 keeps the record and the lock)
STATE = "/var/lib/gangplank"
STATEFUL = ("db", "queue")
GRACE = 5                   # gangplank_down_grace in the inventory: seconds before a down host's stateless work moves


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    bed = FreshBed(tmp_path_factory.mktemp("down"), HOSTS, EXTRA)
    assert bed.names == NAMES
    (bed.base / "group_vars" / "all" / "zz_down.yml").write_text("gangplank_down_grace: %d\n" % GRACE)
    bed.down()
    bed.up()
    yield bed
    bed.down()


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


def record_of(bed):
    return json.loads(bed.sh(NAMES[0], "cat %s/placement.json" % STATE))


def check_no_stateful_twice(bed, record, hosts):
    """No stateful instance runs on two hosts, nor on a live host while the record places it on a host that is down."""
    running = running_instances(bed, hosts)
    for name, placement in record["placement"].items():
        if placement["service"] in STATEFUL:
            assert len(running.get(name, [])) <= 1, (name, running)
            if placement["node"] not in hosts:
                assert name not in running, (name, running)
    return running


def test_a_host_down_keeps_its_place_the_rest_scales_and_it_comes_back(bed):
    returncode, report = bed.playbook("site.yml")
    assert returncode == 0, failures(report)
    record = record_of(bed)
    on_down = sorted(name for name, placement in record["placement"].items() if placement["node"] == DOWN)
    workers = sum(1 for placement in record["placement"].values() if placement["service"] == "worker")
    assert on_down and DOWN in record["nodes"]
    stateful_on_down = [name for name in on_down if record["placement"][name]["service"] in STATEFUL]
    # Stateless instances that fit on the live hosts (infer needs a GPU beside another infer: it keeps waiting).
    movable = [name for name in on_down if record["placement"][name]["service"] in ("api", "worker")]
    assert stateful_on_down and movable, on_down

    outer_podman("stop", "-t", "0", "gangplank-fresh-" + DOWN)
    forget_connections()
    live = [host for host in NAMES if host != DOWN]
    returncode, report = bed.playbook("scale.yml", "-e", "service=worker", "-e", "replicas=%d" % (workers + 1))
    # Carried out on the live hosts: the job succeeds and names the host that is down and what waits for it.
    assert returncode == 0, failures(report)
    down_lines = messages(report, "Name the hosts that are down and what waits for them")
    assert down_lines and "down: %s" % DOWN in down_lines[0][0], down_lines
    plan_lines = messages(report, "Show the plan")[0]
    assert any(line.startswith("down: %s since 0s; its stateless instances are replaced on the live hosts in %ds"
                               % (DOWN, GRACE)) for line in plan_lines), plan_lines
    after = record_of(bed)
    for name in on_down:        # within the grace period its instances keep their place, with what they reserve
        assert after["placement"][name] == record["placement"][name], name
    assert list(after["down_since"]) == [DOWN]
    new = sorted(set(after["placement"]) - set(record["placement"]))
    assert new == ["worker-%d" % workers] and after["placement"][new[0]]["node"] in live
    running = check_no_stateful_twice(bed, after, live)
    assert new[0] in running

    # The operator's move of a stateful instance: refused without confirmation, nothing changes.
    moved = stateful_on_down[0]
    time.sleep(max(0.0, after["down_since"][DOWN] + GRACE - time.time()))
    before = bed.sh(NAMES[0], "cat %s/placement.json" % STATE)
    returncode, report = bed.playbook("scale.yml", "-e", "service=worker", "-e", "replicas=%d" % (workers + 1),
                                      "-e", "gangplank_move_stateful=%s" % moved)
    assert returncode != 0 and "WITHOUT its data, which stays on %s" % DOWN in json.dumps(report)
    assert bed.sh(NAMES[0], "cat %s/placement.json" % STATE) == before

    # Past the grace period, with the confirmation: the stateless instances of the down host start on the live hosts,
    # the moved stateful instance too (without its data, as the run says), the other stateful ones still wait.
    returncode, report = bed.playbook("scale.yml", "-e", "service=worker", "-e", "replicas=%d" % (workers + 1),
                                      "-e", "gangplank_move_stateful=%s" % moved, "-e", "gangplank_move_stateful_confirm=%s" % moved)
    assert returncode == 0, failures(report)
    assert "WITHOUT its data, which stays on %s" % DOWN in json.dumps(report)
    replaced = record_of(bed)
    for name in movable + [moved]:
        assert replaced["placement"][name]["node"] in live, (name, replaced["placement"][name])
    for name in stateful_on_down[1:]:
        assert replaced["placement"][name]["node"] == DOWN, name
    running = check_no_stateful_twice(bed, replaced, live)
    assert all(running.get(name) == [replaced["placement"][name]["node"]] for name in movable + [moved]), running

    # The host comes back, and is lost again while site.yml deploys it: as soon as one of its containers runs again.
    bed.boot(DOWN)
    process = bed.popen("site.yml")
    deadline, seen = time.monotonic() + 300, {}
    while time.monotonic() < deadline and process.poll() is None and not seen:
        seen = running_instances(bed, [DOWN])
        time.sleep(0.2)
    outer_podman("stop", "-t", "0", "gangplank-fresh-" + DOWN)
    assert seen and process.wait(timeout=300) != 0
    check_no_stateful_twice(bed, record_of(bed), live)
    assert bed.sh(NAMES[0], "test ! -e %s/lock.json && echo free" % STATE).strip() == "free"

    # Back for good: the next site.yml repairs everything. The surplus copies on the returned host are removed after
    # the ranks (their replacements were up first), the moved instance's old copy there is removed, never started.
    bed.boot(DOWN)
    returncode, report = bed.playbook("site.yml")
    assert returncode == 0, failures(report)
    running = running_instances(bed, NAMES)
    final = record_of(bed)
    assert sorted(running) == sorted(final["placement"]), running
    assert all(len(hosts) == 1 for hosts in running.values()), running
    assert all(running[name] == [final["placement"][name]["node"]] for name in final["placement"]), running
    assert all(running[name] == [DOWN] for name in stateful_on_down[1:]) and final["down_since"] == {}
    left = bed.sh(DOWN, "podman ps -a --format '{{.Names}}'").split()
    assert not [name for name in movable + [moved] if "%s-%s" % (DOWN, name) in left], left
    returncode, report = bed.playbook("teardown.yml", "-e", "teardown_remove_data=true")
    assert returncode == 0, failures(report)
