# -*- coding: utf-8 -*-
"""Stateful instances never move; stateless ones move only when that is the only way."""

from __future__ import annotations

from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.builders import node, reason, service, solve, where


def test_unchanged_plan_has_no_moves():
    nodes = {"a": node(), "b": node(), "c": node()}
    services = {"web": service(replicas=3, cpu=2), "db": service(stateful=True, cpu=4)}
    first = solve(nodes, services)
    second = solve(nodes, services, previous=first["placements"])
    assert second["placements"] == first["placements"]
    assert second["moves"] == [] and second["path"] == "greedy"


def test_new_work_does_not_displace_running_instances():
    # web-0 sits on b where bin-packing would not put it; new heavy work arrives.
    nodes = {"a": node(cpu=8), "b": node(cpu=8)}
    services = {"web": service(cpu=2), "batch": service(replicas=2, cpu=3)}
    result = solve(nodes, services, previous={"web-0": {"node": "b"}})
    assert where(result)["web-0"] == "b" and result["moves"] == []


def test_stateless_moves_only_when_it_is_the_only_way():
    # big needs a whole node; web runs on a, b is half full: web must move to make room.
    nodes = {"a": node(cpu=8), "b": node(cpu=8)}
    services = {"big": service(cpu=8), "web": service(cpu=2), "db": service(stateful=True, cpu=4)}
    previous = {"web-0": {"node": "a"}, "db-0": {"node": "b"}}
    result = solve(nodes, services, previous=previous)
    assert result["path"] == "greedy_with_moves"
    assert where(result) == {"big-0": "a", "db-0": "b", "web-0": "b"}
    assert result["moves"] == [{"instance": "web-0", "from": "a", "to": "b"}]


def test_stateful_never_moves_even_if_the_gang_then_fails():
    nodes = {"a": node(cpu=8), "b": node(cpu=8)}
    services = {"big": service(cpu=8), "db": service(stateful=True, cpu=2), "db2": service(stateful=True, cpu=2)}
    result = solve(nodes, services, previous={"db-0": {"node": "a"}, "db2-0": {"node": "b"}})
    assert reason(result, "big-0") == \
        "0/2 nodes are available: 2 Insufficient cpu (asked 8 CPUs; the most free on a node is 6 CPUs)."


def test_stateful_whose_node_is_gone_fails_with_the_reason():
    result = solve({"a": node()}, {"db": service(stateful=True)}, previous={"db-0": {"node": "old"}})
    assert reason(result, "db-0") == \
        "0/1 nodes are available: stateful instance db-0 ran on node old, which is no longer in the cluster."


def test_stateless_whose_node_is_gone_moves():
    result = solve({"a": node()}, {"web": service()}, previous={"web-0": {"node": "old"}})
    assert result["moves"] == [{"instance": "web-0", "from": "old", "to": "a"}] and result["path"] == "greedy"


def test_when_moves_are_allowed_stateless_still_prefer_their_node():
    nodes = {"a": node(cpu=8), "b": node(cpu=8), "c": node(cpu=8)}
    services = {"big": service(cpu=8), "web": service(replicas=2, cpu=2)}
    previous = {"web-0": {"node": "a"}, "web-1": {"node": "c"}, "big-0": {"node": "zzz"}}
    # big-0's node is gone; a and c are partly used, b is free: big goes to b and nobody moves.
    result = solve(nodes, services, previous=previous)
    assert where(result) == {"big-0": "b", "web-0": "a", "web-1": "c"}
    assert result["moves"] == [{"instance": "big-0", "from": "zzz", "to": "b"}]
