# -*- coding: utf-8 -*-
from __future__ import annotations

from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.builders import node, reason, service, solve, where


def test_a_host_port_has_one_user_per_node():
    nodes = {"a": node(), "b": node()}
    placed = where(solve(nodes, {"web": service(replicas=2, ports=[8080])}))
    assert sorted(placed.values()) == ["a", "b"]
    result = solve(nodes, {"web": service(replicas=3, ports=[8080])})
    assert reason(result, "web-2") == \
        "0/2 nodes are available: 2 node(s) didn't have free ports for the requested host ports."


def test_sidecar_ports_count_and_different_ports_share():
    services = {"web": service(ports=[80], sidecars=["metrics"]), "api": service(ports=[9100]),
                "metrics": {"sidecar": True, "ports": [9100]}}
    placed = where(solve({"a": node(), "b": node()}, services))
    assert placed["web-0"] != placed["api-0"]
    assert where(solve({"a": node()}, {"web": service(ports=[80]), "api": service(ports=[81])}))
