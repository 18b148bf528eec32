# -*- coding: utf-8 -*-
"""The independent plan checker knows every rule of the planner: each rule is shown to pass a plan that keeps
it and to fail one that breaks it (sidecar resources, ports and anti-affinity; NoExecute; quota minimums;
'already running may stay' on NoSchedule and cordoned nodes; label and taint values as text; a GPU shared
inside a quota group counted once)."""

from __future__ import annotations

import copy

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.scheduler import plan
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.plan_checker import check_plan

GPU = {"index": 0, "uuid": "GPU-0", "model": "NVIDIA A100", "memory": "80Gi"}


def planned(problem):
    result = plan(copy.deepcopy(problem), exact_seconds=0)
    assert result["feasible"], result.get("unschedulable")
    assert check_plan(problem, result) == []
    return result


def flags(problem, result, expected):
    violations = check_plan(problem, result)
    assert any(expected in violation for violation in violations), violations


def move(result, instance, node):
    result["placements"][instance]["node"] = node


def test_sidecar_cpu_and_memory_count_on_the_node():
    problem = {"nodes": {"a": {"cpu": 4, "memory": "4Gi"}},
               "services": {"web": {"resources": {"cpu": 2, "memory": "2Gi"}, "sidecars": ["log"]},
                            "log": {"sidecar": True, "resources": {"cpu": 2, "memory": "2Gi"}}}}
    result = planned(problem)
    problem["nodes"]["a"] = {"cpu": 3, "memory": "3Gi"}        # the app alone fits, not with its sidecar
    flags(problem, result, "node a: CPU over-committed: 4000m requested, 3000m allocatable")
    flags(problem, result, "node a: memory over-committed")


def test_sidecar_ports_and_anti_affinity():
    problem = {"nodes": {"a": {"cpu": 8, "memory": "8Gi"}, "b": {"cpu": 8, "memory": "8Gi"}},
               "services": {"web": {"replicas": 2, "sidecars": ["log"], "anti_affinity": ["web"]},
                            "db": {"anti_affinity": ["log"]},
                            "log": {"sidecar": True, "ports": [9100]}}}
    problem["nodes"]["c"] = {"cpu": 8, "memory": "8Gi"}
    result = planned(problem)
    on_db = result["placements"]["db-0"]["node"]
    clash = copy.deepcopy(result)
    move(clash, "web-1", clash["placements"]["web-0"]["node"])
    flags(problem, clash, "host port 9100 used 2 times (web-0/log, web-1/log)")
    near_db = copy.deepcopy(result)
    move(near_db, "web-0", on_db)
    flags(problem, near_db, "anti-affinity: db and log share the node (db lists log)")


def test_no_execute_evicts_even_what_already_runs():
    problem = {"nodes": {"a": {"cpu": 4, "memory": "4Gi"}, "b": {"cpu": 4, "memory": "4Gi"}},
               "services": {"web": {}}, "previous": {"web-0": {"node": "b"}}}
    result = planned(problem)
    assert result["placements"]["web-0"]["node"] == "b"
    problem["nodes"]["b"]["taints"] = [{"key": "maintenance", "effect": "NoExecute"}]
    flags(problem, result, "web-0 on b: untolerated NoExecute taint maintenance=None")


@pytest.mark.parametrize("change", [{"taints": [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]},
                                    {"unschedulable": True}])
def test_what_already_runs_may_stay_on_no_schedule_and_cordoned_nodes(change):
    problem = {"nodes": {"a": {"cpu": 4, "memory": "4Gi"}, "b": {"cpu": 4, "memory": "4Gi"}},
               "services": {"web": {"replicas": 2}}, "previous": {"web-0": {"node": "b"}}}
    result = planned(problem)
    problem["nodes"]["b"].update(change)
    move(result, "web-1", "a")
    move(result, "web-0", "b")
    for placement in result["placements"].values():
        placement.update(gpus=[], nvme=None)
    violations = [v for v in check_plan(problem, result) if not v.startswith(("usage", "node_labels", "moves"))]
    assert violations == []                                    # web-0 ran there: it may stay
    move(result, "web-1", "b")
    reason = "node is unschedulable" if "unschedulable" in change else "untolerated NoSchedule taint"
    flags(problem, result, "web-1 on b: " + reason)


