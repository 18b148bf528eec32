# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gang scheduler, greedy then exact, on problems whose answer is known.

A held-out set from benchmarks/hard_problems.py (a seed the benchmark does not use): every
known-feasible problem is placed and its plan passes the independent checker; every
known-infeasible one is proved infeasible (exact status "infeasible", never "timeout"); the
minimal-move problems make exactly the known number of moves. Then small hand-made problems:
a packing heavy-first best fit misses, a proof, a timeout, and a single stateless move.
"""

from __future__ import annotations

import copy
import importlib.util
import os

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.scheduler import plan
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.plan_checker import check_plan

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))))


def _load_generator():
    """benchmarks/hard_problems.py, which is a script directory, not a package."""
    spec = importlib.util.spec_from_file_location("gangplank_hard_problems", os.path.join(REPO, "benchmarks", "hard_problems.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hard_problems = _load_generator()

HELD_OUT_SEED = 8675309         # benchmarks/exact_benchmark.py uses 20240611
HELD_OUT_COUNT = 30
FEASIBLE_SECONDS = 5.0          # a plan is found in well under a second; proving it optimal may take the whole limit
INFEASIBLE_SECONDS = 20.0       # proofs take milliseconds; the margin is for slow machines, never spent when they pass
HELD_OUT = hard_problems.suite(HELD_OUT_SEED, HELD_OUT_COUNT)


def _verdict(result):
    """What the exact solver added to the summary ("no placement exists: ..." or "no plan found within ...")."""
    return result["summary"].split("; ", 1)[1] if "; " in result["summary"] else ""


def test_held_out_set_covers_every_kind():
    assert {answer["kind"] for _name, _problem, answer in HELD_OUT} == set(hard_problems.KINDS)
    for _name, _problem, answer in HELD_OUT:
        assert 3 <= answer["nodes"] <= 12 and 5 <= answer["instances"] <= 60


@pytest.mark.parametrize("name, problem, answer", [pytest.param(*entry, id=entry[0]) for entry in HELD_OUT
                                                   if entry[2]["feasible"]])
def test_planted_solution_is_valid(name, problem, answer):
    """The generator's own check: its planted assignment satisfies every rule, so the problem is feasible."""
    assert check_plan(problem, hard_problems.planted_result(problem, answer)) == []


@pytest.mark.parametrize("name, problem, answer", [pytest.param(*entry, id=entry[0]) for entry in HELD_OUT])
def test_held_out_problem(name, problem, answer):
    greedy = plan(copy.deepcopy(problem), exact_seconds=0)
    if greedy["feasible"]:
        assert answer["feasible"], "greedy placed a known-infeasible problem (%s)" % answer["reason"]
        assert check_plan(problem, greedy) == []
    if not answer["feasible"]:
        result = plan(copy.deepcopy(problem), exact_seconds=INFEASIBLE_SECONDS)
        assert result["feasible"] is False
        assert result["path"] == "exact"
        assert result["exact"]["status"] == "infeasible", (answer["reason"], result["summary"])
        assert _verdict(result).startswith("no placement exists"), result["summary"]
        assert check_plan(problem, result) == []
        return
    result = plan(copy.deepcopy(problem), exact_seconds=FEASIBLE_SECONDS)
    assert result["feasible"] is True, (answer["reason"], result.get("summary"), result.get("exact"))
    assert check_plan(problem, result) == []
    if result["path"] == "exact":
        assert result["exact"]["status"] in ("optimal", "feasible")
    moves = len(result["moves"])
    if answer["min_moves"] is not None:
        assert moves >= answer["min_moves"], "fewer moves than the proven minimum: %r" % result["moves"]
        assert moves == answer["min_moves"], (answer["reason"], result["path"], result["moves"])
    if answer["max_moves"] is not None and result["path"] == "exact" and result["exact"]["status"] == "optimal":
        # The exact solver minimises moves first: never more than the planted solution makes.
        assert moves <= answer["max_moves"], result["moves"]


# --- hand-made problems ----------------------------------------------------------------------------

def _gpu_node(name, gi=10):
    return {"cpu": 8, "memory": "16Gi",
            "gpus": [{"index": 0, "uuid": "GPU-%s" % name, "model": "NVIDIA L4", "memory": "%dGi" % gi}]}


