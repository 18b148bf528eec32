# -*- coding: utf-8 -*-
"""The catalog of the CPU pinning tests (tests/e2e/test_cpu_pinning.py on Podman, test_cpu_pinning_docker.py on
Docker): GPU shares pinned to their GPUs' NUMA node, small enough that two fit one CPU and a third does not, and the
check that the third is refused."""

from __future__ import annotations

import yaml

from ansible_collections.gangplank.platform.tests.e2e.bed import failures

READY = "touch /tmp/ready && exec sleep 2147483647"


def catalog(replicas):
    """gangplank_services: ``replicas`` pinned shares of 10Gi, 400m and 16Mi each."""
    return {"pinned": {"replicas": replicas, "cpu_pinning": "numa",
                       "resources": {"cpu": "400m", "memory": "16Mi", "gpu": {"count": 1, "memory": "10Gi"}},
                       "image": "localhost/gangplank-demo:1", "command": ["sh", "-c", READY], "init": True,
                       "health": {"command": ["test", "-f", "/tmp/ready"], "timeout": 10, "interval": 0.2, "retries": 50}}}


def assert_a_third_share_is_refused(bed, snapshot):
    """site.yml with a third share on ``bed`` (its catalog file holding catalog(2)) fails on the NUMA node's CPUs and
    changes nothing: ``snapshot()`` (the containers and the placement record, read as that bed reads them) is the same
    after. The catalog is put back whatever happens."""
    before = snapshot()
    bed.catalog.write_text(yaml.safe_dump({"gangplank_services": catalog(3)}))
    try:
        returncode, report = bed.playbook("site.yml")
    finally:
        bed.catalog.write_text(yaml.safe_dump({"gangplank_services": catalog(2)}))
    assert returncode != 0
    text = "\n".join(failures(report))
    assert "Insufficient CPUs on the GPUs' NUMA node" in text, text
    assert snapshot() == before
