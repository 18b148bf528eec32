# -*- coding: utf-8 -*-
"""Stateful data that survives, end to end on a copy of the local test bed (Podman): the demo's db and queue keep their
data in volumes. A file written into db-0's volume is still there after a new image tag or env value (the container is
recreated) and after its container is removed by hand; queue scaled 2 -> 1 -> 2 gets ordinal 1's file back on its node
(retained in between, listed by the plan and by status); two stateful instances on one NVMe device have directories of
their own; teardown keeps the data unless teardown_remove_data is true."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from ansible_collections.gangplank.platform.tests.e2e.bed import Bed, containers as containers_of, failures, summaries, task_results

HOSTS = {"node1": ("vol-n1", "127.0.0.181"), "node2": ("vol-n2", "127.0.0.182"), "node3": ("vol-n3", "127.0.0.183")}
NAMES = tuple(name for name, _address in HOSTS.values())


def containers():
    return containers_of(NAMES)


def where(found, instance):
    """(container name, node) of an instance."""
    return next((name, labels["gangplank.io/node"]) for name, (_state, _at, labels) in found.items()
                if labels["gangplank.io/instance"] == instance and "gangplank.io/sidecar-of" not in labels)


def podman(*argv):
    return subprocess.run(["podman", *argv], capture_output=True, text=True, check=False)


def write_catalog(bed, change):
    """The bed's catalog with ``change`` (a function of the services) applied."""
    path = bed.base / "group_vars" / "all" / "catalog.yml"
    catalog = yaml.safe_load(path.read_text())
    change(catalog["gangplank_services"])
    path.write_text(yaml.safe_dump(catalog))


def site(bed, *extra):
    returncode, report = bed.playbook("site.yml", *extra)
    assert returncode == 0, failures(report)
    return report


def plan_table(report):
    return [line for hosts in task_results(report, "Show the plan") for result in hosts.values()
            for line in result["msg"]]


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    bed = Bed.make(tmp_path_factory.mktemp("volumes"), HOSTS)
    # Two stateful instances on node1's one NVMe device, each with an NVMe volume.
    write_catalog(bed, lambda services: services.update(store={
        "replicas": 2, "stateful": True, "resources": {"cpu": "10m", "memory": "16Mi", "nvme": {"label": "cache", "size": "1Gi"}},
        "node_selector": {"gangplank.io/hostname": HOSTS["node1"][0]}, "image": "{{ demo_image }}",
        "command": ["sh", "-c", "touch /tmp/ready && exec sleep 2147483647"], "init": True,
        "volumes": [{"name": "cache", "path": "/cache", "where": "nvme", "mode": "0700"}]}))
    report = site(bed)
    bed.torn_down = False
    yield bed, report
    if not bed.torn_down:                   # test_teardown_keeps_the_data_unless_asked... did not get to its last teardown
        bed.playbook("teardown.yml", "-e", "teardown_remove_data=true", "-e", "gangplank_break_lock=true")


def read_file(container, path):
    done = podman("exec", container, "cat", path)
    return done.stdout if done.returncode == 0 else None


def test_every_instance_has_its_own_volume_directory_and_the_plan_says_they_are_new(bed):
    bed, report = bed
    found = containers()
    for instance, path in (("db-0", "/var/lib/db"), ("queue-0", "/var/lib/queue"), ("queue-1", "/var/lib/queue")):
        name, node = where(found, instance)
        service = instance.rpartition("-")[0]
        directory = bed.state(node) / "volumes" / service / instance / "data"
        assert directory.is_dir(), directory
        mounts = json.loads(podman("inspect", name).stdout)[0]["Mounts"]
        assert {"Source": str(directory), "Destination": path} in [
            {"Source": mount["Source"], "Destination": mount["Destination"]} for mount in mounts], mounts
    table = plan_table(report)
    assert "volumes:" in table
    assert any(line.startswith("  created db-0 on ") and line.endswith(": data (disk, 64Mi)") for line in table), table


def test_two_stateful_instances_on_one_nvme_device_have_different_directories(bed):
    bed, _report = bed
    found = containers()
    sources = {}
    for instance in ("store-0", "store-1"):
        name, node = where(found, instance)
        assert node == HOSTS["node1"][0]
        mounts = json.loads(podman("inspect", name).stdout)[0]["Mounts"]
        sources[instance] = next(mount["Source"] for mount in mounts if mount["Destination"] == "/cache")
        assert podman("exec", name, "sh", "-c", "echo %s > /cache/owner" % instance).returncode == 0
    nvme = bed.state(HOSTS["node1"][0]) / "nvme0n1" / "gangplank" / "store"
    assert sources == {"store-0": str(nvme / "store-0" / "cache"), "store-1": str(nvme / "store-1" / "cache")}
    assert (nvme / "store-0" / "cache" / "owner").read_text() == "store-0\n"
    assert (nvme / "store-1" / "cache" / "owner").read_text() == "store-1\n"
    # Made with the catalog's mode, once.
    assert oct((nvme / "store-0" / "cache").stat().st_mode & 0o777) == "0o700"


