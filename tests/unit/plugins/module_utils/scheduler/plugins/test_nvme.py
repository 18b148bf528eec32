# -*- coding: utf-8 -*-
from __future__ import annotations

from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.builders import node, reason, service, solve, where

TI = 2 ** 40


def disk(name, size="1Ti", labels=("cache",)):
    return {"name": name, "size": size, "labels": list(labels), "mount": "/mnt/" + name}


def cache(size="300Gi", label="cache", replicas=1, **extra):
    return service(replicas=replicas, resources={"nvme": {"label": label, "size": size}}, **extra)


def test_device_with_label_and_space():
    nodes = {"a": node(nvme=[disk("nvme0n1", labels=["dataset"])]), "b": node(nvme=[disk("nvme0n1")])}
    result = solve(nodes, {"web": cache()})
    assert result["placements"]["web-0"]["nvme"] == {"name": "nvme0n1", "size": 300 * 2 ** 30,
                                                     "mount": "/mnt/nvme0n1"}
    assert result["placements"]["web-0"]["node"] == "b"


def test_shared_by_size():
    nodes = {"a": node(nvme=[disk("nvme0n1")])}
    assert set(where(solve(nodes, {"web": cache(size="512Gi", replicas=2)})).values()) == {"a"}
    result = solve(nodes, {"web": cache(size="512Gi", replicas=3)})
    assert reason(result, "web-2") == "0/1 nodes are available: 1 Insufficient NVMe space (cache; asked 512Gi; the largest free device has 0)."


def test_no_labelled_device():
    result = solve({"a": node(), "b": node(nvme=[disk("nvme0n1", labels=[])])}, {"web": cache()})
    assert reason(result, "web-0") == "0/2 nodes are available: 2 node(s) had no NVMe device labelled cache."


def test_best_fit_between_devices_and_staying_keeps_its_device():
    nodes = {"a": node(nvme=[disk("nvme0n1", size="2Ti"), disk("nvme1n1", size="500Gi")])}
    result = solve(nodes, {"web": cache(size="400Gi")})
    assert result["placements"]["web-0"]["nvme"]["name"] == "nvme1n1"
    result = solve(nodes, {"web": cache(size="400Gi")}, previous={"web-0": {"node": "a", "nvme": {"name": "nvme0n1"}}})
    assert result["placements"]["web-0"]["nvme"]["name"] == "nvme0n1"
