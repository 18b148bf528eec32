# -*- coding: utf-8 -*-
"""Disk: disk volumes (resources.disk) on the node's data filesystem (nodes.<n>.disk), greedy and exact."""

from __future__ import annotations

import copy

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.report import render_table
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.builders import (
    checked, errors_of, node, reason, service, solve, where,
)
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.plan_checker import check_plan
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.test_exact import PACKING

GI = 2 ** 30


def db(size="4Gi", replicas=1):
    return service(replicas=replicas, stateful=True, resources={"disk": size})


def test_requests_fill_the_data_filesystem_and_the_rest_is_refused_with_a_reason_per_node():
    nodes = {"a": node(disk="10Gi"), "b": node(disk="3Gi"), "c": node()}
    assert set(where(checked({"nodes": nodes, "services": {"db": db(replicas=2)}})).values()) == {"a"}
    result = solve(nodes, {"db": db(replicas=3)})
    assert reason(result, "db-2") == ("0/3 nodes are available: 1 node(s) did not report their data filesystem (disk), "
                                      "2 Insufficient disk space.")
    assert check_plan({"nodes": nodes, "services": {"db": db(replicas=3)}}, result) == []


def test_staying_instances_count_and_a_new_one_goes_where_there_is_room():
    nodes = {"a": node(disk="5Gi"), "b": node(disk="5Gi")}
    result = checked({"nodes": nodes, "services": {"db": db(replicas=2)}, "previous": {"db-0": {"node": "a"}}})
    assert where(result) == {"db-0": "a", "db-1": "b"}


def test_usage_and_table_show_the_disk_only_where_some_service_asks_for_it():
    nodes = {"a": node(disk="10Gi"), "b": node()}
    result = checked({"nodes": nodes, "services": {"db": db()}})
    assert result["usage"]["a"]["disk"] == {"used": 4 * GI, "total": 10 * GI}
    assert result["usage"]["b"]["disk"] == {"used": 0, "total": None}
    table = render_table(result).splitlines()
    assert table[0].split() == ["NODE", "CPU", "MEMORY", "GPU", "MEMORY", "(per", "device)", "NVME", "DISK", "INSTANCES"]
    assert table[1].split()[-2:] == ["4Gi/10Gi", "db-0"]
    plain = checked({"nodes": nodes, "services": {"web": service()}})
    assert all("disk" not in usage for usage in plain["usage"].values())
    assert "DISK" not in render_table(plain)


def test_the_exact_solver_keeps_to_each_data_filesystem():
    # PACKING fits only as {5, 3, 2} + {4, 4, 2} Gi of GPU memory: both s4 instances on one node.
    problem = copy.deepcopy(PACKING)
    for spec in problem["nodes"].values():
        spec["disk"] = "10Gi"
    problem["services"]["s4"]["resources"]["disk"] = "5Gi"
    result = checked(problem)
    assert result["path"] == "exact" and result["placements"]["s4-0"]["node"] == result["placements"]["s4-1"]["node"]
    problem["services"]["s4"]["resources"]["disk"] = "6Gi"
    result = checked(problem)
    assert not result["feasible"] and result["exact"]["status"] == "infeasible"


def test_bad_disk_sizes_are_named():
    errors = errors_of({"nodes": {"a": node(disk="lots")},
                        "services": {"db": db(size="-1"), "side": service(sidecar=True, resources={"disk": "1Gi"})}})
    assert errors["nodes.a.disk"].startswith('got "lots"; expected a size')
    assert errors["services.db.resources.disk"].startswith('got "-1"; expected a size')
    assert errors["services.side.resources.disk"] == ('got "1Gi"; expected no disk request on a sidecar: it takes CPU, '
                                                      'memory and ports beside its app')
