# -*- coding: utf-8 -*-
"""The role_inputs action plugin (one check of several roles' inputs), run the way ansible-core runs it, with a real
templar over the task's variables."""

from __future__ import annotations

import os
import re
from unittest.mock import MagicMock

import pytest
import yaml

from ansible.parsing.dataloader import DataLoader
from ansible.playbook.task import Task
from ansible.template import Templar

from ansible_collections.gangplank.platform.plugins.action.role_inputs import ROLES_DIR, ActionModule, role_options

ROLES = sorted(name for name in os.listdir(ROLES_DIR) if os.path.isfile(os.path.join(ROLES_DIR, name, "meta", "argument_specs.yml")))


def run(args, task_vars):
    task = Task()
    task.args = args
    action = ActionModule(task, MagicMock(), MagicMock(check_mode=False), loader=DataLoader(),
                          templar=Templar(loader=DataLoader(), variables=task_vars), shared_loader_obj=None)
    return action.run(task_vars=task_vars)


def test_every_role_has_options_named_after_it_and_the_shared_settings():
    # The cluster role's check.yml tells the options read once by their names (cluster__check_once).
    assert {"runtime", "facts", "schedule", "deploy"} <= set(ROLES)
    with open(os.path.join(ROLES_DIR, "cluster", "meta", "argument_specs.yml"), encoding="utf-8") as handle:
        shared = yaml.safe_load(handle)["argument_specs"]["settings"]["options"]
    for role in set(ROLES) - {"cluster"}:
        options = role_options(role)
        own = {name: spec for name, spec in options.items() if not name.startswith("cluster_")}
        assert own and all(name.startswith(role + "_") for name in own), role
        # scripts/role_readme.py copies them; the base role has no main spec, so no check of its own per host.
        assert {name: spec for name, spec in options.items() if name.startswith("cluster_")} == shared, role
    with pytest.raises(ValueError):
        role_options("cluster")


def test_good_inputs_pass_and_a_bad_one_is_named():
    assert not run({"roles": ["deploy"]}, {"deploy_log_lines": 20}).get("failed")
    result = run({"roles": ["deploy"]}, {"deploy_log_lines": "many"})
    assert result["failed"] and any("deploy_log_lines" in error for error in result["argument_errors"])
    # The shared settings are checked with the role that depends on them.
    result = run({"roles": ["facts"]}, {"cluster_engine": "lxc"})
    assert result["failed"] and any("cluster_engine" in error for error in result["argument_errors"])


def test_select_and_reject_choose_the_options_checked():
    bad = {"deploy_log_lines": "many", "schedule_history": "ten"}
    once = "^(schedule_.*|deploy_services)$"
    every_host = run({"roles": ["deploy", "schedule"], "reject": once}, bad)
    assert every_host["argument_errors"] and all("schedule_history" not in error for error in every_host["argument_errors"])
    first_host = run({"roles": ["deploy", "schedule"], "select": once}, bad)
    assert any("schedule_history" in error for error in first_host["argument_errors"])
    assert all("deploy_log_lines" not in error for error in first_host["argument_errors"])


@pytest.mark.parametrize("roles, message", [
    (["nosuchrole"], "the argument spec of the role nosuchrole cannot be read"),
])
def test_a_role_without_a_spec_fails_naming_it(roles, message):
    result = run({"roles": roles}, {})
    assert result["failed"] and result["msg"].startswith(message)


def test_a_name_that_is_not_a_role_name_reads_no_file_and_fails():
    # The caller's own option (the shared cluster_check_roles, with its choices) names it where it is checked.
    result = run({"roles": ["deploy", "../../../etc"]}, {"cluster_check_roles": ["../../../etc", "deploy"]})
    assert result["failed"] and any("cluster_check_roles" in error for error in result["argument_errors"])
    result = run({"roles": ["../../../etc"]}, {})
    assert result["failed"] and result["msg"].startswith("'../../../etc': not a role of this collection")


def test_a_bad_pattern_is_refused():
    result = run({"roles": ["deploy"], "select": "("}, {})
    assert result["failed"] and "select is not a regular expression" in result["msg"]


def _tasks(path):
    """Every task of a task file, blocks opened, with whether it (or its block) runs once."""
    with open(path, encoding="utf-8") as handle:
        found = []

        def walk(tasks, once):
            for task in tasks or []:
                here = once or bool(task.get("run_once"))
                if "block" in task:
                    walk(task["block"], here)
                    walk(task.get("rescue"), here)
                    walk(task.get("always"), here)
                else:
                    found.append((task, here))
        walk(yaml.safe_load(handle), False)
        return found


@pytest.mark.parametrize("path, option", [
    (os.path.join(ROLES_DIR, "schedule", "tasks", "main.yml"), re.compile(r"\bschedule_[a-z]")),
    (os.path.join(ROLES_DIR, "deploy", "tasks", "deploy.yml"), re.compile(r"\bdeploy_services\b")),
])
def test_the_options_checked_once_are_read_by_run_once_tasks_only(path, option):
    readers = [(task.get("name"), once) for task, once in _tasks(path) if option.search(yaml.safe_dump(task))]
    assert readers and all(once for _name, once in readers), readers
