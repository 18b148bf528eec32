# -*- coding: utf-8 -*-
"""The exact solver's verdicts when it cannot run: OR-Tools missing, or a problem too large to model."""

from __future__ import annotations

import copy
import os
import subprocess
import sys

from ansible_collections.gangplank.platform.plugins.module_utils.scheduler import exact
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler import scheduler
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.problem import parse_problem
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.scheduler import _greedy, framework_for, plan
from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.plan_checker import check_plan

# Two 10Gi GPUs and requests of 5, 4, 4, 3, 2, 2 Gi: heavy-first best fit fails, {5, 3, 2} + {4, 4, 2} fits.
PACKING = {
    "nodes": {name: {"cpu": 8, "memory": "8Gi", "gpus": [{"index": 0, "uuid": "GPU-" + name, "model": "NVIDIA L4", "memory": "10Gi"}]}
              for name in ("a", "b")},
    "services": {"s5": {"resources": {"gpu": {"memory": "5Gi"}}}, "s4": {"replicas": 2, "resources": {"gpu": {"memory": "4Gi"}}},
                 "s3": {"resources": {"gpu": {"memory": "3Gi"}}}, "s2": {"replicas": 2, "resources": {"gpu": {"memory": "2Gi"}}}},
}


def _packing_beside_web():
    """PACKING beside three CPU-only nodes running web replicas: 5 nodes x 12 instances = 60 instance-node pairs."""
    problem = copy.deepcopy(PACKING)
    problem["nodes"].update({"cpu-%d" % i: {"cpu": 8, "memory": "8Gi"} for i in range(3)})
    problem["services"]["web"] = {"replicas": 6, "resources": {"cpu": 1, "memory": "1Gi"}}
    return problem


def test_the_packing_is_found():
    result = plan(PACKING)
    assert result["feasible"] is True and result["path"] == "exact" and result["exact"]["status"] == "optimal"


def test_without_ortools_the_greedy_answer_stands_and_says_why(monkeypatch):
    monkeypatch.setattr(exact, "cp_model", None)
    result = plan(PACKING)
    # The solver never ran: the path is the greedy pass's, with no exact verdict to claim.
    assert result["feasible"] is False and result["path"] == "greedy" and "exact" not in result
    assert result["summary"] == ("1 of 6 instance(s) could not be placed (the exact solver needs OR-Tools (pip install ortools), "
                                 "so the exact solver did not run)")


def test_a_problem_too_large_to_model_is_skipped(monkeypatch):
    monkeypatch.setattr(exact, "MAX_CANDIDATES", 11)
    result = plan(PACKING)
    assert result["feasible"] is False and result["path"] == "greedy" and "exact" not in result
    assert "12 instance-node pairs exceed the exact solver's limit of 11" in result["summary"]


def test_zero_seconds_turns_it_off():
    result = plan(PACKING, exact_seconds=0)
    assert result["feasible"] is False and result["path"] == "greedy" and "exact" not in result


def test_a_problem_too_large_to_model_is_solved_around_its_unplaced_instances(monkeypatch):
    # PACKING beside three CPU-only nodes running web replicas: 5 nodes x 12 instances = 60 pairs, above the
    # limit of 40; the part around the unplaced GPU request (nodes a and b, with what greedy put there) is not.
    problem = _packing_beside_web()
    monkeypatch.setattr(exact, "MAX_CANDIDATES", 40)
    result = plan(copy.deepcopy(problem))
    assert result["feasible"] is True and result["path"] == "exact" and result["exact"]["status"] == "feasible"
    assert result["exact"]["scope"].startswith("the part around 1 unplaced instance(s)")
    assert check_plan(problem, result) == []
    # Nothing outside the part moved: the web replicas stay where greedy put them.
    assert all(result["placements"]["web-%d" % i]["node"].startswith("cpu-") for i in range(6))


def test_a_part_without_a_plan_proves_nothing(monkeypatch):
    problem = copy.deepcopy(PACKING)
    problem["services"]["s5"]["replicas"] = 3       # 19Gi on 20Gi with requests that cannot share: infeasible
    problem["nodes"].update({"cpu-%d" % i: {"cpu": 8, "memory": "8Gi"} for i in range(3)})
    monkeypatch.setattr(exact, "MAX_CANDIDATES", 20)
    result = plan(problem)
    assert result["feasible"] is False and result["path"] == "greedy" and "exact" not in result
    assert "so the exact solver did not run" in result["summary"]


