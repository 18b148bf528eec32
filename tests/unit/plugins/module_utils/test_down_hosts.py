# -*- coding: utf-8 -*-
"""Which hosts are down and what waits for them (plugins/module_utils/planning/down_hosts.py), hostile records included."""

from __future__ import annotations

import pytest

from ansible_collections.gangplank.platform.plugins.module_utils.planning import down_hosts
from ansible_collections.gangplank.platform.plugins.module_utils.planning.down_hosts import down_nodes, waiting, waiting_lines

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


# -- the grace period, replacements, the operator's move -------------------------------------------------------------

from hypothesis import given, settings, strategies as st  # noqa: E402

from ansible_collections.gangplank.platform.plugins.module_utils.planning.down_hosts import (  # noqa: E402
    DEFAULT_DOWN_GRACE, MAX_DOWN_GRACE, down_grace_error, down_grace_value, down_since, move_stateful_error, replacement_groups,
    replacements,
)

SERVICES = {"db": {"stateful": True}, "web": {}, "fast": {"down_grace": 10}, "agent": {"every_node": True},
            "log": {"sidecar": True}}
PREVIOUS = {"db-0": {"node": "n3", "service": "db"}, "web-0": {"node": "n3", "service": "web"},
            "web-1": {"node": "n1", "service": "web"}, "fast-0": {"node": "n3", "service": "fast"},
            "agent@n3": {"node": "n3", "service": "agent"}, "log-0": {"node": "n3", "service": "log"}}


def test_down_since_keeps_the_first_time_and_forgets_hosts_that_returned():
    record = {"down_since": {"n3": 100, "n2": 50}}
    assert down_since(record, {"n3": {}, "n4": {}}, 1000) == {"n3": 100, "n4": 1000}


@pytest.mark.parametrize("recorded", ["100", None, True, -5, 2000, float("nan"), [1], {"x": 1}])
def test_a_bad_or_future_recorded_time_counts_from_now(recorded):
    assert down_since({"down_since": {"n3": recorded}}, {"n3": {}}, 1000) == {"n3": 1000}


@pytest.mark.parametrize("record", [{"down_since": None}, {"down_since": [1, 2]}, {"down_since": "x"}, {}])
def test_a_bad_down_since_mapping_starts_every_grace_period_now(record):
    assert down_since(record, {"n3": {}}, 7) == {"n3": 7}


def test_stateless_instances_are_replaced_after_their_grace_stateful_every_node_and_sidecars_never():
    since = {"n3": 0}
    assert replacements(PREVIOUS, SERVICES, since, 9, DEFAULT_DOWN_GRACE) == {}
    assert list(replacements(PREVIOUS, SERVICES, since, 10, DEFAULT_DOWN_GRACE)) == ["fast-0"]
    chosen = replacements(PREVIOUS, SERVICES, since, 300, DEFAULT_DOWN_GRACE)
    assert chosen == {"fast-0": {"node": "n3", "service": "fast", "down_for": 300, "grace": 10},
                      "web-0": {"node": "n3", "service": "web", "down_for": 300, "grace": 300}}
    assert replacements(PREVIOUS, SERVICES, since, 10 ** 9, 0).keys() == {"fast-0", "web-0"}
    assert replacements(PREVIOUS, SERVICES, {}, 10 ** 9, 0) == {}         # no host is down


FIELD = st.one_of(st.text(max_size=3), st.integers(), st.none(), st.lists(st.text(max_size=2), max_size=2))


@settings(max_examples=200, deadline=None)
@given(previous=st.dictionaries(st.text(max_size=5), st.one_of(st.none(), st.text(max_size=3), st.dictionaries(
    st.sampled_from(["node", "service"]), FIELD, max_size=2)), max_size=8),
    services=st.dictionaries(st.text(max_size=3), st.one_of(st.none(), st.text(max_size=2), st.dictionaries(
        st.sampled_from(["stateful", "down_grace", "every_node"]), st.one_of(st.booleans(), st.integers(), st.text(max_size=3),
                                                                             st.lists(st.integers(), max_size=2)),
        max_size=3)), max_size=4),
    now=st.integers(min_value=0, max_value=2 ** 40))
def test_hostile_records_and_catalogs_never_break_the_decision(previous, services, now):
    chosen = replacements(previous, services, {"": 0, "n": now}, now, DEFAULT_DOWN_GRACE)
    assert set(chosen) <= set(previous)
    for name in chosen:
        assert services[previous[name]["service"]].get("stateful") is not True
    for name in list(previous)[:3]:
        message = move_stateful_error(name, name, previous, services, {"": {}})
        assert message is None or message.startswith("move_stateful: ")


