# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for gangplank.platform.secret_values: the values of the catalog's secrets, read on the controller."""

from __future__ import annotations

from ansible.errors import AnsibleError, AnsibleUndefinedVariable
from ansible.plugins.action import ActionBase

from ansible_collections.gangplank.platform.plugins.module_utils.catalog import split_catalog
from ansible_collections.gangplank.platform.plugins.module_utils.reader import ProblemError
from ansible_collections.gangplank.platform.plugins.module_utils.secrets import Missing, SecretError, Unreadable, read_values
from ansible_collections.gangplank.platform.plugins.module_utils.validation import one_line

ARGUMENT_SPEC = {
    "services": {"type": "dict", "required": True},
    "hash_key": {"type": "str", "required": True, "no_log": True},
}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        result.update(changed=False, secrets={}, hashes={}, errors=[])
        try:
            _scheduling, specs = split_catalog(args["services"])
        except ProblemError as error:
            result.update(errors=[{"path": path, "message": message} for path, message in error.errors])
            return self._summed_up(result)
        variables = task_vars or {}

        def lookup(name):
            if name not in variables:
                raise Missing(name)
            try:
                return self._templar.resolve_variable_expression(name)
            except AnsibleUndefinedVariable:
                # Defined as a template that names an undefined variable: say so, not the template.
                raise Unreadable("it refers to a variable that is not defined") from None
            except AnsibleError as error:
                # A vault that cannot be opened, a template that fails: the reason without the value (Ansible's
                # messages here name the vault id and the variable, not the text).
                raise Unreadable(_reason(error, variables.get(name))) from None
        try:
            values, hashes, errors = read_values(specs, lookup, args["hash_key"])
        except SecretError as error:
            result.update(errors=[{"path": "cluster_secret_hash_key", "message": str(error)}])
            return self._summed_up(result)
        result.update(secrets=values, hashes=hashes, errors=[{"path": path, "message": message} for path, message in errors])
        return self._summed_up(result)

    @staticmethod
    def _summed_up(result):
        if result["errors"]:
            result.update(secrets={}, hashes={})
            result["msg"] = "The catalog's secrets cannot be read; nothing was changed:\n" + "\n".join(
                "%s: %s" % (entry["path"], entry["message"]) for entry in result["errors"])
        return result


def _reason(error, raw):
    """The first line of Ansible's message, bounded: enough to tell a missing vault password from a wrong one.

    Never the value: when the line holds template syntax, or a piece of the variable's text (a plain value that is a
    broken template is the secret itself), only the kind of error is said."""
    text = str(getattr(error, "message", "") or error).strip().splitlines()
    line = one_line(text[0], 200) if text else type(error).__name__
    pieces = [piece for piece in (raw.split() if isinstance(raw, str) else ()) if len(piece) >= 4]
    if "{{" in line or "{%" in line or "{#" in line or any(piece in line for piece in pieces[:1000]):
        return "its template cannot be rendered (%s; the text is not shown)" % type(error).__name__
    return line
