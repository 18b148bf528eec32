# -*- coding: utf-8 -*-
"""Equivalence classes: services with the same requirements share one candidate heap."""
from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.framework import Framework
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.plugins.profile import PLUGINS, WEIGHTS
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.problem import parse_problem
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.scheduler import Attempt, equivalence_key
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.builders import gpu, node, service, solve, where
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.plan_checker import check_plan

NODES = {"a": node(cpu=4, gpus=[gpu(0, uuid="GPU-a")]), "b": node(cpu=4, gpus=[gpu(0, uuid="GPU-b")]),
         "c": node(cpu=4)}


def test_same_requirements_same_class_and_anti_affinity_splits_them():
    services = {"web-1": service(), "web-2": service(), "spread": service(anti_affinity=["spread"]),
                "infer": service(resources={"gpu": {"memory": "10Gi"}}), "infer-b": service(resources={"gpu": {"memory": "10Gi"}})}
    problem = parse_problem({"nodes": NODES, "services": services})
    key = {name: equivalence_key(problem, s) for name, s in problem.services.items()}
    assert key["web-1"] == key["web-2"] and key["infer"] == key["infer-b"]
    assert key["spread"] != key["web-1"] and key["infer"] != key["web-1"]


def test_one_heap_per_class_and_the_plan_is_valid():
    services = {"s%02d" % i: service(cpu=1) for i in range(12)}
    mapping = {"nodes": NODES, "services": services}
    problem = parse_problem(mapping)
    attempt = Attempt(Framework(problem, PLUGINS, WEIGHTS), problem, moves_allowed=False).run()
    assert not attempt.unplaced and len(attempt._classes) == 1  # pylint: disable=protected-access
    result = solve(NODES, services)
    assert check_plan(mapping, result) == []
    # Every node is used: the shared heap saw each bind, not only the service that made it.
    assert sorted(set(where(result).values())) == ["a", "b", "c"]


def test_a_class_fails_with_the_same_reasons_as_one_service_would():
    services = {"big-%d" % i: service(cpu=4) for i in range(4)}
    result = solve(NODES, services)
    assert result["feasible"] is False
    assert result["unschedulable"] == {"big-3-0": "0/3 nodes are available: 3 Insufficient cpu (asked 4 CPUs; the most free on a node is 0 CPUs)."}
