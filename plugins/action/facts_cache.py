# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for gangplank.platform.facts_cache: the read as a plain Python script, the write as the module.

Every run reads every host's stored facts (site.yml and scale.yml), so the read is on the path of every day-2 run.
As a module it costs what every module costs: the AnsiballZ payload, an interpreter that unpacks it and imports
ansible.module_utils.basic, about 0.15 s of a 2-core controller per host, most of a no-change run at 30 hosts. The
read needs none of that: the same two standard-library files (module_utils/facts_cache.py and state_files.py) are
sent on the script's standard input to the host's Python, through the connection (as pipelining sends a module),
and print the module's result. Anything that goes wrong on that path other than an unreachable host (no Python
there, a become method that cannot take input, an answer that is not ours) runs the module instead: the result is
the same, only slower.
"""

from __future__ import annotations

import json

from ansible import constants as C
from ansible.executor.interpreter_discovery import discover_interpreter
from ansible.plugins.action import ActionBase

from ansible_collections.gangplank.platform.plugins.module_utils import facts_cache, state_files
from ansible_collections.gangplank.platform.plugins.module_utils.facts_cache import ARGUMENT_SPEC

# Printed before the result, on a line of its own: over a terminal other output may come first.
MARKER = "gangplank-facts-cache-result "

# The script: it loads the two files as modules (each has its own `from __future__` line) and prints the result.
SCRIPT = """
import json, sys, types
def load(name, source):
    module = types.ModuleType(name)
    exec(compile(source, name, "exec"), module.__dict__)
    return module
request = json.loads(%s)
files = load("state_files", request["state_files"])
cache = load("facts_cache", request["facts_cache"])
result = cache.read_state(request["path"], request["inputs"], request["bindings_path"], files.read_json)
sys.stdout.write("\\n%s" + json.dumps(result) + "\\n")
"""


def _source(module):
    with open(module.__file__, encoding="utf-8") as handle:
        return handle.read()


def read_script(path, inputs, bindings_path):
    """The Python program that reads the cache on the host, with its request inside it (a JSON string literal)."""
    request = {"state_files": _source(state_files), "facts_cache": _source(facts_cache), "path": path, "inputs": inputs,
               "bindings_path": bindings_path}
    return SCRIPT % (json.dumps(json.dumps(request)), MARKER)


def parse_answer(stdout):
    """The result the script printed, or None when the output holds none (then the module runs instead)."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(MARKER):
            try:
                result = json.loads(line[len(MARKER):])
            except ValueError:
                return None
            return result if isinstance(result, dict) and isinstance(result.get("valid"), bool) else None
    return None


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        if args["state"] == "read" and self._connection.has_pipelining:
            answer = self._read(args, task_vars or {})
            if answer is not None:
                result.update(answer)
                return result
        result.update(self._execute_module(module_name="gangplank.platform.facts_cache", module_args=self._task.args,
                                           task_vars=task_vars))
        return result

    def _read(self, args, task_vars):
        interpreter, discovered = self._interpreter(task_vars)
        if not interpreter:
            return None
        # Unquoted, as Ansible writes it in a module's first line: it may be a command with arguments (/usr/bin/env python3).
        done = self._low_level_execute_command("%s -" % interpreter,
                                               in_data=read_script(args["path"], args["inputs"], args["bindings_path"]).encode("utf-8"))
        answer = parse_answer(done.get("stdout", "")) if done.get("rc") == 0 else None
        if answer is not None and discovered:
            # As a module run would: later modules on this host need not look for Python again.
            answer.setdefault("ansible_facts", {})["discovered_interpreter_python"] = interpreter
        return answer

    def _interpreter(self, task_vars):
        """(the host's Python as Ansible would run a module with it, whether it was looked for now): set in the
        inventory, found by an earlier module run, or looked for now the way Ansible does (C(auto) modes)."""
        configured = task_vars.get("ansible_python_interpreter")
        if configured is not None:
            configured = str(self._templar.template(configured))
            if not configured.startswith("auto"):
                return configured, False
        found = task_vars.get("ansible_facts", {}).get("discovered_interpreter_python")
        if found:
            return found, False
        mode = configured or C.config.get_config_value("INTERPRETER_PYTHON", variables=task_vars)
        # Raises as a module run's discovery would (an unreachable host is unreachable).
        return discover_interpreter(action=self, interpreter_name="python", discovery_mode=mode, task_vars=task_vars), True
