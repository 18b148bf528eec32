# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Priorities, preemptible work and every-node services: examples, and properties against the
independent checker (plan_checker.py), which re-derives the rules from docs/problem-format.md."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import given, reject, settings, strategies as st

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.problem import ProblemError, parse_problem
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.scheduler import plan
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.plan_checker import check_plan
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.test_properties import (
    SETTINGS, problems,
)


def assert_valid(problem, result):
    violations = check_plan(problem, result)
    assert not violations, "violations:\n  %s\nproblem: %s\nresult: %s" % (
        "\n  ".join(violations), json.dumps(problem, sort_keys=True), json.dumps(result, sort_keys=True))


def cpu_nodes(count, cpu=4, **extra):
    return {"n%d" % index: dict({"cpu": cpu, "memory": "16Gi"}, **extra) for index in range(count)}


# --- preemptible work ----------------------------------------------------------------------------

def test_preemptible_fills_what_is_left_lowest_priority_left_out():
    problem = {"nodes": cpu_nodes(2),
               "services": {"web": {"replicas": 2, "resources": {"cpu": 2}},
                            "batch": {"replicas": 3, "preemptible": True, "priority": 5, "resources": {"cpu": 1}},
                            "scavenge": {"replicas": 2, "preemptible": True, "priority": -1, "resources": {"cpu": 1}}}}
    result = plan(problem)
    assert result["feasible"], result
    assert sorted(name for name in result["placements"] if name.startswith("batch")) == ["batch-0", "batch-1", "batch-2"]
    assert list(result["preempted"]) == ["scavenge-1"]
    assert result["preempted"]["scavenge-1"].startswith("0/2 nodes are available: 2 Insufficient cpu")
    assert result["evictions"] == []
    assert_valid(problem, result)


def test_preemptible_never_fails_the_gang():
    problem = {"nodes": cpu_nodes(1),
               "services": {"web": {"resources": {"cpu": 4}},
                            "batch": {"replicas": 2, "preemptible": True, "resources": {"cpu": 1}}}}
    result = plan(problem)
    assert result["feasible"] and list(result["preempted"]) == ["batch-0", "batch-1"]
    assert_valid(problem, result)


def test_within_a_service_the_highest_ordinals_are_left_out():
    problem = {"nodes": cpu_nodes(1),
               "services": {"batch": {"replicas": 6, "preemptible": True, "resources": {"cpu": 1}}}}
    result = plan(problem)
    assert list(result["placements"]) == ["batch-0", "batch-1", "batch-2", "batch-3"]
    assert list(result["preempted"]) == ["batch-4", "batch-5"]


def test_running_preemptible_is_evicted_only_for_the_gang_fewest_first():
    # n0 runs batch-0 and batch-1 (1 CPU each), n1 runs batch-2. New web (3 CPU) needs room: evicting one
    # instance on n1 is enough; greedy alone would place web wherever, the exact solver keeps evictions at 1.
    problem = {"nodes": cpu_nodes(2),
               "services": {"web": {"resources": {"cpu": 3}},
                            "batch": {"replicas": 3, "preemptible": True, "resources": {"cpu": 1.5}}},
               "previous": {"batch-0": {"node": "n0"}, "batch-1": {"node": "n0"}, "batch-2": {"node": "n1"}}}
    result = plan(problem)
    assert result["feasible"], result
    assert result["placements"]["web-0"]["node"] == "n1"
    assert result["evictions"] == [{"instance": "batch-2", "from": "n1"}]
    assert result["preempted"]["batch-2"].startswith("evicted from n1: ")
    assert result["moves"] == []
    assert_valid(problem, result)


def test_running_preemptible_is_not_evicted_for_other_preemptible_work():
    problem = {"nodes": cpu_nodes(1),
               "services": {"low": {"preemptible": True, "priority": 1, "resources": {"cpu": 4}},
                            "high": {"preemptible": True, "priority": 9, "resources": {"cpu": 4}}},
               "previous": {"low-0": {"node": "n0"}}}
    result = plan(problem)
    assert list(result["placements"]) == ["low-0"] and list(result["preempted"]) == ["high-0"]
    assert_valid(problem, result)


