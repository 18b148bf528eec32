# -*- coding: utf-8 -*-
"""Preemptible work and every-node services end to end on a copy of the local test bed:
site.yml runs an every-node agent on each host; scale.yml asks for more preemptible batch instances than
there is room for (one per host: a host port), and only those that fit run while the record keeps the
ask; a non-preemptible service that needs the same port then evicts them, and their containers go."""

from __future__ import annotations

import json

import pytest
import yaml

from ansible_collections.gangplank.platform.tests.e2e.bed import Bed, containers as containers_of, failures

HOSTS = {"node1": ("pr-n1", "127.0.0.141"), "node2": ("pr-n2", "127.0.0.142"), "node3": ("pr-n3", "127.0.0.143")}
NAMES = tuple(name for name, _address in HOSTS.values())
SERVE = {"image": "{{ demo_image }}", "command": ["sh", "-c", "{{ demo_serve }}"], "init": True}
EXTRA = {
    "agent": dict(SERVE, every_node=True, ports=[7100], resources={"cpu": "10m", "memory": "8Mi"}),
    "batch": dict(SERVE, preemptible=True, priority=-1, scalable=True, ports=[7000],
                  resources={"cpu": "10m", "memory": "8Mi"}),
}
PORTAL = dict(SERVE, replicas=3, ports=[7000], resources={"cpu": "10m", "memory": "8Mi"})


def running(service):
    return sorted(labels["gangplank.io/instance"] for state, _at, labels in containers_of(NAMES).values()
                  if labels["gangplank.io/service"] == service and state == "running")


def with_catalog(bed, extra):
    """The demo catalog plus ``extra``, as the bed's group_vars (a later file wins over catalog.yml)."""
    with open(bed.base / "group_vars" / "all" / "catalog.yml") as handle:
        catalog = yaml.safe_load(handle)["gangplank_services"]
    catalog.update(extra)
    (bed.base / "group_vars" / "all" / "zz_catalog.yml").write_text(yaml.safe_dump({"gangplank_services": catalog}))


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    bed = Bed.make(tmp_path_factory.mktemp("preemption"), HOSTS)
    with_catalog(bed, EXTRA)
    returncode, report = bed.playbook("site.yml")
    assert returncode == 0, failures(report)
    yield bed
    bed.playbook("teardown.yml", "-e", "teardown_remove_data=true", "-e", "gangplank_break_lock=true")


def test_every_node_agent_runs_on_each_host(bed):
    assert running("agent") == ["agent@%s" % name for name in NAMES]
    assert all("%s-agent" % name in containers_of(NAMES) for name in NAMES)


def test_scaling_preemptible_work_beyond_room_runs_what_fits_and_keeps_the_ask(bed):
    returncode, report = bed.playbook("scale.yml", "-e", "service=batch", "-e", "replicas=5")
    assert returncode == 0, failures(report)
    assert running("batch") == ["batch-0", "batch-1", "batch-2"]
    record = json.loads((bed.state() / "placement.json").read_text())
    assert record["replicas"] == {"batch": 5}
    assert int(report["global_custom_stats"]["gangplank_scale"]["replicas"]) == 3
    assert int(report["global_custom_stats"]["gangplank_scale"]["asked"]) == 5


def test_non_preemptible_work_evicts_and_their_containers_go(bed):
    with_catalog(bed, dict(EXTRA, portal=PORTAL))
    returncode, report = bed.playbook("site.yml")
    assert returncode == 0, failures(report)
    assert running("portal") == ["portal-0", "portal-1", "portal-2"]
    assert running("batch") == []
    assert not [name for name in containers_of(NAMES) if "-batch-" in name]
