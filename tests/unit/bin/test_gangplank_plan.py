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
    assert "db-0: 0/1 nodes are available: 1 Insufficient cpu." in result.stdout


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
