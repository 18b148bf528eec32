# -*- coding: utf-8 -*-
"""Which hosts are down and what waits for them (plugins/module_utils/down_hosts.py), hostile records included."""

from __future__ import annotations

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils import down_hosts
from ansible_collections.gangplank.platform.plugins.module_utils.down_hosts import down_nodes, waiting, waiting_lines

RECORD = {"placement": {"db-0": {"node": "n3", "service": "db"}, "web-0": {"node": "n1", "service": "web"}},
          "nodes": {"n1": {"cpu": "4"}, "n3": {"cpu": "8", "unschedulable": False}}}


def test_a_recorded_host_of_the_inventory_that_is_not_live_is_down_and_cordoned():
    down = down_nodes(RECORD, ["n1", "n2"], ["n3", "n4"])
    assert down == {"n3": {"cpu": "8", "unschedulable": True}}
    assert RECORD["nodes"]["n3"]["unschedulable"] is False          # the record is not changed
    assert waiting(RECORD["placement"], down) == {"n3": ["db-0"]}
    assert waiting_lines({"n3": ["db-0"]}) == ["down: n3 (unreachable or left out of this run): db-0 wait for it"]


@pytest.mark.parametrize("record", [
    {}, {"nodes": []}, {"nodes": {"n3": "x"}}, {"placement": {"a": "x", "b": {"node": 3}}, "nodes": None},
    {"placement": {"db-0": {"node": "n3"}}},          # an older record: no node entries, so not down but removed
])
def test_hostile_or_old_records_give_no_down_host(record):
    assert down_nodes(record, ["n1"], ["n3"]) == {}


def test_the_number_of_down_hosts_is_bounded(monkeypatch):
    monkeypatch.setattr(down_hosts, "MAX_DOWN_HOSTS", 2)
    record = {"nodes": {"n%d" % number: {"cpu": "1"} for number in range(5)}}
    assert list(down_nodes(record, [], ["n%d" % number for number in range(5)])) == ["n0", "n1"]
