# -*- coding: utf-8 -*-
"""playbooks/plan.yml through a real ansible-playbook run on localhost (no mocks)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAYBOOK = os.path.join(ROOT, "playbooks", "plan.yml")
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")


def play(tmp_path, problem=None, extra=()):
    args = [ANSIBLE_PLAYBOOK, PLAYBOOK, "-e", "gangplank_plan_html=%s" % (tmp_path / "plan.html")]
    if problem is not None:
        path = tmp_path / "problem.yml"
        path.write_text(yaml.safe_dump(problem))
        args += ["-e", "@%s" % path]
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json", ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false")
    completed = subprocess.run(args + list(extra), cwd=ROOT, env=env, capture_output=True, text=True,
                               timeout=300, check=False)
    return completed


def task_results(completed):
    report = json.loads(completed.stdout)
    return {task["task"]["name"]: task["hosts"]["localhost"] for task in report["plays"][0]["tasks"]}


def test_bundled_example_plans(tmp_path):
    with open(os.path.join(ROOT, "examples", "cluster.yml"), encoding="utf-8") as handle:
        problem = yaml.safe_load(handle)
    completed = play(tmp_path, problem)
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr
    results = task_results(completed)
    planned = results["Plan every service instance at once"]
    assert planned["feasible"] is True and planned["changed"] is False
    assert len(planned["placements"]) == 9
    assert results["Show the plan"]["msg"][0].startswith("NODE")
    assert results["Show the plan"]["msg"][-1] == "picture: %s" % (tmp_path / "plan.html")
    page = (tmp_path / "plan.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and all(name in page for name in ("node-a", "node-b", "infer-2", "db-0"))


def test_check_mode_gives_the_same_plan(tmp_path):
    with open(os.path.join(ROOT, "examples", "cluster.yml"), encoding="utf-8") as handle:
        problem = yaml.safe_load(handle)
    normal = task_results(play(tmp_path, problem))["Plan every service instance at once"]
    (tmp_path / "plan.html").unlink()
    checked = play(tmp_path, problem, ["--check"])
    assert checked.returncode == 0
    assert "infer-2" in (tmp_path / "plan.html").read_text(encoding="utf-8")    # the picture is a report: written anyway
    assert task_results(checked)["Plan every service instance at once"]["placements"] == normal["placements"]


def test_infeasible_fails_the_play_with_the_report(tmp_path):
    completed = play(tmp_path, {"nodes": {"a": {"cpu": 1, "memory": "1Gi"}},
                                "services": {"db": {"resources": {"cpu": 2}}}})
    assert completed.returncode == 2
    results = task_results(completed)
    planned = results["Plan every service instance at once"]
    assert planned["feasible"] is False and planned["placements"] == {}
    assert results["Fail when the gang does not fit"]["failed"] is True
    reason = "0/1 nodes are available: 1 Insufficient cpu (asked 2 CPUs; the most free on a node is 1 CPU)."
    assert "db-0: " + reason in results["Fail when the gang does not fit"]["msg"]
    page = (tmp_path / "plan.html").read_text(encoding="utf-8")
    assert "db-0" in page and reason in page


def test_bad_problem_names_the_path(tmp_path):
    completed = play(tmp_path, {"nodes": {"a": {"cpu": 1, "memory": "1Gx"}}, "services": {}})
    assert completed.returncode == 2
    planned = task_results(completed)["Plan every service instance at once"]
    assert planned["errors"][0]["path"] == "nodes.a.memory"
    assert "Traceback" not in completed.stdout + completed.stderr


@pytest.mark.parametrize("problem", [None, {"nodes": {}}])
def test_missing_problem_is_explained(tmp_path, problem):
    completed = play(tmp_path, problem)
    assert completed.returncode == 2
    assert "Give a problem with -e @problem.yml" in completed.stdout


def test_profile_with_the_example_user_plugin(tmp_path):
    """docs/examples: the ImageAffinity user plugin keeps web off the node reserved for CAD images, and
    LeastAllocated spreads it; a bad profile fails naming profile.<path>."""
    examples = os.path.join(ROOT, "docs", "examples")
    with open(os.path.join(examples, "image_affinity_problem.yml"), encoding="utf-8") as handle:
        problem = yaml.safe_load(handle)
    with open(os.path.join(examples, "image_affinity_profile.yml"), encoding="utf-8") as handle:
        profile = yaml.safe_load(handle)
    profile["user_plugins"] = [os.path.join(examples, "image_affinity.py")]
    completed = play(tmp_path, dict(problem, profile=profile))
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr
    planned = task_results(completed)["Plan every service instance at once"]
    nodes = {name: placement["node"] for name, placement in planned["placements"].items()}
    assert nodes == {"cad-0": "cad-node", "web-0": "node-a", "web-1": "node-b"}
    profile["plugins"]["score"]["enabled"][0]["weight"] = -1
    completed = play(tmp_path, dict(problem, profile=profile))
    assert completed.returncode == 2
    planned = task_results(completed)["Plan every service instance at once"]
    assert planned["errors"][0]["path"] == "profile.plugins.score.enabled[0].weight"
    assert "Traceback" not in completed.stdout + completed.stderr