def test_replacement_groups_are_per_service_and_bounded(monkeypatch):
    chosen = {"web-0": {"service": "web"}, "api-1": {"service": "api"}, "web-2": {"service": "web"}}
    assert replacement_groups(chosen) == [("api", {"api-1"}), ("web", {"web-0", "web-2"})]
    monkeypatch.setattr(down_hosts, "MAX_REPLACEMENT_TRIES", 1)
    assert replacement_groups(chosen) == [("api", {"api-1"})]


@pytest.mark.parametrize("value, seconds", [(0, 0), ("0", 0), (" 42 ", 42), (MAX_DOWN_GRACE, MAX_DOWN_GRACE)])
def test_grace_periods_taken(value, seconds):
    assert down_grace_value(value) == seconds and down_grace_error(value) is None


@pytest.mark.parametrize("value", [-1, MAX_DOWN_GRACE + 1, 10 ** 100, "9" * 40, 1.0, 2.5, "2.5", "1e3", "-1", "", "five",
                                   True, False, None, [], {}, "²", "٣", float("inf"), float("nan")])
def test_grace_periods_refused(value):
    assert down_grace_value(value) is None
    assert "expected a whole number of seconds from 0 to 31536000 (a year)" in down_grace_error(value)


def test_a_move_names_a_stateful_instance_of_a_down_host_and_is_confirmed():
    down = {"n3": {}}
    assert move_stateful_error("db-0", "db-0", PREVIOUS, SERVICES, down) is None
    assert "WITHOUT its data, which stays on n3" in move_stateful_error("db-0", None, PREVIOUS, SERVICES, down)
    assert "WITHOUT its data" in move_stateful_error("db-0", "DB-0", PREVIOUS, SERVICES, down)
    assert "is stateless" in move_stateful_error("web-0", "web-0", PREVIOUS, SERVICES, down)
    assert "not an instance of the placement record (stateful instances: db-0)" in move_stateful_error(
        "db-9", "db-9", PREVIOUS, SERVICES, down)
    assert "which is not down in this run" in move_stateful_error("db-0", "db-0", PREVIOUS, SERVICES, {"n1": {}})
    assert "expected the name" in move_stateful_error("", "", PREVIOUS, SERVICES, down)


@pytest.mark.parametrize("record", [
    {"placement": {"db-0": {"node": ["n3"]}}, "nodes": {"n3": {"cpu": "8"}}},
    {"placement": {"db-0": {"node": {"n3": 1}}}, "nodes": {"n3": {"cpu": "8"}}},
    {"placement": {"db-0": {"node": "n3\n"}}, "nodes": [["n3"]]},
    {"placement": [["db-0"]], "nodes": "n3"},
    {"placement": {"db-0": {"node": "n3"}}, "nodes": {"n3": {"cpu": "8"}}, "down_since": [["n3"]]},
    [["n3"]],
])
def test_record_entries_of_another_shape_are_skipped_and_named(record):
    down = down_nodes(record, ["n1"], ["n3"])
    assert down in ({}, {"n3": {"cpu": "8", "unschedulable": True}})
    since = down_hosts.down_since(record if isinstance(record, dict) else {}, down, 100)
    placement = record.get("placement") if isinstance(record, dict) else None
    assert isinstance(waiting(placement if isinstance(placement, dict) else {}, down), dict)
    assert down_hosts.replacements(placement, {"db": {}}, since, 100, 0) == {}
    assert down_hosts.pending_lines(placement, {"db": {}}, since, 100, 0, {}) == []
    problems = down_hosts.record_problems(record)
    if record != {"placement": {"db-0": {"node": "n3"}}, "nodes": {"n3": {"cpu": "8"}}, "down_since": [["n3"]]}:
        assert problems and all("\n" not in line for line in problems)
        assert any("db-0" in line or "record" in line for line in problems)


def test_a_node_that_is_a_list_names_the_entry_without_its_value():
    record = {"placement": {"db-0": {"node": ["secret-ish"]}, "web-0": {"node": "n3"}}, "nodes": {"n3": {}, "bad\nkey": {}}}
    assert down_hosts.record_problems(record) == [
        "record.placement[db-0] is skipped: its node is not a host name (list)",
        "record.nodes[bad\ufffdkey] is skipped: the key is not a host name"]
    assert down_hosts.recorded_hosts(record) == {"n3"}
    assert waiting({"db-0": {"node": ["n3"]}, "web-0": {"node": "n3"}}, {"n3": {}}) == {"n3": ["web-0"]}
