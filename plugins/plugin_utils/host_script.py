# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run a function of the collection's standard-library module_utils on a managed host, as a plain Python script.

Every site.yml probes every host's kept containers (health_wait), so that is on the path of every day-2 run. As a
module it costs what every module costs: the AnsiballZ payload, an interpreter that unpacks it and imports
ansible.module_utils.basic, about 0.15 s of a 2-core controller per host (most of a no-change run at 30 hosts,
benchmarks/README.md). The work itself needs none of that. Its action plugin sends the module_utils files it needs, as
source, with the function's arguments, on the standard input of the host's Python (through the connection, as
pipelining sends a module), and reads back the result the function returns. (The facts read, which needs no Python on
the host at all, is one shell now: plugins/action/facts_cache.py.)

``run`` returns None when that path does not work (no Python where the inventory says, a connection that cannot
take input, an answer that is not ours); the action plugin then runs the module, which gives the same result more
slowly. An unreachable host raises, as a module run would.

It is fenced: the variable ``gangplank_host_scripts: false`` turns it off (every run is a module run); the task's
``environment:`` is set for the script as for a module (``module_defaults`` are already in the task's arguments when
the action runs); and the files sent are the import closure of the function's file, which a unit test checks against
the list each action plugin keeps.
"""

from __future__ import annotations

import json
import sys

from ansible import constants as C
from ansible.errors import AnsibleActionFail
from ansible.executor.interpreter_discovery import discover_interpreter
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

# Where the collection's module_utils are imported from (on the controller, and as named on the host).
MODULE_UTILS = "ansible_collections.gangplank.platform.plugins.module_utils."

# The site's switch (a variable, true by default): false runs the module every time.
SWITCH = "gangplank_host_scripts"

# Printed before the result, on a line of its own: over a terminal other output may come first.
MARKER = "gangplank-host-script-result "

# Loads each file as the module it is (so that their imports of one another resolve), calls the function, prints.
_BOOTSTRAP = """
import json, sys, types
request = json.loads(%s)
for name, source in request["modules"]:
    parts = name.split(".")
    for end in range(1, len(parts)):
        sys.modules.setdefault(".".join(parts[:end]), types.ModuleType(".".join(parts[:end])))
    module = sys.modules[name] = types.ModuleType(name)
    exec(compile(source, name, "exec"), module.__dict__)
function = getattr(sys.modules[request["modules"][-1][0]], request["function"])
sys.stdout.write("\\n" + %r + json.dumps(function(**request["arguments"])) + "\\n")
"""


def _source(name):
    with open(sys.modules[name].__file__, encoding="utf-8") as handle:
        return handle.read()


def script(modules, function, arguments):
    """The program: ``modules`` (imported names, each after the ones it imports; the last holds ``function``)."""
    request = {"modules": [[name, _source(name)] for name in modules], "function": function, "arguments": arguments}
    return (_BOOTSTRAP % (json.dumps(json.dumps(request)), MARKER)).encode("utf-8")


def parse_answer(stdout):
    """The JSON object the script printed last, or None when the output holds none."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(MARKER):
            try:
                answer = json.loads(line[len(MARKER):])
            except ValueError:
                return None
            return answer if isinstance(answer, dict) else None
    return None


def _interpreter(action, task_vars):
    """(the host's Python as Ansible would run a module with it, whether it was looked for now): set in the
    inventory, found by an earlier module run, or looked for now the way Ansible does (the auto modes)."""
    configured = task_vars.get("ansible_python_interpreter")
    if configured is not None:
        configured = str(action._templar.template(configured))
        if not configured.startswith("auto"):
            return configured, False
    found = task_vars.get("ansible_facts", {}).get("discovered_interpreter_python")
    if found:
        return found, False
    # interpreter_python in ansible.cfg (or its environment variable): a path, or one of the auto modes.
    mode = configured or str(C.config.get_config_value("INTERPRETER_PYTHON", variables=task_vars))
    if not mode.startswith("auto"):
        return mode, False
    # Raises as a module run's discovery would (an unreachable host is unreachable).
    return discover_interpreter(action=action, interpreter_name="python", discovery_mode=mode, task_vars=task_vars), True


def run(action, task_vars, modules, function, arguments, environment=""):
    """The function's result computed on the action's host, or None (run the module instead). ``environment``: the
    task's environment as a shell prefix (``VAR=value ...``), as a module run is given it."""
    connection = action._connection
    # A connection and become method that can pass a program on standard input (as pipelining does), whether or not
    # modules are configured to be pipelined: this sends no file.
    if not connection.has_pipelining or (connection.become and not connection.become.pipelining):
        return None
    interpreter, discovered = _interpreter(action, task_vars)
    if not interpreter:
        return None
    # Unquoted, as Ansible writes it in a module's first line: it may be a command with arguments (/usr/bin/env python3).
    command = "%s -" % interpreter
    if environment.strip():
        command = "%s %s" % (environment.strip(), command)
    done = action._low_level_execute_command(command, in_data=script(modules, function, arguments))
    answer = parse_answer(done.get("stdout") or "") if done.get("rc") == 0 else None
    if answer is not None and discovered:
        # As a module run would: later modules on this host need not look for Python again.
        answer.setdefault("ansible_facts", {})["discovered_interpreter_python"] = interpreter
    return answer


class HostScriptAction(ActionBase):
    """An action plugin that runs FUNCTION of the last of MODULE_UTILS on the host as a script, and MODULE where
    script_arguments gives None or the script path does not work. The module and the plugin validate ARGUMENT_SPEC."""

    TRANSFERS_FILES = False
    MODULE = ""
    ARGUMENT_SPEC: dict = {}
    MODULE_UTILS: list = []
    FUNCTION = ""

    def script_arguments(self, args):
        """The function's keyword arguments for these (validated) task arguments; None runs the module."""
        raise NotImplementedError

    def is_answer(self, answer):
        """Whether a JSON object the script printed is the function's result."""
        raise NotImplementedError

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        _validation, args = self.validate_argument_spec(argument_spec=self.ARGUMENT_SPEC)
        arguments = self.script_arguments(args) if self._scripts_on(task_vars) else None
        answer = None
        if arguments is not None:
            answer = run(self, task_vars, self.MODULE_UTILS, self.FUNCTION, arguments,
                         environment=self._compute_environment_string())
        if answer is None or not self.is_answer(answer):
            answer = self._execute_module(module_name=self.MODULE, module_args=self._task.args, task_vars=task_vars)
        result.update(answer)
        return result

    def _scripts_on(self, task_vars):
        value = self._templar.template(task_vars.get(SWITCH, True))
        try:
            return boolean(value, strict=True)
        except TypeError:
            raise AnsibleActionFail("%s: expected a boolean (true or false), got a value of type %s"
                                    % (SWITCH, type(value).__name__)) from None
