# -*- coding: utf-8 -*-
"""plugin_utils/host_script.py: a module_utils function run on the host as a plain Python script gives what the
function gives, needs nothing of the collection installed there, and says when it could not run (the module then
runs instead)."""

from __future__ import annotations

import ast
import importlib
import os
import socket
import subprocess
import sys
from types import SimpleNamespace
from unittest.mock import MagicMock

import pytest

from ansible.errors import AnsibleActionFail
from ansible.playbook.task import Task

# Imported with the module, not in a test: once a test has set up ansible-core's plugin loader, its collection finder
# would load the action plugins and ask for collection metadata that a unit run does not have.
from ansible_collections.gangplank.platform.plugins.action.health_wait import ActionModule as HealthWait
from ansible_collections.gangplank.platform.plugins.module_utils import health
from ansible_collections.gangplank.platform.plugins.plugin_utils import host_script

UTILS = host_script.MODULE_UTILS


def run_script(program):
    """The script run as the action plugin runs it: `python -` with the program on stdin, isolated from this
    checkout (-I: no PYTHONPATH, no user site, not the current directory), from another directory."""
    done = subprocess.run([sys.executable, "-I", "-"], input=program, capture_output=True, cwd="/", timeout=60,
                          env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, check=False)
    assert done.returncode == 0, done.stderr.decode()
    return host_script.parse_answer(done.stdout.decode())


def test_health_probes_as_a_script_pass_and_fail_like_the_module():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        port = listener.getsockname()[1]
        probes = [{"name": "db", "type": "tcp", "host": "127.0.0.1", "port": port, "timeout": 1.0, "interval": 0.1,
                   "retries": 2, "start_period": 0.0, "url": None, "expect_status": None, "argv": None}]
        program = host_script.script([UTILS + "messages", UTILS + "health"], "wait_result", {"probes": probes})
        answer = run_script(program)
    assert answer["healthy"] is True and answer["changed"] is False and "failed" not in answer
    # The listener is closed now: the same probe fails, with the module's failure line.
    answer = run_script(program)
    assert answer["failed"] is True and answer["healthy"] is False
    assert answer["msg"].startswith("db: tcp 127.0.0.1:%d failed 2 times" % port)
    checked = run_script(host_script.script([UTILS + "messages", UTILS + "health"], "wait_result",
                                            {"probes": probes, "check_mode": True}))
    assert checked == health.wait_result(probes, check_mode=True)


@pytest.mark.parametrize("stdout", [
    "", "no marker here\n", host_script.MARKER + "not json\n", host_script.MARKER + "[1, 2]\n",
    host_script.MARKER + '"text"\n', "x" + host_script.MARKER + '{"valid": true}\n',
])
def test_output_without_a_result_of_ours_is_none(stdout):
    assert host_script.parse_answer(stdout) is None


def test_the_last_result_line_counts_and_terminal_line_ends_are_read():
    stdout = "motd\r\n%s{\"a\": 1}\r\nwarning\r\n%s{\"a\": 2}\r\n" % (host_script.MARKER, host_script.MARKER)
    assert host_script.parse_answer(stdout) == {"a": 2}


class FakeAction:
    """Only what host_script.run reads of an action plugin."""

    def __init__(self, rc=0, stdout="", pipelining=True, become=None):
        self._connection = SimpleNamespace(has_pipelining=pipelining, become=become)
        self._templar = SimpleNamespace(template=lambda value: value)
        self.done = {"rc": rc, "stdout": stdout, "stderr": ""}
        self.commands = []

    def _low_level_execute_command(self, command, in_data=None):
        self.commands.append((command, in_data))
        return self.done


ANSWER = host_script.MARKER + '{"valid": true}\n'


def test_run_uses_the_inventory_python_and_returns_the_answer():
    action = FakeAction(stdout=ANSWER)
    assert host_script.run(action, {"ansible_python_interpreter": "/usr/bin/env python3"}, [UTILS + "messages"],
                           "show", {"value": 1}) == {"valid": True}
    command, program = action.commands[0]
    assert command == "/usr/bin/env python3 -" and program.startswith(b"\nimport json, sys, types")


