# -*- coding: utf-8 -*-
"""bin/gangplank-plan on a Python without PyYAML: a YAML file is not "not valid YAML or JSON"; the planner says
PyYAML is missing and how to install it. JSON still works."""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PLANNER = os.path.join(ROOT, "bin", "gangplank-plan")
PROBLEM = {"nodes": {"a": {"cpu": 2, "memory": "4Gi"}}, "services": {"api": {"resources": {"cpu": 1, "memory": "1Gi"}}}}


def run_without_yaml(tmp_path, *args):
    """The planner run by this Python, with a ``yaml`` module first on the path that cannot be imported."""
    hidden = tmp_path / "hidden"
    hidden.mkdir(exist_ok=True)
    (hidden / "yaml.py").write_text("raise ImportError('PyYAML is hidden by the test')\n")
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env["PYTHONPATH"] = str(hidden)
    return subprocess.run([sys.executable, PLANNER, *args], capture_output=True, text=True, env=env, timeout=120,
                          check=False)


def test_a_yaml_problem_without_pyyaml_says_pyyaml_is_missing(tmp_path):
    (tmp_path / "problem.yml").write_text("nodes:\n  a: {cpu: 2, memory: 4Gi}\nservices:\n"
                                          "  api: {resources: {cpu: 1, memory: 1Gi}}\n")
    done = run_without_yaml(tmp_path, str(tmp_path / "problem.yml"))
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "PyYAML is not installed" in done.stderr and "pip install pyyaml" in done.stderr
    assert "Expecting value" not in done.stderr and "not valid YAML or JSON" not in done.stderr
    assert "Traceback" not in done.stderr


def test_a_yaml_profile_without_pyyaml_says_pyyaml_is_missing(tmp_path):
    (tmp_path / "problem.json").write_text(json.dumps(PROBLEM))
    (tmp_path / "profile.yml").write_text("plugin_config:\n  NodeResourcesFit: {strategy: LeastAllocated}\n")
    done = run_without_yaml(tmp_path, str(tmp_path / "problem.json"), "--profile", str(tmp_path / "profile.yml"))
    assert done.returncode == 1 and "PyYAML is not installed" in done.stderr, done.stderr
    assert "profile.yml" in done.stderr


def test_json_needs_no_pyyaml(tmp_path):
    (tmp_path / "problem.json").write_text(json.dumps(PROBLEM))
    done = run_without_yaml(tmp_path, str(tmp_path / "problem.json"), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["feasible"] is True
    # Broken JSON is still named as such, without PyYAML as well.
    (tmp_path / "broken.json").write_text("{")
    done = run_without_yaml(tmp_path, str(tmp_path / "broken.json"))
    assert done.returncode == 1 and "not valid YAML or JSON" in done.stderr
