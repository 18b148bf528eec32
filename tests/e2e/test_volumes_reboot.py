# -*- coding: utf-8 -*-
"""Stateful data through an engine restart and a host reboot on Podman: a fresh-bed host (scripts/lib/freshbed.sh)
reached over real SSH, Podman installed by the runtime role, a stateful db with a published port and a stateful store
of two instances, each instance with a file in its own volume. Podman has no daemon: its restart, as a user sees one,
is every container stopped with the engine's storage kept, which is what ``podman system migrate`` does after a Podman
upgrade. The reboot is the host's container stopped and started again, /run emptied as a real boot empties it. After
each, no instance runs by itself (no podman-restart service on this host); the next site.yml starts the same
containers again on their node, each instance once, on its own volume with its file there, the db's port answering,
and the run after it changes nothing. tests/e2e/test_volumes.py and test_volumes_docker.py check the rest of the
lifecycle (recreate, removal, scale, teardown; Docker's daemon restart)."""

from __future__ import annotations

import json
import urllib.request

import pytest
import yaml

from ansible_collections.gangplank.platform.tests.e2e.bed import failures, summaries
from ansible_collections.gangplank.platform.tests.e2e.fresh import FreshBed

HOST = "fe2e-boot"
ADDRESS = "127.0.0.76"
VOLUMES = "/var/lib/gangplank/volumes"
READY = "touch /tmp/ready && exec sleep 2147483647"
# The demo's server: its health page on the instance's first port (published on the bed host's address).
SERVE = 'mkdir -p /www && echo "$GANGPLANK_INSTANCE ok" > /www/health && exec httpd -f -p "${GANGPLANK_PORTS%%,*}" -h /www'
INSTANCES = ("db-0", "store-0", "store-1")
RESOURCES = {"cpu": "10m", "memory": "16Mi"}
CATALOG = {
    "db": {"stateful": True, "resources": RESOURCES, "ports": [5432], "image": "localhost/gangplank-demo:1",
           "command": ["sh", "-c", SERVE], "init": True, "health": {"tcp": {"port": 5432}, "interval": 0.2, "retries": 50},
           "volumes": [{"name": "data", "path": "/data", "size": "16Mi"}]},
    "store": {"replicas": 2, "stateful": True, "resources": RESOURCES, "image": "localhost/gangplank-demo:1",
              "command": ["sh", "-c", READY], "init": True,
              "health": {"command": ["test", "-f", "/tmp/ready"], "timeout": 10, "interval": 0.2, "retries": 50},
              "volumes": [{"name": "data", "path": "/data", "size": "16Mi"}]}}


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    base = tmp_path_factory.mktemp("volumes-reboot")
    bed = FreshBed(base, {}, extra={HOST: (ADDRESS, {"gangplank_container_engine": "podman"})})
    (base / "group_vars" / "all" / "zz_catalog.yml").write_text(yaml.safe_dump({"gangplank_services": CATALOG}))
    bed.down()
    bed.up()
    site(bed)
    for instance in INSTANCES:
        podman(bed, "exec %s-%s sh -c 'echo %s > /data/marker'" % (HOST, instance, instance))
    yield bed
    bed.down()


def site(bed):
    returncode, report = bed.playbook("site.yml")
    assert returncode == 0, failures(report)
    return report


def podman(bed, script):
    return bed.sh(HOST, "podman " + script).strip()


def stateful_containers(bed):
    """instance -> [(container name, running, its data volume's source, container id)] of every managed container."""
    found = {}
    ids = podman(bed, "ps -aq --filter label=gangplank.io/managed=true").split()
    for item in json.loads(podman(bed, "inspect " + " ".join(ids))) if ids else []:
        labels = item["Config"]["Labels"]
        source = next((mount["Source"] for mount in item["Mounts"] if mount["Destination"] == "/data"), None)
        found.setdefault(labels["gangplank.io/instance"], []).append((item["Name"], item["State"]["Running"], source, item["Id"]))
    return found


def stopped(bed):
    """Every instance's container id, once none of them runs (the engine started none by itself)."""
    found = stateful_containers(bed)
    assert sorted(found) == list(INSTANCES), found
    assert not any(running for containers in found.values() for _name, running, _source, _id in containers), found
    return {instance: containers[0][3] for instance, containers in found.items()}


def check_back_with_data(bed, ids):
    """The next site.yml starts the same containers again; each instance runs once, on this host, on its own directory,
    with the file it wrote; the run after it changes nothing."""
    report = site(bed)
    assert summaries(report)[HOST].startswith("start %d " % len(INSTANCES)), summaries(report)
    found = stateful_containers(bed)
    assert sorted(found) == list(INSTANCES), found
    for instance in INSTANCES:
        directory = "%s/%s/%s/data" % (VOLUMES, instance.rpartition("-")[0], instance)
        assert found[instance] == [("%s-%s" % (HOST, instance), True, directory, ids[instance])], found
        assert podman(bed, "exec %s-%s cat /data/marker" % (HOST, instance)) == instance
    # The db's published port answers again.
    with urllib.request.urlopen("http://%s:5432/health" % ADDRESS, timeout=10) as answer:
        assert answer.read() == b"db-0 ok\n"
    again = summaries(site(bed))[HOST]
    assert again.startswith("start 0 ") and "restart 0 " in again, again


def test_an_engine_restart_stops_the_instances_and_the_next_run_starts_them_on_their_data(bed):
    podman(bed, "system migrate")
    check_back_with_data(bed, stopped(bed))


def test_a_host_reboot_keeps_each_instance_on_its_node_with_its_file(bed):
    bed.reboot(HOST)
    check_back_with_data(bed, stopped(bed))
