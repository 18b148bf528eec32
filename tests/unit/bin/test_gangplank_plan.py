# -*- coding: utf-8 -*-
"""bin/gangplank-plan as a user runs it: exit 0 feasible, 2 infeasible, 1 bad input, never a traceback."""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PLANNER = os.path.join(ROOT, "bin", "gangplank-plan")     # the launcher users run


def run(*args, stdin=None):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}    # it must find its own code
    return subprocess.run([PLANNER, *args], input=stdin, capture_output=True, text=True,
                          env=env, timeout=60, check=False)


def test_example_is_feasible_as_table_and_json():
    table = run(os.path.join(ROOT, "examples", "cluster.yml"))
    assert table.returncode == 0, table.stderr
    assert table.stdout.startswith("NODE") and "plan: feasible (greedy)" in table.stdout
    as_json = run(os.path.join(ROOT, "examples", "cluster.yml"), "--json")
    result = json.loads(as_json.stdout)
    assert result["feasible"] is True and len(result["placements"]) == 9


def test_output_is_byte_identical_across_runs():
    first = run(os.path.join(ROOT, "examples", "cluster.yml"), "--json")
    second = run(os.path.join(ROOT, "examples", "cluster.yml"), "--json")
    # Byte-identical apart from how long planning took.
    assert re.sub(r'"seconds": [0-9.e-]+', "", first.stdout) == re.sub(r'"seconds": [0-9.e-]+', "", second.stdout)
    assert '"seconds": ' in first.stdout


def test_infeasible_exits_2_with_the_reasons():
    problem = json.dumps({"nodes": {"a": {"cpu": 1, "memory": "1Gi"}}, "services": {"db": {"resources": {"cpu": 2}}}})
    result = run("-", stdin=problem)
    assert result.returncode == 2
    assert "db-0: 0/1 nodes are available: 1 Insufficient cpu (asked 2 CPUs; the most free on a node is 1 CPU)." in result.stdout


@pytest.mark.parametrize("content, expected", [
    ("nodes: [\n", "is not valid YAML or JSON"),
    ("- 1\n", "problem: got [1]; expected a mapping with nodes and services"),
    ("nodes: {a: {cpu: 1, memory: 1Gi}}\nservices: {web: {replicas: many}}\n",
     'services.web.replicas: got "many"; expected an integer >= 0'),
])
def test_bad_input_exits_1_without_traceback(content, expected):
    result = run("-", stdin=content)
    assert result.returncode == 1
    assert expected in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_missing_file():
    result = run("/nonexistent/problem.yml")
    assert result.returncode == 1 and "cannot read /nonexistent/problem.yml" in result.stderr


def test_html_writes_the_picture_and_an_unwritable_file_is_an_error(tmp_path):
    page = tmp_path / "plan.html"
    done = run(os.path.join(ROOT, "examples", "cluster.yml"), "--html", str(page))
    assert done.returncode == 0, done.stderr
    text = page.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and ">node-c<" in text and ">infer-2<" in text
    assert [path.name for path in tmp_path.iterdir()] == ["plan.html"]       # no temporary file left
    infeasible = tmp_path / "problem.json"
    infeasible.write_text(json.dumps({"nodes": {"a": {"cpu": 1, "memory": "1Gi"}}, "services": {"db": {"resources": {"cpu": 2}}}}))
    done = run(str(infeasible), "--html", str(page), "--exact-timeout", "0")
    assert done.returncode == 2 and "Insufficient cpu" in page.read_text(encoding="utf-8")
    done = run(os.path.join(ROOT, "examples", "cluster.yml"), "--html", str(tmp_path / "missing" / "plan.html"))
    assert done.returncode == 1 and "cannot write" in done.stderr and "Traceback" not in done.stderr


