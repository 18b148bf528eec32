# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Planning a catalog: the scheduler's plan() and rebalance() for a problem whose services may carry deploy keys.

The catalog's parser (catalog.py) reads the deploy keys off each service; the scheduling part is what this module
hands to the scheduler (its parser names the rest), and both sides' mistakes are raised together in one ProblemError.
Apart from catalog.py so that what deploys a catalog does not load the planner.
"""

from __future__ import annotations

from ansible_collections.gangplank.platform.plugins.module_utils.planning.catalog import Catalog, read_catalog
from ansible_collections.gangplank.platform.plugins.module_utils.messages import show
from ansible_collections.gangplank.platform.plugins.module_utils.reader import ProblemError
from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.scheduler import EXACT_SECONDS, plan

MAX_EXACT_SECONDS = 3600


def exact_seconds_error(seconds):
    """Why ``seconds`` cannot be the exact solver's time limit, or None."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 <= seconds <= MAX_EXACT_SECONDS:
        return "got %s; expected seconds from 0 to %d" % (show(seconds), MAX_EXACT_SECONDS)     # NaN fails 0 <= NaN
    return None


def plan_catalog(problem, exact_seconds=EXACT_SECONDS, profile=None, catalog=None):
    """The scheduler's plan() for a problem whose services may carry deploy keys; ``profile`` a parsed
    scheduler profile (scheduler/profiles.py) or None for the default. ``catalog``: the catalog the caller read
    (catalog.read_catalog()) of the services the problem's were made from, so that they are not read again.

    Raises one ProblemError with the deploy keys' mistakes and the scheduler's together.
    """
    return _without_deploy_keys(problem, lambda scheduling: plan(scheduling, exact_seconds=exact_seconds, profile=profile),
                                catalog)


def rebalance_catalog(problem, max_moves, exact_seconds, profile=None, catalog=None):
    """The scheduler's rebalance() (scheduler/rebalance.py) for a problem whose services may carry deploy keys, under
    ``profile`` (a parsed scheduler profile, or None for the default) and with ``catalog`` as plan_catalog."""
    from ansible_collections.gangplank.platform.plugins.module_utils.scheduler.rebalance import rebalance

    return _without_deploy_keys(problem, lambda scheduling: rebalance(scheduling, max_moves=max_moves, exact_seconds=exact_seconds,
                                                                      profile=profile), catalog)


def plan_or_rebalance(problem, max_moves, exact_seconds, profile=None, catalog=None):
    """plan_catalog, or rebalance_catalog when ``max_moves`` (the moves a rebalance may make) is not None."""
    if max_moves is None:
        return plan_catalog(problem, exact_seconds=exact_seconds, profile=profile, catalog=catalog)
    return rebalance_catalog(problem, max_moves, exact_seconds, profile=profile, catalog=catalog)


def _without_deploy_keys(problem, run, catalog=None):
    """``run`` (a scheduler entry point) on the problem with its services' deploy keys read off; one ProblemError
    with the deploy keys' mistakes and the scheduler's together."""
    errors = []
    if isinstance(problem, dict) and isinstance(problem.get("services"), dict):
        catalog = _read(problem["services"], catalog)
        errors = catalog.errors
        problem = dict(problem, services=catalog.scheduling)
    try:
        result = run(problem)
    except ProblemError as error:
        raise ProblemError(errors + error.errors)
    if errors:
        raise ProblemError(errors)
    return result


def _read(services, catalog):
    """read_catalog(services); or, where the caller read the catalog (``catalog``) that ``services`` were made from,
    that read with the replica counts of ``services``: a scale request's counts (scheduling.build_problem) are the one
    change the schedule makes to the catalog's services, and ``replicas`` is a key of the scheduler's half."""
    if catalog is None or not isinstance(catalog.scheduling, dict) or list(services) != list(catalog.scheduling):
        return read_catalog(services)
    scheduling = {}
    for name, read in catalog.scheduling.items():
        entry = services[name]
        if isinstance(read, dict) and isinstance(entry, dict) and "replicas" in entry:
            read = dict(read, replicas=entry["replicas"])
        scheduling[name] = read
    return Catalog(scheduling, catalog.deploy, catalog.errors)
