# -*- coding: utf-8 -*-
"""Small problem builders shared by the scheduler unit tests."""

from __future__ import annotations

import copy

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.problem import ProblemError, parse_problem
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.scheduler import plan
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.plan_checker import check_plan


def node(cpu=16, memory="64Gi", **extra):
    spec = {"cpu": cpu, "memory": memory}
    spec.update(extra)
    return spec


def gpu(index, model="NVIDIA A100-SXM4-80GB", memory="80Gi", uuid=None):
    return {"index": index, "uuid": uuid or "GPU-%s-%d" % (model.split()[-1], index), "model": model,
            "memory": memory}


def service(replicas=1, cpu=1, memory="1Gi", **extra):
    spec = {"replicas": replicas, "resources": {"cpu": cpu, "memory": memory}}
    resources = extra.pop("resources", {})
    spec["resources"].update(resources)
    spec.update(extra)
    return spec


def solve(nodes, services, **extra):
    problem = {"nodes": copy.deepcopy(nodes), "services": copy.deepcopy(services)}
    problem.update(copy.deepcopy(extra))
    return plan(problem)


def where(result):
    """instance -> node of a feasible result."""
    assert result["feasible"], result.get("unschedulable")
    return {name: placement["node"] for name, placement in result["placements"].items()}


def reason(result, instance):
    assert not result["feasible"]
    assert result["placements"] == {}
    return result["unschedulable"][instance]


def checked(problem, **options):
    """plan() of a copy of ``problem``, after the plan checker found nothing wrong with its result."""
    result = plan(copy.deepcopy(problem), **options)
    assert check_plan(problem, result) == []
    return result


def errors_of(problem):
    """path -> message of every mistake parse_problem() finds in ``problem``."""
    with pytest.raises(ProblemError) as caught:
        parse_problem(problem)
    return dict(caught.value.errors)