@pytest.mark.parametrize("action", [
    FakeAction(rc=127, stdout=ANSWER), FakeAction(rc=0, stdout="Traceback (most recent call last):\n"),
    FakeAction(pipelining=False, stdout=ANSWER),
    FakeAction(stdout=ANSWER, become=SimpleNamespace(pipelining=False)),
])
def test_run_gives_none_when_the_script_path_does_not_work(action):
    assert host_script.run(action, {"ansible_python_interpreter": "python3"}, [UTILS + "messages"], "show",
                           {"value": 1}) is None


def test_a_python_found_by_an_earlier_module_is_used_and_not_reported_again():
    action = FakeAction(stdout=ANSWER)
    answer = host_script.run(action, {"ansible_facts": {"discovered_interpreter_python": "/usr/bin/python3.11"}},
                             [UTILS + "messages"], "show", {"value": 1})
    assert answer == {"valid": True} and action.commands[0][0] == "/usr/bin/python3.11 -"


def action_plugin(plugin, args, stdout, rc=0, check_mode=False):
    """One of the two action plugins as ansible-core builds it, with a connection that answers `stdout` and a module
    run that records its call."""
    task = Task()
    task.args = args
    task.check_mode = check_mode
    connection = MagicMock(has_pipelining=True, become=None)
    action = plugin(task, connection, MagicMock(check_mode=check_mode), loader=MagicMock(), templar=MagicMock(),
                    shared_loader_obj=None)
    action._templar = SimpleNamespace(template=lambda value: value)
    action._low_level_execute_command = lambda command, in_data=None: {"rc": rc, "stdout": stdout, "stderr": ""}
    action.module_calls = []

    def module(module_name, module_args, task_vars):
        action.module_calls.append((module_name, module_args))
        return {"changed": False, "from": "module"}
    action._execute_module = module
    return action


def test_the_plugin_uses_the_script_answer_and_falls_back_to_the_module():
    variables = {"ansible_python_interpreter": "/usr/bin/python3"}
    probes = {"probes": [{"name": "db", "type": "tcp", "port": 5432}]}
    action = action_plugin(HealthWait, probes, host_script.MARKER + '{"changed": false, "healthy": true}\n')
    assert action.run(task_vars=variables)["healthy"] is True and action.module_calls == []
    action = action_plugin(HealthWait, probes, "python3: not found\n", rc=127)
    assert action.run(task_vars=variables)["from"] == "module" and action.module_calls[0][0].endswith("health_wait")
    action = action_plugin(HealthWait, probes, host_script.MARKER + '{"something": "else"}\n')
    assert action.run(task_vars=variables)["from"] == "module"


def test_a_python_set_in_the_configuration_is_used(monkeypatch):
    monkeypatch.setenv("ANSIBLE_PYTHON_INTERPRETER", "/opt/python/bin/python3")
    action = FakeAction(stdout=ANSWER)
    assert host_script.run(action, {}, [UTILS + "messages"], "show", {"value": 1}) == {"valid": True}
    assert action.commands[0][0] == "/opt/python/bin/python3 -"


class ShellAction(FakeAction):
    """Runs the command as a local connection does: through /bin/sh, the program on standard input."""

    def _low_level_execute_command(self, command, in_data=None):
        self.commands.append((command, in_data))
        done = subprocess.run(["/bin/sh", "-c", command], input=in_data, capture_output=True, cwd="/", timeout=60,
                              env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, check=False)
        return {"rc": done.returncode, "stdout": done.stdout.decode(), "stderr": done.stderr.decode()}


