# -*- coding: utf-8 -*-
"""Which end-to-end modules may run side by side on this machine, for pytest-xdist (scripts/test.sh with
GANGPLANK_E2E_WORKERS=2 runs tests/e2e with --numprocesses 2 --dist loadgroup). Each module goes whole into one of
two groups; a group runs on one worker, its modules one after another, each module's tests in file order:

- "fresh-bed": the modules that start hosts of the fresh-host bed (tests/e2e/fresh.py): freshbed.sh down closes
  every persistent SSH connection to the bed (.build/fresh/cp), so two of them at once would cut each other's runs.
  With them, both modules that run the registry of tests/e2e/registry.py (one address and port, one folder
  .build/registry, one pushed image), test_registry.py on the local bed included.
- "local-bed": every other module: each has hosts, loopback addresses and a state folder of its own. Each module
  runs the runtime role for its three hosts at once on this machine already; test_registry.py beside one of them is
  one more such run.

Without --dist loadgroup the marks change nothing: the modules run one after another, as before.

At the end of the run the seconds spent in each test file (its tests' setup, call and teardown) are printed, the
slowest first: what a module's beds and runs cost, to plan the groups by."""

from __future__ import annotations

import collections

import pytest

# What a module holds (imported or defined) when it uses the fresh-host bed or the registry.
_FRESH_BED_OR_REGISTRY = ("FreshBed", "Registry", "registry")


@pytest.hookimpl(tryfirst=True)     # before pytest-xdist reads the marks into the tests' ids
def pytest_collection_modifyitems(items):
    for item in items:
        module = getattr(item, "module", None)
        shares = module is not None and any(hasattr(module, name) for name in _FRESH_BED_OR_REGISTRY)
        item.add_marker(pytest.mark.xdist_group("fresh-bed" if shares else "local-bed"))


_SECONDS_PER_FILE = collections.defaultdict(float)


def pytest_runtest_logreport(report):
    _SECONDS_PER_FILE[report.nodeid.split("::", 1)[0]] += report.duration


def pytest_terminal_summary(terminalreporter):
    if _SECONDS_PER_FILE:
        terminalreporter.write_sep("=", "seconds per test file (its tests' setup, call and teardown)")
        for path, seconds in sorted(_SECONDS_PER_FILE.items(), key=lambda item: (-item[1], item[0])):
            terminalreporter.write_line("%8.1f  %s" % (seconds, path))
