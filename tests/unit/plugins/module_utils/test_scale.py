# -*- coding: utf-8 -*-
"""scale_overrides: a scale request checked against the catalog, as the record's new overrides."""

from __future__ import annotations

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils.reader import ProblemError
from ansible_collections.gangplank.platform.plugins.module_utils.planning.scale import applied_overrides, scale_overrides

SERVICES = {"db": {"stateful": True}, "worker": {"replicas": 3, "scalable": True}, "infer": {"scalable": True}}


def errors_of(request, overrides=None):
    with pytest.raises(ProblemError) as caught:
        scale_overrides(SERVICES, overrides, request)
    return caught.value.errors


def test_a_count_is_recorded_and_other_overrides_kept():
    assert scale_overrides(SERVICES, {"infer": 2}, {"service": "worker", "replicas": 5}) == {"infer": 2, "worker": 5}
    assert scale_overrides(SERVICES, None, {"service": "worker", "replicas": 0}) == {"worker": 0}


def test_the_string_that_extra_vars_give_is_a_count():
    assert scale_overrides(SERVICES, {}, {"service": "worker", "replicas": " 7"}) == {"worker": 7}


def test_reset_removes_the_override():
    assert scale_overrides(SERVICES, {"worker": 5, "infer": 1}, {"service": "worker", "reset": True}) == {"infer": 1}
    assert scale_overrides(SERVICES, {}, {"service": "worker", "reset": True}) == {}


def test_an_unknown_service_lists_the_scalable_ones():
    assert errors_of({"service": "wrker", "replicas": 2}) == [
        ("scale.service", 'got "wrker"; expected one of the catalog\'s scalable services (infer, worker)')]


def test_a_service_not_marked_scalable_is_refused():
    (path, message), = errors_of({"service": "db", "replicas": 2})
    assert path == "scale.service"
    assert message.startswith('got "db"; it is not scalable: its catalog entry (gangplank_services.db) lacks scalable: true')


@pytest.mark.parametrize("replicas", [-1, "-1", "two", 1.5, True, None, "", [2]])
def test_a_count_that_is_not_an_integer_of_0_or_more_is_refused(replicas):
    (path, message), = errors_of({"service": "worker", "replicas": replicas})
    assert path == "scale.replicas" and message.endswith("expected an integer >= 0, at most 100000")


def test_count_and_reset_together_are_refused_and_every_mistake_is_named():
    assert [path for path, _message in errors_of({"service": "db", "replicas": 2, "reset": True})] == [
        "scale.service", "scale.replicas"]


def test_a_count_above_max_replicas_is_refused_and_up_to_it_recorded():
    services = dict(SERVICES, worker={"replicas": 3, "scalable": True, "max_replicas": 6})
    assert scale_overrides(services, {}, {"service": "worker", "replicas": "6"}) == {"worker": 6}
    with pytest.raises(ProblemError) as caught:
        scale_overrides(services, {}, {"service": "worker", "replicas": 7})
    assert caught.value.errors == [("scale.replicas", "got 7; expected at most 6 (gangplank_services.worker.max_replicas)")]


def test_an_override_above_a_lowered_max_replicas_applies_as_max_replicas():
    services = dict(SERVICES, worker={"replicas": 3, "scalable": True, "max_replicas": 4})
    assert applied_overrides(services, {"worker": 7, "infer": 9}) == {"worker": 4, "infer": 9}
    assert applied_overrides(services, {"worker": 2}) == {"worker": 2}
    # Not scalable any more: max_replicas is not this module's to read (the plan refuses the catalog).
    assert applied_overrides(dict(services, worker={"replicas": 3, "max_replicas": 4}), {"worker": 7}) == {"worker": 7}
