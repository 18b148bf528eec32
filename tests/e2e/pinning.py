# -*- coding: utf-8 -*-
"""The catalog of the CPU pinning tests (tests/e2e/test_cpu_pinning.py on Podman, test_cpu_pinning_docker.py on
Docker): GPU shares pinned to their GPUs' NUMA node, small enough that two fit one CPU and a third does not."""

from __future__ import annotations

READY = "touch /tmp/ready && exec sleep 2147483647"


def catalog(replicas):
    """gangplank_services: ``replicas`` pinned shares of 10Gi, 400m and 16Mi each."""
    return {"pinned": {"replicas": replicas, "cpu_pinning": "numa",
                       "resources": {"cpu": "400m", "memory": "16Mi", "gpu": {"count": 1, "memory": "10Gi"}},
                       "image": "localhost/gangplank-demo:1", "command": ["sh", "-c", READY], "init": True,
                       "health": {"command": ["test", "-f", "/tmp/ready"], "timeout": 10, "interval": 0.2, "retries": 50}}}