def test_the_task_environment_reaches_a_command_probe_run_as_a_script():
    probe = {"name": "env", "type": "command", "argv": ["sh", "-c", 'test "$GANGPLANK_PROBE_MODE" = ready'],
             "timeout": 5.0, "interval": 0.1, "retries": 1, "start_period": 0.0, "url": None, "expect_status": None,
             "host": "127.0.0.1", "port": None}
    modules = [UTILS + "messages", UTILS + "health"]
    variables = {"ansible_python_interpreter": sys.executable}
    action = ShellAction()
    with_environment = host_script.run(action, variables, modules, "wait_result", {"probes": [probe]},
                                       environment="GANGPLANK_PROBE_MODE=ready ")
    assert action.commands[0][0] == "GANGPLANK_PROBE_MODE=ready %s -" % sys.executable
    assert with_environment["healthy"] is True
    without = host_script.run(action, variables, modules, "wait_result", {"probes": [probe]})
    assert without["healthy"] is False and without["failed"] is True


def test_the_plugin_sends_the_task_environment_as_a_module_run_gets_it():
    action = action_plugin(HealthWait, {"probes": [{"name": "db", "type": "tcp", "port": 5432}]},
                           host_script.MARKER + '{"changed": false, "healthy": true}\n')
    sent = []
    action._low_level_execute_command = lambda command, in_data=None: sent.append(command) or {
        "rc": 0, "stdout": host_script.MARKER + '{"changed": false, "healthy": true}\n', "stderr": ""}
    action._compute_environment_string = lambda: "HTTPS_PROXY=http://proxy.invalid:3128 "
    assert action.run(task_vars={"ansible_python_interpreter": "/usr/bin/python3"})["healthy"] is True
    assert sent == ["HTTPS_PROXY=http://proxy.invalid:3128 /usr/bin/python3 -"]


@pytest.mark.parametrize("switch", [False, "false", "no", "0"])
def test_a_site_that_turns_host_scripts_off_gets_the_module(switch):
    action = action_plugin(HealthWait, {"probes": [{"name": "db", "type": "tcp", "port": 5432}]},
                           host_script.MARKER + '{"changed": false, "healthy": true}\n')
    answer = action.run(task_vars={"ansible_python_interpreter": "/usr/bin/python3", host_script.SWITCH: switch})
    assert answer["from"] == "module" and action.module_calls[0][0] == "gangplank.platform.health_wait"


def test_a_switch_that_is_not_a_boolean_is_an_error_that_names_it():
    action = action_plugin(HealthWait, {"probes": [{"name": "db", "type": "tcp", "port": 5432}]}, "")
    with pytest.raises(AnsibleActionFail) as failure:
        action.run(task_vars={host_script.SWITCH: "sometimes"})
    assert str(failure.value) == "gangplank_host_scripts: expected a boolean (true or false), got a value of type str"
    assert action.module_calls == []


def _collection_imports(name):
    """The collection's modules that the module ``name`` imports (its source read, not imported)."""
    with open(sys.modules[name].__file__, encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ansible_collections."):
            imported = importlib.import_module(node.module)
            # From a package its modules are imported; from a module, names.
            is_package = hasattr(imported, "__path__")
            found.extend("%s.%s" % (node.module, alias.name) if is_package else node.module for alias in node.names)
        elif isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names if alias.name.startswith("ansible_collections."))
    return found


def _import_closure(name, order=None):
    """``name`` and every collection module it imports, each after the ones it imports (the order the script loads
    them in)."""
    order = [] if order is None else order
    for imported in _collection_imports(name):
        importlib.import_module(imported)
        if imported not in order:
            _import_closure(imported, order)
    if name not in order:
        order.append(name)
    return order


@pytest.mark.parametrize("plugin", [HealthWait])
def test_the_files_sent_are_the_import_closure_of_the_function(plugin):
    last = plugin.MODULE_UTILS[-1]
    importlib.import_module(last)
    assert plugin.MODULE_UTILS == _import_closure(last)
    # Nothing outside the collection's module_utils and the standard library: the host has no Ansible.
    assert all(name.startswith(UTILS) for name in plugin.MODULE_UTILS)
