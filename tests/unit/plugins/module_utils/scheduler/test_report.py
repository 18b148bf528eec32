# -*- coding: utf-8 -*-
from __future__ import annotations

import re

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.report import render_table
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.builders import gpu, node, service, solve


def test_feasible_table_shows_usage_per_device_and_instances():
    nodes = {"a": node(gpus=[gpu(0), gpu(1, model="NVIDIA L4", memory="24Gi")],
                       nvme=[{"name": "nvme0n1", "size": "1Ti", "labels": ["cache"]}]), "b": node()}
    services = {"infer": service(resources={"gpu": {"memory": "20Gi", "models": ["A100"]},
                                            "nvme": {"label": "cache", "size": "100Gi"}}, sidecars=["log"]),
                "log": {"sidecar": True}}
    lines = render_table(solve(nodes, services)).splitlines()
    assert lines[0].split() == ["NODE", "CPU", "MEMORY", "GPU", "MEMORY", "(per", "device)", "NVME", "INSTANCES"]
    assert lines[1].split() == ["a", "1/16", "1Gi/64Gi", "0:20Gi/80Gi", "1:0/24Gi", "nvme0n1:100Gi/1Ti",
                                "infer-0(+log)"]
    assert lines[2].split() == ["b", "0/16", "0/64Gi", "-", "-", "-"]
    assert lines[4] == "plan: feasible (greedy): 1 instance(s) on 1 of 2 node(s), 0 move(s)"
    assert lines[5] == "ranks: 0: infer"


def test_infeasible_report_lists_each_unplaced_instance():
    text = render_table(solve({"a": node(cpu=1)}, {"db": service(cpu=2)}))
    lines = text.splitlines()
    assert re.match(r"plan: INFEASIBLE \(exact, infeasible in [0-9.]+ s of 5 s\): 1 of 1 instance\(s\) could not be placed; "
                    r"no placement exists: the exact solver proved it \(db-0: no node passes its filters\); nothing is placed$", lines[0])
    assert lines[1:] == ["  db-0: 0/1 nodes are available: 1 Insufficient cpu (asked 2 CPUs; the most free on a node is 1 CPU)."]


def test_moves_are_listed():
    text = render_table(solve({"a": node()}, {"web": service()}, previous={"web-0": {"node": "gone"}}))
    assert "  move web-0: gone -> a" in text.splitlines()
