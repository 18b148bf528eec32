# -*- coding: utf-8 -*-
"""schedule_cluster without Ansible: typed inputs in, a typed outcome (or ScheduleError) out."""

from __future__ import annotations

import dataclasses

import pytest

from ansible_collections.gangplank.platform.plugins.action.gang_schedule import ARGUMENT_SPEC
from ansible_collections.gangplank.platform.plugins.module_utils.planning.scheduling import (
    ScheduleError, ScheduleInputs, ScheduleOutcome, schedule_cluster,
)
from ansible_collections.gangplank.platform.tests.unit.plugins.action.test_gang_schedule import HOSTVARS, SERVICES

HOSTS = ["a", "b", "c"]


def inputs(**changes):
    return dataclasses.replace(ScheduleInputs(services=SERVICES, hosts=HOSTS, hostvars=HOSTVARS), **changes)


def test_the_inputs_take_the_actions_options_with_the_same_defaults():
    fields = {item.name: item for item in dataclasses.fields(ScheduleInputs)}
    # ``catalog``: the option is the parse an earlier task handed along, as plain data; the action reads it into the
    # inputs' Catalog (or reads ``services`` itself). Neither is set by default.
    assert set(ARGUMENT_SPEC) == set(fields) - {"hostvars", "profile_base"}
    for name, spec in ARGUMENT_SPEC.items():
        if not spec.get("required"):
            default = fields[name].default_factory() if fields[name].default is dataclasses.MISSING else fields[name].default
            assert default == spec["default"], name


def test_a_first_plan_is_decided_and_recorded():
    outcome = schedule_cluster(inputs())
    assert isinstance(outcome, ScheduleOutcome) and outcome.plan["feasible"] is True and outcome.changed is True
    assert outcome.changes["added"] == ["db-0", "infer-0", "web-0", "web-1"]
    assert outcome.record["placement"] == outcome.plan["placements"] and sorted(outcome.record["nodes"]) == HOSTS
    assert outcome.hosts["a"]["instances"]["infer-0"]["rank"] == 2 and outcome.hosts_changed
    assert outcome.stats == {"gangplank_placement": {"placements": outcome.plan["placements"],
                                                     "ranks": [["db"], ["web"], ["infer"]], "moves": outcome.plan["moves"]}}
    assert outcome.warnings == [] and outcome.rebalance is None and outcome.scale is None and not outcome.failed
    result = outcome.result()
    assert list(result) == ["plan", "table", "waiting", "replaced", "changed", "changes", "record", "hosts", "ranks",
                            "preempted", "hosts_changed", "diff"]
    assert result["table"] == outcome.table and result["ranks"] == outcome.plan["ranks"]


def test_the_same_plan_again_changes_nothing():
    first = schedule_cluster(inputs())
    again = schedule_cluster(inputs(record=dict(first.record, revision=1)))
    assert again.changed is False and again.diff == [] and again.hosts_changed == []


def test_a_plan_that_does_not_fit_records_nothing():
    services = dict(SERVICES, web={"replicas": 5, "ports": [80]})
    kept = schedule_cluster(inputs(services=services, fail_on_infeasible=False))
    assert kept.plan["feasible"] is False and not kept.failed and kept.msg is None
    assert kept.record is None and kept.stats is None and kept.hosts is None
    assert set(kept.result()) == {"plan", "table", "waiting", "replaced", "changed"}
    failed = schedule_cluster(inputs(services=services))
    assert failed.failed and failed.msg.startswith("The gang does not fit; nothing was changed on any host.\n")
    assert failed.result()["failed"] is True


def test_a_rebalance_puts_what_it_gains_before_the_table():
    first = schedule_cluster(inputs())
    outcome = schedule_cluster(inputs(record=dict(first.record, revision=1), rebalance={"max_moves": 2}))
    assert outcome.rebalance and outcome.table[:len(outcome.rebalance) + 1] == outcome.rebalance + [""]


def test_a_scale_request_reports_what_was_asked_and_what_runs():
    services = dict(SERVICES, web={"replicas": 2, "scalable": True, "resources": {"cpu": 1}, "depends_on": ["db"]})
    outcome = schedule_cluster(inputs(services=services, scale={"service": "web", "replicas": 3}))
    assert outcome.scale == {"service": "web", "asked": 3, "running": 3} and outcome.record["replicas"] == {"web": 3}


@pytest.mark.parametrize("changes, msg, paths", [
    ({"exact_timeout": -1}, "exact_timeout: got -1; expected seconds from 0 to 3600", None),
    ({"down_grace": "soon"}, "down_grace (gangplank_down_grace): got 'soon'; expected a whole number", None),
    ({"rebalance": {"moves": 1}}, "rebalance.max_moves: unknown key \"moves\"; expected only max_moves; nothing was changed",
     None),
    ({"scale": {"service": "db", "replicas": 2}}, "The scale request is not valid; nothing was changed:\n",
     ["scale.service"]),
    ({"services": {"web": {"replicas": "two"}}}, "The catalog or the cluster is not valid; nothing was changed:\n",
     ["gangplank_services.web.replicas"]),
    ({"hosts": ["a", "zz"]}, "Cannot describe a host to the scheduler: host \"zz\": no host variables", None),
    ({"move_stateful": "db-0"}, "move_stateful: db-0 is not an instance of the placement record", None),
])
def test_what_cannot_be_decided_is_a_schedule_error_naming_why(changes, msg, paths):
    with pytest.raises(ScheduleError) as caught:
        schedule_cluster(inputs(**changes))
    assert msg in caught.value.msg
    assert (caught.value.errors and [error["path"] for error in caught.value.errors]) == paths
    assert caught.value.result() == ({"msg": caught.value.msg} if paths is None
                                     else {"errors": caught.value.errors, "msg": caught.value.msg})
