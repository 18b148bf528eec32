# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""TopologySpread: topology_spread over the node itself or a node label, refused (DoNotSchedule) or preferred
(ScheduleAnyway), in the greedy pass, the exact solver and the plan checker."""

from __future__ import annotations

import copy
from collections import Counter

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler import exact
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.problem import parse_problem
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.scheduler import framework_for, plan
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.builders import (
    checked, errors_of, gpu, node, reason, service, where,
)
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.plan_checker import check_plan


def _racks(cpu=64):
    return {name: node(cpu=cpu, memory="256Gi", labels={"rack": rack})
            for name, rack in (("a", "r1"), ("b", "r1"), ("c", "r2"), ("d", "r2"))}


def _spread(replicas, *constraints, **extra):
    return service(replicas=replicas, topology_spread=list(constraints), **extra)


def _per(result, key=lambda node_name: node_name):
    return Counter(key(node_name) for node_name in where(result).values())


def test_without_a_spread_the_replicas_pack_onto_one_node():
    result = checked({"nodes": _racks(), "services": {"emb": service(replicas=6)}})
    assert _per(result) == Counter({"a": 6})


def test_max_skew_one_over_the_nodes_spreads_the_replicas():
    result = checked({"nodes": _racks(), "services": {"emb": _spread(6, {"max_skew": 1})}})
    counts = _per(result)
    assert sorted(counts.values()) == [1, 1, 2, 2] and set(counts) == {"a", "b", "c", "d"}


def test_max_skew_over_a_label_spreads_over_its_values():
    result = checked({"nodes": _racks(), "services": {"emb": _spread(6, {"max_skew": 1, "topology_key": "rack"})}})
    rack = {"a": "r1", "b": "r1", "c": "r2", "d": "r2"}
    assert _per(result, rack.get) == Counter({"r1": 3, "r2": 3})


def test_a_larger_max_skew_allows_that_many_more_in_one_domain():
    result = checked({"nodes": _racks(), "services": {"emb": _spread(8, {"max_skew": 3})}})
    counts = _per(result)
    assert max(counts.values()) - min(counts.get(name, 0) for name in "abcd") <= 3
    assert max(counts.values()) == 3


def test_a_node_without_the_label_is_refused_with_kube_reason():
    nodes = _racks()
    nodes["e"] = node(cpu=64, memory="256Gi")
    result = checked({"nodes": nodes, "services": {"emb": _spread(4, {"max_skew": 1, "topology_key": "rack"})}})
    assert "e" not in where(result).values()
    result = plan({"nodes": {"e": node()}, "services": {"emb": _spread(1, {"max_skew": 1, "topology_key": "rack"})}})
    assert reason(result, "emb-0") == (
        "0/1 nodes are available: 1 node(s) didn't match pod topology spread constraints (missing required label).")


def test_a_full_domain_blocks_the_others_and_says_so():
    # Node b holds one instance; a takes two at most with max_skew 1, so the third instance fits nowhere.
    nodes = {"a": node(cpu=8), "b": node(cpu=1)}
    result = plan({"nodes": nodes, "services": {"emb": _spread(4, {"max_skew": 1})}})
    assert not result["feasible"]
    messages = set(result["unschedulable"].values())
    assert any("didn't match pod topology spread constraints" in message for message in messages), messages
    assert check_plan({"nodes": nodes, "services": {"emb": _spread(4, {"max_skew": 1})}}, result) == []


def test_nodes_that_can_never_hold_an_instance_do_not_hold_the_minimum():
    # The CPU-only node cannot take a GPU instance: it is no domain of the spread, so the GPU nodes take 3 each.
    nodes = {"cpu": node(cpu=64, memory="256Gi"),
             "g1": node(cpu=64, memory="256Gi", gpus=[gpu(i, uuid="g1-%d" % i) for i in range(4)]),
             "g2": node(cpu=64, memory="256Gi", gpus=[gpu(i, uuid="g2-%d" % i) for i in range(4)])}
    services = {"emb": _spread(6, {"max_skew": 1}, resources={"gpu": {"count": 1, "memory": "10Gi"}})}
    result = checked({"nodes": nodes, "services": services})
    assert _per(result) == Counter({"g1": 3, "g2": 3})


def test_schedule_anyway_prefers_spread_but_never_refuses():
    nodes = {"a": node(cpu=8), "b": node(cpu=2)}
    services = {"emb": _spread(6, {"max_skew": 1, "when_unsatisfiable": "ScheduleAnyway"})}
    result = checked({"nodes": nodes, "services": services})
    assert _per(result) == Counter({"a": 4, "b": 2})
    services = {"emb": _spread(4, {"max_skew": 1, "when_unsatisfiable": "ScheduleAnyway"})}
    assert sorted(_per(checked({"nodes": _racks(), "services": services})).values()) == [1, 1, 1, 1]


def test_a_stateful_instance_stays_even_where_it_would_now_break_nothing():
    problem = {"nodes": _racks(), "services": {"db": _spread(2, {"max_skew": 1}, stateful=True)},
               "previous": {"db-0": {"node": "a"}, "db-1": {"node": "b"}}}
    assert where(checked(problem)) == {"db-0": "a", "db-1": "b"}


def test_running_instances_that_break_the_spread_are_moved():
    problem = {"nodes": _racks(), "services": {"web": _spread(4, {"max_skew": 1})},
               "previous": {"web-%d" % i: {"node": "a"} for i in range(4)}}
    result = checked(problem)
    assert sorted(_per(result).values()) == [1, 1, 1, 1]
    assert len(result["moves"]) == 3


@pytest.mark.skipif(not exact.available(), reason="needs OR-Tools")
def test_the_exact_solver_honours_the_spread():
    nodes = {"a": node(cpu=4, memory="64Gi"), "b": node(cpu=4, memory="64Gi")}
    problem = parse_problem({"nodes": nodes, "services": {"emb": _spread(4, {"max_skew": 1}),
                                                          "big": service(replicas=1, cpu=2)}})
    found = exact.solve(problem, framework_for(problem), 5.0)
    assert found.status == exact.OPTIMAL
    counts = Counter(p.node for p in found.placements if p.instance.service.name == "emb")
    assert counts == Counter({"a": 2, "b": 2})
    # max_skew 1 with one node holding 3 at most and the other 1 is proved impossible.
    tight = parse_problem({"nodes": {"a": node(cpu=3), "b": node(cpu=1)}, "services": {"emb": _spread(4, {"max_skew": 1})}})
    assert exact.solve(tight, framework_for(tight), 5.0).status == exact.INFEASIBLE


@pytest.mark.skipif(not exact.available(), reason="needs OR-Tools")
def test_a_plan_greedy_misses_is_found_by_the_exact_solver_within_the_spread():
    # Heavy-first greedy packs both 2-CPU instances onto one node; the spread then keeps the other node to one emb.
    nodes = {"a": node(cpu=4), "b": node(cpu=4)}
    problem = {"nodes": nodes, "services": {"emb": _spread(4, {"max_skew": 1}), "big": service(replicas=2, cpu=2)}}
    greedy = plan(copy.deepcopy(problem), exact_seconds=0)
    assert not greedy["feasible"] and "didn't match pod topology spread constraints" in greedy["unschedulable"]["emb-1"]
    result = checked(problem)
    assert result["path"] == "exact"
    assert _per(result) == Counter({"a": 3, "b": 3})


def test_spread_is_checked_by_the_plan_checker():
    problem = {"nodes": _racks(), "services": {"emb": _spread(4, {"max_skew": 1})}}
    result = checked(problem)
    broken = copy.deepcopy(result)
    for placement in broken["placements"].values():
        placement["node"] = "a"
    assert any("skew above max_skew 1" in violation for violation in check_plan(problem, broken))


@pytest.mark.parametrize("spread, path, expected", [
    ([{"max_skew": 0}], "services.emb.topology_spread[0].max_skew", "got 0; expected an integer >= 1"),
    ([{"topology_key": "rack"}], "services.emb.topology_spread[0].max_skew", "is required"),
    ([{"max_skew": 1, "when_unsatisfiable": "Never"}], "services.emb.topology_spread[0].when_unsatisfiable",
     'got "Never"; expected one of DoNotSchedule, ScheduleAnyway'),
    ([{"max_skew": 1, "topology_key": ""}], "services.emb.topology_spread[0].topology_key",
     'got ""; expected a node label key (or none: each node is its own domain)'),
    ([{"max_skew": 1, "skew": 2}], "services.emb.topology_spread[0].skew", "unknown key"),
    ([{"max_skew": 1}, {"max_skew": 1}], "services.emb.topology_spread[1]", "a constraint not listed twice"),
])
def test_bad_spreads_are_named_by_path(spread, path, expected):
    errors = errors_of({"nodes": {"a": node()}, "services": {"emb": service(topology_spread=spread)}})
    assert expected in errors[path], errors


def test_no_spread_on_a_sidecar_or_an_every_node_service():
    errors = errors_of({"nodes": {"a": node()}, "services": {
        "side": {"sidecar": True, "topology_spread": [{"max_skew": 1}]},
        "exporter": {"every_node": True, "topology_spread": [{"max_skew": 1}]}}})
    assert "a sidecar" in errors["services.side.topology_spread"]
    assert "an every-node service" in errors["services.exporter.topology_spread"]
