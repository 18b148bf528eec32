# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for gangplank.platform.role_inputs: Ansible's own check of a role's inputs
(ansible.builtin.validate_argument_spec, on the values the task sees), over the argument specs of roles of this
collection, read here. A validate_argument_spec task whose spec is read with Jinja (file lookups, from_yaml) costs
about twice as much on every host: the whole spec, descriptions too, is made a template result first."""

from __future__ import annotations

import os
import re

import yaml
from ansible.plugins.action.validate_argument_spec import ActionModule as ValidateArgumentSpec

from ansible_collections.gangplank.platform.plugins.module_utils.validation import well_formed

# This collection's roles, beside plugins/ (also in an installed collection).
ROLES_DIR = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "roles"))

# A role's short name, the whole string (validation.well_formed: "deploy\n" is not a name); any other name reads no file.
ROLE_NAME = re.compile(r"[a-z][a-z0-9_]*")
_MAX_ROLE_NAME = 64

ARGUMENT_SPEC = {
    "roles": {"type": "list", "elements": "str", "required": True},
    "select": {"type": "str"},
    "reject": {"type": "str"},
}

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def role_options(role):
    """The options of a role's entry point main, from its meta/argument_specs.yml."""
    path = os.path.join(ROLES_DIR, role, "meta", "argument_specs.yml")
    with open(path, encoding="utf-8") as handle:
        specs = yaml.load(handle, Loader=_LOADER)  # noqa: S506 - a safe loader
    try:
        return dict(specs["argument_specs"]["main"]["options"] or {})
    except (KeyError, TypeError):
        raise ValueError("%s has no options of the entry point main" % path) from None


class ActionModule(ValidateArgumentSpec):
    def run(self, tmp=None, task_vars=None):
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        patterns = {}
        for key in ("select", "reject"):
            try:
                patterns[key] = re.compile(args[key]) if args[key] else None
            except re.error as error:
                return {"failed": True, "changed": False, "msg": "%s is not a regular expression (%s): %r" % (key, error, args[key])}
        spec = {}
        names = [role for role in dict.fromkeys(args["roles"]) if well_formed(role, ROLE_NAME, _MAX_ROLE_NAME)]
        not_names = [role for role in args["roles"] if role not in names]
        for role in names:
            try:
                spec.update(role_options(role))
            except (OSError, ValueError, yaml.YAMLError) as error:
                return {"failed": True, "changed": False, "msg": "the argument spec of the role %s cannot be read: %s" % (role, error)}
        spec = {name: option for name, option in spec.items()
                if (patterns["select"] is None or patterns["select"].match(name))
                and (patterns["reject"] is None or not patterns["reject"].match(name))}
        context = {"type": "role", "name": ", ".join(args["roles"]), "argument_spec_name": "main", "path": ROLES_DIR}
        self._task.args = {"argument_spec": spec, "validate_args_context": context}
        result = super().run(tmp, task_vars)
        # After the check, which names the option that gave such a name (cluster_check_roles' choices) where it can.
        if not_names and not result.get("failed"):
            result.update(failed=True, msg="%s: not a role of this collection, which names a role by its short name (%s)"
                          % (", ".join(repr(role) for role in not_names),
                             "^%s$, at most %d characters" % (ROLE_NAME.pattern, _MAX_ROLE_NAME)))
        return result