def _gpu_service(gi, replicas=1, stateful=False):
    service = {"replicas": replicas, "resources": {"cpu": "500m", "memory": "1Gi", "gpu": {"memory": "%dGi" % gi}}}
    if stateful:
        service["stateful"] = True
    return service


def _gib(value):
    return value * 1024 ** 3


def _packing():
    """Two 10Gi GPUs; 5, 4, 4, 3, 2, 2 Gi asked: 20Gi, exactly what there is."""
    return {"nodes": {"node-a": _gpu_node("a"), "node-b": _gpu_node("b")},
            "services": {"five": _gpu_service(5), "four": _gpu_service(4, 2), "three": _gpu_service(3),
                         "two": _gpu_service(2, 2)}}


def test_greedy_misses_a_packing_the_exact_solver_finds():
    # Heavy-first best fit: 5 and 4 on one GPU (1 left), 4, 3, 2 on the other (1 left), the last 2 fits nowhere.
    greedy = plan(_packing(), exact_seconds=0)
    assert greedy["feasible"] is False
    assert greedy["path"] == "greedy"
    assert "exact" not in greedy
    assert list(greedy["unschedulable"]) == ["two-1"]

    result = plan(_packing(), exact_seconds=10)
    assert result["feasible"] is True
    assert result["path"] == "exact"
    assert result["exact"]["status"] == "optimal"
    assert result["exact"]["time_limit"] == 10
    assert check_plan(_packing(), result) == []
    # {5, 3, 2} and {4, 4, 2}: both GPUs exactly full.
    for node in ("node-a", "node-b"):
        assert result["usage"][node]["gpus"][0]["used"] == _gib(10)
    on_five = result["placements"]["five-0"]["node"]
    together = sorted(name for name, placement in result["placements"].items() if placement["node"] == on_five)
    assert together in (["five-0", "three-0", "two-0"], ["five-0", "three-0", "two-1"])


def test_provably_infeasible_says_no_placement_exists():
    # Three 6Gi requests, two 10Gi GPUs: 18Gi of 20Gi, but a GPU holds only one of them.
    problem = {"nodes": {"node-a": _gpu_node("a"), "node-b": _gpu_node("b")}, "services": {"six": _gpu_service(6, 3)}}
    result = plan(copy.deepcopy(problem), exact_seconds=10)
    assert result["feasible"] is False
    assert result["path"] == "exact"
    assert result["exact"]["status"] == "infeasible"
    assert result["summary"].startswith("1 of 3 instance(s) could not be placed; ")
    assert _verdict(result).startswith("no placement exists")
    assert result["placements"] == {}
    assert list(result["unschedulable"]) == ["six-2"]
    assert check_plan(problem, result) == []


def _pigeonhole(nodes=20, per_node=4, replicas=81):
    """81 requests above half of an 80Gi GPU for 80 GPUs: infeasible, but CP-SAT needs a few tenths of a second to prove it."""
    return {"nodes": {"n%02d" % position: {"cpu": 64, "memory": "256Gi", "gpus": [
        {"index": index, "uuid": "GPU-%02d-%d" % (position, index), "model": "NVIDIA A100-SXM4-80GB", "memory": "80Gi"}
        for index in range(per_node)]} for position in range(nodes)},
        "services": {"infer": {"replicas": replicas, "resources": {"cpu": 1, "memory": "1Gi", "gpu": {"memory": "41Gi"}}}}}


def test_tiny_time_limit_reports_a_timeout_not_a_proof():
    problem = _pigeonhole()
    for _attempt in range(3):
        result = plan(copy.deepcopy(problem), exact_seconds=0.001)
        assert result["feasible"] is False
        assert result["path"] == "exact"
        assert result["exact"]["status"] == "timeout"
        assert result["exact"]["time_limit"] == 0.001
        assert _verdict(result).startswith("no plan found within 0.001 s")
        assert "no placement exists" not in result["summary"]
        assert check_plan(problem, result) == []