def test_the_data_survives_a_recreate_for_an_env_change_and_a_removed_container(bed):
    bed, _report = bed
    name, node = where(containers(), "db-0")
    assert podman("exec", name, "sh", "-c", "echo kept > /var/lib/db/marker").returncode == 0
    # A new env value recreates db-0 (a new spec hash): a new container, the same data.
    write_catalog(bed, lambda services: services["db"].setdefault("env", {}).update(DB_MODE="changed"))
    before = containers()[name]
    report = site(bed)
    after = containers()[name]
    assert after[1] != before[1] and after[2]["gangplank.io/spec-hash"] != before[2]["gangplank.io/spec-hash"]
    assert "restart 1 [%r]" % name in summaries(report)[node]
    assert read_file(name, "/var/lib/db/marker") == "kept\n"
    # The container removed by hand: the next run makes it again, on the same data.
    assert podman("rm", "-f", name).returncode == 0
    site(bed)
    assert read_file(name, "/var/lib/db/marker") == "kept\n"
    # A run with nothing to change keeps the container and the data, and the directory's mode stays as the app left it.
    directory = bed.state(node) / "volumes" / "db" / "db-0" / "data"
    directory.chmod(0o711)
    report = site(bed)
    assert "restart 0" in summaries(report)[node] and oct(directory.stat().st_mode & 0o777) == "0o711"


def test_a_scale_down_retains_ordinal_1_and_a_scale_up_gets_its_file_back_on_its_node(bed):
    bed, _report = bed
    name, node = where(containers(), "queue-1")
    assert podman("exec", name, "sh", "-c", "echo ordinal-1 > /var/lib/queue/marker").returncode == 0
    write_catalog(bed, lambda services: services["queue"].update(replicas=1))
    report = site(bed)
    assert name not in containers()
    directory = bed.state(node) / "volumes" / "queue" / "queue-1" / "data"
    assert (directory / "marker").read_text() == "ordinal-1\n"
    table = plan_table(report)
    assert "  retained queue-1 on %s: data (disk, 64Mi); kept until removed (docs/deploy.md, Retained volumes)" % node \
        in table, table
    record = json.loads((bed.state() / "placement.json").read_text())
    assert record["retained"]["queue-1"]["node"] == node
    returncode, status = bed.playbook("status.yml")
    assert returncode == 0, failures(status)
    lines = [line for hosts in task_results(status, "Show the status table") for result in hosts.values()
             for line in result["msg"]]
    assert "retained volumes of queue-1 on %s: data (disk, 64Mi)" % node in lines, lines
    # Back to two: queue-1 is reattached on its node, with its file.
    write_catalog(bed, lambda services: services["queue"].update(replicas=2))
    report = site(bed)
    again, again_node = where(containers(), "queue-1")
    assert again_node == node and read_file(again, "/var/lib/queue/marker") == "ordinal-1\n"
    assert any(line == "  reattached queue-1 on %s: data (disk, 64Mi)" % node for line in plan_table(report))


def test_teardown_keeps_the_data_unless_asked_and_removes_it_when_asked(bed):
    bed, _report = bed
    _name, node = where(containers(), "db-0")
    marker = bed.state(node) / "volumes" / "db" / "db-0" / "data" / "marker"
    nvme = bed.state(HOSTS["node1"][0]) / "nvme0n1" / "gangplank" / "store" / "store-0" / "cache" / "owner"
    assert marker.exists() and nvme.exists()
    returncode, report = bed.playbook("teardown.yml")
    assert returncode == 0, failures(report)
    assert containers() == {} and marker.read_text() == "kept\n" and nvme.exists()
    # Deployed again, db-0 finds its data.
    site(bed)
    name, _node = where(containers(), "db-0")
    assert read_file(name, "/var/lib/db/marker") == "kept\n"
    returncode, report = bed.playbook("teardown.yml", "-e", "teardown_remove_data=true")
    assert returncode == 0, failures(report)
    bed.torn_down = True
    assert not marker.exists() and not (bed.state(node) / "volumes").exists() and not nvme.exists()
