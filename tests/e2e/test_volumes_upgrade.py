# -*- coding: utf-8 -*-
"""Upgrading a running site to NVMe volumes, end to end on a copy of the local test bed (Podman). A site deployed
without volumes has one NVMe directory per service and device, <mount>/gangplank/<service> (services without volumes
deploy as before volumes, spec hashes pinned by tests/unit/plugins/module_utils/test_deploy_unchanged.py). Declaring an
NVMe volume then adopts that directory where one instance used it (a rename: the files are where the instance's volume
is), and stops the run before any change where two did, naming them."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from ansible_collections.gangplank.platform.tests.e2e.bed import Bed, containers as containers_of, failures

HOSTS = {"node1": ("upg-n1", "127.0.0.186"), "node2": ("upg-n2", "127.0.0.187"), "node3": ("upg-n3", "127.0.0.188")}
NAMES = tuple(name for name, _address in HOSTS.values())
NODE1 = HOSTS["node1"][0]


def service(replicas):
    """A stateful service on node1's NVMe device, with its NVMe directory at /cache (no volumes)."""
    return {"replicas": replicas, "stateful": True, "nvme_path": "/cache",
            "resources": {"cpu": "10m", "memory": "16Mi", "nvme": {"label": "cache", "size": "1Gi"}},
            "node_selector": {"gangplank.io/hostname": NODE1}, "image": "{{ demo_image }}",
            "command": ["sh", "-c", "touch /tmp/ready && exec sleep 2147483647"], "init": True}


def write_catalog(bed, change):
    path = bed.base / "group_vars" / "all" / "catalog.yml"
    catalog = yaml.safe_load(path.read_text())
    change(catalog["gangplank_services"])
    path.write_text(yaml.safe_dump(catalog))


def volume(services, name):
    services[name]["volumes"] = [{"name": "cache", "path": "/cache", "where": "nvme"}]


def podman(*argv):
    return subprocess.run(["podman", *argv], capture_output=True, text=True, check=False)


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    bed = Bed.make(tmp_path_factory.mktemp("upgrade"), HOSTS)
    write_catalog(bed, lambda services: services.update(solo=service(1), pair=service(2)))
    returncode, report = bed.playbook("site.yml")
    assert returncode == 0, failures(report)
    yield bed
    bed.playbook("teardown.yml", "-e", "teardown_remove_data=true", "-e", "gangplank_break_lock=true")


def gangplank_dir(bed):
    return bed.state(NODE1) / "nvme0n1" / "gangplank"


def test_the_site_before_volumes_has_one_directory_per_service(bed):
    for name, instance in (("solo", "solo-0"), ("pair", "pair-0"), ("pair", "pair-1")):
        container = "%s-%s" % (NODE1, instance)
        assert podman("exec", container, "sh", "-c", "echo %s >> /cache/written" % instance).returncode == 0
    assert (gangplank_dir(bed) / "solo" / "written").read_text() == "solo-0\n"
    assert sorted((gangplank_dir(bed) / "pair" / "written").read_text().split()) == ["pair-0", "pair-1"]


def test_one_instance_adopts_its_old_directory(bed):
    write_catalog(bed, lambda services: volume(services, "solo"))
    returncode, report = bed.playbook("site.yml")
    assert returncode == 0, failures(report)
    target = gangplank_dir(bed) / "solo" / "solo-0" / "cache"
    assert (target / "written").read_text() == "solo-0\n"
    assert sorted(path.name for path in (gangplank_dir(bed) / "solo").iterdir()) == ["solo-0"]
    mounts = json.loads(podman("inspect", "%s-solo-0" % NODE1).stdout)[0]["Mounts"]
    assert str(target) in [mount["Source"] for mount in mounts if mount["Destination"] == "/cache"]
    assert podman("exec", "%s-solo-0" % NODE1, "cat", "/cache/written").stdout == "solo-0\n"
    # A second run has nothing more to adopt.
    returncode, report = bed.playbook("site.yml")
    assert returncode == 0, failures(report)
    assert (target / "written").read_text() == "solo-0\n"


def test_a_directory_two_instances_shared_stops_the_run_before_any_change(bed):
    before = containers_of(NAMES)
    write_catalog(bed, lambda services: volume(services, "pair"))
    returncode, report = bed.playbook("site.yml")
    assert returncode != 0
    legacy = gangplank_dir(bed) / "pair"
    message = "\n".join(failures(report))
    assert ("%s: %s was shared by pair-0, pair-1 (the NVMe directory of service pair before volumes)" % (NODE1, legacy)
            in message), message
    assert "Split it by hand" in message
    # Nothing changed: the same containers, started at the same times, and the old directory as it was.
    assert containers_of(NAMES) == before
    assert sorted((legacy / "written").read_text().split()) == ["pair-0", "pair-1"]
