# -*- coding: utf-8 -*-
# Copyright: gangplank.platform contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A scale request (playbooks/scale.yml) checked against the catalog, as new replica overrides.

The placement record keeps ``replicas``: per service, the count the compute platform asked for.
It wins over the catalog's ``replicas`` until it is reset. Whether the new count fits (nodes,
quotas) is the scheduler's answer, not this module's.
"""

from __future__ import annotations

import re

from ansible_collections.gangplank.platform.plugins.module_utils.messages import show
from ansible_collections.gangplank.platform.plugins.module_utils.problem_format import MAX_INSTANCES
from ansible_collections.gangplank.platform.plugins.module_utils.reader import ProblemError
from ansible_collections.gangplank.platform.plugins.module_utils.quantity import BLANKS

# ASCII digits only: str.isdigit() also accepts "²", which int() refuses. The whole string, after ASCII blanks
# (" 7", "7\n" from a survey): "7\x00" or "7\u2028" is refused.
_DIGITS = re.compile(r"[0-9]{1,%d}" % len(str(MAX_INSTANCES)))


def _replicas(value):
    """An integer from 0 to MAX_INSTANCES, also from the string that ``-e replicas=3`` gives; None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and _DIGITS.fullmatch(value.strip(BLANKS)):
        value = int(value.strip(BLANKS))
    if isinstance(value, int) and 0 <= value <= MAX_INSTANCES:
        return value
    return None


def takes_replicas(spec):
    """Whether a catalog entry has a replica count an override can set: not a sidecar (it runs beside each instance
    of its app) and not an every-node service (one instance per eligible node)."""
    return isinstance(spec, dict) and spec.get("sidecar") is not True and spec.get("every_node") is not True


def applied_overrides(services, overrides):
    """The overrides that apply to the catalog now. One recorded while a service was scalable that has since become a
    sidecar or an every-node service no longer applies (giving it replicas would fail every plan); it is dropped
    from the record by the next plan. One above the service's ``max_replicas`` (lowered since it was recorded) applies
    as ``max_replicas``, as Kubernetes' HorizontalPodAutoscaler holds its count to maxReplicas. Overrides of services
    not in the catalog are kept, as before, and not applied."""
    applied = {}
    for name, count in (overrides or {}).items():
        if name in services and not takes_replicas(services[name]):
            continue
        most = _max_replicas(services.get(name))
        applied[name] = most if most is not None and _replicas(count) is not None and _replicas(count) > most else count
    return applied


def _max_replicas(spec):
    """A scalable catalog entry's max_replicas, or None (not scalable, none given, or not a count)."""
    if not isinstance(spec, dict) or spec.get("scalable") is not True:
        return None
    return _replicas(spec.get("max_replicas"))


def scale_overrides(services, overrides, request):
    """The record's replica overrides after ``request`` ({service, replicas, reset}).

    Raises ProblemError naming ``scale.service`` or ``scale.replicas`` when the request is not valid. A reset is
    taken for any service the record holds an override of, scalable or not any more: it is how one is cleared.
    """
    service = request.get("service")
    scalable = sorted(name for name, spec in services.items()
                      if isinstance(spec, dict) and spec.get("scalable") is True and takes_replicas(spec))
    errors = []
    reset = request.get("reset") is True
    if reset and isinstance(service, str) and service in (overrides or {}):
        pass                        # clearing a recorded override is always allowed
    elif not isinstance(service, str) or service not in services:
        errors.append(("scale.service", "got %s; expected one of the catalog's scalable services (%s)"
                       % (show(service), ", ".join(scalable) or "none is marked scalable: true")))
    elif not takes_replicas(services[service]):
        errors.append(("scale.service", "got %s; it is not scalable: %s has no replicas (scalable services: %s)"
                       % (show(service), "a sidecar" if services[service].get("sidecar") is True else "an every-node service",
                          ", ".join(scalable) or "none")))
    elif service not in scalable:
        errors.append(("scale.service", "got %s; it is not scalable: its catalog entry (gangplank_services.%s) lacks "
                       "scalable: true (scalable services: %s)" % (show(service), service, ", ".join(scalable) or "none")))
    replicas = request.get("replicas")
    if reset and replicas is not None:
        errors.append(("scale.replicas", "got %s with reset; expected either replicas or reset=true, not both" % show(replicas)))
    elif not reset and _replicas(replicas) is None:
        errors.append(("scale.replicas", "got %s; expected an integer >= 0, at most %d" % (show(replicas), MAX_INSTANCES)))
    elif not reset and service in scalable:
        most = _max_replicas(services[service])
        if most is not None and _replicas(replicas) > most:
            errors.append(("scale.replicas", "got %d; expected at most %d (gangplank_services.%s.max_replicas)"
                           % (_replicas(replicas), most, service)))
    if errors:
        raise ProblemError(errors)
    result = dict(overrides or {})
    if reset:
        result.pop(service, None)
    else:
        result[service] = _replicas(replicas)
    return result
