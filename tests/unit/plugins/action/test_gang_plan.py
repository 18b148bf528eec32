# -*- coding: utf-8 -*-
"""The gang_plan action plugin, run the way ansible-core runs it, with a fake task."""

from __future__ import annotations

from unittest.mock import MagicMock

import pytest

from ansible.errors import AnsibleActionFail
from ansible.playbook.task import Task

from ansible_collections.gangplank.platform.plugins.action.gang_plan import ActionModule

PROBLEM = {"nodes": {"a": {"cpu": 4, "memory": "8Gi"}},
           "services": {"web": {"replicas": 2, "resources": {"cpu": 1}, "ports": [80]}}}


def run(args, check_mode=False):
    task = Task()
    task.args = args
    task.check_mode = check_mode
    play_context = MagicMock(check_mode=check_mode)
    action = ActionModule(task, MagicMock(), play_context, loader=MagicMock(), templar=MagicMock(),
                          shared_loader_obj=None)
    return action.run(task_vars={})


def test_infeasible_fails_with_the_report():
    result = run({"problem": PROBLEM})
    assert result["failed"] is True and result["changed"] is False
    assert result["feasible"] is False and result["placements"] == {}
    assert "web-1: 0/1 nodes are available: 1 node(s) didn't have free ports" in result["msg"]


def test_infeasible_without_failing():
    result = run({"problem": PROBLEM, "fail_on_infeasible": False})
    assert not result.get("failed") and result["feasible"] is False


def test_feasible_returns_the_plan_and_table():
    problem = dict(PROBLEM, services={"web": {"replicas": 2, "resources": {"cpu": 1}}})
    result = run({"problem": problem}, check_mode=True)
    assert not result.get("failed") and result["changed"] is False
    assert sorted(result["placements"]) == ["web-0", "web-1"]
    assert result["table"][0].startswith("NODE")


def test_bad_problem_lists_every_error_with_its_path():
    result = run({"problem": {"nodes": {"a": {"cpu": "x", "memory": "8Gi"}}, "services": {"web": {"replicas": -1}}}})
    assert result["failed"] is True
    assert result["errors"] == [
        {"path": "nodes.a.cpu", "message": 'got "x"; expected a CPU amount: cores (e.g. 4 or 0.5) or millicores (e.g. 500m)'},
        {"path": "services.web.replicas", "message": "got -1; expected an integer >= 0"},
    ]
    assert result["msg"].startswith("The problem is not valid:\nnodes.a.cpu: ")


def test_argument_spec_is_enforced():
    # ansible-core turns AnsibleActionFail into a failed task with this message.
    with pytest.raises(AnsibleActionFail, match="argument 'problem' is of type str"):
        run({"problem": "not a mapping"})
    with pytest.raises(AnsibleActionFail, match="missing required arguments: problem"):
        run({})
