# -*- coding: utf-8 -*-
"""playbooks/rebalance.yml end to end on a copy of the local test bed with a small catalog of its own:
two GPU instances spread over two nodes by anti-affinity, then the anti-affinity dropped from the
catalog so that packing them frees a whole GPU and a node. Check mode shows the gain and changes
nothing; the real run moves one instance, whose new container is running and healthy before the old
one is removed (podman is watched throughout); a second run gains nothing and changes nothing.
Hosts rb1-rb3 on 127.0.0.171-173."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from ansible_collections.gangplank.platform.tests.e2e.bed import Bed, Poller, containers as containers_of, failures, task_results

HOSTS = {"node1": ("rb1", "127.0.0.171"), "node2": ("rb2", "127.0.0.172"), "node3": ("rb3", "127.0.0.173")}
NAMES = tuple(name for name, _address in HOSTS.values())


def catalog(spread):
    """db (stateful) and two GPU instances; ``spread``: with anti-affinity, so they start on two nodes."""
    gpuweb = {"replicas": 2, "resources": {"cpu": "100m", "memory": "32Mi", "gpu": {"count": 1, "memory": "10Gi"}},
              "image": "{{ demo_image }}", "command": ["sh", "-c", "touch /tmp/ready && exec sleep 2147483647"],
              "init": True, "health": {"command": ["test", "-f", "/tmp/ready"], "timeout": 10, "interval": 0.2, "retries": 50}}
    if spread:
        gpuweb["anti_affinity"] = ["gpuweb"]
    return {"gangplank_quotas": {}, "gangplank_services": {
        "db": {"stateful": True, "resources": {"cpu": "100m", "memory": "32Mi"}, "ports": [5432],
               "image": "{{ demo_image }}", "command": ["sh", "-c", "{{ demo_serve }}"], "init": True,
               "health": {"tcp": {"port": 5432}, "interval": 0.2, "retries": 50}},
        "gpuweb": gpuweb}}


def containers():
    return containers_of(NAMES)


def record(bed):
    return json.loads((bed.state() / "placement.json").read_text())


def use(bed, spread):
    values = dict(catalog(spread), gangplank_plan_html=str(bed.base / "plan.html"))
    (bed.base / "group_vars" / "all" / "zz_rebalance.yml").write_text(yaml.safe_dump(values))


class Watch(Poller):
    """Polls podman while a playbook runs: the running containers of the gpuweb instances, over time."""

    def __init__(self):
        super().__init__("container watch", 0.1)
        self.snapshots = []
        self.failed_reads = 0

    def poll(self):
        listing = subprocess.run(["podman", "ps", "--filter", "label=gangplank.io/service=gpuweb", "--format", "json"],
                                 capture_output=True, text=True, check=False)
        # A listing can fail while a container it was reading is removed; a failed one says nothing of what ran,
        # where an empty snapshot would say that nothing did.
        if listing.returncode != 0:
            self.failed_reads += 1
            return
        self.snapshots.append({item["Names"][0] for item in json.loads(listing.stdout or "[]")
                               if (item.get("Labels") or {}).get("gangplank.io/node") in NAMES})


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    bed = Bed.make(tmp_path_factory.mktemp("rebalance"), HOSTS)
    use(bed, spread=True)
    returncode, report = bed.playbook("site.yml")
    assert returncode == 0, failures(report)
    use(bed, spread=False)
    yield bed
    bed.playbook("teardown.yml", "-e", "teardown_remove_data=true", "-e", "gangplank_break_lock=true")


def gpu_nodes(bed):
    return {name: entry["node"] for name, entry in record(bed)["placement"].items() if entry["service"] == "gpuweb"}


def test_check_mode_shows_the_gain_and_changes_nothing(bed):
    spread = gpu_nodes(bed)
    assert len(set(spread.values())) == 2, spread
    before, kept = containers(), record(bed)
    returncode, report = bed.playbook("rebalance.yml", "-e", "max_moves=1", "--check")
    assert returncode == 0, failures(report)
    shown = next(task_results(report, "Show the plan"))
    lines = next(iter(shown.values()))["msg"]
    assert lines[0].startswith("rebalance (at most 1 move(s)") and "1 move(s)" in lines[0]
    assert "(+1)" in lines[1] and lines[1].startswith("  whole GPUs free")
    assert "(+1)" in lines[2] and lines[2].startswith("  nodes free")
    assert containers() == before and record(bed) == kept
    # The picture is written all the same, with the gain on it.
    assert "whole GPUs free" in (bed.base / "plan.html").read_text(encoding="utf-8")


def task_names(report):
    return [task["task"]["name"].split(" : ", 1)[-1] for play in report["plays"] for task in play["tasks"]]


def test_rebalance_moves_one_instance_new_healthy_before_old_removed(bed):
    spread = gpu_nodes(bed)
    db_before = {name: entry for name, entry in containers().items() if entry[2]["gangplank.io/service"] == "db"}
    with Watch() as watch:
        returncode, report = bed.playbook("rebalance.yml", "-e", "max_moves=1")
    assert returncode == 0, failures(report)
    packed = gpu_nodes(bed)
    assert len(set(packed.values())) == 1, packed
    moved = [name for name in packed if packed[name] != spread[name]]
    assert len(moved) == 1
    old, new = spread[moved[0]] + "-" + moved[0], packed[moved[0]] + "-" + moved[0]
    found = containers()
    assert old not in found and found[new][0] == "running"
    # The stateful db never moves, and it was not restarted.
    assert {name: entry for name, entry in found.items() if entry[2]["gangplank.io/service"] == "db"} == db_before
    # Every moment the watch saw, the moved instance ran somewhere; and for a while both ran: the new one
    # started (and passed its health wait) before the old one was removed.
    seen = [snapshot for snapshot in watch.snapshots if snapshot]
    assert seen and all(old in snapshot or new in snapshot for snapshot in watch.snapshots), (watch.snapshots, watch.failed_reads)
    both = [index for index, snapshot in enumerate(watch.snapshots) if old in snapshot and new in snapshot]
    assert both, watch.snapshots
    assert all(old not in snapshot for snapshot in watch.snapshots[both[-1] + 1:])
    names = task_names(report)
    waits = [index for index, name in enumerate(names) if name.startswith("Wait until every instance is healthy")]
    assert waits and waits[-1] < names.index("Remove the containers no longer placed here"), names


def test_a_second_rebalance_gains_nothing_and_changes_nothing(bed):
    before, kept = containers(), record(bed)
    returncode, report = bed.playbook("rebalance.yml", "-e", "max_moves=3")
    assert returncode == 0, failures(report)
    assert all(report["stats"][host]["changed"] == 0 for host in NAMES), report["stats"]
    assert containers() == before and record(bed)["placement"] == kept["placement"]
    lines = next(iter(next(task_results(report, "Show the plan")).values()))["msg"]
    assert "nothing to do" in "\n".join(lines)


def test_a_bad_max_moves_is_refused(bed):
    returncode, report = bed.playbook("rebalance.yml", "-e", "max_moves=lots")
    assert returncode != 0
    assert any("max_moves must be a whole number" in message for message in failures(report))


def test_status_draws_the_placement_with_live_health(bed):
    page_file = bed.base / "status.html"
    returncode, report = bed.playbook("status.yml", "-e", "gangplank_status_html=%s" % page_file)
    assert returncode == 0, failures(report)
    assert next(iter(next(task_results(report, "Name the picture")).values()))["msg"] == "picture: %s" % page_file
    page = page_file.read_text(encoding="utf-8")
    assert all(">%s<" % host in page for host in NAMES)
    assert all(">%s<" % name in page for name in record(bed)["placement"])
    assert "GPU0 " in page and 'class="chip bad"' not in page and ", healthy" in page
