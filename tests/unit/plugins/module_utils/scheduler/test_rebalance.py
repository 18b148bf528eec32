# -*- coding: utf-8 -*-
"""Rebalance (scheduler/rebalance.py): packs stateless instances within max_moves, never moves a stateful
one, counts a restart on other devices as a move, takes no plan that gains nothing, and every plan it
returns passes the independent checker."""

from __future__ import annotations

import copy
import random

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler import exact
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.problem import ProblemError
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.rebalance import (
    describe, fragmentation, rebalance,
)
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.plan_checker import check_plan

pytestmark = pytest.mark.skipif(not exact.available(), reason="rebalance needs OR-Tools")


def fragmented(nodes=4, stateful_db=True):
    """One small GPU instance per node, each alone on a GPU of its own; a stateful db beside the last one."""
    problem = {
        "nodes": {"n%d" % i: {"cpu": 16, "memory": "64Gi",
                              "gpus": [{"index": g, "uuid": "G-%d-%d" % (i, g), "model": "NVIDIA A100", "memory": "80Gi"}
                                       for g in range(2)]} for i in range(nodes)},
        "services": {"infer": {"replicas": nodes, "resources": {"cpu": 1, "gpu": {"memory": "20Gi"}}},
                     "db": {"stateful": stateful_db, "resources": {"cpu": 1}}},
        "previous": {"infer-%d" % i: {"node": "n%d" % i, "gpus": [{"uuid": "G-%d-0" % i}]} for i in range(nodes)},
    }
    problem["previous"]["db-0"] = {"node": "n%d" % (nodes - 1)}
    return problem


def checked(problem, result):
    """The checker knows the plan paths; a rebalance plan is checked as one (its moves included)."""
    plain = {key: value for key, value in result.items() if key != "rebalance"}
    plain["path"] = "greedy_with_moves" if result["path"] == "rebalance" else result["path"]
    return check_plan(problem, plain)


@pytest.mark.parametrize("max_moves, gain", [(0, 0), (1, 1), (2, 2), (3, 3), (5, 3)])
def test_each_move_frees_a_gpu_and_a_node_up_to_max_moves(max_moves, gain):
    problem = fragmented()
    result = rebalance(copy.deepcopy(problem), max_moves=max_moves)
    assert checked(problem, result) == []
    report = result["rebalance"]
    assert len(result["moves"]) == gain <= max_moves
    assert report["gain"] == {"whole_gpus_freed": gain, "nodes_freed": gain}
    assert report["before"]["whole_free_gpus"] == 4 and report["after"]["whole_free_gpus"] == 4 + gain
    assert result["placements"]["db-0"]["node"] == "n3"        # stateful: never moved
    assert result["path"] == ("rebalance" if gain else "greedy")
    if not gain:
        assert "nothing to do" in "\n".join(describe(result))


def test_stateful_instances_never_move():
    problem = fragmented()
    problem["services"]["infer"]["stateful"] = True
    result = rebalance(problem, max_moves=10)
    assert result["moves"] == [] and result["rebalance"]["gain"] == {"whole_gpus_freed": 0, "nodes_freed": 0}


def test_a_restart_on_other_gpus_counts_as_a_move():
    problem = {"nodes": {"a": {"cpu": 8, "memory": "8Gi", "gpus": [
        {"index": 0, "uuid": "G0", "model": "L4", "memory": "24Gi"}, {"index": 1, "uuid": "G1", "model": "L4", "memory": "24Gi"}]}},
        "services": {"web": {"replicas": 2, "resources": {"gpu": {"memory": "10Gi"}}}},
        "previous": {"web-0": {"node": "a", "gpus": [{"uuid": "G0"}]}, "web-1": {"node": "a", "gpus": [{"uuid": "G1"}]}}}
    assert rebalance(copy.deepcopy(problem), max_moves=0)["moves"] == []
    result = rebalance(problem, max_moves=1)
    assert result["moves"] == [] and result["rebalance"]["restarts"] == 1
    assert result["rebalance"]["gain"] == {"whole_gpus_freed": 1, "nodes_freed": 0}
    assert {claim["uuid"] for entry in result["placements"].values() for claim in entry["gpus"]} in ({"G0"}, {"G1"})


def test_an_infeasible_catalog_is_not_rebalanced():
    problem = fragmented()
    problem["services"]["infer"]["resources"]["cpu"] = 100
    result = rebalance(problem, max_moves=3, exact_seconds=1)
    assert result["feasible"] is False and result["rebalance"]["status"] == "not_run"
    assert describe(result) == ["rebalance: the current catalog does not fit the cluster, so there is nothing to rebalance"]


@pytest.mark.parametrize("value", [-1, True, 1.5, "3", 100001, None])
def test_a_bad_max_moves_names_it(value):
    with pytest.raises(ProblemError) as raised:
        rebalance(fragmented(), max_moves=value)
    assert raised.value.errors[0][0] == "max_moves" and "expected a whole number from 0 to 100000" in raised.value.errors[0][1]


def test_fragmentation_counts():
    usage = {"a": {"gpus": [{"used": 0, "total": 8}, {"used": 4, "total": 8}, {"used": 8, "total": 8}], "instances": ["x"]},
             "b": {"gpus": [], "instances": []}}
    assert fragmentation(usage) == {"whole_free_gpus": 1, "free_nodes": 1, "partly_used_gpus": 1, "gpus": 3, "nodes": 2}