def test_label_and_taint_values_compare_as_text():
    problem = {"nodes": {"a": {"cpu": 4, "memory": "4Gi", "labels": {"version": 1.5, "gpu": True, "rack": 3},
                               "taints": [{"key": "tier", "value": True, "effect": "NoSchedule"}]}},
               "services": {"web": {"node_selector": {"version": "1.5", "gpu": "true", "rack": "3"},
                                    "tolerations": [{"key": "tier", "value": "true"}]}}}
    result = planned(problem)
    problem["services"]["web"]["node_selector"] = {"version": 1.50}
    assert check_plan(problem, result) == []                   # 1.50 is the text "1.5" too
    problem["services"]["web"]["node_selector"] = {"rack": "03"}
    flags(problem, result, "node selector rack=03 not matched")
    problem["services"]["web"]["node_selector"] = {}
    problem["services"]["web"]["tolerations"] = [{"key": "tier", "value": "yes"}]
    flags(problem, result, "untolerated NoSchedule taint tier=true")


def test_a_gpu_shared_inside_a_quota_group_counts_once():
    problem = {"nodes": {"a": {"cpu": 8, "memory": "8Gi", "gpus": [GPU, dict(GPU, index=1, uuid="GPU-1")]}},
               "services": {"infer": {"replicas": 2, "quota": "ml", "resources": {"gpu": {"count": 1, "memory": "10Gi"}}}},
               "quotas": {"ml": {"max": {"gpu": 1}}}}
    result = planned(problem)
    assert {g["uuid"] for p in result["placements"].values() for g in p["gpus"]} == {"GPU-0"}
    spread = copy.deepcopy(result)
    spread["placements"]["infer-1"]["gpus"][0].update(index=1, uuid="GPU-1")
    flags(problem, spread, "quota ml: gpu used 2, above its max 1")


def test_quota_minimums_are_kept_for_their_group():
    problem = {"nodes": {"a": {"cpu": 8, "memory": "8Gi", "gpus": [GPU]}, "b": {"cpu": 8, "memory": "8Gi"}},
               "services": {"solo": {"resources": {"gpu": {"count": 1}}}},
               "quotas": {"ml": {}}}
    result = planned(problem)
    problem["quotas"]["ml"] = {"min": {"gpu": 1}}
    flags(problem, result, "quota min reservations: gpu needs 2")


def swap(result, placed, preempted):
    """``placed`` left out and ``preempted`` put on its node, as a planner that ignored the order would."""
    result["placements"][preempted] = result["placements"].pop(placed)
    result["preempted"][placed] = result["preempted"].pop(preempted)


def test_preemptible_work_is_left_out_lowest_priority_and_highest_ordinal_first():
    problem = {"nodes": {"a": {"cpu": 4, "memory": "4Gi"}},
               "services": {"high": {"replicas": 2, "preemptible": True, "priority": 2, "resources": {"cpu": 1}},
                            "low": {"replicas": 3, "preemptible": True, "priority": 1, "resources": {"cpu": 1}}}}
    result = planned(problem)
    assert sorted(result["placements"]) == ["high-0", "high-1", "low-0", "low-1"]
    assert sorted(result["preempted"]) == ["low-2"]
    by_ordinal = copy.deepcopy(result)
    swap(by_ordinal, "low-0", "low-2")
    flags(problem, by_ordinal, "preempted low-0 while low-2 of the same service is placed")
    by_priority = copy.deepcopy(result)
    swap(by_priority, "high-1", "low-2")
    flags(problem, by_priority, "preempted high-1 (priority 2) while low-2 (priority 1, a larger request) is placed on a")
