# -*- coding: utf-8 -*-
"""Property-based fuzzing of every entry point: no traceback, only the documented errors, bounded
time and memory, and every feasible plan accepted by the independent plan checker.

The in-process entry points run in this process: their work is bounded by the documented limits, and a case
that took long would fail the test on its own. The planner command runs in a subprocess with an address-space
limit and a timeout, where a hang or a memory blow-up could happen.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ansible_collections.gangplank.platform.tests.unit.plugins import fuzz_cases

CASE_SECONDS = 10           # one in-process case; the bounds keep every case far below this

FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


def _chooser(data):
    return lambda options: data.draw(st.sampled_from(list(options)))


def _timed(run, case):
    start = time.monotonic()
    outcome = run(case)
    assert time.monotonic() - start < CASE_SECONDS, "took %.1fs" % (time.monotonic() - start)
    assert not outcome.startswith("violation"), outcome
    return outcome


@pytest.mark.parametrize("entry_point", sorted(fuzz_cases.ENTRY_POINTS))
@settings(FUZZ, max_examples=30)
@given(data=st.data())
def test_entry_point(entry_point, data):
    make, run = fuzz_cases.ENTRY_POINTS[entry_point]
    _timed(run, make(_chooser(data)))


@settings(FUZZ, max_examples=20)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=30))
def test_deploy_any_host_name(host):
    _timed(fuzz_cases.run_deploy, host)


# --- the planner command, bounded --------------------------------------------------------------------

def run_planner_command(text, *args):
    code, stdout, stderr, seconds = fuzz_cases.run_command(text, *args)
    if code is None:
        pytest.fail("hang: no answer within %ds" % fuzz_cases.CLI_SECONDS)
    return code, stdout, stderr, seconds


@settings(FUZZ, max_examples=8)
@given(st.data())
def test_planner_command_bounded(data):
    choose = _chooser(data)
    problem = fuzz_cases.mutate(fuzz_cases.PROBLEM, choose, mutations=1, pool=fuzz_cases.JSON_HOSTILE)
    text, checkable = fuzz_cases.as_text(problem, choose)
    code, stdout, stderr, _seconds = run_planner_command(text, "--json")
    failure = fuzz_cases.judge_command(problem if checkable else None, code, stdout, stderr)
    assert failure is None, failure


def test_planner_command_head_closes_the_pipe():
    """`bin/gangplank-plan --json | head -1`: no traceback about the broken pipe."""
    text = json.dumps({"nodes": {"a": {"cpu": 64, "memory": "256Gi"}}, "services": {"web": {"replicas": 50}}})
    command = "%s - --json | head -1" % fuzz_cases.PLANNER
    process = subprocess.run(["sh", "-c", command], input=text, capture_output=True, text=True, timeout=fuzz_cases.CLI_SECONDS,
                             env={key: value for key, value in os.environ.items() if key != "PYTHONPATH"}, check=False)
    assert process.stdout == "{\n" and process.stderr == ""


@pytest.mark.parametrize("text, expected", [
    ("nodes: {a: {cpu: 1, memory: 1Gi}}\nservices: {web: {replicas: 1000000000}}\n",
     "services.web.replicas: got 1000000000; expected an integer >= 0, at most 100000"),
    ('{"nodes": {"a": {"cpu": 1, "memory": "1Gi"}}, "services": {"web": {"ports": %s}}}' % list(range(1, 65536)),
     "services.web.ports: has 65535 items; expected at most 1024"),
    ('{"nodes": {"a": {"cpu": 1, "memory": 8e9}}, "services": {"web": {}}, "services": {}}',
     'duplicate key "services"'),
    ("nodes: {a: {cpu: 1, memory: 1Gi}}\nservices:\n  web: {}\n  web: {replicas: 0}\n", 'found duplicate key "web"'),
    ("nodes: {a: {cpu: .nan, memory: .inf}}\nservices: {}\n", "nodes.a.cpu: got NaN; expected a CPU amount"),
    ("nodes: " + "[" * 20000, "is nested too deeply"),
    (fuzz_cases.as_text({}, lambda options: "laughs")[0], 'services.web.ports[0]: got [[[[[[[["lol", "lol"'),
])
def test_planner_command_refuses_what_issue_13_found(text, expected):
    code, _stdout, stderr, seconds = run_planner_command(text)
    assert code == 1 and expected in stderr and "Traceback" not in stderr, stderr
    assert seconds < fuzz_cases.CLI_SECONDS


def test_json_is_read_as_json():
    """8e9 is a number in JSON (YAML 1.1 reads it as a string), and a long key is a key."""
    key = "k" * 2000
    text = json.dumps({"nodes": {"a": {"cpu": 1, "memory": 8e9, "labels": {key: "v"}}}, "services": {"web": {}}})
    code, stdout, stderr, _seconds = run_planner_command(text, "--json")
    assert code == 0, stderr
    assert json.loads(stdout)["usage"]["a"]["memory"]["total"] == 8000000000


def test_a_huge_problem_file_is_refused_before_it_is_read_whole():
    code, _stdout, stderr, _seconds = run_planner_command(" " * (64 * 2 ** 20 + 1))
    assert code == 1 and stderr == "gangplank-plan: - is not valid YAML or JSON: it is longer than 67108864 characters\n"
