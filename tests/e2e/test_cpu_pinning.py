# -*- coding: utf-8 -*-
"""CPU pinning to the GPUs' NUMA node end to end on a copy of the local test bed, real Podman, no GPU: node1's two
simulated A100s are on NUMA node 0 with this machine's CPU 0 (memory node 0 is the only one a container can be given
here; the machine has CPUs 0-1, so the NUMA node is tighter than the node);
node2's L4 has no NUMA facts. Two pinned shares land on node1 and their containers get the cpuset of their
placement, read back from the engine and from inside; a run after that changes nothing. A third share that the
NUMA node's CPUs cannot hold is refused with the reason, and nothing changes. Teardown removes everything.

A small catalog of its own keeps the runs short. The hosts are renamed (pin-n1, ...) and publish on 127.0.0.94-96.
"""

from __future__ import annotations

import subprocess

import pytest
import yaml

from ansible_collections.gangplank.platform.tests.e2e.bed import Bed, containers as containers_of, failures, summaries
from ansible_collections.gangplank.platform.tests.e2e.pinning import assert_a_third_share_is_refused, catalog

HOSTS = {"node1": ("pin-n1", "127.0.0.94"), "node2": ("pin-n2", "127.0.0.95"), "node3": ("pin-n3", "127.0.0.96")}
NAMES = tuple(name for name, _address in HOSTS.values())


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    bed = Bed.make(tmp_path_factory.mktemp("pinning"), HOSTS)
    inventory = yaml.safe_load(bed.inventory.read_text())
    node1 = inventory["all"]["hosts"]["pin-n1"]
    node1["gangplank_simulated_gpus"] = [dict(gpu, numa_node=0, cpu_affinity="0") for gpu in node1["gangplank_simulated_gpus"]]
    bed.inventory.write_text(yaml.safe_dump(inventory))
    bed.catalog = bed.base / "group_vars" / "all" / "zz_catalog.yml"
    bed.catalog.write_text(yaml.safe_dump({"gangplank_services": catalog(2)}))
    yield bed
    if containers():                        # test_teardown did not pass
        bed.playbook("teardown.yml", "-e", "gangplank_break_lock=true")


def containers():
    return containers_of(NAMES)


def podman(*argv):
    return subprocess.run(["podman", *argv], capture_output=True, text=True, check=False)


def placements(bed):
    return dict(yaml.safe_load((bed.state() / "placement.json").read_text())["placement"])


def test_pinned_instances_get_the_cpuset_of_their_gpus_numa_node(bed):
    returncode, report = bed.playbook("site.yml")
    assert returncode == 0, failures(report)
    placed = placements(bed)
    assert sorted(placed) == ["pinned-0", "pinned-1"]
    for instance, entry in placed.items():
        # node2's L4 would hold a 10Gi share, but it has no NUMA facts to pin to.
        assert entry["node"] == "pin-n1", placed
        assert (entry["cpuset_cpus"], entry["cpuset_mems"]) == ("0", "0"), entry
        name = "pin-n1-" + instance
        shown = podman("inspect", "--format", "{{.HostConfig.CpusetCpus}} {{.HostConfig.CpusetMems}}", name)
        assert shown.returncode == 0 and shown.stdout.split() == ["0", "0"], (shown.stdout, shown.stderr)
        inside = podman("exec", name, "grep", "^Cpus_allowed_list:", "/proc/self/status")
        assert inside.returncode == 0 and inside.stdout.split() == ["Cpus_allowed_list:", "0"], (inside.stdout, inside.stderr)
    returncode, report = bed.playbook("site.yml")
    assert returncode == 0, failures(report)
    assert all(line.startswith("start 0 [], restart 0 [], stop 0 []") for line in summaries(report).values()), summaries(report)
    assert all(report["stats"][host]["changed"] == 0 for host in NAMES), report["stats"]


def test_a_pinned_instance_the_numa_node_cannot_hold_is_refused_and_nothing_changes(bed):
    # 3 x 400m on NUMA node 0's one CPU (the node has two): the third is refused there; node2 has no NUMA facts.
    assert_a_third_share_is_refused(bed, lambda: (containers(), (bed.state() / "placement.json").read_text()))


def test_teardown(bed):
    returncode, report = bed.playbook("teardown.yml")
    assert returncode == 0, failures(report)
    assert containers() == {}
