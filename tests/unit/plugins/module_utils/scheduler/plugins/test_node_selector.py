# -*- coding: utf-8 -*-
from __future__ import annotations

from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.builders import node, reason, service, solve, where


def test_every_selector_label_must_match():
    nodes = {"a": node(labels={"zone": "east", "disk": "ssd"}), "b": node(labels={"zone": "east"}),
             "c": node(labels={"zone": "west", "disk": "ssd"})}
    assert where(solve(nodes, {"db": service(node_selector={"zone": "east", "disk": "ssd"})})) == {"db-0": "a"}
    result = solve(nodes, {"db": service(node_selector={"zone": "north"})})
    assert reason(result, "db-0") == "0/3 nodes are available: 3 node(s) didn't match node selector."


def test_selector_values_compare_as_strings():
    assert where(solve({"a": node(labels={"gpu": True, "rack": 3})},
                       {"db": service(node_selector={"gpu": "true", "rack": 3})})) == {"db-0": "a"}
