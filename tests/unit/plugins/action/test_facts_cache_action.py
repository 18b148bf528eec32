# -*- coding: utf-8 -*-
"""The facts_cache action plugin: the read is one shell on the host (here the real sh on this machine, through a
connection stub that runs the command), hashed on the controller into the module's fingerprint; the write and a read
that did not finish run the module; check_roles checks the roles' inputs first and reads nothing when one is bad."""

from __future__ import annotations

import json
import subprocess
from types import SimpleNamespace
from unittest.mock import MagicMock

from ansible.parsing.dataloader import DataLoader
from ansible.playbook.task import Task
from ansible.template import Templar

from ansible_collections.gangplank.platform.plugins.action.facts_cache import ActionModule as FactsCache
from ansible_collections.gangplank.platform.plugins.action.role_inputs import ActionModule as RoleInputs
from ansible_collections.gangplank.platform.plugins.module_utils.facts.facts_cache import cache_content, read_state

INPUTS = {"hostname": "h1", "simulated_gpus": [], "simulated_nvme": [], "nvme_labels": {}}
FACTS = {"processor_vcpus": 16, "memtotal_mb": 65536, "architecture": "x86_64", "system": "Linux"}


def plugin(args, task_vars, fail_shell=False):
    """The action as ansible-core builds it; its commands run in this machine's sh, and its module run is recorded.
    The role_inputs action comes from a plugin loader stub, built the same way over ``task_vars``."""
    task = Task()
    task.args = args
    action = FactsCache(task, MagicMock(become=None), MagicMock(check_mode=False), loader=MagicMock(),
                        templar=MagicMock(), shared_loader_obj=None)
    action.commands = []
    action.module_calls = []

    def execute(command, executable=None, in_data=None):
        del executable, in_data
        action.commands.append(command)
        if fail_shell:
            return {"rc": 127, "stdout": "sh: not found\n", "stderr": ""}
        done = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=30, check=False)
        return {"rc": done.returncode, "stdout": done.stdout, "stderr": done.stderr}

    def module(module_name, module_args, task_vars):
        del task_vars
        action.module_calls.append((module_name, module_args))
        return {"changed": False, "from": "module"}

    def get(name, task, **_kwargs):
        assert name == "gangplank.platform.role_inputs"
        return RoleInputs(task, MagicMock(), MagicMock(check_mode=False), loader=DataLoader(),
                          templar=Templar(loader=DataLoader(), variables=task_vars), shared_loader_obj=None)
    action._low_level_execute_command = execute
    action._execute_module = module
    action._shared_loader_obj = SimpleNamespace(action_loader=SimpleNamespace(get=get))
    return action


def test_the_read_is_one_shell_and_equals_the_modules_read(tmp_path):
    from ansible_collections.gangplank.platform.plugins.module_utils.facts.facts_cache import fingerprint
    cache = tmp_path / "hardware-facts.json"
    cache.write_text(json.dumps(cache_content(FACTS, fingerprint(INPUTS))))
    bindings = tmp_path / "gangplank.fact"
    bindings.write_text(json.dumps({"instances": {}, "revision": 1}))
    args = {"path": str(cache), "inputs": INPUTS, "bindings_path": str(bindings)}
    action = plugin(args, {})
    result = action.run(task_vars={})
    assert len(action.commands) == 1 and action.commands[0].startswith("sh -c ") and action.module_calls == []
    expected = read_state(str(cache), INPUTS, str(bindings))
    assert {key: result[key] for key in expected} == expected and result["valid"] is True


def test_the_write_and_a_read_whose_shell_failed_run_the_module(tmp_path):
    args = {"path": str(tmp_path / "c.json"), "state": "write", "facts": FACTS}
    action = plugin(args, {})
    assert action.run(task_vars={})["from"] == "module" and action.commands == []
    action = plugin({"path": str(tmp_path / "c.json")}, {}, fail_shell=True)
    assert action.run(task_vars={})["from"] == "module" and action.module_calls[0][0] == "gangplank.platform.facts_cache"


def test_check_roles_checks_the_inputs_first_and_reads_no_host_when_one_is_bad(tmp_path):
    args = {"path": str(tmp_path / "c.json"), "check_roles": ["deploy"], "check_reject": "^deploy_services$"}
    # deploy_services is left to the once-check (check_reject): the read goes on.
    action = plugin(dict(args), {"deploy_log_lines": 20, "deploy_services": "not a catalog"})
    result = action.run(task_vars={"deploy_log_lines": 20, "deploy_services": "not a catalog"})
    assert not result.get("failed") and result["valid"] is False and len(action.commands) == 1
    assert action._task.args["check_roles"] == ["deploy"]
    bad = {"deploy_log_lines": "many"}
    action = plugin(dict(args), bad)
    result = action.run(task_vars=bad)
    assert result["failed"] and any("deploy_log_lines" in error for error in result["argument_errors"])
    assert action.commands == [] and action.module_calls == [] and "valid" not in result
    # Hostile check arguments: refused by name, nothing read.
    for hostile, message in (({"check_roles": ["../../../etc"]}, "'../../../etc': not a role of this collection"),
                             ({"check_reject": "("}, "check_reject is not a regular expression"),
                             ({"check_roles": ["nosuchrole"]}, "the argument spec of the role nosuchrole cannot be read")):
        action = plugin(dict(args, **hostile), {})
        result = action.run(task_vars={})
        assert result["failed"] and result["msg"].startswith(message) and action.commands == [], result
