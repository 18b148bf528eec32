# -*- coding: utf-8 -*-
from __future__ import annotations

from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.builders import node, reason, service, solve, where


def test_cordoned_node_takes_nothing_new_but_keeps_what_runs():
    nodes = {"a": node(unschedulable=True)}
    assert reason(solve(nodes, {"web": service()}), "web-0") == \
        "0/1 nodes are available: 1 node(s) were unschedulable."
    assert where(solve(nodes, {"web": service()}, previous={"web-0": {"node": "a"}})) == {"web-0": "a"}