def test_a_model_whose_sums_pass_int64_is_skipped_not_timed_out():
    # Each coefficient is within the documented bounds (1 PiB); their sum over 10,000 terms is not.
    assert exact.available()
    model = exact.cp_model.CpModel()
    takes = [model.NewBoolVar("t%d" % index) for index in range(10000)]
    model.Add(sum(2 ** 50 * take for take in takes) <= 2 ** 50)
    reason = exact._unrepresentable(type("Builder", (), {"model": model})())
    assert reason.startswith("the problem's sizes are too large for CP-SAT's 64-bit arithmetic (")
    small = exact.cp_model.CpModel()
    small.Add(sum(small.NewBoolVar("s%d" % index) for index in range(3)) <= 2)
    assert exact._unrepresentable(type("Builder", (), {"model": small})()) == ""


def test_loading_the_schedulers_plugins_does_not_load_ortools():
    # Ansible's controller loads the action plugin in its main process, which forks a worker per task and host:
    # OR-Tools (numpy, pandas) would make each fork dearer. It is loaded when the exact solver is first asked for.
    code = ("import sys; import ansible_collections.gangplank.platform.plugins.action.gang_schedule; "
            "import ansible_collections.gangplank.platform.plugins.action.gang_plan; "
            "print(sorted(name for name in ('ortools', 'numpy', 'pandas') if name in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ)
    assert loaded.stdout.strip() == "[]"


def test_the_result_lists_the_steps_taken():
    result = plan(PACKING)
    assert [step["step"] for step in result["steps"]] == ["greedy", "exact"]
    assert all(isinstance(step["seconds"], float) and step["seconds"] >= 0 for step in result["steps"])
    easy = copy.deepcopy(PACKING)
    easy["services"]["s2"]["replicas"] = 1
    assert [step["step"] for step in plan(easy)["steps"]] == ["greedy"]


def test_building_the_model_is_part_of_the_time_limit(monkeypatch):
    # A clock that has passed every deadline once the model is being built: the build stops, and the answer is a
    # timeout, not a proof.
    clock = iter([0.0] + [1000.0] * 1000)
    monkeypatch.setattr(exact.time, "monotonic", lambda: next(clock))
    found = exact.solve(parse_problem(copy.deepcopy(PACKING)), framework_for(parse_problem(copy.deepcopy(PACKING))), 5)
    assert found.status == exact.TIMEOUT and found.placements is None
    assert found.reason == "no plan found within 5 s"


def test_a_part_whose_model_takes_the_whole_limit_to_build_is_not_searched(monkeypatch):
    problem = _packing_beside_web()
    monkeypatch.setattr(exact, "MAX_CANDIDATES", 40)
    parsed = parse_problem(problem)
    framework = framework_for(parsed)
    failed, _path = _greedy(framework, parsed)
    searched = []
    monkeypatch.setattr(exact, "_two_phases", lambda *args: searched.append(args))
    clock = iter([0.0] + [1000.0] * 1000)
    monkeypatch.setattr(exact.time, "monotonic", lambda: next(clock))
    found = exact.solve(parsed, framework, 5, around=failed)
    assert found.status == exact.SKIPPED and found.placements is None and searched == []
    assert "has no plan found within 5 s (its model took longer to build)" in found.reason


def test_too_large_to_model_the_cheap_steps_go_first_and_share_the_limit(monkeypatch):
    # The PACKING gang beside CPU-only nodes, too large to model whole: no counting proof, the re-orderings
    # (none places it: the packing needs the exact solver), then the exact solver around the unplaced instance.
    problem = _packing_beside_web()
    monkeypatch.setattr(exact, "MAX_CANDIDATES", 40)
    result = plan(copy.deepcopy(problem))
    names = [step["step"] for step in result["steps"]]
    assert names[:2] == ["greedy", "counting_proof"] and names[-1] == "exact"
    assert all(name.startswith("reordering:") for name in names[2:-1])
    assert result["feasible"] is True and result["exact"]["time_limit"] == 5.0
    # The re-orderings ran out the limit: the exact solver is not started, and the summary says why.
    real = exact.time.monotonic
    monkeypatch.setattr(scheduler, "_reordered", lambda *args: monkeypatch.setattr(
        scheduler.time, "monotonic", lambda: real() + 3600))
    result = plan(copy.deepcopy(problem))
    assert result["feasible"] is False and "exact" not in result
    assert result["summary"].endswith("(60 instance-node pairs exceed the exact solver's limit of 40, and the re-orderings "
                                      "took its 5 s, so the exact solver did not run)")
    assert [step["step"] for step in result["steps"]] == ["greedy", "counting_proof"]
