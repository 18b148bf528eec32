# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Scheduler profiles (scheduler/profiles.py): enabled and disabled plugins, weights, the NodeResourcesFit
strategy and user plugins, through the greedy pass and the exact solver, checked by the plan checker."""

from __future__ import annotations

import copy
import os

import pytest
from hypothesis import given, settings

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.problem import ProblemError
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.profiles import DEFAULT, load_profile, parse_profile
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.scheduler import plan
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.plan_checker import check_plan
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.test_priorities import kinded
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.test_properties import SETTINGS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))))
EXAMPLE = os.path.join(ROOT, "docs", "examples", "image_affinity.py")


def nodes(count, **extra):
    return {"n%d" % index: dict({"cpu": 4, "memory": "16Gi"}, **extra) for index in range(count)}


def placed_on(result):
    return {name: placement["node"] for name, placement in result["placements"].items()}


def test_empty_profile_is_the_default():
    assert load_profile(None) is DEFAULT and load_profile({}) is DEFAULT
    problem = {"nodes": nodes(3), "services": {"web": {"replicas": 3, "resources": {"cpu": 1}}}}
    assert placed_on(plan(problem, profile=parse_profile({"plugins": {}}))) == placed_on(plan(problem))


def test_least_allocated_spreads_and_most_allocated_packs():
    problem = {"nodes": nodes(3), "services": {"web": {"replicas": 3, "resources": {"cpu": 1}}}}
    assert set(placed_on(plan(problem)).values()) == {"n0"}
    spread = parse_profile({"plugin_config": {"NodeResourcesFit": {"strategy": "LeastAllocated"}}})
    result = plan(problem, profile=spread)
    assert set(placed_on(result).values()) == {"n0", "n1", "n2"}
    assert not check_plan(problem, result)


def test_a_disabled_static_filter_is_off_in_greedy_exact_and_checker():
    problem = {"nodes": {"a": {"cpu": 4, "memory": "16Gi", "labels": {"zone": "east"}},
                         "b": {"cpu": 4, "memory": "16Gi"}},
               "services": {"web": {"replicas": 2, "node_selector": {"zone": "east"}, "resources": {"cpu": 3}}}}
    assert not plan(problem, exact_seconds=1)["feasible"]
    profile = parse_profile({"plugins": {"filter": {"disabled": ["NodeSelector"]}}})
    for seconds in (0, 1):
        result = plan(problem, exact_seconds=seconds, profile=profile)
        assert result["feasible"] and sorted(placed_on(result).values()) == ["a", "b"]
        assert not check_plan(problem, result, disabled_filters=["NodeSelector"])
        assert any("node selector" in line for line in check_plan(problem, result))


def test_score_weights_and_disabled_scores():
    # Without GPU work NodeResourcesFit (MostAllocated) decides: disabling it leaves only name order.
    problem = {"nodes": {"a": {"cpu": 8, "memory": "16Gi"}, "b": {"cpu": 2, "memory": "16Gi"}},
               "services": {"web": {"resources": {"cpu": 1}}}}
    assert placed_on(plan(problem)) == {"web-0": "b"}
    off = parse_profile({"plugins": {"score": {"disabled": ["NodeResourcesFit", "GPU"]}}})
    assert placed_on(plan(problem, profile=off)) == {"web-0": "a"}
    zero = parse_profile({"plugins": {"score": {"enabled": [{"name": "NodeResourcesFit", "weight": 0}]}}})
    assert zero.weights["NodeResourcesFit"] == 0


def example_profile(**extra):
    profile = {"user_plugins": [EXAMPLE],
               "plugins": {"filter": {"enabled": ["ImageAffinity"]},
                           "score": {"enabled": [{"name": "ImageAffinity", "weight": 20}]}}}
    profile.update(extra)
    return parse_profile(profile)


def test_example_user_plugin_filters_and_scores():
    problem = {"nodes": {"cad": {"cpu": 4, "memory": "16Gi", "labels": {"gangplank.io/image": "reg/cad/"}},
                         "n0": {"cpu": 4, "memory": "16Gi"}},
               "services": {"cad": {"image": "reg/cad/solver:1", "resources": {"cpu": 1}},
                            "web": {"image": "reg/web:1", "replicas": 2, "resources": {"cpu": 1}}}}
    result = plan(problem, profile=example_profile())
    assert placed_on(result) == {"cad-0": "cad", "web-0": "n0", "web-1": "n0"}
    assert not check_plan(problem, result)
    # Filter: with n0 too small for web, web cannot go to the reserved node; the exact solver agrees.
    problem["nodes"]["n0"]["cpu"] = 1
    for seconds in (0, 2):
        result = plan(problem, exact_seconds=seconds, profile=example_profile())
        assert not result["feasible"], result
        assert "node(s) were reserved for other images" in result["unschedulable"]["web-1"]
    assert result["exact"]["status"] == "infeasible"


def test_exact_solver_honours_the_user_filter_when_greedy_fails():
    # Best-fit-decreasing puts 5 and 4 on a, then 3+3+3 on b, and 2 fits nowhere; a = 5+3+2, b = 4+3+3 fits.
    # The reserved node has room for everything but takes none of these images, in greedy and exact alike.
    problem = {"nodes": {"a": {"cpu": 10, "memory": "16Gi"}, "b": {"cpu": 10, "memory": "16Gi"},
                         "cad": {"cpu": 100, "memory": "16Gi", "labels": {"gangplank.io/image": "reg/cad/"}}},
               "services": {"s5": {"image": "reg/s5:1", "resources": {"cpu": 5}},
                            "s4": {"image": "reg/s4:1", "resources": {"cpu": 4}},
                            "s3": {"image": "reg/s3:1", "replicas": 3, "resources": {"cpu": 3}},
                            "s2": {"image": "reg/s2:1", "resources": {"cpu": 2}}}}
    result = plan(problem, exact_seconds=5, profile=example_profile())
    assert result["feasible"] and result["path"] == "exact", result
    assert "cad" not in placed_on(result).values()
    assert not check_plan(problem, result)


REFUSED = {
    "dynamic.py": "class P(FilterPlugin):\n    name = 'P'\n    def filter(self, cycle, cluster, instance, node_state):\n"
                  "        return OK\nPLUGIN = P\n",
    "reserve.py": "class P(ReservePlugin):\n    name = 'P'\n    def reserve(self, *args):\n        pass\nPLUGIN = P\n",
    "nothing.py": "x = 1\n",
    "raises.py": "raise RuntimeError('boom')\n",
    "clash.py": "class P(FilterPlugin):\n    name = 'NodeSelector'\nPLUGIN = P\n",
}
HEADER = "from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.framework import *\n"


@pytest.mark.parametrize("filename, expected", [
    ("dynamic.py", "a filter with filter_static only: P overrides filter"),
    ("reserve.py", "P implements ReservePlugin, which the exact solver cannot model"),
    ("nothing.py", "a file that defines PLUGIN"),
    ("raises.py", "a Python file that loads (it raised RuntimeError: boom)"),
    ("clash.py", "a plugin whose name (\"NodeSelector\") no other plugin has"),
    ("missing.py", "an existing Python file"),
])
def test_refused_user_plugins(tmp_path, filename, expected):
    if filename in REFUSED:
        (tmp_path / filename).write_text(HEADER + REFUSED[filename])
    with pytest.raises(ProblemError) as caught:
        parse_profile({"user_plugins": [filename]}, base=str(tmp_path))
    assert caught.value.errors[0][0] == "profile.user_plugins[0]"
    assert expected in caught.value.errors[0][1], caught.value.errors


@pytest.mark.parametrize("profile, path, expected", [
    ({"plugins": {"filter": {"disabled": ["Nope"]}}}, "profile.plugins.filter.disabled[0]", "expected a filter plugin"),
    ({"plugins": {"filter": {"disabled": ["GPU"]}}}, "profile.plugins.filter.disabled[0]", "a static filter"),
    ({"plugins": {"pre_filter": {"disabled": ["NodeResourcesFit"]}}}, "profile.plugins.pre_filter.disabled[0]", "a user plugin"),
    ({"plugins": {"score": {"enabled": [{"name": "GPU", "weight": -1}]}}},
     "profile.plugins.score.enabled[0].weight", "got -1; expected an integer from 0 to 1000"),
    ({"plugins": {"score": {"enabled": ["GPU"]}}}, "profile.plugins.score.enabled[0]", "a mapping"),
    ({"plugins": {"reserve": {}}}, "profile.plugins.reserve", "unknown key"),
    ({"plugin_config": {"NodeResourcesFit": {"strategy": "Spread"}}},
     "profile.plugin_config.NodeResourcesFit.strategy", "one of MostAllocated, LeastAllocated"),
    ({"weights": {}}, "profile.weights", "unknown key"),
    ({"user_plugins": [EXAMPLE]}, "profile.user_plugins", "enabled at no extension point"),
    ([], "profile", "a mapping"),
])
def test_bad_profiles_name_the_path(profile, path, expected):
    with pytest.raises(ProblemError) as caught:
        parse_profile(profile)
    assert any(where == path and expected in message for where, message in caught.value.errors), caught.value.errors


SPREAD_WITHOUT_SELECTORS = {"plugins": {"filter": {"disabled": ["NodeSelector", "NodeUnschedulable"]},
                                        "score": {"disabled": ["GPUFragmentation"],
                                                  "enabled": [{"name": "GPU", "weight": 7}]}},
                            "plugin_config": {"NodeResourcesFit": {"strategy": "LeastAllocated"}}}


@settings(max_examples=200, **SETTINGS)
@given(kinded())
def test_profiled_results_pass_the_checker(problem):
    """Generated problems (with priorities, preemptible and every-node services) under a profile that turns
    two static filters off and changes the scores: every result passes the checker told of the profile."""
    result = plan(copy.deepcopy(problem), profile=parse_profile(SPREAD_WITHOUT_SELECTORS))
    violations = check_plan(problem, result, disabled_filters=["NodeSelector", "NodeUnschedulable"])
    assert not violations, (violations, problem, result)