def test_evictions_are_minimised_by_the_exact_solver_before_moves():
    # web-0 ran on n0 and must leave (n0 shrank): it can move to n1 (evicting both batch there) or to n2
    # (evicting one). Fewest evictions: n2.
    problem = {"nodes": {"n0": {"cpu": 1, "memory": "16Gi"}, "n1": {"cpu": 4, "memory": "16Gi"},
                         "n2": {"cpu": 4, "memory": "16Gi"}},
               "services": {"web": {"resources": {"cpu": 3}},
                            "batch": {"replicas": 2, "preemptible": True, "priority": 1, "resources": {"cpu": 2}},
                            "fill": {"preemptible": True, "resources": {"cpu": 2}}},
               "previous": {"web-0": {"node": "n0"}, "batch-0": {"node": "n1"}, "batch-1": {"node": "n1"},
                            "fill-0": {"node": "n2"}}}
    result = plan(problem)
    assert result["feasible"], result
    assert len(result["evictions"]) == 1, result
    assert_valid(problem, result)


def test_priority_orders_the_queue():
    # Two services that each fill the node: the one with the higher priority goes first (and is placed).
    problem = {"nodes": cpu_nodes(1),
               "services": {"a": {"preemptible": True, "priority": 1, "resources": {"cpu": 4}},
                            "b": {"preemptible": True, "priority": 2, "resources": {"cpu": 4}}}}
    assert list(plan(problem)["placements"]) == ["b-0"]


@pytest.mark.parametrize("spec, path, expected", [
    ({"priority": "high"}, "services.web.priority", "an integer from -1000000000 to 1000000000"),
    ({"priority": 10 ** 10}, "services.web.priority", "an integer from -1000000000 to 1000000000"),
    ({"priority": True}, "services.web.priority", "an integer"),
    ({"preemptible": "yes"}, "services.web.preemptible", "true or false"),
    ({"preemptible": True, "stateful": True}, "services.web.preemptible", "false for a stateful service"),
    ({"every_node": 1}, "services.web.every_node", "true or false"),
    ({"every_node": True, "replicas": 2}, "services.web.replicas", "no replicas on an every-node service"),
    ({"every_node": True, "scalable": True}, "services.web.scalable", "no scalable on an every-node service"),
    ({"every_node": True, "preemptible": True}, "services.web.every_node", "false for a preemptible service"),
    ({"image": ""}, "services.web.image", "an image reference"),
])
def test_bad_kinds_name_the_path(spec, path, expected):
    with pytest.raises(ProblemError) as caught:
        parse_problem({"nodes": cpu_nodes(1), "services": {"web": spec}})
    assert any(where == path and expected in message for where, message in caught.value.errors), caught.value.errors


def test_sidecar_takes_no_priority():
    with pytest.raises(ProblemError) as caught:
        parse_problem({"nodes": cpu_nodes(1), "services": {"log": {"sidecar": True, "priority": 3}}})
    assert caught.value.errors[0][0] == "services.log.priority"


# --- every-node services -------------------------------------------------------------------------

def test_every_node_runs_on_each_eligible_node_cordoned_included():
    nodes = cpu_nodes(3)
    nodes["n1"]["unschedulable"] = True
    nodes["n2"]["taints"] = [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]
    nodes["gpu"] = {"cpu": 4, "memory": "16Gi", "labels": {"gpu": True}}
    problem = {"nodes": nodes, "services": {"agent": {"every_node": True, "resources": {"cpu": "100m"}},
                                            "exporter": {"every_node": True, "node_selector": {"gpu": True}}}}
    result = plan(problem)
    assert result["feasible"], result
    assert {name: p["node"] for name, p in result["placements"].items()} == {
        "agent@gpu": "gpu", "agent@n0": "n0", "agent@n1": "n1", "exporter@gpu": "gpu"}
    assert_valid(problem, result)
    tolerant = copy.deepcopy(problem)
    tolerant["services"]["agent"]["tolerations"] = [{"key": "dedicated"}]
    assert "agent@n2" in plan(tolerant)["placements"]


