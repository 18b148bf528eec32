# -*- coding: utf-8 -*-
from __future__ import annotations

from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.builders import node, reason, service, solve, where

TAINT = {"key": "dedicated", "value": "cdn", "effect": "NoSchedule"}


def test_untolerated_no_schedule_taint_keeps_instances_off():
    result = solve({"a": node(taints=[TAINT])}, {"web": service()})
    assert reason(result, "web-0") == "0/1 nodes are available: 1 node(s) had untolerated taint {dedicated: cdn}."


def test_toleration_by_key_and_value():
    nodes = {"a": node(taints=[TAINT])}
    assert where(solve(nodes, {"web": service(tolerations=[{"key": "dedicated", "value": "cdn"}])}))
    assert where(solve(nodes, {"web": service(tolerations=[{"key": "dedicated"}])}))
    assert not solve(nodes, {"web": service(tolerations=[{"key": "dedicated", "value": "gpu"}])})["feasible"]
    assert not solve(nodes, {"web": service(
        tolerations=[{"key": "dedicated", "effect": "NoExecute"}])})["feasible"]


def test_no_schedule_lets_running_instances_stay_but_no_execute_evicts():
    previous = {"web-0": {"node": "a"}}
    services = {"web": service(stateful=True)}
    assert where(solve({"a": node(taints=[TAINT]), "b": node()}, services, previous=previous)) == {"web-0": "a"}
    evict = dict(TAINT, effect="NoExecute")
    result = solve({"a": node(taints=[evict]), "b": node()}, services, previous=previous)
    assert reason(result, "web-0") == ("0/2 nodes are available: 1 node(s) had untolerated taint {dedicated: cdn}, "
                                       "1 node(s) were not the node the stateful instance runs on.")
    stateless = solve({"a": node(taints=[evict]), "b": node()}, {"web": service()}, previous=previous)
    assert where(stateless) == {"web-0": "b"}
    assert stateless["moves"] == [{"instance": "web-0", "from": "a", "to": "b"}]


def test_prefer_no_schedule_only_lowers_the_score():
    soft = dict(TAINT, effect="PreferNoSchedule")
    assert where(solve({"a": node(taints=[soft]), "b": node()}, {"web": service()})) == {"web-0": "b"}
    assert where(solve({"a": node(taints=[soft])}, {"web": service()})) == {"web-0": "a"}
