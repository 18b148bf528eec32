# -*- coding: utf-8 -*-
"""All or nothing: one instance that does not fit means no placement at all."""

from __future__ import annotations

from ansible_collections.gangplank.platform.tests.unit.plugins.module_utils.scheduler.builders import node, service, solve


def test_gang_is_all_or_nothing_and_lists_every_unplaced_instance():
    result = solve({"a": node(cpu=4)}, {"web": service(replicas=6, cpu=1), "db": service(cpu=1)})
    assert result["feasible"] is False
    assert result["placements"] == {}
    assert "node_labels" not in result and "moves" not in result
    assert sorted(result["unschedulable"]) == ["web-3", "web-4", "web-5"]
    assert result["summary"].startswith("3 of 7 instance(s) could not be placed; no placement exists")


def test_empty_catalog_is_feasible():
    result = solve({"a": node()}, {})
    assert result["feasible"] and result["placements"] == {} and result["node_labels"] == {"a": {}}