def test_one_stateless_move_is_enough():
    # node-a: the stateful 5Gi db and a 4Gi replica; node-b: the other 4Gi replica; new: 3, 2 and 2 Gi.
    # Staying, node-a has 1Gi left and node-b 6Gi for 7Gi of new work. Both greedy attempts keep
    # four-0 on node-a (stickiness), so they fail; moving four-0 alone fits: {5, 3, 2} and {4, 4, 2}.
    problem = {"nodes": {"node-a": _gpu_node("a"), "node-b": _gpu_node("b")},
               "services": {"db": _gpu_service(5, stateful=True), "four": _gpu_service(4, 2), "three": _gpu_service(3),
                            "two": _gpu_service(2, 2)},
               "previous": {"db-0": {"node": "node-a", "gpus": [{"uuid": "GPU-a"}]}, "four-0": {"node": "node-a"},
                            "four-1": {"node": "node-b"}}}
    greedy = plan(copy.deepcopy(problem), exact_seconds=0)
    assert greedy["feasible"] is False
    assert greedy["path"] == "greedy_with_moves"

    result = plan(copy.deepcopy(problem), exact_seconds=10)
    assert result["feasible"] is True
    assert result["path"] == "exact"
    assert result["exact"]["status"] == "optimal"
    assert result["moves"] == [{"instance": "four-0", "from": "node-a", "to": "node-b"}]
    assert result["placements"]["db-0"]["node"] == "node-a"
    assert result["placements"]["four-1"]["node"] == "node-b"
    assert check_plan(problem, result) == []


# --- greedy moves more than needed; the exact solver, started from greedy's plan, cuts them -------


def test_greedy_release_moves_more_than_needed():
    # All three ran on node-a (8 + 5 + 4 Gi of a 10Gi GPU). Moving the 8Gi one alone fits (node-a {5, 4},
    # node-b {8}); the first greedy attempt keeps 8 on node-a and moves both 5 and 4, so the exact solver runs.
    problem = {"nodes": {"node-a": _gpu_node("a"), "node-b": _gpu_node("b")},
               "services": {"eight": _gpu_service(8), "five": _gpu_service(5), "four": _gpu_service(4)},
               "previous": {"eight-0": {"node": "node-a"}, "five-0": {"node": "node-a"}, "four-0": {"node": "node-a"}}}
    result = plan(copy.deepcopy(problem))
    assert result["feasible"] is True
    assert check_plan(problem, result) == []
    assert len(result["moves"]) == 1 and result["path"] == "exact", result["moves"]


def test_greedy_repack_moves_more_than_needed():
    # node-b ran 7 + 5 + 4 Gi, node-a 2 Gi. Moving the 7Gi one alone fits (node-a {7, 2}, node-b {5, 4}).
    # Attempt 1 keeps 7 on node-b and cannot place both 5 and 4 elsewhere; attempt 2 re-packs 7 on node-b,
    # 5 and 4 on node-a and pushes 2 to node-b: three moves, which the exact solver cuts to one.
    problem = {"nodes": {"node-a": _gpu_node("a"), "node-b": _gpu_node("b")},
               "services": {"seven": _gpu_service(7), "five": _gpu_service(5), "four": _gpu_service(4), "two": _gpu_service(2)},
               "previous": {"seven-0": {"node": "node-b"}, "five-0": {"node": "node-b"}, "four-0": {"node": "node-b"},
                            "two-0": {"node": "node-a"}}}
    result = plan(copy.deepcopy(problem))
    assert result["feasible"] is True
    assert check_plan(problem, result) == []
    assert len(result["moves"]) == 1 and result["path"] == "exact", (result["path"], result["moves"])


def test_quota_gpu_count_pigeonhole_is_proved():
    # 16 x 20Gi = 320Gi in one quota group capped at 3 GPUs of 80Gi (240Gi): infeasible.
    problem = {"nodes": {"n%d" % position: {"cpu": 64, "memory": "256Gi", "gpus": [
        {"index": index, "uuid": "GPU-%d-%d" % (position, index), "model": "NVIDIA A100-SXM4-80GB", "memory": "80Gi"}
        for index in range(2)]} for position in range(6)},
        "services": {"infer": {"replicas": 16, "quota": "team", "resources": {"cpu": 1, "memory": "1Gi", "gpu": {"memory": "20Gi"}}}},
        "quotas": {"team": {"max": {"gpu": 3}}}}
    result = plan(copy.deepcopy(problem), exact_seconds=2)
    assert result["feasible"] is False
    assert result["exact"]["status"] == "infeasible", result["summary"]
