# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Property tests of topology_spread: every plan passes the independent checker (which checks the skew), and on
problems small enough to try every placement, a plan exists exactly when the scheduler finds one."""

from __future__ import annotations

import itertools
from collections import Counter

from hypothesis import given, settings, strategies as st

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler import exact
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.test_properties import (
    SETTINGS, assert_valid, assert_well_formed_failure, chance, pick, problems, run_plan,
)

MODES = ("DoNotSchedule", "DoNotSchedule", "ScheduleAnyway")
KEYS = (None, None, "zone", "rack")


@st.composite
def spread_problems(draw):
    """A problem of test_properties.problems with topology_spread on some of its apps."""
    problem = draw(problems())
    for name in sorted(problem["services"]):
        spec = problem["services"][name]
        if spec.get("sidecar") or not chance(draw, 2):
            continue
        constraints, seen = [], set()
        for _unused in range(draw(st.integers(1, 2))):
            constraint = {"max_skew": draw(st.integers(1, 3))}
            key = pick(draw, KEYS)
            if key is not None:
                constraint["topology_key"] = key
            if chance(draw, 2):
                constraint["when_unsatisfiable"] = pick(draw, MODES)
            same = (constraint["max_skew"], key, constraint.get("when_unsatisfiable", "DoNotSchedule"))
            if same not in seen:
                seen.add(same)
                constraints.append(constraint)
        spec["topology_spread"] = constraints
    return problem


@settings(max_examples=400, **SETTINGS)
@given(spread_problems())
def test_every_result_with_spreads_passes_the_checker(problem):
    result = run_plan(problem)
    assert_valid(problem, result)
    if not result["feasible"]:
        assert_well_formed_failure(problem, result)


@st.composite
def tiny_problems(draw):
    """Up to 3 nodes (CPU only, a zone label on some) and up to 2 services of up to 3 replicas, spread."""
    nodes = {}
    for name in ("n1", "n2", "n3")[:draw(st.integers(1, 3))]:
        spec = {"cpu": draw(st.integers(1, 4)), "memory": "64Gi"}
        if not chance(draw, 4):
            spec["labels"] = {"zone": pick(draw, ("east", "west"))}
        nodes[name] = spec
    services = {}
    for name in ("web", "api")[:draw(st.integers(1, 2))]:
        spec = {"replicas": draw(st.integers(1, 3)), "resources": {"cpu": draw(st.integers(1, 2))}}
        if not chance(draw, 4):
            constraint = {"max_skew": draw(st.integers(1, 2))}
            if chance(draw, 3):
                constraint["topology_key"] = "zone"
            spec["topology_spread"] = [constraint]
        services[name] = spec
    return {"nodes": nodes, "services": services}


def _domain(problem, node_name, key):
    return node_name if key is None else problem["nodes"][node_name].get("labels", {}).get(key)


def _valid(problem, assignment):
    """Whether instances -> nodes (``assignment``) fits the CPUs and every spread (docs/problem-format.md)."""
    used = Counter()
    for (service, _ordinal), node_name in assignment.items():
        used[node_name] += problem["services"][service]["resources"]["cpu"]
    if any(used[name] > spec["cpu"] for name, spec in problem["nodes"].items()):
        return False
    for service, spec in problem["services"].items():
        for constraint in spec.get("topology_spread", ()):
            key = constraint.get("topology_key")
            domains = {_domain(problem, name, key) for name in problem["nodes"]} - {None}
            counts = Counter(dict.fromkeys(domains, 0))
            for (owner, _ordinal), node_name in assignment.items():
                if owner == service:
                    domain = _domain(problem, node_name, key)
                    if domain is None:
                        return False
                    counts[domain] += 1
            if domains and max(counts.values()) - min(counts[domain] for domain in domains) > constraint["max_skew"]:
                return False
    return True


def _some_placement_exists(problem):
    instances = [(service, ordinal) for service, spec in problem["services"].items() for ordinal in range(spec["replicas"])]
    names = sorted(problem["nodes"])
    return any(_valid(problem, dict(zip(instances, choice)))
               for choice in itertools.product(names, repeat=len(instances)))


@settings(max_examples=300, **SETTINGS)
@given(tiny_problems())
def test_a_plan_exists_exactly_when_the_scheduler_finds_one(problem):
    if not exact.available():
        return
    result = run_plan(problem)
    assert_valid(problem, result)
    assert result["feasible"] == _some_placement_exists(problem), result
