# -*- coding: utf-8 -*-
from __future__ import annotations

from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.builders import node, reason, service, solve, where

NODES = {"a": node(), "b": node(), "c": node()}


def test_listing_itself_spreads_replicas_one_per_node():
    placed = where(solve(NODES, {"web": service(replicas=3, anti_affinity=["web"])}))
    assert sorted(placed.values()) == ["a", "b", "c"]
    result = solve(NODES, {"web": service(replicas=4, anti_affinity=["web"])})
    assert reason(result, "web-3") == "0/3 nodes are available: 3 node(s) didn't satisfy anti-affinity rules."


def test_symmetric():
    # Only db lists cache, yet cache (placed first: heavier) also keeps db away.
    services = {"db": service(anti_affinity=["cache"]), "cache": service(cpu=4)}
    placed = where(solve({"a": node(), "b": node()}, services))
    assert placed["db-0"] != placed["cache-0"]
    assert reason(solve({"a": node()}, services), "db-0") == \
        "0/1 nodes are available: 1 node(s) didn't satisfy anti-affinity rules."


def test_sidecars_count():
    services = {"web": service(sidecars=["log"]), "log": {"sidecar": True}, "job": service(anti_affinity=["log"])}
    placed = where(solve({"a": node(), "b": node()}, services))
    assert placed["web-0"] != placed["job-0"]


def test_labels_are_planted_for_services_and_sidecars_on_every_node():
    services = {"web": service(sidecars=["log"], anti_affinity=["web"], replicas=2), "log": {"sidecar": True}}
    result = solve(NODES, services)
    labels = result["node_labels"]
    assert sorted(labels) == ["a", "b", "c"]
    used = [name for name, node_labels in labels.items() if node_labels]
    assert len(used) == 2
    for name in used:
        assert labels[name] == {"gangplank.io/service.log": "true", "gangplank.io/service.web": "true"}
    assert [v for v in labels.values() if not v] == [{}]


def test_incoming_planted_labels_do_not_count():
    # A stale label from an old plan must not repel anything: the scheduler re-plants its own.
    nodes = {"a": node(labels={"gangplank.io/service.web": "true"})}
    assert where(solve(nodes, {"web": service(anti_affinity=["web"])})) == {"web-0": "a"}
