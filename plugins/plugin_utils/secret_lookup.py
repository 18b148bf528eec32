# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller's reading of the catalog's secret variables, shared by the actions that read or check them:
secret_values (the deploy reads the values) and gang_schedule and gang_plan (a plan checks that each one can be read,
so a misspelt variable is caught before anything is deployed, with the deploy's own message)."""

from __future__ import annotations

from ansible.errors import AnsibleError, AnsibleUndefinedVariable

from ansible_collections.gangplank.platform.plugins.module_utils.planning.catalog import split_catalog
from ansible_collections.gangplank.platform.plugins.module_utils.reader import ProblemError
from ansible_collections.gangplank.platform.plugins.module_utils.deploy.secrets import Missing, Unreadable, read_values
from ansible_collections.gangplank.platform.plugins.module_utils.validation import one_line

UNREADABLE = "The catalog's secrets cannot be read; nothing was changed:\n"


def variable_lookup(templar, variables):
    """lookup(name) for secrets.read_values: the variable's value through ``templar``, or Missing or Unreadable with
    a reason that holds none of its text."""
    variables = variables or {}

    def lookup(name):
        if name not in variables:
            raise Missing(name)
        try:
            return templar.resolve_variable_expression(name)
        except AnsibleUndefinedVariable:
            # Defined as a template that names an undefined variable: say so, not the template.
            raise Unreadable("it refers to a variable that is not defined") from None
        except AnsibleError as error:
            # A vault that cannot be opened, a template that fails: the reason without the value (Ansible's
            # messages here name the vault id and the variable, not the text).
            raise Unreadable(_reason(error, variables.get(name))) from None
    return lookup


def has_secrets(services):
    """Whether some entry of the catalog ``services`` (unparsed) names secrets: a quick look before a parse."""
    return isinstance(services, dict) and any(isinstance(entry, dict) and entry.get("secrets")
                                              for entry in services.values())


def secret_problems(services, templar, variables, catalog=None):
    """[(path, message), ...] for every secret of the catalog ``services`` whose variable cannot be read as the deploy
    reads it (not defined, not decrypted, not a valid value): the deploy's messages; [] when all can, or when the
    catalog itself is not valid (the planner reports that). The values are read and dropped: nothing is returned.
    ``catalog``: ``services`` as catalog.read_catalog() read it, for a caller that read it already (it is then not
    parsed again)."""
    if not has_secrets(services):
        return []
    if catalog is None:
        try:
            _scheduling, specs = split_catalog(services)
        except ProblemError:
            return []
    elif catalog.errors or any(entry is not None and not isinstance(entry, dict) for entry in catalog.scheduling.values()):
        return []           # what parse_catalog refuses
    else:
        specs = catalog.deploy
    return read_values(specs, variable_lookup(templar, variables), None)[2]


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
