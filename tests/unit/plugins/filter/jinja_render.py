# -*- coding: utf-8 -*-
"""Render a Jinja expression as a playbook would, with the role files' variables: for tests that compare the
expression a role used before with the filter that replaced it."""

from __future__ import annotations

import importlib
import os

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
FILTER_DIR = os.path.join(ROOT, "plugins", "filter")


def _collection_filters():
    """This collection's filters by their FQCN. Registered on each Templar: the collection finder cannot resolve them
    once pytest has imported ansible_collections as a plain package (it does, collecting the tests)."""
    found = {}
    for name in sorted(os.listdir(FILTER_DIR)):
        if name.endswith(".py") and not name.startswith("_"):
            module = importlib.import_module(f"ansible_collections.gangplank.platform.plugins.filter.{name[:-3]}")
            found.update({f"gangplank.platform.{filter_name}": function
                          for filter_name, function in module.FilterModule().filters().items()})
    return found


_FILTERS = _collection_filters()


def role_variables(*files):
    """The variables of role files (relative to the repository root), later files over earlier ones, as templates."""
    loader, variables = DataLoader(), {}
    for file in files:
        variables.update(loader.load_from_file(os.path.join(ROOT, file), trusted_as_template=True) or {})
    return variables


def render(expression, variables):
    """``{{ expression }}`` rendered with ``variables`` (whose strings are templates where the role's are)."""
    templar = Templar(loader=DataLoader(), variables=variables)
    for name, function in _FILTERS.items():
        templar.environment.filters[name] = function
    return templar.template(trust_as_template("{{ " + expression + " }}"))
