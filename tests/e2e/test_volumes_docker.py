# -*- coding: utf-8 -*-
"""Stateful data that survives, end to end on Docker: a fresh-bed host (scripts/lib/freshbed.sh) reached over real
SSH, Docker installed by the runtime role. A stateful db of two instances keeps a file in each instance's own volume
through a new env value (recreated), a removed container and a restart of the Docker daemon; scaled 2 -> 1 -> 2,
ordinal 1 gets its file back; teardown keeps the data unless teardown_remove_data is true.
tests/e2e/test_volumes.py checks the same and more on Podman."""

from __future__ import annotations

import pytest
import yaml

from ansible_collections.gangplank.platform.tests.e2e.bed import failures
from ansible_collections.gangplank.platform.tests.e2e.fresh import FreshBed

HOST = "fe2e-vol"
VOLUMES = "/var/lib/gangplank/volumes/db"
READY = "touch /tmp/ready && exec sleep 2147483647"


def catalog(replicas, **env):
    return {"db": {"replicas": replicas, "stateful": True, "resources": {"cpu": "10m", "memory": "16Mi"},
                   "image": "localhost/gangplank-demo:1", "command": ["sh", "-c", READY], "init": True, "env": env,
                   "health": {"command": ["test", "-f", "/tmp/ready"], "timeout": 10, "interval": 0.2, "retries": 50},
                   "volumes": [{"name": "data", "path": "/data", "size": "16Mi"}]}}


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    base = tmp_path_factory.mktemp("volumes-docker")
    bed = FreshBed(base, {}, extra={HOST: ("127.0.0.77", {"gangplank_container_engine": "docker"})})
    bed.catalog = base / "group_vars" / "all" / "zz_catalog.yml"
    bed.catalog.write_text(yaml.safe_dump({"gangplank_services": catalog(2)}))
    bed.down()
    bed.up()
    returncode, report = bed.playbook("site.yml")
    assert returncode == 0, failures(report)
    yield bed
    bed.down()


def site(bed, services):
    bed.catalog.write_text(yaml.safe_dump({"gangplank_services": services}))
    returncode, report = bed.playbook("site.yml")
    assert returncode == 0, failures(report)
    return report


def docker(bed, script, check=True):
    return bed.sh(HOST, "docker " + script, check=check).strip()


def test_each_instance_keeps_its_file_through_a_recreate_a_removal_and_a_daemon_restart(bed):
    for ordinal in (0, 1):
        docker(bed, "exec %s-db-%d sh -c 'echo db-%d > /data/marker'" % (HOST, ordinal, ordinal))
    assert bed.sh(HOST, "cat %s/db-0/data/marker %s/db-1/data/marker" % (VOLUMES, VOLUMES)) == "db-0\ndb-1\n"
    before = docker(bed, "inspect --format '{{.Id}}' %s-db-0" % HOST)
    site(bed, catalog(2, DB_MODE="changed"))
    assert docker(bed, "inspect --format '{{.Id}}' %s-db-0" % HOST) != before
    assert docker(bed, "exec %s-db-0 cat /data/marker" % HOST) == "db-0"
    docker(bed, "rm -f %s-db-0" % HOST)
    site(bed, catalog(2, DB_MODE="changed"))
    assert docker(bed, "exec %s-db-0 cat /data/marker" % HOST) == "db-0"
    # The engine restarted (the runtime role's dockerd, started again the way the bed starts it), then a run.
    bed.sh(HOST, "pkill -x dockerd; for i in $(seq 50); do pgrep -x dockerd >/dev/null || break; sleep 0.2; done")
    site(bed, catalog(2, DB_MODE="changed"))
    assert docker(bed, "exec %s-db-0 cat /data/marker" % HOST) == "db-0"
    assert docker(bed, "exec %s-db-1 cat /data/marker" % HOST) == "db-1"


def test_a_scale_down_retains_ordinal_1_and_a_scale_up_reattaches_it(bed):
    report = site(bed, catalog(1, DB_MODE="changed"))
    assert docker(bed, "ps -aq --filter name=%s-db-1" % HOST) == ""
    assert bed.sh(HOST, "cat %s/db-1/data/marker" % VOLUMES) == "db-1\n"
    table = [line for play in report["plays"] for task in play["tasks"]
             if task["task"]["name"].endswith("Show the plan") for result in task["hosts"].values() for line in result["msg"]]
    assert "  retained db-1 on %s: data (disk, 16Mi); kept until removed (docs/deploy.md, Retained volumes)" % HOST in table
    site(bed, catalog(2, DB_MODE="changed"))
    assert docker(bed, "exec %s-db-1 cat /data/marker" % HOST) == "db-1"


def test_teardown_keeps_the_data_unless_asked(bed):
    returncode, report = bed.playbook("teardown.yml")
    assert returncode == 0, failures(report)
    assert bed.containers() == {} and bed.sh(HOST, "cat %s/db-0/data/marker" % VOLUMES) == "db-0\n"
    returncode, report = bed.playbook("teardown.yml", "-e", "teardown_remove_data=true")
    assert returncode == 0, failures(report)
    assert bed.sh(HOST, "test -e %s && echo present || echo gone" % VOLUMES).strip() == "gone"
