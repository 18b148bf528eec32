# -*- coding: utf-8 -*-
"""CPU pinning to the GPUs' NUMA node end to end on Docker: a fresh-bed host (scripts/lib/freshbed.sh) reached over
real SSH, Docker installed by the runtime role from Debian's repositories, no GPU. Its two simulated A100s are on NUMA
node 0 with the host's CPU 0 (memory node 0 is the only one a container can be given here). Two pinned shares get
the cpuset of their placement, read back from Docker and from inside the containers; a run after that changes
nothing. A third share that the NUMA node's CPUs cannot hold is refused with the reason, and nothing changes.
Teardown removes everything. tests/e2e/test_cpu_pinning.py checks the same on Podman.
"""

from __future__ import annotations

import json

import pytest
import yaml

from ansible_collections.gangplank.platform.tests.e2e.bed import failures, summaries
from ansible_collections.gangplank.platform.tests.e2e.fresh import FreshBed
from ansible_collections.gangplank.platform.tests.e2e.pinning import assert_a_third_share_is_refused, catalog

HOST = "fe2e-pin"
GPU = {"model": "NVIDIA A100-SXM4-80GB", "memory": "80Gi", "numa_node": 0, "cpu_affinity": "0"}
STATE = "/var/lib/gangplank/placement.json"


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    base = tmp_path_factory.mktemp("pinning-docker")
    bed = FreshBed(base, {}, extra={HOST: ("127.0.0.75", {"gangplank_container_engine": "docker",
                                                          "gangplank_simulated_gpus": [GPU, GPU]})})
    bed.catalog = base / "group_vars" / "all" / "zz_catalog.yml"
    bed.catalog.write_text(yaml.safe_dump({"gangplank_services": catalog(2)}))
    bed.down()
    bed.up()
    yield bed
    bed.down()


def docker(bed, script):
    return bed.sh(HOST, "docker " + script).strip()


def test_pinned_instances_on_docker_get_the_cpuset_of_their_gpus_numa_node(bed):
    returncode, report = bed.playbook("site.yml")
    assert returncode == 0, failures(report)
    placed = dict(json.loads(bed.sh(HOST, "cat " + STATE))["placement"])
    assert sorted(placed) == ["pinned-0", "pinned-1"]
    for instance, entry in placed.items():
        assert (entry["node"], entry["cpuset_cpus"], entry["cpuset_mems"]) == (HOST, "0", "0"), entry
        name = "%s-%s" % (HOST, instance)
        assert docker(bed, "inspect --format '{{.HostConfig.CpusetCpus}} {{.HostConfig.CpusetMems}}' " + name) == "0 0"
        inside = docker(bed, "exec %s grep _allowed_list: /proc/self/status" % name).split()
        assert inside == ["Cpus_allowed_list:", "0", "Mems_allowed_list:", "0"], inside
    returncode, report = bed.playbook("site.yml")
    assert returncode == 0, failures(report)
    assert all(line.startswith("start 0 [], restart 0 [], stop 0 []") for line in summaries(report).values()), summaries(report)
    assert report["stats"][HOST]["changed"] == 0, report["stats"]


def test_a_pinned_instance_the_numa_node_cannot_hold_is_refused_and_nothing_changes(bed):
    # 3 x 400m on NUMA node 0's one CPU (the host has two): the third is refused.
    assert_a_third_share_is_refused(bed, lambda: (bed.containers(), bed.sh(HOST, "cat " + STATE)))


def test_teardown(bed):
    returncode, report = bed.playbook("teardown.yml")
    assert returncode == 0, failures(report)
    assert bed.containers() == {}