def _fragmented_problem(tmp_path):
    nodes = {"n%d" % i: {"cpu": 16, "memory": "64Gi", "gpus": [
        {"index": g, "uuid": "G-%d-%d" % (i, g), "model": "NVIDIA A100", "memory": "80Gi"} for g in range(2)]} for i in range(3)}
    problem = {"nodes": nodes, "services": {"infer": {"replicas": 3, "resources": {"cpu": 1, "gpu": {"memory": "20Gi"}}}},
               "previous": {"infer-%d" % i: {"node": "n%d" % i, "gpus": [{"uuid": "G-%d-0" % i}]} for i in range(3)}}
    path = tmp_path / "fragmented.json"
    path.write_text(json.dumps(problem))
    return str(path)


def test_rebalance_shows_the_gain_first_then_the_moves(tmp_path):
    problem = _fragmented_problem(tmp_path)
    done = run(problem, "--rebalance", "--max-moves", "1", "--html", str(tmp_path / "rb.html"))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("rebalance (at most 1 move(s); solver ") and "1 move(s), 0 restart(s)" in lines[0]
    assert lines[1] == "  whole GPUs free: 3 -> 4 of 6 (+1)" and lines[2] == "  nodes free:      0 -> 1 of 3 (+1)"
    assert "plan: feasible (rebalance): 3 instance(s) on 2 of 3 node(s), 1 move(s)" in done.stdout
    assert "whole GPUs free: 3 -&gt; 4 of 6 (+1)" in (tmp_path / "rb.html").read_text(encoding="utf-8")
    result = json.loads(run(problem, "--rebalance", "--json").stdout)
    assert result["path"] == "rebalance" and len(result["moves"]) == 2 and result["rebalance"]["gain"]["nodes_freed"] == 2


@pytest.mark.parametrize("args, message", [
    (("--max-moves", "2"), "--max-moves needs --rebalance"),
    (("--rebalance", "--max-moves", "-1"), "--max-moves: got -1; expected a whole number from 0 to 100000"),
])
def test_rebalance_arguments_are_checked(tmp_path, args, message):
    done = run(_fragmented_problem(tmp_path), *args)
    assert done.returncode == 1 and message in done.stderr and "Traceback" not in done.stderr


def test_profile_with_the_example_user_plugin():
    examples = os.path.join(ROOT, "docs", "examples")
    problem = os.path.join(examples, "image_affinity_problem.yml")
    planned = run(problem, "--json", "--profile", os.path.join(examples, "image_affinity_profile.yml"))
    assert planned.returncode == 0, planned.stderr
    nodes = {name: placement["node"] for name, placement in json.loads(planned.stdout)["placements"].items()}
    # The reserved node takes only the CAD image; web spreads (LeastAllocated) over the other two.
    assert nodes == {"cad-0": "cad-node", "web-0": "node-a", "web-1": "node-b"}
    default = json.loads(run(problem, "--json").stdout)
    assert {p["node"] for p in default["placements"].values()} == {"cad-node"}


def test_bad_profile_names_the_path(tmp_path):
    profile = tmp_path / "profile.yml"
    profile.write_text("plugins: {filter: {disabled: [NoSuchPlugin]}}\n")
    completed = run(os.path.join(ROOT, "examples", "cluster.yml"), "--profile", str(profile))
    assert completed.returncode == 1 and "Traceback" not in completed.stderr
    assert "profile.plugins.filter.disabled[0]: got \"NoSuchPlugin\"; expected a filter plugin" in completed.stderr


def test_a_yaml_error_names_the_file_and_its_line(tmp_path):
    broken = tmp_path / "cluster.yml"
    broken.write_text("nodes:\n  a: {cpu: 1\nservices: {}\n", encoding="utf-8")
    result = run(str(broken))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert 'in "%s", line 3, column 9' % broken in result.stderr
    assert "<unicode string>" not in result.stderr
    result = run("-", stdin=broken.read_text(encoding="utf-8"))
    assert result.returncode == 1 and 'in "<stdin>", line 3, column 9' in result.stderr