def test_every_node_that_does_not_fit_fails_the_gang_with_reasons():
    problem = {"nodes": cpu_nodes(2), "services": {"web": {"resources": {"cpu": 4}},
                                                   "agent": {"every_node": True, "resources": {"cpu": 1}}}}
    result = plan(problem, exact_seconds=0)
    assert not result["feasible"]
    assert "Insufficient cpu" in next(iter(result["unschedulable"].values()))
    assert_valid(problem, result)


def test_every_node_follows_the_inventory():
    problem = {"nodes": cpu_nodes(2), "services": {"agent": {"every_node": True}}}
    first = plan(problem)
    grown = dict(problem, nodes=cpu_nodes(3), previous=first["placements"])
    again = plan(grown)
    assert sorted(again["placements"]) == ["agent@n0", "agent@n1", "agent@n2"] and again["moves"] == []
    shrunk = dict(problem, nodes={"n1": cpu_nodes(2)["n1"]}, previous=again["placements"])
    assert sorted(plan(shrunk)["placements"]) == ["agent@n1"]


# --- properties ----------------------------------------------------------------------------------

@st.composite
def kinded(draw):
    """A generated problem whose apps sometimes get a priority, become preemptible or every-node."""
    problem = draw(problems())
    for name in sorted(problem["services"]):
        spec = problem["services"][name]
        if spec.get("sidecar"):
            continue
        roll = draw(st.integers(0, 9))
        if roll < 4 and not spec.get("stateful"):
            spec["preemptible"] = True
        elif roll == 4:
            spec["every_node"] = True
            spec.pop("replicas", None)
            spec.pop("scalable", None)
        if draw(st.booleans()):
            spec["priority"] = draw(st.integers(-3, 3))
    previous = problem.get("previous") or {}
    for name in list(previous):
        service = name.rsplit("-", 1)[0]
        if problem["services"].get(service, {}).get("every_node"):
            del previous[name]
    return problem


@settings(max_examples=300, **SETTINGS)
@given(kinded())
def test_kinded_results_pass_the_checker(problem):
    result = plan(copy.deepcopy(problem))
    assert_valid(problem, result)


@settings(max_examples=150, **SETTINGS)
@given(kinded())
def test_kinded_plans_fed_back_keep_everything(problem):
    """A feasible plan fed back as previous: nothing moves, nothing is evicted, preemptible work stays."""
    result = plan(copy.deepcopy(problem))
    if not result["feasible"]:
        reject()
    again_problem = dict(problem, previous=copy.deepcopy(result["placements"]))
    again = plan(again_problem)
    assert again["feasible"] and again["moves"] == [] and again["evictions"] == [], again
    assert set(result["placements"]) <= set(again["placements"])
    assert_valid(again_problem, again)


def test_checker_catches_priority_and_coverage_mistakes():
    problem = {"nodes": cpu_nodes(1),
               "services": {"a": {"preemptible": True, "priority": 1, "resources": {"cpu": 4}},
                            "b": {"preemptible": True, "priority": 2, "resources": {"cpu": 4}},
                            "agent": {"every_node": True}}}
    result = plan(problem)
    assert not check_plan(problem, result)
    swapped = copy.deepcopy(result)
    swapped["placements"]["a-0"] = dict(swapped["placements"].pop("b-0"), service="a", ordinal=0)
    swapped["preempted"] = {"b-0": "made up"}
    swapped["usage"]["n0"]["instances"] = ["a-0", "agent@n0"]
    swapped["node_labels"]["n0"] = {"gangplank.io/service.a": "true", "gangplank.io/service.agent": "true"}
    assert any("priority" in line for line in check_plan(problem, swapped)), check_plan(problem, swapped)
    missing = copy.deepcopy(result)
    del missing["placements"]["agent@n0"]
    assert any("agent@n0 is not placed" in line for line in check_plan(problem, missing))
    unlisted = copy.deepcopy(result)
    unlisted["preempted"] = {}
    assert any("neither placed nor preempted" in line for line in check_plan(problem, unlisted))