def test_random_fragmented_clusters_stay_valid_and_within_budget():
    rng = random.Random(16)
    for _round in range(12):
        count = rng.randint(2, 5)
        nodes = {"n%d" % i: {"cpu": 8, "memory": "32Gi", "gpus": [
            {"index": g, "uuid": "G-%d-%d" % (i, g), "model": "NVIDIA A100", "memory": "40Gi"} for g in range(rng.randint(0, 3))]}
            for i in range(count)}
        with_gpus = [name for name, spec in nodes.items() if spec["gpus"]]
        services = {"cpu": {"replicas": rng.randint(1, 4), "resources": {"cpu": rng.choice([1, 2]), "memory": "1Gi"}},
                    "keep": {"stateful": True, "resources": {"cpu": 1}}}
        previous = {"cpu-%d" % i: {"node": rng.choice(sorted(nodes))} for i in range(services["cpu"]["replicas"])}
        previous["keep-0"] = {"node": rng.choice(sorted(nodes))}
        if with_gpus:
            services["gpu"] = {"replicas": rng.randint(1, 3), "resources": {"cpu": 1, "gpu": {"memory": "10Gi"}}}
            for i in range(services["gpu"]["replicas"]):
                host = rng.choice(with_gpus)
                previous["gpu-%d" % i] = {"node": host, "gpus": [{"uuid": rng.choice(nodes[host]["gpus"])["uuid"]}]}
        problem = {"nodes": nodes, "services": services, "previous": previous}
        max_moves = rng.randint(0, 3)
        result = rebalance(copy.deepcopy(problem), max_moves=max_moves, exact_seconds=5)
        if not result["feasible"]:
            continue
        assert checked(problem, result) == [], problem
        report = result["rebalance"]
        assert report["moves"] + report["restarts"] <= max_moves or result["path"] != "rebalance"
        assert result["placements"]["keep-0"]["node"] == previous["keep-0"]["node"]
        assert report["gain"]["whole_gpus_freed"] >= 0


def test_a_large_cluster_is_solved_over_its_most_fragmented_part(monkeypatch):
    from ansible_collections.gangplank.platform.plugins.module_utils.scheduler import rebalance as module
    problem = fragmented(nodes=8)
    problem["nodes"]["full"] = {"cpu": 16, "memory": "64Gi",
                                "gpus": [{"index": 0, "uuid": "G-full", "model": "NVIDIA A100", "memory": "80Gi"}]}
    problem["services"]["big"] = {"resources": {"cpu": 1, "gpu": {"count": 1}}}       # a whole GPU: nothing to drain there
    problem["previous"]["big-0"] = {"node": "full", "gpus": [{"uuid": "G-full"}]}
    # Quotas count the whole cluster, also the instances outside the modelled part (the checker checks them).
    problem["services"]["infer"]["quota"] = "q"
    problem["services"]["big"]["quota"] = "q"
    problem["quotas"] = {"q": {"max": {"gpu": 9, "cpu": 9}, "min": {"gpu": 9}}}
    monkeypatch.setattr(module, "PART_PAIRS", 40)
    result = rebalance(copy.deepcopy(problem), max_moves=2)
    assert checked(problem, result) == []
    report = result["rebalance"]
    # Nodes by GPUs used in part, then fewest instances, while nodes x instances stay within 40: n0..n5.
    assert report["scope"] == "the 6 most fragmented of 9 nodes, with their 6 of 10 instances"
    assert result["placements"]["big-0"]["node"] == "full" and result["placements"]["db-0"]["node"] == "n7"
    assert report["gain"] == {"whole_gpus_freed": 2, "nodes_freed": 2} and report["status"] == "feasible"
    assert any(line.startswith("  solved over the ") for line in describe(result))


def test_the_greedy_drain_moves_the_emptiest_gpus_within_the_budget():
    from ansible_collections.gangplank.platform.plugins.module_utils.scheduler import rebalance as module
    from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.framework import Framework
    from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.profile import PLUGINS, WEIGHTS
    from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.problem import parse_problem
    from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.scheduler import schedule
    problem = parse_problem(fragmented())
    current = schedule(problem, PLUGINS)
    placements = module._current_placements(problem, current)
    builder = module._RebalanceModel(problem, Framework(problem, PLUGINS, WEIGHTS), None, 2)
    drained = module._drained(builder, placements, 2)
    moved = {placement.instance.name: placement.node for placement in drained}
    before = {placement.instance.name: placement.node for placement in placements}
    changed = sorted(name for name in moved if moved[name] != before[name])
    assert len(changed) == 2 and all(name.startswith("infer-") for name in changed)
    # Each moved instance went onto a GPU another instance already used: two GPUs emptied.
    used = {(placement.node, placement.gpus[0].device.uuid) for placement in drained if placement.gpus}
    assert len(used) == 2
    assert module._drained(builder, placements, 0) is None


def test_a_rebalance_never_evicts_running_preemptible_work():
    problem = fragmented()
    problem["services"]["batch"] = {"preemptible": True, "replicas": 2, "resources": {"cpu": 15}}
    problem["previous"]["batch-0"] = {"node": "n0"}
    problem["previous"]["batch-1"] = {"node": "n1"}
    result = rebalance(copy.deepcopy(problem), max_moves=3)
    assert checked(problem, result) == []
    assert {result["placements"]["batch-0"]["node"], result["placements"]["batch-1"]["node"]} <= {"n0", "n1", "n2", "n3"}
    assert result["evictions"] == [] and result["rebalance"]["gain"]["whole_gpus_freed"] >= 1
