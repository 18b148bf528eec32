# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gangplank-plan: plan a gang placement offline, from a problem file (YAML or JSON).

Run it through bin/gangplank-plan, which picks the Python.

Exit status: 0 feasible, 2 infeasible, 1 bad input. See docs/problem-format.md.
"""

import argparse
import json
import os
import sys
import types

ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # the checkout: the collection root


def _import_collection():
    """Make this checkout importable as ansible_collections.gangplank.platform, Ansible or not."""
    for name, path in (("ansible_collections", []), ("ansible_collections.gangplank", []),
                       ("ansible_collections.gangplank.platform", [ROOT])):
        if name not in sys.modules:
            module = types.ModuleType(name)
            module.__path__ = path
            sys.modules[name] = module
    sys.modules["ansible_collections.gangplank.platform"].__path__ = [ROOT]


def _load(path):
    """The parsed file; ValueError when it is neither YAML nor JSON."""
    if path == "-":
        text = sys.stdin.read()
    else:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    try:
        import yaml
    except ImportError:
        return json.loads(text)     # JSON needs no PyYAML
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ValueError(str(error)) from None


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="gangplank-plan",
        description="Plan a gang placement offline. Exit 0 feasible, 2 infeasible, 1 bad input.")
    parser.add_argument("problem", help="problem file, YAML or JSON (- for standard input)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON instead of a table")
    args = parser.parse_args(argv)
    _import_collection()
    from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.problem import ProblemError
    from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.report import render_table
    from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.scheduler import plan

    try:
        data = _load(args.problem)
    except (OSError, UnicodeDecodeError) as error:
        print("gangplank-plan: cannot read %s: %s" % (args.problem, getattr(error, "strerror", None) or error),
              file=sys.stderr)
        return 1
    except ValueError as error:     # JSON and YAML syntax errors
        print("gangplank-plan: %s is not valid YAML or JSON: %s" % (args.problem, error), file=sys.stderr)
        return 1
    try:
        result = plan(data)
    except ProblemError as error:
        print("gangplank-plan: %s is not a valid problem:" % args.problem, file=sys.stderr)
        for path, message in error.errors:
            print("  %s: %s" % (path, message), file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(render_table(result))
    return 0 if result["feasible"] else 2


if __name__ == "__main__":
    sys.exit(main())
