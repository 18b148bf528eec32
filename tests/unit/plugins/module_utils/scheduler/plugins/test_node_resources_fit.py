# -*- coding: utf-8 -*-
from __future__ import annotations

from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.builders import gpu, node, reason, service, solve, where


def test_cpu_and_memory_must_fit_including_sidecars():
    nodes = {"a": node(cpu=4, memory="8Gi")}
    services = {"web": service(cpu=3, memory="4Gi", sidecars=["log"]),
                "log": {"sidecar": True, "resources": {"cpu": "1500m", "memory": "1Gi"}}}
    assert reason(solve(nodes, services), "web-0") == "0/1 nodes are available: 1 Insufficient cpu (asked 4500m CPU; the most free on a node is 4 CPUs)."
    services["log"]["resources"]["cpu"] = "1000m"
    assert where(solve(nodes, services)) == {"web-0": "a"}


def test_memory_reason():
    result = solve({"a": node(memory="2Gi"), "b": node(memory="2Gi")}, {"db": service(memory="3Gi")})
    assert reason(result, "db-0") == "0/2 nodes are available: 2 Insufficient memory (asked 3Gi of memory; the most free on a node is 2Gi)."


def test_bin_packing_fills_one_node_before_the_next():
    nodes = {"a": node(cpu=8), "b": node(cpu=8), "c": node(cpu=8)}
    placed = where(solve(nodes, {"web": service(replicas=4, cpu=2)}))
    assert set(placed.values()) == {"a"}


def test_packs_onto_the_fuller_node():
    # c already holds a big instance; the small ones join it rather than opening a or b.
    nodes = {"a": node(cpu=16), "b": node(cpu=16), "c": node(cpu=16)}
    services = {"big": service(cpu=12, node_selector={"k": "c"}), "small": service(replicas=2, cpu=1)}
    nodes["c"]["labels"] = {"k": "c"}
    placed = where(solve(nodes, services))
    assert placed == {"big-0": "c", "small-0": "c", "small-1": "c"}


def test_gpu_nodes_are_kept_for_gpu_work():
    nodes = {"a-gpu": node(gpus=[gpu(0)]), "b-cpu": node()}
    assert where(solve(nodes, {"web": service()})) == {"web-0": "b-cpu"}
