# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The scheduler core (plugins/module_utils/scheduler/, every file) does no network or file-system I/O of its own:
it imports no ``ssl``, ``socket`` or ``tempfile`` (the extenders' transport, module_utils/extender/transport.py, sets
up TLS, reads the token and PEM files and makes the calls), and no Ansible code. Of module_utils it imports the ground
floor (module_utils/*.py) and itself, never a wing above it (extender/, planning/, facts/, deploy/, watchdog/). Read
from the sources (ast), so an import inside a function or under ``if`` counts too."""

from __future__ import annotations

import ast
import pathlib

import pytest

CORE = pathlib.Path(__file__).resolve().parents[5] / "plugins" / "module_utils" / "scheduler"
FORBIDDEN = ("ssl", "socket", "tempfile", "ansible")
MODULE_UTILS = "ansible_collections.gangplank.platform.plugins.module_utils"
# The wings above the core: importing the transport would bring all of the I/O modules back in.
WINGS_ABOVE = ("extender", "planning", "facts", "deploy", "watchdog")


def core_files():
    return sorted(CORE.rglob("*.py"))


def imported_modules(source):
    """Every module an ``import`` or ``from ... import`` statement in ``source`` names (relative ones as written)."""
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            names.append(module)
            names.extend("%s.%s" % (module, alias.name) for alias in node.names)
    return names


def forbidden(name):
    top = name.split(".")[0]
    if top in FORBIDDEN:
        return True
    return any(name == "%s.%s" % (MODULE_UTILS, wing) or name.startswith("%s.%s." % (MODULE_UTILS, wing))
               for wing in WINGS_ABOVE)


def test_the_core_is_found():
    files = core_files()
    assert CORE.is_dir()
    assert {"extender.py", "profiles.py"} <= {path.name for path in files}
    assert any(path.parent.name == "plugins" and path.name == "extender.py" for path in files)


@pytest.mark.parametrize("path", core_files(), ids=lambda path: str(path.relative_to(CORE)))
def test_a_core_file_imports_no_io_module(path):
    found = [name for name in imported_modules(path.read_text(encoding="utf-8")) if forbidden(name)]
    assert found == [], "%s imports %s" % (path.relative_to(CORE), ", ".join(found))


@pytest.mark.parametrize("source, found", [
    ("import ssl", ["ssl"]),
    ("import socket as s", ["socket"]),
    ("def f():\n    import tempfile\n", ["tempfile"]),
    ("from ssl import SSLContext", ["ssl", "ssl.SSLContext"]),
    ("from ansible.module_utils.basic import AnsibleModule", ["ansible.module_utils.basic",
                                                              "ansible.module_utils.basic.AnsibleModule"]),
    ("from ansible_collections.gangplank.platform.plugins.module_utils.extender import transport",
     ["ansible_collections.gangplank.platform.plugins.module_utils.extender",
      "ansible_collections.gangplank.platform.plugins.module_utils.extender.transport"]),
    ("from ansible_collections.gangplank.platform.plugins.module_utils.planning.catalog import parse_catalog",
     ["ansible_collections.gangplank.platform.plugins.module_utils.planning.catalog",
      "ansible_collections.gangplank.platform.plugins.module_utils.planning.catalog.parse_catalog"]),
    ("from ansible_collections.gangplank.platform.plugins.module_utils import deploy",
     ["ansible_collections.gangplank.platform.plugins.module_utils.deploy"]),
    ("from ansible_collections.gangplank.platform.plugins.module_utils.quantity import parse_size", []),
    ("from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.model import Instance", []),
    ("import os\nimport ssl_helpers\nfrom ansible_collections.gangplank.platform.plugins.module_utils import reader", []),
])
def test_the_check_sees_each_kind_of_import(source, found):
    assert [name for name in imported_modules(source) if forbidden(name)] == found
